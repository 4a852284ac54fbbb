import type { Backend } from './backends.js';
export type Pending = {
    resolve: (value: any) => void;
    reject: (error: unknown) => void;
    onProgress: ((chunk: any) => void) | undefined;
    signal: AbortSignal | undefined;
    onAbort: () => void;
    /**
     * what the progress callback threw (the call was cancelled for it)
     */
    failure?: unknown;
};
export type ConnectionEvents = {
    opened: () => void;
    message: (message: string) => void;
    closed: (reason: string | null, status: number, code: string | null) => void;
};
/**
 * An operation waiting for its DONE.
 *
 * @typedef {object} Pending
 * @property {(value: any) => void} resolve
 * @property {(error: unknown) => void} reject
 * @property {((chunk: any) => void) | undefined} onProgress
 * @property {AbortSignal | undefined} signal
 * @property {() => void} onAbort
 * @property {unknown} [failure] what the progress callback threw (the call was cancelled for it)
 */
/**
 * What a virtual connection is told.
 *
 * @typedef {object} ConnectionEvents
 * @property {() => void} opened
 * @property {(message: string) => void} message
 * @property {(reason: string | null, status: number, code: string | null) => void} closed
 */
/**
 * Calls the caller's `fn(value)` outside the loop: what it throws is thrown from its own tick,
 * as an event listener's error is, never into the driver's drain.
 */
export declare function later(fn: any, value: any): void;
/** The CancelledError of an operation its signal aborted. */
export declare function cancelled(what: any, signal: any): import("./mcpgw-error.js").McpgwError;
/** One host driver and the processes, operations and connections it is steering. */
export declare class HostLoop {
    #private;
    /**
     * Throws the library's error (InvalidArgumentError naming the field) for a bad configuration.
     *
     * @param {Record<string, unknown>} config the library's `HostConfig`
     * @param {Backend} backend
     * @param {((text: string) => void) | undefined} onNotice
     * @param {((record: Record<string, unknown>) => void) | undefined} [onAudit]
     */
    constructor(config: Record<string, unknown>, backend: Backend, onNotice: ((text: string) => void) | undefined, onAudit?: ((record: Record<string, unknown>) => void) | undefined);
    /** Whether anything is under way: an operation, a process, a connection. */
    get busy(): boolean;
    /** Whether the driver has been freed. */
    get freed(): boolean;
    /**
     * Submits operation `op` (a `Submit` of the library: `{op: 'call_tool', ...}`); resolves with
     * its result's JSON, parsed, or rejects with its error.
     *
     * @param {Record<string, unknown>} op
     * @param {{signal?: AbortSignal, onProgress?: (chunk: any) => void}} [options]
     * @returns {Promise<any>}
     */
    submit(op: Record<string, unknown>, options?: {
        signal?: AbortSignal;
        onProgress?: (chunk: any) => void;
    }): Promise<any>;
    /**
     * {@link HostLoop.submit} on a worker thread, for an operation whose submission reads and
     * hashes a host file (the gateway binary): the event loop goes on meanwhile. Only for a
     * driver nothing else uses until this resolves (it is then used from that thread).
     *
     * @param {Record<string, unknown>} op
     * @param {{signal?: AbortSignal}} [options]
     * @returns {Promise<any>}
     */
    submitOffThread(op: Record<string, unknown>, options?: {
        signal?: AbortSignal;
    }): Promise<any>;
    /**
     * Opens a virtual MCP connection over the session; its events go to `events`. Throws the
     * library's error when no session is open or opening.
     *
     * @param {string} mcp
     * @param {string} agentId
     * @param {string} sessionId
     * @param {ConnectionEvents} events
     * @returns {number} its id
     */
    openConnection(mcp: string, agentId: string, sessionId: string, events: ConnectionEvents): number;
    /**
     * Sends one JSON-RPC message (its text) on connection `id`.
     *
     * @param {number} id
     * @param {string} message
     */
    send(id: number, message: string): void;
    /**
     * Closes connection `id` (its `closed` event follows).
     *
     * @param {number} id
     */
    closeConnection(id: number): void;
    /**
     * What the driver knows: `{session: 'off' | 'opening' | 'open', gateway, hello}`.
     *
     * @returns {{session: 'off' | 'opening' | 'open', gateway: any, hello: any}}
     */
    state(): {
        session: 'off' | 'opening' | 'open';
        gateway: any;
        hello: any;
    };
    /** Resolves once nothing is under way (at once when nothing is). */
    idle(): Promise<any>;
    /**
     * Frees the driver: what is still under way ends (processes killed, operations rejected with
     * InvalidStateError, connections closed). Idempotent.
     */
    free(): void;
}
