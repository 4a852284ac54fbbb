import { Connection } from './connection.js';
import type { Backend } from './backends.js';
import type { BinaryStatus, GatewayInfo, Health, Hello, McpEntry, McpSpec, Tool, ToolChunk } from './wire.js';
import type { ConnectOptions } from './connection.js';
export type ClientOptions = {
    /**
     * the gateway binary inside the sandbox; a bare name is looked
     * up on PATH. Default `mcpgw-gateway`.
     */
    gatewayPath?: string;
    /**
     * the loopback address the gateway listens on. Default `127.0.0.1`.
     */
    host?: string;
    /**
     * 0 (default): `startGateway` (or a session) launches a gateway.
     * Non-zero, with `tokenFile`: use the gateway that runs there.
     */
    port?: number;
    /**
     * the gateway's token file inside the sandbox
     */
    tokenFile?: string;
    /**
     * the per-launch directory inside the sandbox (token, log).
     * Default `/tmp/mcpgw-<16 hex>`.
     */
    stateDir?: string;
    /**
     * the instance nonce of a running gateway
     */
    instanceNonce?: string;
    /**
     * how requests reach the gateway inside the
     * sandbox; detected once when absent
     */
    transport?: 'curl' | 'built_in';
    /**
     * where large bodies are staged when the backend passes no stdin
     */
    stagingDir?: string;
    /**
     * the longest command text handed to the backend
     */
    maxCommandBytes?: number;
    /**
     * the time limit of an operation that sets none. Default 60000.
     */
    timeoutMs?: number;
    /**
     * how long a session channel may take to say hello (a launch
     * included). Default 60000.
     */
    openTimeoutMs?: number;
    /**
     * how long an answer over a session may take beyond its
     * operation's own limit. Default 5000.
     */
    answerGraceMs?: number;
    /**
     * how long a closed channel may take to exit before it is
     * killed. Default 5000.
     */
    closeGraceMs?: number;
    /**
     * whether a lost session channel is opened again (its tool calls
     * then resume). Default true.
     */
    reopen?: boolean;
    /**
     * how many failed opens in a row end the session. Default 5.
     */
    reopenAttempts?: number;
    /**
     * how often attach pings when idle (0: attach's default)
     */
    heartbeatMs?: number;
    /**
     * how long the channel may stay silent before it is
     * declared lost (0: three heartbeats)
     */
    heartbeatTimeoutMs?: number;
    /**
     * the host's rules (the structure of `mcpgw mcp --policy`'s file):
     * what they refuse fails with PolicyDeniedError and is not listed
     */
    policy?: object;
    /**
     * secret values by
     * name, or a function from a name to its value (called when `addMcp` is given a spec that
     * names it), which a spec's `{secret: NAME}` env or headers value resolves to (else the
     * process's environment variable NAME); answers show `[secret:NAME]` in their place
     */
    secrets?: Record<string, string> | ((name: string) => string);
    /**
     * called with each call's audit
     * record when the call ends (turns the library's audit on)
     */
    onAudit?: (record: Record<string, unknown>) => void;
    /**
     * whether the records hold the arguments themselves
     * (secrets shown by name), not only their digest and size
     */
    auditArguments?: boolean;
    /**
     * what the driver says that concerns no call (a
     * channel opened again, a frame for a call no longer waited for), for a log. The same lines go
     * to `NODE_DEBUG=mcpgw`.
     */
    onNotice?: (text: string) => void;
};
export type CallOptions = {
    /**
     * cancels the call: it rejects with CancelledError (the
     * signal's reason as `cause`); its command is killed, or the gateway cancels it upstream
     */
    signal?: AbortSignal;
    /**
     * the operation's time limit, in milliseconds; for a tool call
     * also the gateway's deadline. Absent: the client's `timeoutMs`.
     */
    timeoutMs?: number;
    /**
     * the agent part of the MCPs' scope. Default `""`.
     */
    agentId?: string;
    /**
     * the session part of the MCPs' scope. Default `""`.
     */
    sessionId?: string;
};
export type CallToolOptions = CallOptions & {
    onProgress?: (chunk: ToolChunk) => void;
};
/** @import { Backend } from './backends.js' */
/** @import { BinaryStatus, GatewayInfo, Health, Hello, McpEntry, McpSpec, Tool, ToolChunk } from './wire.js' */
/** @import { ConnectOptions } from './connection.js' */
/**
 * Settings of a {@link Client}, each the library's `HostConfig` key of the same name in
 * snake_case (`gatewayPath` is `gateway_path`); every one is optional.
 *
 * @typedef {object} ClientOptions
 * @property {string} [gatewayPath] the gateway binary inside the sandbox; a bare name is looked
 *   up on PATH. Default `mcpgw-gateway`.
 * @property {string} [host] the loopback address the gateway listens on. Default `127.0.0.1`.
 * @property {number} [port] 0 (default): `startGateway` (or a session) launches a gateway.
 *   Non-zero, with `tokenFile`: use the gateway that runs there.
 * @property {string} [tokenFile] the gateway's token file inside the sandbox
 * @property {string} [stateDir] the per-launch directory inside the sandbox (token, log).
 *   Default `/tmp/mcpgw-<16 hex>`.
 * @property {string} [instanceNonce] the instance nonce of a running gateway
 * @property {'curl' | 'built_in'} [transport] how requests reach the gateway inside the
 *   sandbox; detected once when absent
 * @property {string} [stagingDir] where large bodies are staged when the backend passes no stdin
 * @property {number} [maxCommandBytes] the longest command text handed to the backend
 * @property {number} [timeoutMs] the time limit of an operation that sets none. Default 60000.
 * @property {number} [openTimeoutMs] how long a session channel may take to say hello (a launch
 *   included). Default 60000.
 * @property {number} [answerGraceMs] how long an answer over a session may take beyond its
 *   operation's own limit. Default 5000.
 * @property {number} [closeGraceMs] how long a closed channel may take to exit before it is
 *   killed. Default 5000.
 * @property {boolean} [reopen] whether a lost session channel is opened again (its tool calls
 *   then resume). Default true.
 * @property {number} [reopenAttempts] how many failed opens in a row end the session. Default 5.
 * @property {number} [heartbeatMs] how often attach pings when idle (0: attach's default)
 * @property {number} [heartbeatTimeoutMs] how long the channel may stay silent before it is
 *   declared lost (0: three heartbeats)
 * @property {object} [policy] the host's rules (the structure of `mcpgw mcp --policy`'s file):
 *   what they refuse fails with PolicyDeniedError and is not listed
 * @property {Record<string, string> | ((name: string) => string)} [secrets] secret values by
 *   name, or a function from a name to its value (called when `addMcp` is given a spec that
 *   names it), which a spec's `{secret: NAME}` env or headers value resolves to (else the
 *   process's environment variable NAME); answers show `[secret:NAME]` in their place
 * @property {(record: Record<string, unknown>) => void} [onAudit] called with each call's audit
 *   record when the call ends (turns the library's audit on)
 * @property {boolean} [auditArguments] whether the records hold the arguments themselves
 *   (secrets shown by name), not only their digest and size
 * @property {(text: string) => void} [onNotice] what the driver says that concerns no call (a
 *   channel opened again, a frame for a call no longer waited for), for a log. The same lines go
 *   to `NODE_DEBUG=mcpgw`.
 */
/**
 * Per-call options.
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] cancels the call: it rejects with CancelledError (the
 *   signal's reason as `cause`); its command is killed, or the gateway cancels it upstream
 * @property {number} [timeoutMs] the operation's time limit, in milliseconds; for a tool call
 *   also the gateway's deadline. Absent: the client's `timeoutMs`.
 * @property {string} [agentId] the agent part of the MCPs' scope. Default `""`.
 * @property {string} [sessionId] the session part of the MCPs' scope. Default `""`.
 */
/**
 * Per-call options of a tool call.
 *
 * @typedef {CallOptions & {onProgress?: (chunk: ToolChunk) => void}} CallToolOptions
 * `onProgress` receives each progress chunk as the server reports it (over a session); a
 * callback that throws cancels the call, which rejects with what it threw.
 */
/** The options that are `HostConfig` keys (in camelCase). */
export declare const CONFIG_OPTIONS: readonly string[];
/**
 * A client of one mcpgw gateway in one sandbox. Every method returns a promise and never blocks
 * the event loop; calls may run concurrently. One host driver steers them all: one-shot
 * commands through the backend, or, once `openSession()` opened it, one long-lived channel.
 */
export declare class Client {
    #private;
    /**
     * Throws InvalidArgumentError for a bad backend or option (the library names what is wrong),
     * or an Error when libmcpgw cannot be loaded.
     *
     * @param {Backend} backend `local()`, `docker(container)`, `podman(container)`,
     *   `kubectl(pod)`, `argv(prefix)` or `exec(run)`
     * @param {ClientOptions} [options]
     */
    constructor(backend: Backend, options?: ClientOptions);
    /** The gateway's port once known (configured, launched, or told by a session), else 0. */
    get port(): any;
    /** Whether `close()` was called. */
    get closed(): boolean;
    /**
     * What the driver knows: the session (`off`, `opening`, `open`), the gateway it launched
     * (`{port, pid, token_file, instance_nonce, state_dir}` or null), the channel's hello.
     *
     * @returns {{session: 'off' | 'opening' | 'open', gateway: GatewayInfo | null, hello: Hello | null}}
     */
    state(): {
        session: 'off' | 'opening' | 'open';
        gateway: GatewayInfo | null;
        hello: Hello | null;
    };
    /**
     * Launches the gateway in the sandbox (one command; the token is minted there) and confirms
     * it answers.
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
     * Installs the gateway binary read from `binaryPath` (on the host; by default the one this
     * package bundles, {@link gatewayBinary}) at `gatewayPath` in the sandbox, unless an identical
     * one is there (SHA-256): in one command when the backend passes stdin, else in staged pieces.
     *
     * @param {string} [binaryPath]
     * @param {CallOptions} [opts]
     * @returns {Promise<BinaryStatus>}
     */
    ensureGatewayBinary(binaryPath?: string, opts?: CallOptions): Promise<BinaryStatus>;
    /**
     * Asks whether the gateway is up, checking its instance nonce when known.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<Health>}
     */
    health(opts?: CallOptions): Promise<Health>;
    /**
     * The MCP servers of the scope: each spec as registered, with the gateway's `status`.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<McpEntry[]>}
     */
    listMcps(opts?: CallOptions): Promise<McpEntry[]>;
    /**
     * Registers an MCP server in the scope; resolves once the gateway has connected it and
     * listed its tools.
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
     * The tools of an MCP server, as it described them.
     *
     * @param {string} mcp
     * @param {CallOptions} [opts]
     * @returns {Promise<Tool[]>}
     */
    listTools(mcp: string, opts?: CallOptions): Promise<Tool[]>;
    /**
     * Calls a tool and resolves with its last ToolChunk. A tool that reports an error resolves
     * with `state: "error"`; failures to call it reject. `opts.onProgress` receives each progress
     * chunk as it happens (over a session).
     *
     * @param {string} mcp
     * @param {string} tool
     * @param {Record<string, unknown> | null} [args]
     * @param {CallToolOptions} [opts]
     * @returns {Promise<ToolChunk>}
     */
    callTool(mcp: string, tool: string, args?: Record<string, unknown> | null, opts?: CallToolOptions): Promise<ToolChunk>;
    /**
     * Calls a tool and yields its chunks: each progress chunk as the server reports it (over a
     * session; one-shot only the last), then the last chunk. The call starts when iteration
     * begins; leaving the loop early (`break`) or aborting `opts.signal` cancels it.
     *
     * @param {string} mcp
     * @param {string} tool
     * @param {Record<string, unknown> | null} [args]
     * @param {CallToolOptions} [opts]
     * @returns {AsyncGenerator<ToolChunk, void, undefined>}
     */
    callToolStream(mcp: string, tool: string, args?: Record<string, unknown> | null, opts?: CallToolOptions): AsyncGenerator<ToolChunk, void, undefined>;
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
     * Opens the session channel (`mcpgw-gateway attach` through the backend, launching the
     * gateway when the client knows none) and resolves with its hello; from then on every REST
     * operation travels over it. Calls made meanwhile wait for it. A channel that is lost is
     * opened again (option `reopen`), its tool calls resumed.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<Hello>}
     */
    openSession(opts?: CallOptions): Promise<Hello>;
    /**
     * Closes the session channel: calls it carries fail with SessionLostError; later calls go
     * one-shot. The gateway keeps running.
     *
     * @param {CallOptions} [opts]
     * @returns {Promise<void>}
     */
    closeSession(opts?: CallOptions): Promise<void>;
    /**
     * Opens a virtual MCP connection to MCP `mcp` over the session: raw JSON-RPC both ways, the
     * gateway being the MCP server. Throws InvalidStateError when no session is open or opening.
     *
     * @param {string} mcp
     * @param {ConnectOptions} [opts]
     * @returns {Connection}
     */
    connect(mcp: string, opts?: ConnectOptions): Connection;
    /**
     * Closes the client: new calls reject with InvalidStateError; the session (if any) is closed;
     * one-shot calls under way finish. Resolves once every process the client started has ended
     * and its native driver is freed. Idempotent. Does not stop the gateway: `stopGateway()`
     * first for that.
     *
     * @returns {Promise<void>}
     */
    close(): Promise<void>;
}
