// The Promise API over libmcpgw's sans-IO operations.
//
// Every method prepares an operation (a short, synchronous call into the library), then loops:
// ask the op for its next command, await the host's exec function, hand the output back. All
// waiting happens in JS promises, so the event loop is never blocked and the exec function may
// be as asynchronous as it likes. The op is freed in `finally`, whatever happens: success,
// failure, abort or timeout.

import { RESULT, TRANSPORT, decodeCString, native } from './native.js';
import { readToolChunk } from './chunk.js';
import { AbortError, codeName, errorFor } from './errors.js';

/** Native objects this binding holds right now, by kind; see `nativeStats`. */
const live = { clients: 0, ops: 0, chunks: 0, errors: 0, strings: 0 };

/**
 * How many native objects the binding holds at this moment, by kind. Every one is freed exactly
 * once: ops, chunks, strings and errors before the call that made them settles, a client by
 * `close()` (or, as a backstop, when it is garbage-collected). Meant for leak checks.
 *
 * @returns {{clients: number, ops: number, chunks: number, errors: number, strings: number}}
 */
export function nativeStats() {
  return { ...live };
}

/** Frees a native client, exactly once per pointer by construction of its callers. */
function freeClient(ptr) {
  native().mcpgw_client_free(ptr);
  live.clients--;
}

// A backstop for clients that were never closed; close() unregisters, so nothing is freed twice.
// A client with a call on a worker thread is still referenced by that call, so not collected.
const finalizer = new FinalizationRegistry(freeClient);

const MAX_U32 = 2 ** 32 - 1;
// setTimeout fires at once for delays above this; longer command timeouts are clamped to it.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** An InvalidArgumentError raised by the binding itself, before any native call. */
function invalid(message) {
  return errorFor(RESULT.INVALID_ARGUMENT, message);
}

/** `value` as C string text: a string without NUL (C strings end at the first one). */
function cText(value, what) {
  if (typeof value !== 'string') {
    throw invalid(`${what} must be a string, not ${typeof value}`);
  }
  if (value.includes('\0')) {
    throw invalid(`${what} must not contain a NUL character`);
  }
  return value;
}

/** An optional C string: `undefined`/`null` stay `null`. */
function optText(value, what) {
  return value == null ? null : cText(value, what);
}

/** An integer in `[min, max]`, or `fallback` when undefined. */
function integer(value, what, min, max, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalid(`${what} must be an integer from ${min} to ${max}, not ${value}`);
  }
  return value;
}

/** A JSON object argument, as text. */
function jsonObject(value, what) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw invalid(`${what} must be an object`);
  }
  return JSON.stringify(value);
}

/** Bytes of an exec result field: Buffer/Uint8Array, ArrayBuffer, string (UTF-8) or nothing. */
function bytes(value, what) {
  if (value == null) return null;
  if (value instanceof Uint8Array) return value;
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  throw new TypeError(`${what} must be a Buffer, Uint8Array or string, not ${typeof value}`);
}

/**
 * The exec function's answer, checked; a TypeError says what is wrong with it.
 * @returns {{exitCode: number, stdout: Uint8Array | null, stderr: Uint8Array | null}}
 */
function checkExecResult(r) {
  if (typeof r === 'function') {
    throw new TypeError(
      'the exec function returned a function; pass localExec() (a call), not localExec',
    );
  }
  if (r === null || typeof r !== 'object') {
    throw new TypeError(`the exec function must return {exitCode, stdout, stderr}, not ${r}`);
  }
  const { exitCode } = r;
  if (!Number.isInteger(exitCode) || exitCode < -(2 ** 31) || exitCode >= 2 ** 31) {
    throw new TypeError(`the exec function's result has no integer exitCode (got ${exitCode})`);
  }
  return { exitCode, stdout: bytes(r.stdout, 'stdout'), stderr: bytes(r.stderr, 'stderr') };
}

/** The typed error of a native `mcpgw_error` (borrowed: not freed here). */
function readError(n, err, cause) {
  const result = n.mcpgw_error_code(err);
  const status = n.mcpgw_error_http_status(err);
  return errorFor(result, n.mcpgw_error_message(err) ?? codeName(result), {
    status: status || undefined,
    detail: n.mcpgw_error_detail(err) ?? undefined,
    cause,
  });
}

/** Takes an owned `char *` result: decodes it, frees it once. */
function takeString(n, ptr) {
  live.strings++;
  try {
    return decodeCString(ptr);
  } finally {
    n.mcpgw_string_free(ptr);
    live.strings--;
  }
}

/** Takes an owned `mcpgw_error *`: reads it, frees it once, returns the typed error. */
function takeError(n, err, cause) {
  live.errors++;
  try {
    return readError(n, err, cause);
  } finally {
    n.mcpgw_error_free(err);
    live.errors--;
  }
}

const CONFIG_SETTERS = [
  ['gatewayPath', 'mcpgw_client_config_set_gateway_path', (v) => cText(v, 'gatewayPath')],
  ['host', 'mcpgw_client_config_set_host', (v) => cText(v, 'host')],
  ['port', 'mcpgw_client_config_set_port', (v) => integer(v, 'port', 0, 65535)],
  ['tokenFile', 'mcpgw_client_config_set_token_file', (v) => cText(v, 'tokenFile')],
  ['stateDir', 'mcpgw_client_config_set_state_dir', (v) => cText(v, 'stateDir')],
  ['instanceNonce', 'mcpgw_client_config_set_instance_nonce', (v) => cText(v, 'instanceNonce')],
  ['stagingDir', 'mcpgw_client_config_set_staging_dir', (v) => cText(v, 'stagingDir')],
  [
    'transport',
    'mcpgw_client_config_set_transport',
    (v) => {
      if (!Object.hasOwn(TRANSPORT, v)) {
        throw invalid(`transport must be "auto", "curl" or "builtin", not ${v}`);
      }
      return TRANSPORT[v];
    },
  ],
  ['timeoutMs', 'mcpgw_client_config_set_timeout_ms', (v) => integer(v, 'timeoutMs', 1, MAX_U32)],
  [
    'maxCommandBytes',
    'mcpgw_client_config_set_max_command_bytes',
    (v) => integer(v, 'maxCommandBytes', 0, Number.MAX_SAFE_INTEGER),
  ],
];

/**
 * A client of one mcpgw gateway in one sandbox. See index.d.ts for the full documentation of
 * its options and methods.
 */
export class Client {
  /** @type {bigint | null} */
  #ptr = null;
  #exec;
  #agentId;
  #sessionId;
  // The unregister token of this client's FinalizationRegistry entry.
  #registration = {};
  // Native calls on this client running on worker threads, and the pointer close() left to them.
  #workers = 0;
  #freeAfterWorkers = null;

  /**
   * @param {import('../index.js').ClientOptions} options
   */
  constructor(options) {
    if (options === null || typeof options !== 'object') {
      throw invalid('new Client() needs an options object with an exec function');
    }
    if (typeof options.exec !== 'function') {
      throw invalid(
        'options.exec must be a function (command, {timeoutMs, signal}) => ' +
          'Promise<{exitCode, stdout, stderr}>, e.g. localExec()',
      );
    }
    this.#exec = options.exec;
    this.#agentId = optText(options.agentId, 'agentId');
    this.#sessionId = optText(options.sessionId, 'sessionId');
    // Checked before anything native is allocated, so a bad option leaks nothing.
    const settings = [];
    for (const [key, setter, convert] of CONFIG_SETTERS) {
      if (options[key] !== undefined && options[key] !== null) {
        settings.push([key, setter, convert(options[key])]);
      }
    }

    const n = native();
    const cfgOut = [null];
    const rc = n.mcpgw_client_config_new(cfgOut);
    if (rc !== RESULT.OK) throw errorFor(rc, 'creating a client configuration failed');
    const cfg = cfgOut[0];
    try {
      for (const [key, setter, value] of settings) {
        const r = n[setter](cfg, value);
        if (r !== RESULT.OK) {
          throw errorFor(r, `option ${key}: ${n.mcpgw_result_message(r)}`);
        }
      }
      const clientOut = [null];
      const errOut = [null];
      const r = n.mcpgw_client_new(cfg, null, null, null, clientOut, errOut);
      if (r !== RESULT.OK) {
        throw errOut[0] ? takeError(n, errOut[0]) : errorFor(r, n.mcpgw_result_message(r));
      }
      this.#ptr = clientOut[0];
      live.clients++;
      finalizer.register(this, this.#ptr, this.#registration);
    } finally {
      n.mcpgw_client_config_free(cfg);
    }
  }

  /** The gateway's port once known (configured or launched), else 0. */
  get port() {
    return this.#ptr === null ? 0 : native().mcpgw_client_port(this.#ptr);
  }

  /** Whether `close()` was called. */
  get closed() {
    return this.#ptr === null;
  }

  /**
   * Launches the gateway in the sandbox and confirms it answers.
   * @param {import('../index.js').CallOptions} [opts]
   */
  async startGateway(opts) {
    const info = await this.#run(opts, (n, c, o, out) =>
      n.mcpgw_client_prepare_start_gateway(c, o, out),
    );
    return {
      port: info.port,
      pid: info.pid,
      tokenFile: info.token_file,
      instanceNonce: info.instance_nonce,
      stateDir: info.state_dir,
    };
  }

  /**
   * Stops the gateway this client launched and removes its state directory.
   * @param {import('../index.js').CallOptions} [opts]
   */
  async stopGateway(opts) {
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_stop_gateway(c, o, out));
  }

  /**
   * Makes sure the sandbox holds the gateway binary read from `hostPath` at `gatewayPath`.
   * @param {string} hostPath
   * @param {import('../index.js').CallOptions} [opts]
   */
  async ensureGatewayBinary(hostPath, opts) {
    const path = cText(hostPath, 'hostPath');
    // This prepare reads and hashes the whole binary: a worker thread does it, not the event loop.
    return this.#run(opts, (n, c, o, out) =>
      this.#offThread(n.mcpgw_client_prepare_ensure_gateway_binary, c, o, path, out),
    );
  }

  /**
   * Asks whether the gateway is up.
   * @param {import('../index.js').CallOptions} [opts]
   */
  async health(opts) {
    const h = await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_health(c, o, out));
    return { status: h.status, instanceNonce: h.instance_nonce ?? null };
  }

  /**
   * Registers an MCP server in the scope.
   * @param {import('../index.js').McpSpec} spec
   * @param {import('../index.js').CallOptions} [opts]
   */
  async addMcp(spec, opts) {
    const json = jsonObject(spec, 'the MCP spec');
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_add_mcp(c, o, json, out));
  }

  /**
   * Removes an MCP server from the scope.
   * @param {string} name
   * @param {import('../index.js').CallOptions} [opts]
   */
  async removeMcp(name, opts) {
    const mcp = cText(name, 'the MCP name');
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_remove_mcp(c, o, mcp, out));
  }

  /**
   * Lists the specs of the MCP servers in the scope.
   * @param {import('../index.js').CallOptions} [opts]
   */
  async listMcps(opts) {
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_list_mcps(c, o, out));
  }

  /**
   * Lists the tools of an MCP server.
   * @param {string} name
   * @param {import('../index.js').CallOptions} [opts]
   */
  async listTools(name, opts) {
    const mcp = cText(name, 'the MCP name');
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_list_tools(c, o, mcp, out));
  }

  /**
   * Calls a tool and returns its ToolChunk.
   * @param {string} mcp
   * @param {string} tool
   * @param {Record<string, unknown>} [args]
   * @param {import('../index.js').CallOptions} [opts]
   */
  async callTool(mcp, tool, args, opts) {
    const m = cText(mcp, 'the MCP name');
    const t = cText(tool, 'the tool name');
    const json = args === undefined || args === null ? '' : jsonObject(args, 'the tool arguments');
    return this.#run(
      opts,
      (n, c, o, out) => n.mcpgw_client_prepare_call_tool(c, o, m, t, json, out),
      (n, op) => {
        const chunkOut = [null];
        const errOut = [null];
        const rc = n.mcpgw_op_tool_chunk(op, chunkOut, errOut);
        if (rc !== RESULT.OK) {
          throw errOut[0] ? takeError(n, errOut[0]) : errorFor(rc, n.mcpgw_result_message(rc));
        }
        live.chunks++;
        try {
          return readToolChunk(n, chunkOut[0]);
        } finally {
          n.mcpgw_tool_chunk_free(chunkOut[0]);
          live.chunks--;
        }
      },
    );
  }

  /**
   * Replaces the runtime headers of a streamable-HTTP MCP server.
   * @param {string} mcp
   * @param {Record<string, string>} headers
   * @param {import('../index.js').CallOptions} [opts]
   */
  async setRuntimeHeaders(mcp, headers, opts) {
    const m = cText(mcp, 'the MCP name');
    const json = jsonObject(headers, 'the runtime headers');
    await this.#run(opts, (n, c, o, out) =>
      n.mcpgw_client_prepare_set_runtime_headers(c, o, m, json, out),
    );
  }

  /**
   * Frees the native client. Idempotent. Calls already under way finish normally (their
   * operations do not need the client); new calls throw InvalidStateError. Does not stop the
   * gateway: call `stopGateway()` first for that.
   */
  close() {
    if (this.#ptr === null) return;
    finalizer.unregister(this.#registration);
    const ptr = this.#ptr;
    this.#ptr = null;
    // A worker thread may still be using the client: the last one to finish frees it.
    if (this.#workers > 0) this.#freeAfterWorkers = ptr;
    else freeClient(ptr);
  }

  /**
   * Calls `fn` (a native function taking this client) on koffi's worker threads and resolves with
   * its result. The client is thread-safe; `close()` meanwhile defers freeing it until the call
   * has returned.
   */
  async #offThread(fn, ...args) {
    this.#workers++;
    try {
      return await new Promise((resolve, reject) => {
        fn.async(...args, (err, rc) => (err ? reject(err) : resolve(rc)));
      });
    } finally {
      this.#workers--;
      if (this.#workers === 0 && this.#freeAfterWorkers !== null) {
        freeClient(this.#freeAfterWorkers);
        this.#freeAfterWorkers = null;
      }
    }
  }

  /** The per-call options as the C struct, checked. */
  #callOptions(opts = {}) {
    if (opts === null || typeof opts !== 'object') {
      throw invalid('the call options must be an object');
    }
    return {
      agent_id: optText(opts.agentId, 'agentId') ?? this.#agentId,
      session_id: optText(opts.sessionId, 'sessionId') ?? this.#sessionId,
      timeout_ms: integer(opts.timeoutMs, 'timeoutMs', 0, MAX_U32, 0),
    };
  }

  /**
   * Prepares an operation with `prepare`, drives it through the exec function, and returns
   * `decode(n, op)` (by default the op's result JSON, parsed). The op is freed exactly once.
   */
  async #run(opts, prepare, decode = resultJson) {
    const signal = opts?.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw invalid('signal must be an AbortSignal');
    }
    const callOpts = this.#callOptions(opts);
    if (this.#ptr === null) {
      throw errorFor(RESULT.INVALID_STATE, 'the client is closed');
    }

    const n = native();
    const opOut = [null];
    // Usually synchronous; a prepare that does host I/O resolves from a worker thread.
    const rc = await prepare(n, this.#ptr, callOpts, opOut);
    if (rc !== RESULT.OK)
      throw errorFor(rc, `preparing the operation failed: ${n.mcpgw_result_message(rc)}`);
    const op = opOut[0];
    live.ops++;
    try {
      const name = n.mcpgw_op_name(op);
      let execError;
      for (;;) {
        if (signal?.aborted) throw aborted(name, signal);
        const cmdOut = [null];
        const timeoutOut = [0];
        // INVALID_STATE here means the operation has finished and wants no more commands.
        if (n.mcpgw_op_command(op, cmdOut, timeoutOut) !== RESULT.OK) break;
        // Decoded now: the text is borrowed and dies with the next complete/fail_exec.
        const command = decodeCString(cmdOut[0]);
        const timeoutMs = timeoutOut[0];
        const outcome = await this.#runCommand(command, timeoutMs, signal);
        if (outcome.kind === 'aborted') throw aborted(name, signal);
        if (outcome.kind === 'timeout') {
          throw errorFor(
            RESULT.DEADLINE,
            `${name}: the exec function did not finish a command within ${timeoutMs} ms`,
          );
        }
        let result;
        try {
          if (outcome.kind === 'threw') throw outcome.error;
          result = checkExecResult(outcome.value);
        } catch (e) {
          execError = e;
          const rcf = n.mcpgw_op_fail_exec(op, e instanceof Error ? e.message : String(e));
          if (rcf !== RESULT.OK) throw errorFor(rcf, `${name}: reporting the exec failure failed`);
          continue;
        }
        const { exitCode, stdout, stderr } = result;
        const rcc = n.mcpgw_op_complete(
          op,
          exitCode,
          stdout,
          stdout?.length ?? 0,
          stderr,
          stderr?.length ?? 0,
        );
        // Cannot fail with a pending command; were it to, looping would rerun the same command.
        if (rcc !== RESULT.OK) throw errorFor(rcc, `${name}: handing back the output failed`);
      }
      const result = n.mcpgw_op_result(op);
      if (result !== RESULT.OK) {
        const err = n.mcpgw_op_error(op);
        // The op's error is borrowed from the op: read here, freed with the op.
        throw err
          ? readError(n, err, result === RESULT.EXEC_FAILED ? execError : undefined)
          : errorFor(result, `${name}: ${n.mcpgw_result_message(result)}`);
      }
      return decode(n, op);
    } finally {
      n.mcpgw_op_free(op);
      live.ops--;
    }
  }

  /**
   * Runs one command through the exec function, racing it against the caller's signal and the
   * command's timeout. The exec function gets a signal that aborts on either, so it can stop the
   * command; a call that ignores it is simply left behind (its result discarded).
   *
   * @returns {Promise<{kind: 'done', value: unknown} | {kind: 'threw', error: unknown} | {kind: 'aborted'} | {kind: 'timeout'}>}
   */
  async #runCommand(command, timeoutMs, signal) {
    const controller = new AbortController();
    let timer;
    let onAbort;
    const stopped = new Promise((resolve) => {
      onAbort = () => {
        controller.abort(signal.reason);
        resolve({ kind: 'aborted' });
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      timer = setTimeout(
        () => {
          controller.abort(
            errorFor(RESULT.DEADLINE, `the command did not finish within ${timeoutMs} ms`),
          );
          resolve({ kind: 'timeout' });
        },
        Math.min(timeoutMs, MAX_TIMER_MS),
      );
    });
    // An async wrapper turns a synchronous throw of the exec function into a rejection.
    const running = (async () =>
      this.#exec(command, { timeoutMs, signal: controller.signal }))().then(
      (value) => ({ kind: 'done', value }),
      (error) => ({ kind: 'threw', error }),
    );
    try {
      const first = await Promise.race([running, stopped]);
      // An exec that rejected because of the abort is reported as the abort itself.
      if (signal?.aborted) return { kind: 'aborted' };
      return first;
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }
}

/** The AbortError of an operation aborted through `signal`. */
function aborted(name, signal) {
  return new AbortError(`${name}: aborted`, {
    code: 'ABORT_ERR',
    cause: signal.reason,
  });
}

/** The op's result JSON, parsed. */
function resultJson(n, op) {
  const out = [null];
  const rc = n.mcpgw_op_result_json(op, out);
  if (rc !== RESULT.OK)
    throw errorFor(rc, `reading the result failed: ${n.mcpgw_result_message(rc)}`);
  return JSON.parse(takeString(n, out[0]));
}
