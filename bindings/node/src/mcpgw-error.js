// The base class of every error the package throws (the classes per result code, generated in
// codes.js, extend it).

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
export class McpgwError extends Error {
  /**
   * @param {string} message
   * @param {McpgwErrorInfo} [info]
   */
  constructor(message, { code = 'ERROR', result = 0, status, detail, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = new.target.name;
    /** The result code's name (`NOT_FOUND`, `DEADLINE`, ...). */
    this.code = code;
    /** The result code's number (e.g. 7105). */
    this.result = result;
    /** The gateway's HTTP status, when it answered. @type {number | undefined} */
    this.status = status;
    /** The gateway's `detail` text, when it answered with one. @type {string | undefined} */
    this.detail = detail;
  }
}
