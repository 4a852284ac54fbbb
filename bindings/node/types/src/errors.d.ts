export type McpgwErrorInfo = {
    /**
     * the library's result name (`NOT_FOUND`), or `ABORT_ERR`
     */
    code?: string;
    /**
     * the numeric `mcpgw_result`, 0 when it did not come from the library
     */
    result?: number;
    /**
     * the gateway's HTTP status, when it answered
     */
    status?: number;
    /**
     * the gateway's `detail` text, when it answered with one
     */
    detail?: string;
    /**
     * what caused it, e.g. the exec function's rejection
     */
    cause?: unknown;
};
/**
 * What every error of this package carries besides its message.
 *
 * @typedef {object} McpgwErrorInfo
 * @property {string} [code] the library's result name (`NOT_FOUND`), or `ABORT_ERR`
 * @property {number} [result] the numeric `mcpgw_result`, 0 when it did not come from the library
 * @property {number} [status] the gateway's HTTP status, when it answered
 * @property {string} [detail] the gateway's `detail` text, when it answered with one
 * @property {unknown} [cause] what caused it, e.g. the exec function's rejection
 */
/**
 * The base class of every error this package throws.
 *
 * `code` is the name of the library's result code (`NOT_FOUND`, `DEADLINE`, ...; `ABORT_ERR` for
 * an aborted call), `result` its numeric value (0 when the failure did not come from the
 * library), `status` the gateway's HTTP status when it answered, `detail` its `detail` text.
 */
export declare class McpgwError extends Error {
    /** The library's result name (`NOT_FOUND`, `DEADLINE`, ...), or `ABORT_ERR`. */
    code: string;
    /** The numeric `mcpgw_result` (e.g. 7105), or 0 when the failure did not come from the library. */
    result: number;
    /** The gateway's HTTP status, when it answered. @type {number | undefined} */
    status: number | undefined;
    /** The gateway's `detail` text, when it answered with one. @type {string | undefined} */
    detail: string | undefined;
    /**
     * @param {string} message
     * @param {McpgwErrorInfo} [info]
     */
    constructor(message: string, { code, result, status, detail, cause }?: McpgwErrorInfo);
}
/** A value is unusable, or the gateway refused the request as invalid (400, 413, 422). Code `INVALID_ARGUMENT`. */
export declare class InvalidArgumentError extends McpgwError {
}
/** The client or session is closed, or was used out of order. Code `INVALID_STATE`. */
export declare class InvalidStateError extends McpgwError {
}
/** The exec function could not run a command: the sandbox is gone, or the exec threw or returned garbage (`cause` says). Code `EXEC_FAILED`. */
export declare class ExecError extends McpgwError {
}
/** A command ran in the sandbox but failed outside the HTTP exchange (missing program, full disk). Code `COMMAND_FAILED`. */
export declare class CommandError extends McpgwError {
}
/** No gateway answers on the port, or a different one than this client launched. Code `GATEWAY_NOT_RUNNING`. */
export declare class GatewayDownError extends McpgwError {
}
/** The gateway could not be launched; the message carries its reason and log tail. Code `START_FAILED`. */
export declare class StartError extends McpgwError {
}
/** The gateway refused the token (401), or the token file could not be read. Code `UNAUTHORIZED`. */
export declare class UnauthorizedError extends McpgwError {
}
/** Unknown MCP or tool in this scope (404). Code `NOT_FOUND`. */
export declare class NotFoundError extends McpgwError {
}
/** An MCP of that name already exists in this scope (409). Code `CONFLICT`. */
export declare class ConflictError extends McpgwError {
}
/** The upstream MCP server failed to connect or to answer (500, 502, 503). Code `UPSTREAM_ERROR`. */
export declare class UpstreamError extends McpgwError {
}
/** A deadline passed: the tool call's at the gateway (504), the request's, or a command's. Code `DEADLINE`. */
export declare class TimeoutError extends McpgwError {
}
/** What came back is not what the gateway protocol promises. Code `PROTOCOL_ERROR`. */
export declare class ProtocolError extends McpgwError {
}
/** A file on the host could not be read. Code `HOST_IO`. */
export declare class HostIoError extends McpgwError {
}
/** The session channel died before the call's answer came; the call was not replayed. Code `SESSION_LOST`. */
export declare class SessionLostError extends McpgwError {
}
/** A bug in libmcpgw or in this binding (a panic, a NULL where none may be): please report it. Code `PANIC` or `NULL_PARAMETER`. */
export declare class InternalError extends McpgwError {
}
/** The call was aborted through its `AbortSignal`; `cause` is the signal's reason. Code `ABORT_ERR`. */
export declare class AbortError extends McpgwError {
}
/**
 * The name of a result code (`NOT_FOUND`), as the library has it; `UNKNOWN_<n>` for a number that
 * is not a code.
 *
 * @param {number} result
 * @returns {string}
 */
export declare function codeName(result: number): string;
/**
 * Every result code of the loaded library, ascending: its number, its name after
 * `MCPGW_RESULT_` and its static text. Read from the library (`mcpgw_result_codes`), not kept here.
 *
 * @returns {{code: number, name: string, message: string}[]}
 */
export declare function resultCodes(): {
    code: number;
    name: string;
    message: string;
}[];
/**
 * A typed error for the result code `result`.
 *
 * @param {number} result
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 */
export declare function errorFor(result: number, message: string, extra?: {
    status?: number;
    detail?: string;
    cause?: unknown;
}): McpgwError;
/**
 * A typed error for the result code named `name` (e.g. `INVALID_ARGUMENT`).
 *
 * @param {string} name
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 */
export declare function errorNamed(name: string, message: string, extra?: {
    status?: number;
    detail?: string;
    cause?: unknown;
}): McpgwError;
/**
 * The AbortError of a call aborted through `signal`.
 *
 * @param {string} what
 * @param {AbortSignal} signal
 */
export declare function aborted(what: string, signal: AbortSignal): AbortError;
