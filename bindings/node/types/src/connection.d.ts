import type { HostLoop } from './loop.js';
export type ConnectOptions = {
    /**
     * the agent part of the MCP's scope. Default `""`.
     */
    agentId?: string;
    /**
     * the session part of the MCP's scope. Default `""`.
     */
    sessionId?: string;
    /**
     * receives each message as it comes; without
     * it, messages wait for the connection's async iterator
     */
    onMessage?: (message: any) => void;
};
export type ConnectionEnd = {
    reason: string | null;
    status: number;
    code: string | null;
};
/** @import { HostLoop } from './loop.js' */
/**
 * Options of `client.connect`.
 *
 * @typedef {object} ConnectOptions
 * @property {string} [agentId] the agent part of the MCP's scope. Default `""`.
 * @property {string} [sessionId] the session part of the MCP's scope. Default `""`.
 * @property {(message: any) => void} [onMessage] receives each message as it comes; without
 *   it, messages wait for the connection's async iterator
 */
/**
 * How a connection ended: `reason` is why (null when the host closed it), `status` the HTTP
 * status of a refused open (404: no such MCP), else 0, and `code` the name of the end's kind
 * as the library judged it (`NOT_FOUND`, `UPSTREAM_ERROR` when the gateway ended it,
 * `SESSION_LOST`, ...; null when the host closed it).
 *
 * @typedef {{reason: string | null, status: number, code: string | null}} ConnectionEnd
 */
/**
 * A virtual MCP connection: `send` JSON-RPC messages, receive them with `onMessage` or
 * `for await (const message of connection)`, `close()` it. `opened` resolves true once the
 * gateway accepted it (false when it ended first); `closed` resolves with how it ended.
 */
export declare class Connection {
    #private;
    /** Resolves true once the gateway accepted the connection, false when it ended first. */
    opened: Promise<any>;
    /** Resolves with how the connection ended. @type {Promise<ConnectionEnd>} */
    closed: Promise<ConnectionEnd>;
    /**
     * Use `client.connect(mcp, options)`.
     *
     * @param {HostLoop} loop
     * @param {string} mcp
     * @param {ConnectOptions} options
     */
    constructor(loop: HostLoop, mcp: string, { agentId, sessionId, onMessage }?: ConnectOptions);
    /**
     * Sends one JSON-RPC message: an object, or its JSON text.
     *
     * @param {object | string} message
     */
    send(message: object | string): void;
    /** Closes the connection; `closed` then resolves. */
    close(): void;
    /**
     * The messages as they come, until the connection ends.
     *
     * @returns {AsyncGenerator<any, void, undefined>}
     */
    [Symbol.asyncIterator](): AsyncGenerator<any, void, undefined>;
}
