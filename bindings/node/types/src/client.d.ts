import { Session } from './session.js';
import type { ExecFn } from './exec.js';
import type { BinaryStatus, GatewayInfo, Health, McpEntry, McpSpec, Tool, ToolChunk } from './wire.js';
import type { AttachOptions, OpenChannel } from './session.js';
export type ClientOptions = {
    /**
     * runs commands inside the sandbox: `localExec()`, `dockerExec(c)`,
     * `kubectlExec(pod)` or your own
     */
    exec: ExecFn;
    /**
     * whether `exec` passes a command's stdin; default `exec.stdin`
     * (the ready-made execs set it). Then the gateway binary and large bodies take one command.
     */
    execStdin?: boolean;
    /**
     * the gateway binary inside the sandbox; a bare name is looked up
     * on PATH. Default `mcpgw-gateway`.
     */
    gatewayPath?: string;
    /**
     * the loopback address the gateway listens on. Default `127.0.0.1`.
     */
    host?: string;
    /**
     * 0 (default): `startGateway` picks a free port. Non-zero with
     * `tokenFile`: use a gateway that already runs.
     */
    port?: number;
    /**
     * the gateway's token file inside the sandbox. Default
     * `<stateDir>/token`.
     */
    tokenFile?: string;
    /**
     * the per-launch directory inside the sandbox (token file, log).
     * Default `/tmp/mcpgw-<16 hex>`.
     */
    stateDir?: string;
    /**
     * the instance nonce of a running gateway, checked by `health`
     */
    instanceNonce?: string;
    /**
     * where large request bodies are staged inside the sandbox when
     * `exec` passes no stdin. Default the state directory, else /tmp.
     */
    stagingDir?: string;
    /**
     * how requests reach the gateway: curl when
     * present (`auto`, the default), always curl, or the gateway's built-in client
     */
    transport?: 'auto' | 'curl' | 'builtin';
    /**
     * the timeout of calls that set none, in milliseconds. Default 60000.
     */
    timeoutMs?: number;
    /**
     * the longest command handed to `exec` (at least 4096;
     * default 120 KiB). Larger bodies go on stdin, or are staged.
     */
    maxCommandBytes?: number;
    /**
     * the default agent part of the MCPs' scope. Default `""`.
     */
    agentId?: string;
    /**
     * the default session part of the MCPs' scope. Default `""`.
     */
    sessionId?: string;
};
export type CallOptions = {
    /**
     * aborts the call: it rejects with AbortError at once; a
     * one-shot command is told to stop, a call over a session gets a cancel frame (the gateway
     * sends `notifications/cancelled` upstream)
     */
    signal?: AbortSignal;
    /**
     * bounds each command of the call, in milliseconds; for a tool
     * call also the gateway's deadline. 0 or absent: the client's timeout.
     */
    timeoutMs?: number;
    /**
     * the agent part of the MCPs' scope; overrides the client's
     */
    agentId?: string;
    /**
     * the session part of the MCPs' scope; overrides the client's
     */
    sessionId?: string;
};
/**
 * A client of one mcpgw gateway in one sandbox. Every method returns a Promise and never blocks
 * the event loop. Calls may run concurrently. With a session attached (`attach`), every REST
 * call goes over its one long-lived channel; else each call runs its commands through `exec`.
 */
export declare class Client {
    #private;
    /**
     * Throws InvalidArgumentError for bad options, or an Error when libmcpgw cannot be loaded.
     *
     * @param {ClientOptions} options
     */
    constructor(options: ClientOptions);
    /**
     * The gateway's port once known (configured, launched, or learned from a session), else 0.
     *
     * @returns {number}
     */
    get port(): number;
    /** Whether `close()` was called. */
    get closed(): boolean;
    /** The attached session while it is open, else null (calls then go one-shot through `exec`). */
    get session(): Session | null;
    /**
     * Launches the gateway in the sandbox (one command; the token is minted there) and confirms it
     * answers. Resolves with `{port, pid, token_file, instance_nonce, state_dir}`.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<GatewayInfo>}
     */
    startGateway(opts?: CallOptions): Promise<GatewayInfo>;
    /**
     * Stops the gateway this client launched (SIGTERM, SIGKILL after the timeout) and removes its
     * state directory.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    stopGateway(opts?: CallOptions): Promise<void>;
    /**
     * Installs the gateway binary read from `hostPath` (on the host; by default the one this
     * package bundles, {@link gatewayBinary}) at `gatewayPath` (absolute) in the sandbox unless an
     * identical one is there (SHA-256). With an exec that passes stdin the binary travels in one
     * command; else in staged pieces. The file is read and hashed on a worker thread.
     *
     * @param {string} [hostPath]
     * @param {CallOptions} [opts]
     * @returns {Promise<BinaryStatus>}
     */
    ensureGatewayBinary(hostPath?: string, opts?: CallOptions): Promise<BinaryStatus>;
    /**
     * Asks whether the gateway is up, checking its instance nonce when known.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<Health>}
     */
    health(opts?: CallOptions): Promise<Health>;
    /**
     * Registers an MCP server in the scope; resolves once the gateway has connected it and listed
     * its tools.
     *
     * @param {McpSpec} spec
     * @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    addMcp(spec: McpSpec, opts?: CallOptions): Promise<void>;
    /**
     * Removes an MCP server from the scope; the gateway closes it and its processes.
     *
     * @param {string} name
     * @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    removeMcp(name: string, opts?: CallOptions): Promise<void>;
    /**
     * The MCP servers of the scope: each spec as registered, with the gateway's `status`.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<McpEntry[]>}
     */
    listMcps(opts?: CallOptions): Promise<McpEntry[]>;
    /**
     * The tools of an MCP server, as it described them.
     *
     * @param {string} name
     * @param {CallOptions} [opts]
     * @returns {Promise<Tool[]>}
     */
    listTools(name: string, opts?: CallOptions): Promise<Tool[]>;
    /**
     * Calls a tool and resolves with its ToolChunk. A tool that reports an error resolves with
     * `state: "error"`; failures to call it reject.
     *
     * @param {string} mcp
     * @param {string} tool
     * @param {Record<string, unknown> | null} [args]
     * @param {CallOptions} [opts]
     * @returns {Promise<ToolChunk>}
     */
    callTool(mcp: string, tool: string, args?: Record<string, unknown> | null, opts?: CallOptions): Promise<ToolChunk>;
    /**
     * Calls a tool and yields its chunks as they happen: over a session, each progress chunk
     * (`is_last: false`, see `progressOf`) as the server reports it, then the final chunk; without
     * one, only the final chunk. The call starts when iteration begins; leaving the loop early
     * (`break`) or aborting `opts.signal` cancels it.
     *
     * @param {string} mcp
     * @param {string} tool
     * @param {Record<string, unknown> | null} [args]
     * @param {CallOptions} [opts]
     * @returns {AsyncGenerator<ToolChunk, void, undefined>}
     */
    callToolStream(mcp: string, tool: string, args?: Record<string, unknown> | null, opts?: CallOptions): AsyncGenerator<ToolChunk, void, undefined>;
    /**
     * Replaces the runtime headers of a streamable-HTTP MCP server (`{}` clears them) without
     * reconnecting it.
     *
     * @param {string} mcp
     * @param {Record<string, string>} headers
     * @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    setRuntimeHeaders(mcp: string, headers: Record<string, string>, opts?: CallOptions): Promise<void>;
    /**
     * Opens a session channel and routes every REST call of this client over it (`health`,
     * `listMcps`, `addMcp`, `removeMcp`, `listTools`, `callTool`, `callToolStream`,
     * `setRuntimeHeaders`; starting, stopping and installing the gateway stay one-shot). `open`
     * runs the session's command in the sandbox with stdin and stdout piped and returns the
     * channel (a child process, `{stdin, stdout}`, or a duplex stream); `localSession`,
     * `dockerSession` and `kubectlSession` do it for you. When the client knows no gateway, the
     * channel launches one first (one exec gives a ready session; `stopGateway` then stops it).
     *
     * The session is used at once: calls made before the channel answers are queued and written
     * when it does. Resolves with the Session once it answered; rejects with SessionLostError when
     * the channel died first (queued calls then go one-shot through `exec`). When the channel dies
     * later, calls in flight fail with SessionLostError and later calls go one-shot, until
     * `attach` is called again, or, with `reopen: true`, the next call opens a new channel itself.
     *
     * @param {OpenChannel} open
     * @param {AttachOptions} [options]
     * @returns {Promise<Session>}
     */
    attach(open: OpenChannel, options?: AttachOptions): Promise<Session>;
    /**
     * Frees the native client. Idempotent. Calls already under way finish normally (their
     * operations do not need the client); new calls throw InvalidStateError. Closes an attached
     * session (without waiting: `await client.session?.close()` first to wait for its channel to
     * exit). Does not stop the gateway: call `stopGateway()` first for that.
     */
    close(): void;
}
