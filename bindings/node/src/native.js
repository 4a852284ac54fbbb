// The koffi declarations of libmcpgw (include/mcpgw.h) and the search for the shared library.
// Each declared function is a thin call into the library (client.js runs the one that reads a
// host file on a worker thread); ownership is handled by the callers in client.js and chunk.js.

import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import koffi from 'koffi';

/** The ABI version this binding was written against (`MCPGW_ABI_VERSION` in mcpgw.h). */
export const ABI_VERSION = 1;

/** `mcpgw_result` values, by the name after `MCPGW_RESULT_`. */
export const RESULT = Object.freeze({
  OK: 7000,
  NULL_PARAMETER: 7001,
  PANIC: 7002,
  INVALID_ARGUMENT: 7003,
  INVALID_STATE: 7004,
  HOST_IO: 7005,
  EXEC_FAILED: 7100,
  COMMAND_FAILED: 7101,
  GATEWAY_NOT_RUNNING: 7102,
  START_FAILED: 7103,
  UNAUTHORIZED: 7104,
  NOT_FOUND: 7105,
  CONFLICT: 7106,
  UPSTREAM_ERROR: 7107,
  DEADLINE: 7108,
  PROTOCOL_ERROR: 7109,
});

/** `mcpgw_transport` values. */
export const TRANSPORT = Object.freeze({ auto: 0, curl: 1, builtin: 2 });

const PACKAGE_DIR = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The platform's file name of the shared library. */
function libraryFileName() {
  if (process.platform === 'darwin') return 'libmcpgw.dylib';
  if (process.platform === 'win32') return 'mcpgw.dll';
  return 'libmcpgw.so';
}

/**
 * The places the shared library is looked for, in order: `MCPGW_LIB` alone when it is set (an
 * explicit choice is never silently replaced), else next to the package, else the cargo build
 * outputs of this repository (release before debug).
 */
export function libraryCandidates(env = process.env) {
  if (env.MCPGW_LIB) return [resolve(env.MCPGW_LIB)];
  const name = libraryFileName();
  const repo = resolve(PACKAGE_DIR, '..', '..');
  return [
    join(PACKAGE_DIR, name),
    join(repo, 'target', 'release', name),
    join(repo, 'target', 'debug', name),
  ];
}

let loaded = null;

/**
 * Loads the library once per process and declares its functions. Throws an Error naming every
 * path tried when none holds a loadable library of the expected ABI.
 */
export function native() {
  if (loaded) return loaded;
  const candidates = libraryCandidates();
  const path = candidates.find((p) => existsSync(p));
  if (!path) {
    throw new Error(
      `libmcpgw was not found; tried ${candidates.join(', ')}. ` +
        'Build it with `cargo build -p mcpgw` (or --release) in the mcpgw repository, ' +
        'put it next to the package, or set MCPGW_LIB to its path.',
    );
  }
  let lib;
  try {
    lib = koffi.load(path);
  } catch (e) {
    throw new Error(`libmcpgw at ${path} could not be loaded: ${e.message}`, { cause: e });
  }
  const api = declare(lib);
  const abi = api.mcpgw_abi_version();
  if (abi !== ABI_VERSION) {
    throw new Error(
      `libmcpgw at ${path} has ABI version ${abi}, but this binding needs ${ABI_VERSION}; ` +
        'rebuild the library or use the binding of the same release',
    );
  }
  loaded = { path, ...api };
  return loaded;
}

/** Declares every function of mcpgw.h the binding uses. */
function declare(lib) {
  koffi.opaque('mcpgw_client');
  koffi.opaque('mcpgw_client_config');
  koffi.opaque('mcpgw_op');
  koffi.opaque('mcpgw_error');
  koffi.opaque('mcpgw_tool_chunk');
  koffi.opaque('mcpgw_block');
  koffi.struct('mcpgw_call_options', {
    agent_id: 'const char *',
    session_id: 'const char *',
    timeout_ms: 'uint32_t',
  });
  // C enums are int-sized; the result codes are read as plain numbers.
  koffi.alias('mcpgw_result', 'uint32_t');

  const f = (sig) => lib.func(sig);
  const fns = {
    mcpgw_version: f('const char *mcpgw_version(void)'),
    mcpgw_abi_version: f('uint32_t mcpgw_abi_version(void)'),
    mcpgw_result_message: f('const char *mcpgw_result_message(uint32_t result)'),
    // Strings the caller must free come back as raw pointers (BigInt), not decoded strings.
    mcpgw_string_free: f('void mcpgw_string_free(void *s)'),

    mcpgw_client_config_new: f(
      'mcpgw_result mcpgw_client_config_new(_Out_ mcpgw_client_config **out)',
    ),
    mcpgw_client_config_free: f('void mcpgw_client_config_free(mcpgw_client_config *config)'),
    mcpgw_client_config_set_gateway_path: f(
      'mcpgw_result mcpgw_client_config_set_gateway_path(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_host: f(
      'mcpgw_result mcpgw_client_config_set_host(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_port: f(
      'mcpgw_result mcpgw_client_config_set_port(mcpgw_client_config *c, uint16_t v)',
    ),
    mcpgw_client_config_set_token_file: f(
      'mcpgw_result mcpgw_client_config_set_token_file(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_state_dir: f(
      'mcpgw_result mcpgw_client_config_set_state_dir(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_instance_nonce: f(
      'mcpgw_result mcpgw_client_config_set_instance_nonce(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_staging_dir: f(
      'mcpgw_result mcpgw_client_config_set_staging_dir(mcpgw_client_config *c, const char *v)',
    ),
    mcpgw_client_config_set_transport: f(
      'mcpgw_result mcpgw_client_config_set_transport(mcpgw_client_config *c, uint32_t v)',
    ),
    mcpgw_client_config_set_timeout_ms: f(
      'mcpgw_result mcpgw_client_config_set_timeout_ms(mcpgw_client_config *c, uint32_t v)',
    ),
    mcpgw_client_config_set_max_command_bytes: f(
      'mcpgw_result mcpgw_client_config_set_max_command_bytes(mcpgw_client_config *c, size_t v)',
    ),

    mcpgw_client_new: f(
      'mcpgw_result mcpgw_client_new(const mcpgw_client_config *config, void *exec, void *userdata, void *userdata_free, _Out_ mcpgw_client **client_out, _Out_ mcpgw_error **error_out)',
    ),
    mcpgw_client_free: f('void mcpgw_client_free(mcpgw_client *client)'),
    mcpgw_client_port: f('uint16_t mcpgw_client_port(const mcpgw_client *client)'),

    mcpgw_client_prepare_start_gateway: f(
      'mcpgw_result mcpgw_client_prepare_start_gateway(const mcpgw_client *c, const mcpgw_call_options *o, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_stop_gateway: f(
      'mcpgw_result mcpgw_client_prepare_stop_gateway(const mcpgw_client *c, const mcpgw_call_options *o, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_ensure_gateway_binary: f(
      'mcpgw_result mcpgw_client_prepare_ensure_gateway_binary(const mcpgw_client *c, const mcpgw_call_options *o, const char *host_path, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_health: f(
      'mcpgw_result mcpgw_client_prepare_health(const mcpgw_client *c, const mcpgw_call_options *o, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_list_mcps: f(
      'mcpgw_result mcpgw_client_prepare_list_mcps(const mcpgw_client *c, const mcpgw_call_options *o, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_add_mcp: f(
      'mcpgw_result mcpgw_client_prepare_add_mcp(const mcpgw_client *c, const mcpgw_call_options *o, const char *spec_json, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_remove_mcp: f(
      'mcpgw_result mcpgw_client_prepare_remove_mcp(const mcpgw_client *c, const mcpgw_call_options *o, const char *name, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_list_tools: f(
      'mcpgw_result mcpgw_client_prepare_list_tools(const mcpgw_client *c, const mcpgw_call_options *o, const char *mcp, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_call_tool: f(
      'mcpgw_result mcpgw_client_prepare_call_tool(const mcpgw_client *c, const mcpgw_call_options *o, const char *mcp, const char *tool, const char *arguments_json, _Out_ mcpgw_op **op)',
    ),
    mcpgw_client_prepare_set_runtime_headers: f(
      'mcpgw_result mcpgw_client_prepare_set_runtime_headers(const mcpgw_client *c, const mcpgw_call_options *o, const char *mcp, const char *headers_json, _Out_ mcpgw_op **op)',
    ),

    // The command text is borrowed from the op: read as a pointer and decoded at once.
    mcpgw_op_command: f(
      'mcpgw_result mcpgw_op_command(const mcpgw_op *op, _Out_ void **command_out, _Out_ uint32_t *timeout_ms_out)',
    ),
    mcpgw_op_complete: f(
      'mcpgw_result mcpgw_op_complete(mcpgw_op *op, int32_t exit_code, const uint8_t *out_buf, size_t out_len, const uint8_t *err_buf, size_t err_len)',
    ),
    mcpgw_op_fail_exec: f('mcpgw_result mcpgw_op_fail_exec(mcpgw_op *op, const char *reason)'),
    mcpgw_op_is_finished: f('bool mcpgw_op_is_finished(const mcpgw_op *op)'),
    mcpgw_op_result: f('mcpgw_result mcpgw_op_result(const mcpgw_op *op)'),
    mcpgw_op_error: f('const mcpgw_error *mcpgw_op_error(const mcpgw_op *op)'),
    mcpgw_op_name: f('const char *mcpgw_op_name(const mcpgw_op *op)'),
    mcpgw_op_result_json: f(
      'mcpgw_result mcpgw_op_result_json(const mcpgw_op *op, _Out_ void **json_out)',
    ),
    mcpgw_op_tool_chunk: f(
      'mcpgw_result mcpgw_op_tool_chunk(const mcpgw_op *op, _Out_ mcpgw_tool_chunk **chunk_out, _Out_ mcpgw_error **error_out)',
    ),
    mcpgw_op_free: f('void mcpgw_op_free(mcpgw_op *op)'),

    mcpgw_error_code: f('mcpgw_result mcpgw_error_code(const mcpgw_error *error)'),
    mcpgw_error_message: f('const char *mcpgw_error_message(const mcpgw_error *error)'),
    mcpgw_error_http_status: f('uint16_t mcpgw_error_http_status(const mcpgw_error *error)'),
    mcpgw_error_detail: f('const char *mcpgw_error_detail(const mcpgw_error *error)'),
    mcpgw_error_free: f('void mcpgw_error_free(mcpgw_error *error)'),

    mcpgw_tool_chunk_state: f('uint32_t mcpgw_tool_chunk_state(const mcpgw_tool_chunk *chunk)'),
    mcpgw_tool_chunk_is_last: f('bool mcpgw_tool_chunk_is_last(const mcpgw_tool_chunk *chunk)'),
    mcpgw_tool_chunk_id: f('const char *mcpgw_tool_chunk_id(const mcpgw_tool_chunk *chunk)'),
    mcpgw_tool_chunk_metadata_json: f(
      'const char *mcpgw_tool_chunk_metadata_json(const mcpgw_tool_chunk *chunk)',
    ),
    mcpgw_tool_chunk_block_count: f(
      'size_t mcpgw_tool_chunk_block_count(const mcpgw_tool_chunk *chunk)',
    ),
    mcpgw_tool_chunk_block: f(
      'mcpgw_result mcpgw_tool_chunk_block(const mcpgw_tool_chunk *chunk, size_t index, _Out_ const mcpgw_block **block_out)',
    ),
    mcpgw_tool_chunk_free: f('void mcpgw_tool_chunk_free(mcpgw_tool_chunk *chunk)'),

    mcpgw_block_get_type: f('uint32_t mcpgw_block_get_type(const mcpgw_block *block)'),
    mcpgw_block_id: f('const char *mcpgw_block_id(const mcpgw_block *block)'),
    // Text may contain NUL and data is binary: both come back as pointer and length.
    mcpgw_block_text: f(
      'mcpgw_result mcpgw_block_text(const mcpgw_block *block, _Out_ void **text_out, _Out_ size_t *len_out)',
    ),
    mcpgw_block_data: f(
      'mcpgw_result mcpgw_block_data(const mcpgw_block *block, _Out_ void **data_out, _Out_ size_t *len_out)',
    ),
    mcpgw_block_media_type: f('const char *mcpgw_block_media_type(const mcpgw_block *block)'),
    mcpgw_block_url: f('const char *mcpgw_block_url(const mcpgw_block *block)'),
    mcpgw_block_name: f('const char *mcpgw_block_name(const mcpgw_block *block)'),
  };
  return fns;
}

/** A copy of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export function copyBytes(ptr, len) {
  if (!len) return new Uint8Array(0);
  return new Uint8Array(koffi.view(ptr, len).slice(0));
}

/** The UTF-8 text of `len` bytes of native memory at `ptr` (borrowed, not freed here). */
export function decodeText(ptr, len) {
  if (!len) return '';
  return Buffer.from(koffi.view(ptr, len)).toString('utf8');
}

/** A NUL-terminated string at `ptr`, decoded; the caller still owns the memory. */
export function decodeCString(ptr) {
  return koffi.decode(ptr, 'char', -1);
}
