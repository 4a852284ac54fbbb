import { ABI_VERSION } from './ffi.js';
export { ABI_VERSION };
import type { Spec } from './procs.js';
/** The directory of the package's bundled library for this platform, e.g. `prebuilds/linux-x64`. */
export declare function prebuildDir(platform?: NodeJS.Platform, arch?: NodeJS.Architecture): string;
/**
 * The places the shared library is looked for, in order: `MCPGW_LIB` alone when it is set (an
 * explicit choice is never silently replaced), else the library bundled in the package
 * (`prebuilds/<platform>-<arch>/`), else, only inside a checkout of the mcpgw repository, its
 * cargo outputs (release before debug).
 *
 * @param {Record<string, string | undefined>} [env] the environment to read `MCPGW_LIB` from
 * @returns {string[]}
 */
export declare function libraryCandidates(env?: Record<string, string | undefined>): string[];
/**
 * The places {@link gatewayBinary} looks, in order: the static gateway bundled in the package
 * (`gateway/linux-<arch>/mcpgw-gateway`), else, only inside a checkout of the mcpgw repository,
 * its static build (`make static`, x64 only).
 *
 * @param {string} [arch] the sandbox's architecture, as Node names it (`x64`, `arm64`)
 * @returns {string[]}
 */
export declare function gatewayCandidates(arch?: string): string[];
/**
 * The host path of the static `mcpgw-gateway` of this package's release for Linux sandboxes of
 * `arch` (no libc needed in the image): the one the package bundles (linux-x64).
 * `client.ensureGatewayBinary()` installs it into the sandbox when given no path. Throws an
 * Error naming every path tried when there is none.
 *
 * @param {string} [arch] the sandbox's architecture, as Node names it; the host's by default
 * @returns {string}
 */
export declare function gatewayBinary(arch?: string): string;
/**
 * Loads the library once per process, checks its ABI version, declares its functions and checks
 * its result codes against the header's. Throws an Error naming every path tried when none
 * holds a loadable library of the expected ABI.
 *
 * @returns {any} the declared functions (by their C names), plus `path` and `codes` (the
 *   library's result codes: number to name and message)
 */
export declare function native(): any;
/**
 * Every result code of the loaded library, ascending: its number, its name after
 * `MCPGW_RESULT_` and its static text, as the library has them.
 *
 * @returns {{code: number, name: string, message: string}[]}
 */
export declare function resultCodes(): {
    code: number;
    name: string;
    message: string;
}[];
/** Native objects this binding holds right now, by kind; see `nativeStats`. */
export declare const live: {
    hosts: number;
    actions: number;
    errors: number;
    strings: number;
    chunks: number;
};
export type NativeStats = {
    /**
     * host drivers (one per open client)
     */
    hosts: number;
    /**
     * actions being handled (freed once read)
     */
    actions: number;
    /**
     * error objects being read
     */
    errors: number;
    /**
     * strings being read
     */
    strings: number;
    /**
     * tool chunks being read
     */
    chunks: number;
};
/**
 * Native objects the binding holds right now, by kind; all zero once every client is closed.
 *
 * @typedef {object} NativeStats
 * @property {number} hosts host drivers (one per open client)
 * @property {number} actions actions being handled (freed once read)
 * @property {number} errors error objects being read
 * @property {number} strings strings being read
 * @property {number} chunks tool chunks being read
 */
/**
 * How many native objects the binding holds at this moment, by kind. Each is freed exactly
 * once: actions, strings, errors and chunks as soon as they are read, a client's host driver
 * when the client is closed (or, as a backstop, garbage-collected). Meant for leak checks.
 *
 * @returns {NativeStats}
 */
export declare function nativeStats(): NativeStats;
/** A copy of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export declare function copyBytes(ptr: any, len: any): Buffer<ArrayBuffer>;
/** Takes an owned `char *`: decodes it, frees it once. */
export declare function takeString(n: any, ptr: any): any;
/** Takes an owned `mcpgw_error *`: reads it, frees it once, returns the typed error. */
export declare function takeError(n: any, err: any): import("./mcpgw-error.js").McpgwError;
/** A copy of the bytes an action carries (borrowed from it). */
export declare function actionBytes(n: any, action: any): Buffer<ArrayBuffer>;
/**
 * What a RUN or OPEN action asks for, copied out of the action.
 *
 * @returns {Spec}
 */
export declare function actionSpec(n: any, action: any): Spec;
