import { McpgwError } from './mcpgw-error.js';
/** A required pointer argument was NULL. Code `NULL_PARAMETER` (7001). */
export declare class NullParameterError extends McpgwError {
}
/** The library panicked; the call had no effect that can be relied on. A bug: please report. Code `PANIC` (7002). */
export declare class PanicError extends McpgwError {
}
/** A value given to the library is unusable, or the gateway refused the request as invalid (HTTP 400, 413, 422). Code `INVALID_ARGUMENT` (7003). */
export declare class InvalidArgumentError extends McpgwError {
}
/** A call came in a state that cannot take it: a connection opened without a session, a message sent on a connection that is not open. Code `INVALID_STATE` (7004). */
export declare class InvalidStateError extends McpgwError {
}
/** A file on the host could not be read. Code `HOST_IO` (7005). */
export declare class HostIoError extends McpgwError {
}
/** The sandbox backend could not run a command at all: the sandbox is gone, not running or unreachable, or the program (or the host's exec function) could not be run. Code `EXEC_FAILED` (7100). */
export declare class ExecFailedError extends McpgwError {
}
/** A command ran in the sandbox but failed outside the HTTP exchange (missing program, full disk, failed upload check). Code `COMMAND_FAILED` (7101). */
export declare class CommandFailedError extends McpgwError {
}
/** No gateway answers on the port, or a different one than this host launched. Code `GATEWAY_NOT_RUNNING` (7102). */
export declare class GatewayNotRunningError extends McpgwError {
}
/** The gateway could not be launched; the message carries its reason and log tail. Code `START_FAILED` (7103). */
export declare class StartFailedError extends McpgwError {
}
/** The gateway refused the token (HTTP 401), or the token file could not be read. Code `UNAUTHORIZED` (7104). */
export declare class UnauthorizedError extends McpgwError {
}
/** Unknown MCP or tool in this scope (HTTP 404). Code `NOT_FOUND` (7105). */
export declare class NotFoundError extends McpgwError {
}
/** An MCP of that name already exists in this scope (HTTP 409). Code `CONFLICT` (7106). */
export declare class ConflictError extends McpgwError {
}
/** The upstream MCP server failed to connect or to answer (HTTP 500, 502, 503). Code `UPSTREAM_ERROR` (7107). */
export declare class UpstreamError extends McpgwError {
}
/** A deadline passed: the tool call's (HTTP 504) or the request's own. Code `DEADLINE` (7108). */
export declare class DeadlineError extends McpgwError {
}
/** What came back is not what the gateway protocol promises. Code `PROTOCOL_ERROR` (7109). */
export declare class ProtocolError extends McpgwError {
}
/** The session channel carrying the operation died before its answer came; the operation was not replayed. Code `SESSION_LOST` (7110). */
export declare class SessionLostError extends McpgwError {
}
/** The caller gave up on the operation; the gateway was told to cancel it upstream. Code `CANCELLED` (7111). */
export declare class CancelledError extends McpgwError {
}
/** A rule refused it before it reached the sandbox: the MCP's `enable_tools` / `disable_tools` (HTTP 403), or the host's policy. Code `POLICY_DENIED` (7112). */
export declare class PolicyDeniedError extends McpgwError {
}
/**
 * Each failure code's number and class, by the code's name.
 *
 * @type {ReadonlyMap<string, {result: number, Class: typeof McpgwError}>}
 */
export declare const CODES: ReadonlyMap<string, {
    result: number;
    Class: typeof McpgwError;
}>;
