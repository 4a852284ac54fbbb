import type { ToolChunk } from './wire.js';
/** @import { ToolChunk } from './wire.js' */
/** Native objects this binding holds right now, by kind; see `nativeStats`. */
export declare const live: {
    clients: number;
    ops: number;
    chunks: number;
    errors: number;
    strings: number;
    sessions: number;
};
export type NativeStats = {
    clients: number;
    ops: number;
    chunks: number;
    errors: number;
    strings: number;
    sessions: number;
};
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
export declare function nativeStats(): NativeStats;
/** Takes an owned `char *`: decodes it, frees it once. */
export declare function takeString(n: any, ptr: any): any;
/**
 * The typed error of a native `mcpgw_error` (borrowed: not freed here).
 *
 * @param {unknown} [cause]
 */
export declare function readError(n: any, err: any, cause?: unknown): import("./errors.js").McpgwError;
/** Takes an owned `mcpgw_error *`: reads it, frees it once, returns the typed error. */
export declare function takeError(n: any, err: any, cause: any): import("./errors.js").McpgwError;
/**
 * The ToolChunk at `chunk` (borrowed: not freed here), through its JSON: the library's wire
 * type written as the gateway writes it.
 *
 * @returns {ToolChunk}
 */
export declare function chunkJson(n: any, chunk: any): ToolChunk;
