/** The ABI version this binding was written against (`MCPGW_ABI_VERSION` in mcpgw.h). */
export declare const ABI_VERSION = 2;
/** `mcpgw_transport` values. */
export declare const TRANSPORT: Readonly<{
    auto: 0;
    curl: 1;
    builtin: 2;
}>;
/** `mcpgw_session_event_kind` values. */
export declare const EVENT: Readonly<{
    OPENED: 1;
    PROGRESS: 2;
    FINISHED: 3;
    UNSENT: 4;
    NOTICE: 5;
    LOST: 6;
}>;
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
 * Loads the library once per process, checks its ABI version, declares its functions and reads
 * its result codes. Throws an Error naming every path tried when none holds a loadable library
 * of the expected ABI.
 *
 * @returns {any} the declared functions, plus `path`, `RESULT` (code by name) and `codes`
 *   (name and message by code)
 */
export declare function native(): any;
/** A copy of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export declare function copyBytes(ptr: any, len: any): Buffer<ArrayBuffer>;
/** A NUL-terminated string at `ptr`, decoded; the caller still owns the memory. */
export declare function decodeCString(ptr: any): any;
