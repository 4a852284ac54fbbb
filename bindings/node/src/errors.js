// Typed errors. The codes, their numbers and their texts come from the library at load
// (native.js reads `mcpgw_result_codes`); this file only chooses a class per code name, so callers
// can branch with `instanceof` or on `code`. A code this binding does not know yet (a newer
// library of the same ABI) still gives an McpgwError with its name as `code`.

import { native } from './native.js';

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
export class McpgwError extends Error {
  /**
   * @param {string} message
   * @param {McpgwErrorInfo} [info]
   */
  constructor(message, { code = 'ERROR', result = 0, status, detail, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** The library's result name (`NOT_FOUND`, `DEADLINE`, ...), or `ABORT_ERR`. */
    this.code = code;
    /** The numeric `mcpgw_result` (e.g. 7105), or 0 when the failure did not come from the library. */
    this.result = result;
    /** The gateway's HTTP status, when it answered. @type {number | undefined} */
    this.status = status;
    /** The gateway's `detail` text, when it answered with one. @type {string | undefined} */
    this.detail = detail;
  }
}

/** A value is unusable, or the gateway refused the request as invalid (400, 413, 422). Code `INVALID_ARGUMENT`. */
export class InvalidArgumentError extends McpgwError {}

/** The client or session is closed, or was used out of order. Code `INVALID_STATE`. */
export class InvalidStateError extends McpgwError {}

/** The exec function could not run a command: the sandbox is gone, or the exec threw or returned garbage (`cause` says). Code `EXEC_FAILED`. */
export class ExecError extends McpgwError {}

/** A command ran in the sandbox but failed outside the HTTP exchange (missing program, full disk). Code `COMMAND_FAILED`. */
export class CommandError extends McpgwError {}

/** No gateway answers on the port, or a different one than this client launched. Code `GATEWAY_NOT_RUNNING`. */
export class GatewayDownError extends McpgwError {}

/** The gateway could not be launched; the message carries its reason and log tail. Code `START_FAILED`. */
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

/** The session channel died before the call's answer came; the call was not replayed. Code `SESSION_LOST`. */
export class SessionLostError extends McpgwError {}

/** A bug in libmcpgw or in this binding (a panic, a NULL where none may be): please report it. Code `PANIC` or `NULL_PARAMETER`. */
export class InternalError extends McpgwError {}

/** The call was aborted through its `AbortSignal`; `cause` is the signal's reason. Code `ABORT_ERR`. */
export class AbortError extends McpgwError {}

/** The class of each code name; every other code is a plain McpgwError. */
const CLASSES = new Map([
  ['INVALID_ARGUMENT', InvalidArgumentError],
  ['INVALID_STATE', InvalidStateError],
  ['HOST_IO', HostIoError],
  ['EXEC_FAILED', ExecError],
  ['COMMAND_FAILED', CommandError],
  ['GATEWAY_NOT_RUNNING', GatewayDownError],
  ['START_FAILED', StartError],
  ['UNAUTHORIZED', UnauthorizedError],
  ['NOT_FOUND', NotFoundError],
  ['CONFLICT', ConflictError],
  ['UPSTREAM_ERROR', UpstreamError],
  ['DEADLINE', TimeoutError],
  ['PROTOCOL_ERROR', ProtocolError],
  ['SESSION_LOST', SessionLostError],
  ['CANCELLED', AbortError],
  ['PANIC', InternalError],
  ['NULL_PARAMETER', InternalError],
]);

/**
 * The name of a result code (`NOT_FOUND`), as the library has it; `UNKNOWN_<n>` for a number that
 * is not a code.
 *
 * @param {number} result
 * @returns {string}
 */
export function codeName(result) {
  return native().codes.get(result)?.name ?? `UNKNOWN_${result}`;
}

/**
 * Every result code of the loaded library, ascending: its number, its name after
 * `MCPGW_RESULT_` and its static text. Read from the library (`mcpgw_result_codes`), not kept here.
 *
 * @returns {{code: number, name: string, message: string}[]}
 */
export function resultCodes() {
  return [...native().codes].map(([code, { name, message }]) => ({ code, name, message }));
}

/**
 * A typed error for the result code `result`.
 *
 * @param {number} result
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 */
export function errorFor(result, message, extra = {}) {
  const code = codeName(result);
  const Class = CLASSES.get(code) ?? McpgwError;
  return new Class(message, { code, result, ...extra });
}

/**
 * A typed error for the result code named `name` (e.g. `INVALID_ARGUMENT`).
 *
 * @param {string} name
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 */
export function errorNamed(name, message, extra = {}) {
  return errorFor(native().RESULT[name], message, extra);
}

/**
 * The AbortError of a call aborted through `signal`.
 *
 * @param {string} what
 * @param {AbortSignal} signal
 */
export function aborted(what, signal) {
  return new AbortError(`${what}: aborted`, { code: 'ABORT_ERR', cause: signal.reason });
}
