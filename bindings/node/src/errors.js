// Typed errors: one class per kind of failure, mapped from libmcpgw's mcpgw_result codes in one
// place (errorClassFor), so callers can branch with `instanceof` or on `code`.

import { RESULT } from './native.js';

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
   * @param {{code?: string, result?: number, status?: number, detail?: string, cause?: unknown}} [info]
   */
  constructor(message, { code = 'ERROR', result = 0, status, detail, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** @type {string} */
    this.code = code;
    /** @type {number} */
    this.result = result;
    /** @type {number | undefined} */
    this.status = status;
    /** @type {string | undefined} */
    this.detail = detail;
  }
}

/** A value given to the library is unusable, or the gateway refused the request (400, 413, 422). */
export class InvalidArgumentError extends McpgwError {}

/** The client was used out of order: after `close()`, or an operation driven wrongly. */
export class InvalidStateError extends McpgwError {}

/** The exec function could not run a command in the sandbox (it threw or returned garbage). */
export class ExecError extends McpgwError {}

/** A command ran in the sandbox but failed outside the HTTP exchange (missing program, full disk). */
export class CommandError extends McpgwError {}

/** No gateway answers on the port, or a different one than this client launched. */
export class GatewayDownError extends McpgwError {}

/** The gateway could not be launched; the message carries its reason and log tail. */
export class StartError extends McpgwError {}

/** The gateway refused the token (401), or the token file could not be read. */
export class UnauthorizedError extends McpgwError {}

/** Unknown MCP or tool in this scope (404). */
export class NotFoundError extends McpgwError {}

/** An MCP of that name already exists in this scope (409). */
export class ConflictError extends McpgwError {}

/** The upstream MCP server failed to connect or to answer (500, 502, 503). */
export class UpstreamError extends McpgwError {}

/** A deadline passed: the tool call's at the gateway (504), the request's, or a command's. */
export class TimeoutError extends McpgwError {}

/** What came back is not what the gateway protocol promises. */
export class ProtocolError extends McpgwError {}

/** A file on the host could not be read. */
export class HostIoError extends McpgwError {}

/** A bug in libmcpgw or in this binding (a panic, a NULL where none may be). Please report it. */
export class InternalError extends McpgwError {}

/** The call was aborted through its `AbortSignal`; `cause` is the signal's reason. */
export class AbortError extends McpgwError {}

const CLASSES = new Map([
  [RESULT.INVALID_ARGUMENT, InvalidArgumentError],
  [RESULT.INVALID_STATE, InvalidStateError],
  [RESULT.HOST_IO, HostIoError],
  [RESULT.EXEC_FAILED, ExecError],
  [RESULT.COMMAND_FAILED, CommandError],
  [RESULT.GATEWAY_NOT_RUNNING, GatewayDownError],
  [RESULT.START_FAILED, StartError],
  [RESULT.UNAUTHORIZED, UnauthorizedError],
  [RESULT.NOT_FOUND, NotFoundError],
  [RESULT.CONFLICT, ConflictError],
  [RESULT.UPSTREAM_ERROR, UpstreamError],
  [RESULT.DEADLINE, TimeoutError],
  [RESULT.PROTOCOL_ERROR, ProtocolError],
  [RESULT.PANIC, InternalError],
  [RESULT.NULL_PARAMETER, InternalError],
]);

const NAMES = new Map(Object.entries(RESULT).map(([name, value]) => [value, name]));

/** The error class of a result code. */
export function errorClassFor(result) {
  return CLASSES.get(result) ?? McpgwError;
}

/** The name of a result code (`NOT_FOUND`), or `UNKNOWN_<n>`. */
export function codeName(result) {
  return NAMES.get(result) ?? `UNKNOWN_${result}`;
}

/**
 * A typed error for `result`.
 * @param {number} result
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 */
export function errorFor(result, message, extra = {}) {
  const Class = errorClassFor(result);
  return new Class(message, { code: codeName(result), result, ...extra });
}
