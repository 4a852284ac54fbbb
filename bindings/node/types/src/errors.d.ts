import { ExecFailedError } from './codes.js';
import { McpgwError } from './mcpgw-error.js';
export type BackendState = 'gone' | 'not_running' | 'unreachable' | 'cannot_run';
export type ErrorJson = {
    code: number;
    name: string;
    message: string;
    http_status?: number;
    detail?: string;
    backend?: {
        backend: string;
        target: string;
        exit_code: number;
        state: BackendState;
        reason: string;
    };
};
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
export declare class BackendError extends ExecFailedError {
    /** The backend's program: `docker`, `podman`, `kubectl`, or an argv prefix's. */
    backend: string;
    /** The container or pod. */
    target: string;
    /** The backend client's exit status. */
    exitCode: number;
    /** What kind of failure. @type {BackendState} */
    state: BackendState;
    /** What the backend said, or what was found out. */
    reason: string;
    /**
     * @param {string} message
     * @param {{backend: string, target: string, exitCode: number, state: BackendState, reason: string}} failure
     * @param {import('./mcpgw-error.js').McpgwErrorInfo} [info]
     */
    constructor(message: string, failure: {
        backend: string;
        target: string;
        exitCode: number;
        state: BackendState;
        reason: string;
    }, info?: import('./mcpgw-error.js').McpgwErrorInfo);
}
/**
 * An error of the result code named `name` (e.g. `INVALID_ARGUMENT`).
 *
 * @param {string} name
 * @param {string} message
 * @param {{status?: number, detail?: string, cause?: unknown}} [extra]
 * @returns {McpgwError}
 */
export declare function errorNamed(name: string, message: string, extra?: {
    status?: number;
    detail?: string;
    cause?: unknown;
}): McpgwError;
/**
 * The name of result code `result` (e.g. `NOT_FOUND` for 7105); null for OK (0), and
 * `RESULT_<n>` for a code this binding does not know.
 *
 * @param {number} result
 * @returns {string | null}
 */
export declare function codeName(result: number): string | null;
/**
 * An InvalidArgumentError: a value the binding refuses before the library sees it.
 *
 * @param {string} message
 */
export declare function invalid(message: string): McpgwError;
/**
 * The error the library's error JSON describes.
 *
 * @param {ErrorJson} e
 * @param {unknown} [cause]
 * @returns {McpgwError}
 */
export declare function errorFromJson(e: ErrorJson, cause?: unknown): McpgwError;
