export type McpgwErrorInfo = {
    /**
     * the result code's name (`NOT_FOUND`)
     */
    code?: string;
    /**
     * the result code's number (7105)
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
     * what caused it, e.g. the exec function's rejection or the abort
     * signal's reason
     */
    cause?: unknown;
};
/**
 * What every error of this package carries besides its message.
 *
 * @typedef {object} McpgwErrorInfo
 * @property {string} [code] the result code's name (`NOT_FOUND`)
 * @property {number} [result] the result code's number (7105)
 * @property {number} [status] the gateway's HTTP status, when it answered
 * @property {string} [detail] the gateway's `detail` text, when it answered with one
 * @property {unknown} [cause] what caused it, e.g. the exec function's rejection or the abort
 *   signal's reason
 */
/**
 * The base class of every error this package throws: `code` is the name of the library's result
 * code (`NOT_FOUND`, `DEADLINE`, ...), `result` its number, `status` the gateway's HTTP status
 * when it answered, `detail` its `detail` text. Each code has its class, named after it
 * (`NotFoundError`, `DeadlineError`, ...).
 */
export declare class McpgwError extends Error {
    /** The result code's name (`NOT_FOUND`, `DEADLINE`, ...). */
    code: string;
    /** The result code's number (e.g. 7105). */
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
