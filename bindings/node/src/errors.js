// Errors from what the library reports: its error JSON (a DONE action's), its error objects
// (a refused configuration or operation), and the binding's own refusals of arguments. The
// class of each code is generated from the header (codes.js); a code this binding does not know
// (a newer library of the same ABI) still gives an McpgwError with its name as `code`.

import { CODES, ExecFailedError } from './codes.js';
import { McpgwError } from './mcpgw-error.js';

/**
 * The backend's failure as the library judged it (`BackendFailure` in `src/error.rs`):
 * the sandbox is gone, not running, or unreachable, or the backend could not run the command.
 *
 * @typedef {'gone' | 'not_running' | 'unreachable' | 'cannot_run'} BackendState
 */

/**
 * What the library's error JSON holds (`Error::to_json` in the core).
 *
 * @typedef {object} ErrorJson
 * @property {number} code
 * @property {string} name
 * @property {string} message
 * @property {number} [http_status]
 * @property {string} [detail]
 * @property {{backend: string, target: string, exit_code: number, state: BackendState, reason: string}} [backend]
 */

/**
 * An `EXEC_FAILED` error the sandbox backend caused: `backend` (`docker`, `podman`,
 * `kubectl`, ...), `target` (the container or pod), `exitCode` (the backend client's exit
 * status), `state` (`gone`, `not_running`, `unreachable`, `cannot_run`) and `reason` (what the
 * backend said, or what was found out).
 */
export class BackendError extends ExecFailedError {
  /**
   * @param {string} message
   * @param {{backend: string, target: string, exitCode: number, state: BackendState, reason: string}} failure
   * @param {import('./mcpgw-error.js').McpgwErrorInfo} [info]
   */
  constructor(message, failure, info) {
    super(message, info);
    /** The backend's program: `docker`, `podman`, `kubectl`, or an argv prefix's. */
    this.backend = failure.backend;
    /** The container or pod. */
    this.target = failure.target;
    /** The backend client's exit status. */
    this.exitCode = failure.exitCode;
    /** What kind of failure. @type {BackendState} */
    this.state = failure.state;
    /** What the backend said, or what was found out. */
    this.reason = failure.reason;
  }
}

/**
 * An error of the result code named `name` (e.g. `INVALID_ARGUMENT`).
 *
 * @param {string} name
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 * @returns {McpgwError}
 */
export function errorNamed(name, message, extra = {}) {
  const known = CODES.get(name);
  const Class = known?.Class ?? McpgwError;
  return new Class(message, { code: name, result: known?.result ?? 0, ...extra });
}

/**
 * The name of result code `result` (e.g. `NOT_FOUND` for 7105); null for OK (0), and
 * `RESULT_<n>` for a code this binding does not know.
 *
 * @param {number} result
 * @returns {string | null}
 */
export function codeName(result) {
  if (!result) return null;
  for (const [name, known] of CODES) if (known.result === result) return name;
  return `RESULT_${result}`;
}

/**
 * An InvalidArgumentError: a value the binding refuses before the library sees it.
 *
 * @param {string} message
 */
export function invalid(message) {
  return errorNamed('INVALID_ARGUMENT', message);
}

/**
 * The error the library's error JSON describes.
 *
 * @param {ErrorJson} e
 * @param {unknown} [cause]
 * @returns {McpgwError}
 */
export function errorFromJson(e, cause) {
  const info = {
    code: e.name,
    result: e.code,
    status: e.http_status || undefined,
    detail: e.detail ?? undefined,
    cause,
  };
  if (e.backend && e.name === 'EXEC_FAILED') {
    const b = e.backend;
    const failure = { ...b, exitCode: b.exit_code };
    return new BackendError(e.message, failure, info);
  }
  const Class = CODES.get(e.name)?.Class ?? McpgwError;
  return new Class(e.message, info);
}
