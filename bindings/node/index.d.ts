// Types of the `mcpgw` package: a Promise API over libmcpgw, the host-side client of
// mcpgw-gateway (MCP servers running inside a sandbox, reached through any exec channel).

/** What an exec function reports about one command it ran. */
export interface ExecResult {
  /** The command's exit status (128 + N when signal N ended it). */
  exitCode: number;
  /** Everything it wrote to stdout: bytes, or text (taken as UTF-8). */
  stdout?: Uint8Array | ArrayBuffer | string | null;
  /** Everything it wrote to stderr: bytes, or text (taken as UTF-8). */
  stderr?: Uint8Array | ArrayBuffer | string | null;
}

/** What an exec function is given besides the command. */
export interface ExecOptions {
  /** How long the command may take, in milliseconds (for backends with a timeout of their own). */
  timeoutMs: number;
  /**
   * Aborts when the caller aborts the call or the command's time is up: stop the command then.
   * The call does not wait for the exec function after that; its result is discarded.
   */
  signal: AbortSignal;
}

/**
 * Runs `command` with `sh -c` inside the sandbox and resolves with its exit status and output,
 * whatever the exit status. Rejects (or throws) only when the command could not be run at all
 * (the sandbox is gone, the backend refused): the call then fails with {@link ExecError}, the
 * rejection as its `cause`. May be called concurrently for independent calls.
 */
export type ExecFn = (command: string, options: ExecOptions) => Promise<ExecResult> | ExecResult;

/** Settings of a {@link Client}; all but `exec` are optional. */
export interface ClientOptions {
  /** Runs commands inside the sandbox: {@link localExec}, {@link dockerExec}, {@link kubectlExec} or your own. */
  exec: ExecFn;
  /** The gateway binary inside the sandbox; a bare name is looked up on PATH. Default `mcpgw-gateway`. */
  gatewayPath?: string;
  /** The loopback address the gateway listens on. Default `127.0.0.1`. */
  host?: string;
  /** 0 (default): `startGateway` picks a free port. Non-zero with `tokenFile`: attach to a running gateway. */
  port?: number;
  /** The gateway's token file inside the sandbox. Default `<stateDir>/token`. */
  tokenFile?: string;
  /** The per-launch directory inside the sandbox (token file, log). Default `/tmp/mcpgw-<16 hex>`. */
  stateDir?: string;
  /** The instance nonce of a running gateway to attach to, checked by `health`. */
  instanceNonce?: string;
  /** Where large request bodies are staged inside the sandbox. Default the state directory, else /tmp. */
  stagingDir?: string;
  /** How requests reach the gateway: curl when present (`auto`, the default), always curl, or the gateway's built-in client. */
  transport?: 'auto' | 'curl' | 'builtin';
  /** The timeout of calls that set none, in milliseconds. Default 60000. */
  timeoutMs?: number;
  /** The longest command handed to `exec` (at least 4096; default 120 KiB). Larger bodies are staged. */
  maxCommandBytes?: number;
  /** The default agent part of the MCPs' scope for every call. Default `""`. */
  agentId?: string;
  /** The default session part of the MCPs' scope for every call. Default `""`. */
  sessionId?: string;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call: it rejects with {@link AbortError} at once, and the command under way is told to stop. */
  signal?: AbortSignal;
  /** Bounds each command of the call, in milliseconds; for a tool call also the gateway's deadline. 0 or absent: the client's timeout. */
  timeoutMs?: number;
  /** The agent part of the MCPs' scope; overrides the client's. */
  agentId?: string;
  /** The session part of the MCPs' scope; overrides the client's. */
  sessionId?: string;
}

/** The gateway `startGateway` launched. */
export interface GatewayInfo {
  /** Its port inside the sandbox. */
  port: number;
  /** Its process id inside the sandbox. */
  pid: number;
  /** Its token file inside the sandbox (the token itself never leaves the sandbox). */
  tokenFile: string;
  /** Its instance nonce, checked by `health`. */
  instanceNonce: string;
  /** Its state directory, removed by `stopGateway`. */
  stateDir: string;
}

/** The answer of `health`. */
export interface HealthInfo {
  /** `"ok"`. */
  status: string;
  /** The gateway's instance nonce, when it was launched with one. */
  instanceNonce: string | null;
}

/** What `ensureGatewayBinary` found or did. */
export interface BinaryStatus {
  /** Whether the binary was uploaded (false: an identical one was already there). */
  uploaded: boolean;
  /** Its SHA-256, lowercase hex. */
  sha256: string;
  /** Its path inside the sandbox. */
  path: string;
}

/** How the gateway starts a stdio MCP server (AgentScope's `stdio_mcp` config). */
export interface StdioMcpConfig {
  type: 'stdio_mcp';
  /** The program, inside the sandbox. */
  command: string;
  args?: string[];
  env?: Record<string, string> | null;
  cwd?: string | null;
  encoding_error_handler?: string;
  [key: string]: unknown;
}

/** How the gateway reaches an HTTP MCP server (streamable HTTP, or legacy SSE for URLs ending in `/sse`). */
export interface HttpMcpConfig {
  type: 'http_mcp';
  url: string;
  headers?: Record<string, string> | null;
  /** Seconds. */
  timeout?: number | null;
  [key: string]: unknown;
}

/** An MCP server registration: AgentScope's MCPClient dump. Unknown fields are kept and echoed. */
export interface McpSpec {
  /** Matches `[A-Za-z0-9_-]+`. */
  name: string;
  is_stateful?: boolean;
  mcp_config: StdioMcpConfig | HttpMcpConfig;
  enable_tools?: string[] | null;
  disable_tools?: string[] | null;
  /** Seconds each call of this MCP may take. */
  execution_timeout?: number | null;
  stream_progress?: boolean;
  /** Headers for an HTTP upstream that are never echoed back. */
  runtime_headers?: Record<string, string>;
  [key: string]: unknown;
}

/** An MCP `Tool` as the upstream described it (camelCase, unfiltered). */
export interface Tool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  [key: string]: unknown;
}

/** A text block of a ToolChunk. */
export interface TextBlock {
  type: 'text';
  id: string;
  text: string;
}

/** A data block with its bytes, decoded. */
export interface DataBlock {
  type: 'data';
  id: string;
  /** The block's name (e.g. an embedded resource's URI), or null. */
  name: string | null;
  /** E.g. `image/png`. */
  mediaType: string | null;
  data: Uint8Array;
}

/** A data block that links to its bytes (an MCP resource link). */
export interface UrlBlock {
  type: 'url';
  id: string;
  name: string | null;
  mediaType: string | null;
  url: string;
}

/** One block of a ToolChunk. */
export type Block = TextBlock | DataBlock | UrlBlock;

/** AgentScope's state of a tool execution; a successful MCP result is `running` with `isLast`. */
export type ToolState = 'running' | 'success' | 'error' | 'interrupted' | 'denied';

/** The result of a tool call (AgentScope's ToolChunk), with everything copied into JS. */
export interface ToolChunk {
  /** 32 hex digits. */
  id: string;
  /** `error` when the tool reported an error (MCP `isError`). */
  state: ToolState;
  isLast: boolean;
  /** `structured_content` (the MCP result's `structuredContent`), `progress`, ... */
  metadata: { structured_content?: unknown; [key: string]: unknown };
  content: Block[];
}

/**
 * A client of one mcpgw gateway in one sandbox. Every method returns a Promise and never blocks
 * the event loop: the library builds each request as a command, `exec` runs it, the library
 * decodes the output. Calls may run concurrently.
 */
export class Client {
  /** Throws {@link InvalidArgumentError} for bad options, or an Error when libmcpgw cannot be loaded. */
  constructor(options: ClientOptions);
  /** The gateway's port once known (configured or launched), else 0. */
  readonly port: number;
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Launches the gateway in the sandbox (one command; the token is minted there) and confirms it answers. */
  startGateway(options?: CallOptions): Promise<GatewayInfo>;
  /** Stops the gateway this client launched (SIGTERM, SIGKILL after the timeout) and removes its state directory. */
  stopGateway(options?: CallOptions): Promise<void>;
  /** Installs the gateway binary read from `hostPath` at `gatewayPath` (absolute) unless an identical one is there; needs `sha256sum` and `base64` in the sandbox. The file is read and hashed on a worker thread. */
  ensureGatewayBinary(hostPath: string, options?: CallOptions): Promise<BinaryStatus>;
  /** Asks whether the gateway is up, checking its instance nonce when known. */
  health(options?: CallOptions): Promise<HealthInfo>;
  /** Registers an MCP server in the scope; resolves once the gateway has connected it and listed its tools. */
  addMcp(spec: McpSpec, options?: CallOptions): Promise<void>;
  /** Removes an MCP server from the scope; the gateway closes it and its processes. */
  removeMcp(name: string, options?: CallOptions): Promise<void>;
  /** The specs of the MCP servers in the scope, as registered (plus the gateway's `status`). */
  listMcps(options?: CallOptions): Promise<McpSpec[]>;
  /** The tools of an MCP server. */
  listTools(name: string, options?: CallOptions): Promise<Tool[]>;
  /** Calls a tool. A tool that reports an error resolves with `state: "error"`; failures to call it reject. */
  callTool(
    mcp: string,
    tool: string,
    args?: Record<string, unknown> | null,
    options?: CallOptions,
  ): Promise<ToolChunk>;
  /** Replaces the runtime headers of a streamable-HTTP MCP server (`{}` clears them) without reconnecting it. */
  setRuntimeHeaders(
    mcp: string,
    headers: Record<string, string>,
    options?: CallOptions,
  ): Promise<void>;
  /** Frees the native client; idempotent. Calls under way finish; later ones throw {@link InvalidStateError}. Does not stop the gateway. */
  close(): void;
}

/** Options of {@link localExec}. */
export interface LocalExecOptions {
  /** The directory commands run in. */
  cwd?: string;
  /** Their environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** The shell, run as `SHELL -c COMMAND`. Default `sh`. */
  shell?: string;
}

/** An exec function running each command with `sh -c` on this machine; an abort or timeout kills its whole process group. */
export function localExec(options?: LocalExecOptions): ExecFn;

/** Options of {@link dockerExec}. */
export interface DockerExecOptions {
  /** The program. Default `docker` (e.g. `podman`). */
  docker?: string;
  /** `--user`. */
  user?: string;
  /** `--workdir`. */
  workdir?: string;
  /** `--env K=V` for each entry. */
  env?: Record<string, string>;
}

/** An exec function running `docker exec CONTAINER sh -c COMMAND`; docker's own failure (exit 125) rejects. */
export function dockerExec(container: string, options?: DockerExecOptions): ExecFn;

/** The argv after the program name that {@link dockerExec} runs for `command`. */
export function dockerArgv(
  container: string,
  command: string,
  options?: DockerExecOptions,
): string[];

/** Options of {@link kubectlExec}. */
export interface KubectlExecOptions {
  /** The program. Default `kubectl`. */
  kubectl?: string;
  namespace?: string;
  /** The container of the pod. */
  container?: string;
  context?: string;
  kubeconfig?: string;
}

/** An exec function running `kubectl exec POD -- sh -c COMMAND`. */
export function kubectlExec(pod: string, options?: KubectlExecOptions): ExecFn;

/** The argv after the program name that {@link kubectlExec} runs for `command`. */
export function kubectlArgv(pod: string, command: string, options?: KubectlExecOptions): string[];

/** What every failure carries besides its message. */
export interface McpgwErrorInfo {
  code?: string;
  result?: number;
  status?: number;
  detail?: string;
  cause?: unknown;
}

/** The base class of every error of this package. */
export class McpgwError extends Error {
  constructor(message: string, info?: McpgwErrorInfo);
  /** The library's result name (`NOT_FOUND`, `DEADLINE`, ...), or `ABORT_ERR` for an aborted call. */
  readonly code: string;
  /** The numeric `mcpgw_result` (e.g. 7105), or 0 when the failure did not come from the library. */
  readonly result: number;
  /** The gateway's HTTP status, when it answered. */
  readonly status: number | undefined;
  /** The gateway's `detail` text, when it answered with one. */
  readonly detail: string | undefined;
}
/** A value is unusable, or the gateway refused the request as invalid (400, 413, 422). Code `INVALID_ARGUMENT`. */
export class InvalidArgumentError extends McpgwError {}
/** The client is closed, or was used out of order. Code `INVALID_STATE`. */
export class InvalidStateError extends McpgwError {}
/** The exec function could not run a command (it threw, or returned garbage; `cause` says). Code `EXEC_FAILED`. */
export class ExecError extends McpgwError {}
/** A command ran but failed outside the HTTP exchange (missing program, full disk). Code `COMMAND_FAILED`. */
export class CommandError extends McpgwError {}
/** No gateway answers on the port, or a different one. Code `GATEWAY_NOT_RUNNING`. */
export class GatewayDownError extends McpgwError {}
/** The gateway could not be launched; the message has its reason and log tail. Code `START_FAILED`. */
export class StartError extends McpgwError {}
/** The gateway refused the token (401), or the token file could not be read. Code `UNAUTHORIZED`. */
export class UnauthorizedError extends McpgwError {}
/** Unknown MCP or tool in this scope (404). Code `NOT_FOUND`. */
export class NotFoundError extends McpgwError {}
/** An MCP of that name already exists in this scope (409). Code `CONFLICT`. */
export class ConflictError extends McpgwError {}
/** The upstream MCP server failed to connect or to answer (500, 502, 503). Code `UPSTREAM_ERROR`. */
export class UpstreamError extends McpgwError {}
/** A deadline passed: the tool call's at the gateway (504), the request's, or a command's. Code `DEADLINE`. */
export class TimeoutError extends McpgwError {}
/** What came back is not what the gateway protocol promises. Code `PROTOCOL_ERROR`. */
export class ProtocolError extends McpgwError {}
/** A file on the host could not be read. Code `HOST_IO`. */
export class HostIoError extends McpgwError {}
/** A bug in libmcpgw or this binding. Code `PANIC` or `NULL_PARAMETER`. */
export class InternalError extends McpgwError {}
/** The call was aborted through its signal; `cause` is the signal's reason. Name `AbortError`, code `ABORT_ERR`. */
export class AbortError extends McpgwError {}

/** Native objects the binding holds right now, by kind; all zero once every client is closed and no call runs. */
export interface NativeStats {
  clients: number;
  ops: number;
  chunks: number;
  errors: number;
  strings: number;
}

/** How many native objects the binding holds at this moment: for leak checks. */
export function nativeStats(): NativeStats;

/** The loaded library. */
export interface LibraryInfo {
  /** Its path. */
  path: string;
  /** Its version, e.g. `0.1.0`. */
  version: string;
  /** Its ABI version; equal to {@link ABI_VERSION}. */
  abiVersion: number;
}

/** Loads libmcpgw (once; `new Client` does too) and describes it; throws an Error naming every path tried when it is missing. */
export function library(): LibraryInfo;

/** The paths searched for libmcpgw, in order: `MCPGW_LIB` alone when set, else next to the package, then `../../target/{release,debug}`. */
export function libraryCandidates(env?: Record<string, string | undefined>): string[];

/** The ABI version this binding needs. */
export const ABI_VERSION: number;
