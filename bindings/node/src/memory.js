// Native objects the binding holds, counted; owned strings and errors taken (read, then freed
// exactly once).

import { decodeCString } from './native.js';
import { errorFor } from './errors.js';

/** @import { ToolChunk } from './wire.js' */

/** Native objects this binding holds right now, by kind; see `nativeStats`. */
export const live = { clients: 0, ops: 0, chunks: 0, errors: 0, strings: 0, sessions: 0 };

/**
 * Native objects the binding holds right now, by kind; all zero once every client and session
 * is closed and no call runs.
 *
 * @typedef {object} NativeStats
 * @property {number} clients
 * @property {number} ops
 * @property {number} chunks
 * @property {number} errors
 * @property {number} strings
 * @property {number} sessions
 */

/**
 * How many native objects the binding holds at this moment, by kind. Every one is freed exactly
 * once: ops, chunks, strings and errors before the call that made them settles, a session when
 * it is closed or lost, a client by `close()` (or, as a backstop, when it is garbage-collected).
 * Meant for leak checks.
 *
 * @returns {NativeStats}
 */
export function nativeStats() {
  return { ...live };
}

/** Takes an owned `char *`: decodes it, frees it once. */
export function takeString(n, ptr) {
  live.strings++;
  try {
    return decodeCString(ptr);
  } finally {
    n.mcpgw_string_free(ptr);
    live.strings--;
  }
}

/**
 * The typed error of a native `mcpgw_error` (borrowed: not freed here).
 *
 * @param {unknown} [cause]
 */
export function readError(n, err, cause) {
  const result = n.mcpgw_error_code(err);
  const status = n.mcpgw_error_http_status(err);
  return errorFor(result, n.mcpgw_error_message(err) ?? n.mcpgw_result_message(result), {
    status: status || undefined,
    detail: n.mcpgw_error_detail(err) ?? undefined,
    cause,
  });
}

/** Takes an owned `mcpgw_error *`: reads it, frees it once, returns the typed error. */
export function takeError(n, err, cause) {
  live.errors++;
  try {
    return readError(n, err, cause);
  } finally {
    n.mcpgw_error_free(err);
    live.errors--;
  }
}

/**
 * The ToolChunk at `chunk` (borrowed: not freed here), through its JSON: the library's wire
 * type written as the gateway writes it.
 *
 * @returns {ToolChunk}
 */
export function chunkJson(n, chunk) {
  const out = [null];
  const rc = n.mcpgw_tool_chunk_to_json(chunk, out);
  if (rc !== n.RESULT.OK) throw errorFor(rc, 'reading a ToolChunk failed');
  return JSON.parse(takeString(n, out[0]));
}
