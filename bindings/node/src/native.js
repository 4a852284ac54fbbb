// Loading libmcpgw: the search for the shared library, its ABI check, the koffi declarations
// (generated from include/mcpgw.h: ffi.js), and the library's own list of result codes, checked
// against the header's. Also what crosses back: owned strings and errors taken (read, then freed
// exactly once), borrowed bytes copied, and counts of what is held, for leak checks.

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';
import { CODES } from './codes.js';
import { ABI_VERSION, ENUM_TYPES, OPAQUE_TYPES, PROTOTYPES, STDIN_KIND } from './ffi.js';
import { errorNamed } from './errors.js';

export { ABI_VERSION };

/** @import { Spec } from './procs.js' */

const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The platform's file name of the shared library. */
function libraryFileName() {
  if (process.platform === 'darwin') return 'libmcpgw.dylib';
  if (process.platform === 'win32') return 'mcpgw.dll';
  return 'libmcpgw.so';
}

/** The directory of the package's bundled library for this platform, e.g. `prebuilds/linux-x64`. */
export function prebuildDir(platform = process.platform, arch = process.arch) {
  return join(PACKAGE_DIR, 'prebuilds', `${platform}-${arch}`);
}

/**
 * The places the shared library is looked for, in order: `MCPGW_LIB` alone when it is set (an
 * explicit choice is never silently replaced), else the library bundled in the package
 * (`prebuilds/<platform>-<arch>/`), else, only inside a checkout of the mcpgw repository, its
 * cargo outputs (release before debug).
 *
 * @param {Record<string, string | undefined>} [env] the environment to read `MCPGW_LIB` from
 * @returns {string[]}
 */
export function libraryCandidates(env = process.env) {
  if (env.MCPGW_LIB) return [resolve(env.MCPGW_LIB)];
  const name = libraryFileName();
  const candidates = [join(prebuildDir(), name)];
  const repo = checkoutRoot();
  if (repo) {
    candidates.push(join(repo, 'target', 'release', name), join(repo, 'target', 'debug', name));
  }
  return candidates;
}

/** Whether this package runs from a checkout of the mcpgw repository (bindings/node). */
function checkoutRoot() {
  const repo = resolve(PACKAGE_DIR, '..', '..');
  // An installed package lives in node_modules: never look into the user's project for target/.
  return existsSync(join(repo, 'include', 'mcpgw.h')) && existsSync(join(repo, 'Cargo.toml'))
    ? repo
    : null;
}

/**
 * The places {@link gatewayBinary} looks, in order: the static gateway bundled in the package
 * (`gateway/linux-<arch>/mcpgw-gateway`), else, only inside a checkout of the mcpgw repository,
 * its static build (`make static`, x64 only).
 *
 * @param {string} [arch] the sandbox's architecture, as Node names it (`x64`, `arm64`)
 * @returns {string[]}
 */
export function gatewayCandidates(arch = process.arch) {
  const candidates = [join(PACKAGE_DIR, 'gateway', `linux-${arch}`, 'mcpgw-gateway')];
  const repo = checkoutRoot();
  if (repo && arch === 'x64') {
    candidates.push(join(repo, 'target', 'x86_64-unknown-linux-gnu', 'release', 'mcpgw-gateway'));
  }
  return candidates;
}

/**
 * The host path of the static `mcpgw-gateway` of this package's release for Linux sandboxes of
 * `arch` (no libc needed in the image): the one the package bundles (linux-x64).
 * `client.ensureGatewayBinary()` installs it into the sandbox when given no path. Throws an
 * Error naming every path tried when there is none.
 *
 * @param {string} [arch] the sandbox's architecture, as Node names it; the host's by default
 * @returns {string}
 */
export function gatewayBinary(arch = process.arch) {
  const candidates = gatewayCandidates(arch);
  const path = candidates.find((p) => existsSync(p));
  if (!path) {
    throw new Error(
      `no bundled mcpgw-gateway for linux-${arch}: tried ${candidates.join(', ')}. ` +
        'The npm package carries the one for linux-x64; a checkout builds it with `make static`.',
    );
  }
  return path;
}

/** Why a bundled linux-x64 library may not load here, for the error message. */
function platformHint() {
  if (process.platform !== 'linux' || process.arch !== 'x64') {
    return ` The package bundles libmcpgw for linux-x64 (glibc) only; on ${process.platform}-${process.arch} build it and set MCPGW_LIB.`;
  }
  const header = /** @type {any} */ (process.report?.getReport())?.header;
  if (header && !header.glibcVersionRuntime) {
    return ' The bundled libmcpgw needs glibc; on musl (e.g. Alpine) build it there and set MCPGW_LIB.';
  }
  return '';
}

/** @type {any} */
let loaded = null;

/**
 * Loads the library once per process, checks its ABI version, declares its functions and checks
 * its result codes against the header's. Throws an Error naming every path tried when none
 * holds a loadable library of the expected ABI.
 *
 * @returns {any} the declared functions (by their C names), plus `path` and `codes` (the
 *   library's result codes: number to name and message)
 */
export function native() {
  if (loaded) return loaded;
  const candidates = libraryCandidates();
  const path = candidates.find((p) => existsSync(p));
  if (!path) {
    throw new Error(
      `libmcpgw was not found; tried ${candidates.join(', ')}. ` +
        'Build it with `cargo build -p mcpgw-ffi` (or --release) in the mcpgw repository, ' +
        `or set MCPGW_LIB to its path.${platformHint()}`,
    );
  }
  let lib;
  try {
    lib = koffi.load(path);
  } catch (e) {
    throw new Error(
      `libmcpgw at ${path} could not be loaded: ${/** @type {Error} */ (e).message}.${platformHint()}`,
      { cause: e },
    );
  }
  // Checked before anything else is declared: a library of another ABI may lack the symbols.
  let abi;
  try {
    abi = lib.func(PROTOTYPES.mcpgw_abi_version)();
  } catch (e) {
    throw new Error(`${path} is not libmcpgw (it has no mcpgw_abi_version)`, { cause: e });
  }
  if (abi !== ABI_VERSION) {
    throw new Error(
      `libmcpgw at ${path} has ABI version ${abi}, but this binding needs ${ABI_VERSION}; ` +
        'use the library and the binding of the same release',
    );
  }
  for (const t of OPAQUE_TYPES) koffi.opaque(t);
  for (const t of ENUM_TYPES) koffi.alias(t, 'uint32_t');
  /** @type {Record<string, any>} */
  const api = {};
  for (const [name, prototype] of Object.entries(PROTOTYPES)) api[name] = lib.func(prototype);
  const codes = resultTable(api);
  for (const [name, { result }] of CODES) {
    if (codes.get(result)?.name !== name) {
      throw new Error(
        `libmcpgw at ${path} lacks the result code ${name} (${result}) of its header`,
      );
    }
  }
  loaded = { ...api, path, codes };
  return loaded;
}

/** The library's result codes (`mcpgw_result_codes`, `_name`, `_message`), by number. */
function resultTable(api) {
  const codesOut = [null];
  const lenOut = [0];
  api.mcpgw_result_codes(codesOut, lenOut);
  /** @type {Map<number, {name: string, message: string}>} */
  const codes = new Map();
  for (const code of koffi.decode(codesOut[0], 'uint32_t', Number(lenOut[0]))) {
    codes.set(code, { name: api.mcpgw_result_name(code), message: api.mcpgw_result_message(code) });
  }
  return codes;
}

/**
 * Every result code of the loaded library, ascending: its number, its name after
 * `MCPGW_RESULT_` and its static text, as the library has them.
 *
 * @returns {{code: number, name: string, message: string}[]}
 */
export function resultCodes() {
  return [...native().codes].map(([code, { name, message }]) => ({ code, name, message }));
}

/** Native objects this binding holds right now, by kind; see `nativeStats`. */
export const live = { hosts: 0, actions: 0, errors: 0, strings: 0, chunks: 0 };

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
export function nativeStats() {
  return { ...live };
}

/** A copy of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export function copyBytes(ptr, len) {
  if (!len) return Buffer.alloc(0);
  return Buffer.from(koffi.view(ptr, len).slice(0));
}

/** Takes an owned `char *`: decodes it, frees it once. */
export function takeString(n, ptr) {
  live.strings++;
  try {
    return koffi.decode(ptr, 'char', -1);
  } finally {
    n.mcpgw_string_free(ptr);
    live.strings--;
  }
}

/** Takes an owned `mcpgw_error *`: reads it, frees it once, returns the typed error. */
export function takeError(n, err) {
  live.errors++;
  try {
    const result = n.mcpgw_error_code(err);
    const status = n.mcpgw_error_http_status(err);
    const name = n.codes.get(result)?.name ?? `UNKNOWN_${result}`;
    return errorNamed(name, n.mcpgw_error_message(err) ?? n.mcpgw_result_message(result), {
      status: status || undefined,
      detail: n.mcpgw_error_detail(err) ?? undefined,
    });
  } finally {
    n.mcpgw_error_free(err);
    live.errors--;
  }
}

/** A copy of the bytes an action carries (borrowed from it). */
export function actionBytes(n, action) {
  const len = [0];
  const ptr = n.mcpgw_action_bytes(action, len);
  return ptr ? copyBytes(ptr, Number(len[0])) : Buffer.alloc(0);
}

/**
 * What a RUN or OPEN action asks for, copied out of the action.
 *
 * @returns {Spec}
 */
export function actionSpec(n, action) {
  const argv = [];
  for (let i = 0, argc = Number(n.mcpgw_action_argc(action)); i < argc; i++) {
    argv.push(n.mcpgw_action_argv(action, i));
  }
  const stdinKind = n.mcpgw_action_stdin_kind(action);
  return {
    argv,
    shell: n.mcpgw_action_shell(action),
    cwd: n.mcpgw_action_cwd(action) ?? undefined,
    stdinKind,
    stdin: stdinKind === STDIN_KIND.BYTES ? actionBytes(n, action) : null,
    timeoutMs: n.mcpgw_action_timeout_ms(action),
  };
}
