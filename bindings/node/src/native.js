// The koffi declarations of libmcpgw (include/mcpgw.h), the search for the shared library, and the
// table of result codes read from the library at load. Ownership of what the functions return is
// handled by their callers (client.js, session.js, wire.js).

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';

/** The ABI version this binding was written against (`MCPGW_ABI_VERSION` in mcpgw.h). */
export const ABI_VERSION = 2;

/** `mcpgw_transport` values. */
export const TRANSPORT = Object.freeze({ auto: 0, curl: 1, builtin: 2 });

/** `mcpgw_session_event_kind` values. */
export const EVENT = Object.freeze({
  OPENED: 1,
  PROGRESS: 2,
  FINISHED: 3,
  UNSENT: 4,
  NOTICE: 5,
  LOST: 6,
});

/** The result codes the binding itself branches on; the library must have each of them. */
const NEEDED_CODES = [
  'OK',
  'INVALID_ARGUMENT',
  'INVALID_STATE',
  'EXEC_FAILED',
  'DEADLINE',
  'SESSION_LOST',
  'CANCELLED',
];

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
 * Loads the library once per process, checks its ABI version, declares its functions and reads
 * its result codes. Throws an Error naming every path tried when none holds a loadable library
 * of the expected ABI.
 *
 * @returns {any} the declared functions, plus `path`, `RESULT` (code by name) and `codes`
 *   (name and message by code)
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
    abi = lib.func('uint32_t mcpgw_abi_version(void)')();
  } catch (e) {
    throw new Error(`${path} is not libmcpgw (it has no mcpgw_abi_version)`, { cause: e });
  }
  if (abi !== ABI_VERSION) {
    throw new Error(
      `libmcpgw at ${path} has ABI version ${abi}, but this binding needs ${ABI_VERSION}; ` +
        'use the library and the binding of the same release',
    );
  }
  const api = declare(lib);
  const table = resultTable(api);
  for (const name of NEEDED_CODES) {
    if (!(name in table.RESULT)) {
      throw new Error(`libmcpgw at ${path} lacks the result code ${name}`);
    }
  }
  loaded = { path, ...api, ...table };
  return loaded;
}

/**
 * The library's result codes, from `mcpgw_result_codes`, `mcpgw_result_name` and
 * `mcpgw_result_message`: the one list of codes is the library's.
 */
function resultTable(api) {
  const codesOut = [null];
  const lenOut = [0];
  api.mcpgw_result_codes(codesOut, lenOut);
  /** @type {number[]} */
  const list = koffi.decode(codesOut[0], 'uint32_t', Number(lenOut[0]));
  /** @type {Record<string, number>} */
  const RESULT = {};
  /** @type {Map<number, {name: string, message: string}>} */
  const codes = new Map();
  for (const code of list) {
    const name = api.mcpgw_result_name(code);
    RESULT[name] = code;
    codes.set(code, { name, message: api.mcpgw_result_message(code) });
  }
  return { RESULT: Object.freeze(RESULT), codes };
}

/** Declares every function of mcpgw.h the binding uses. */
function declare(lib) {
  koffi.opaque('mcpgw_client');
  koffi.opaque('mcpgw_client_config');
  koffi.opaque('mcpgw_call_options');
  koffi.opaque('mcpgw_op');
  koffi.opaque('mcpgw_error');
  koffi.opaque('mcpgw_tool_chunk');
  koffi.opaque('mcpgw_session');
  koffi.opaque('mcpgw_session_event');
  koffi.alias('mcpgw_result', 'uint32_t');

  const f = (sig) => lib.func(sig);
  const setter = (name, type) =>
    f(`mcpgw_result ${name}(mcpgw_client_config *config, ${type} value)`);
  const optionSetter = (name, type) =>
    f(`mcpgw_result ${name}(mcpgw_call_options *options, ${type} value)`);
  const prepare = (name, extra = '') =>
    f(
      `mcpgw_result ${name}(const mcpgw_client *client, const mcpgw_call_options *options${extra}, _Out_ mcpgw_op **op_out)`,
    );
  return {
    mcpgw_version: f('const char *mcpgw_version(void)'),
    mcpgw_abi_version: f('uint32_t mcpgw_abi_version(void)'),
    mcpgw_result_message: f('const char *mcpgw_result_message(uint32_t result)'),
    mcpgw_result_name: f('const char *mcpgw_result_name(uint32_t result)'),
    mcpgw_result_codes: f('void mcpgw_result_codes(_Out_ void **codes_out, _Out_ size_t *len_out)'),
    // Strings the caller must free come back as raw pointers, not decoded strings.
    mcpgw_string_free: f('void mcpgw_string_free(void *s)'),

    mcpgw_client_config_new: f(
      'mcpgw_result mcpgw_client_config_new(_Out_ mcpgw_client_config **out)',
    ),
    mcpgw_client_config_free: f('void mcpgw_client_config_free(mcpgw_client_config *config)'),
    mcpgw_client_config_set_gateway_path: setter(
      'mcpgw_client_config_set_gateway_path',
      'const char *',
    ),
    mcpgw_client_config_set_host: setter('mcpgw_client_config_set_host', 'const char *'),
    mcpgw_client_config_set_port: setter('mcpgw_client_config_set_port', 'uint16_t'),
    mcpgw_client_config_set_token_file: setter(
      'mcpgw_client_config_set_token_file',
      'const char *',
    ),
    mcpgw_client_config_set_state_dir: setter('mcpgw_client_config_set_state_dir', 'const char *'),
    mcpgw_client_config_set_instance_nonce: setter(
      'mcpgw_client_config_set_instance_nonce',
      'const char *',
    ),
    mcpgw_client_config_set_staging_dir: setter(
      'mcpgw_client_config_set_staging_dir',
      'const char *',
    ),
    mcpgw_client_config_set_transport: setter('mcpgw_client_config_set_transport', 'uint32_t'),
    mcpgw_client_config_set_timeout_ms: setter('mcpgw_client_config_set_timeout_ms', 'uint32_t'),
    mcpgw_client_config_set_max_command_bytes: setter(
      'mcpgw_client_config_set_max_command_bytes',
      'size_t',
    ),
    mcpgw_client_config_set_exec_stdin: setter('mcpgw_client_config_set_exec_stdin', 'bool'),

    mcpgw_client_new: f(
      'mcpgw_result mcpgw_client_new(const mcpgw_client_config *config, void *exec, void *userdata, void *userdata_free, _Out_ mcpgw_client **client_out, _Out_ mcpgw_error **error_out)',
    ),
    mcpgw_client_free: f('void mcpgw_client_free(mcpgw_client *client)'),
    mcpgw_client_port: f('uint16_t mcpgw_client_port(const mcpgw_client *client)'),

    mcpgw_call_options_new: f(
      'mcpgw_result mcpgw_call_options_new(_Out_ mcpgw_call_options **options_out)',
    ),
    mcpgw_call_options_free: f('void mcpgw_call_options_free(mcpgw_call_options *options)'),
    mcpgw_call_options_set_agent_id: optionSetter(
      'mcpgw_call_options_set_agent_id',
      'const char *',
    ),
    mcpgw_call_options_set_session_id: optionSetter(
      'mcpgw_call_options_set_session_id',
      'const char *',
    ),
    mcpgw_call_options_set_timeout_ms: optionSetter(
      'mcpgw_call_options_set_timeout_ms',
      'uint32_t',
    ),

    mcpgw_client_prepare_start_gateway: prepare('mcpgw_client_prepare_start_gateway'),
    mcpgw_client_prepare_stop_gateway: prepare('mcpgw_client_prepare_stop_gateway'),
    mcpgw_client_prepare_ensure_gateway_binary: prepare(
      'mcpgw_client_prepare_ensure_gateway_binary',
      ', const char *host_path',
    ),
    mcpgw_client_prepare_health: prepare('mcpgw_client_prepare_health'),
    mcpgw_client_prepare_list_mcps: prepare('mcpgw_client_prepare_list_mcps'),
    mcpgw_client_prepare_add_mcp: prepare('mcpgw_client_prepare_add_mcp', ', const char *spec'),
    mcpgw_client_prepare_remove_mcp: prepare('mcpgw_client_prepare_remove_mcp', ', const char *n'),
    mcpgw_client_prepare_list_tools: prepare('mcpgw_client_prepare_list_tools', ', const char *m'),
    mcpgw_client_prepare_call_tool: prepare(
      'mcpgw_client_prepare_call_tool',
      ', const char *mcp, const char *tool, const char *arguments_json',
    ),
    mcpgw_client_prepare_set_runtime_headers: prepare(
      'mcpgw_client_prepare_set_runtime_headers',
      ', const char *mcp, const char *headers_json',
    ),

    // Command text and stdin are borrowed from the op: read as pointers and copied at once.
    mcpgw_op_command: f(
      'mcpgw_result mcpgw_op_command(const mcpgw_op *op, _Out_ void **command_out, _Out_ uint32_t *timeout_ms_out)',
    ),
    mcpgw_op_command_stdin: f(
      'mcpgw_result mcpgw_op_command_stdin(const mcpgw_op *op, _Out_ void **buf_out, _Out_ size_t *len_out)',
    ),
    mcpgw_op_complete: f(
      'mcpgw_result mcpgw_op_complete(mcpgw_op *op, int32_t exit_code, const uint8_t *out_buf, size_t out_len, const uint8_t *err_buf, size_t err_len)',
    ),
    mcpgw_op_fail_exec: f('mcpgw_result mcpgw_op_fail_exec(mcpgw_op *op, const char *reason)'),
    mcpgw_op_result: f('mcpgw_result mcpgw_op_result(const mcpgw_op *op)'),
    mcpgw_op_error: f('const mcpgw_error *mcpgw_op_error(const mcpgw_op *op)'),
    mcpgw_op_name: f('const char *mcpgw_op_name(const mcpgw_op *op)'),
    mcpgw_op_result_json: f(
      'mcpgw_result mcpgw_op_result_json(const mcpgw_op *op, _Out_ void **json_out)',
    ),
    mcpgw_op_free: f('void mcpgw_op_free(mcpgw_op *op)'),

    mcpgw_error_code: f('mcpgw_result mcpgw_error_code(const mcpgw_error *error)'),
    mcpgw_error_message: f('const char *mcpgw_error_message(const mcpgw_error *error)'),
    mcpgw_error_http_status: f('uint16_t mcpgw_error_http_status(const mcpgw_error *error)'),
    mcpgw_error_detail: f('const char *mcpgw_error_detail(const mcpgw_error *error)'),
    mcpgw_error_free: f('void mcpgw_error_free(mcpgw_error *error)'),

    // A ToolChunk crosses as JSON, both ways: the wire's own shape, one decoding path.
    mcpgw_tool_chunk_from_json: f(
      'mcpgw_result mcpgw_tool_chunk_from_json(const char *json, _Out_ mcpgw_tool_chunk **chunk_out, _Out_ mcpgw_error **error_out)',
    ),
    mcpgw_tool_chunk_to_json: f(
      'mcpgw_result mcpgw_tool_chunk_to_json(const mcpgw_tool_chunk *chunk, _Out_ void **json_out)',
    ),
    mcpgw_tool_chunk_free: f('void mcpgw_tool_chunk_free(mcpgw_tool_chunk *chunk)'),

    mcpgw_session_open: f(
      'mcpgw_result mcpgw_session_open(const mcpgw_client *client, _Out_ mcpgw_session **session_out, _Out_ mcpgw_error **error_out)',
    ),
    mcpgw_session_command: f('const char *mcpgw_session_command(const mcpgw_session *session)'),
    mcpgw_session_submit: f(
      'mcpgw_result mcpgw_session_submit(mcpgw_session *session, mcpgw_op *op, bool stream, _Out_ uint64_t *id_out)',
    ),
    mcpgw_session_cancel: f('bool mcpgw_session_cancel(mcpgw_session *session, uint64_t id)'),
    mcpgw_session_output: f(
      'mcpgw_result mcpgw_session_output(const mcpgw_session *session, _Out_ void **buf_out, _Out_ size_t *len_out)',
    ),
    mcpgw_session_consume: f('void mcpgw_session_consume(mcpgw_session *session, size_t n)'),
    mcpgw_session_feed: f(
      'mcpgw_result mcpgw_session_feed(mcpgw_session *session, const uint8_t *buf, size_t len)',
    ),
    mcpgw_session_feed_eof: f(
      'void mcpgw_session_feed_eof(mcpgw_session *session, const char *reason)',
    ),
    mcpgw_session_close: f('void mcpgw_session_close(mcpgw_session *session)'),
    mcpgw_session_is_lost: f('bool mcpgw_session_is_lost(const mcpgw_session *session)'),
    mcpgw_session_next_event: f(
      'mcpgw_result mcpgw_session_next_event(mcpgw_session *session, _Out_ mcpgw_session_event **event_out)',
    ),
    mcpgw_session_free: f('void mcpgw_session_free(mcpgw_session *session)'),
    mcpgw_session_event_get_kind: f(
      'uint32_t mcpgw_session_event_get_kind(const mcpgw_session_event *event)',
    ),
    mcpgw_session_event_id: f('uint64_t mcpgw_session_event_id(const mcpgw_session_event *event)'),
    mcpgw_session_event_chunk: f(
      'const mcpgw_tool_chunk *mcpgw_session_event_chunk(const mcpgw_session_event *event)',
    ),
    mcpgw_session_event_text: f(
      'const char *mcpgw_session_event_text(const mcpgw_session_event *event)',
    ),
    mcpgw_session_event_free: f('void mcpgw_session_event_free(mcpgw_session_event *event)'),
  };
}

/** A copy of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export function copyBytes(ptr, len) {
  if (!len) return Buffer.alloc(0);
  return Buffer.from(koffi.view(ptr, len).slice(0));
}

/** A NUL-terminated string at `ptr`, decoded; the caller still owns the memory. */
export function decodeCString(ptr) {
  return koffi.decode(ptr, 'char', -1);
}
