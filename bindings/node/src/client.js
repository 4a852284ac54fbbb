// The Promise API over libmcpgw's operations.
//
// Every method prepares an operation (a short, synchronous call into the library), then drives
// it one of two ways. Over a session channel when one is attached (REST calls only): the op is
// submitted and its answer arrives as a session event. Else one-shot: ask the op for its next
// command, await the host's exec function, hand the output back, until it has its result. All
// waiting happens in JS promises, so the event loop is never blocked and the exec function may be
// as asynchronous as it likes. The op is freed in `finally`, whatever happens.

import { TRANSPORT, copyBytes, decodeCString, gatewayBinary, native } from './native.js';
import { aborted, errorFor, errorNamed } from './errors.js';
import { live, readError, takeError, takeString } from './memory.js';
import { Session } from './session.js';

/** @import { ExecFn, ExecOptions } from './exec.js' */
/** @import { BinaryStatus, GatewayInfo, Health, McpEntry, McpSpec, Tool, ToolChunk } from './wire.js' */
/** @import { AttachOptions, OpenChannel } from './session.js' */

/**
 * Settings of a {@link Client}; all but `exec` are optional.
 *
 * @typedef {object} ClientOptions
 * @property {ExecFn} exec runs commands inside the sandbox: `localExec()`, `dockerExec(c)`,
 *   `kubectlExec(pod)` or your own
 * @property {boolean} [execStdin] whether `exec` passes a command's stdin; default `exec.stdin`
 *   (the ready-made execs set it). Then the gateway binary and large bodies take one command.
 * @property {string} [gatewayPath] the gateway binary inside the sandbox; a bare name is looked up
 *   on PATH. Default `mcpgw-gateway`.
 * @property {string} [host] the loopback address the gateway listens on. Default `127.0.0.1`.
 * @property {number} [port] 0 (default): `startGateway` picks a free port. Non-zero with
 *   `tokenFile`: use a gateway that already runs.
 * @property {string} [tokenFile] the gateway's token file inside the sandbox. Default
 *   `<stateDir>/token`.
 * @property {string} [stateDir] the per-launch directory inside the sandbox (token file, log).
 *   Default `/tmp/mcpgw-<16 hex>`.
 * @property {string} [instanceNonce] the instance nonce of a running gateway, checked by `health`
 * @property {string} [stagingDir] where large request bodies are staged inside the sandbox when
 *   `exec` passes no stdin. Default the state directory, else /tmp.
 * @property {'auto' | 'curl' | 'builtin'} [transport] how requests reach the gateway: curl when
 *   present (`auto`, the default), always curl, or the gateway's built-in client
 * @property {number} [timeoutMs] the timeout of calls that set none, in milliseconds. Default 60000.
 * @property {number} [maxCommandBytes] the longest command handed to `exec` (at least 4096;
 *   default 120 KiB). Larger bodies go on stdin, or are staged.
 * @property {string} [agentId] the default agent part of the MCPs' scope. Default `""`.
 * @property {string} [sessionId] the default session part of the MCPs' scope. Default `""`.
 */

/**
 * Per-call options.
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] aborts the call: it rejects with AbortError at once; a
 *   one-shot command is told to stop, a call over a session gets a cancel frame (the gateway
 *   sends `notifications/cancelled` upstream)
 * @property {number} [timeoutMs] bounds each command of the call, in milliseconds; for a tool
 *   call also the gateway's deadline. 0 or absent: the client's timeout.
 * @property {string} [agentId] the agent part of the MCPs' scope; overrides the client's
 * @property {string} [sessionId] the session part of the MCPs' scope; overrides the client's
 */

/** The client's default timeout when it sets none (the library's, `mcpgw_client_config_new`). */
const DEFAULT_TIMEOUT_MS = 60_000;
const MAX_U32 = 2 ** 32 - 1;
// setTimeout fires at once for delays above this; longer command timeouts are clamped to it.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Frees a native client, exactly once per pointer by construction of its callers. */
function freeClient(ptr) {
  native().mcpgw_client_free(ptr);
  live.clients--;
}

// A backstop for clients that were never closed; close() unregisters, so nothing is freed twice.
// A client with a call on a worker thread is still referenced by that call, so not collected.
const finalizer = new FinalizationRegistry(freeClient);

/** An InvalidArgumentError raised by the binding itself, before any native call. */
function invalid(message) {
  return errorNamed('INVALID_ARGUMENT', message);
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

/**
 * An integer in `[min, max]`, or `fallback` when undefined.
 *
 * @param {unknown} value
 * @param {string} what
 * @param {number} min
 * @param {number} max
 * @param {number} [fallback]
 * @returns {number | undefined}
 */
function integer(value, what, min, max, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
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
 *
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

/** @type {[string, string, (v: any) => any][]} */
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
  [
    'execStdin',
    'mcpgw_client_config_set_exec_stdin',
    (v) => {
      if (typeof v !== 'boolean') throw invalid(`execStdin must be a boolean, not ${typeof v}`);
      return v;
    },
  ],
];

/**
 * A client of one mcpgw gateway in one sandbox. Every method returns a Promise and never blocks
 * the event loop. Calls may run concurrently. With a session attached (`attach`), every REST
 * call goes over its one long-lived channel; else each call runs its commands through `exec`.
 */
export class Client {
  /** @type {any} */
  #ptr = null;
  /** @type {ExecFn} */
  #exec;
  /** @type {string | null} */
  #agentId;
  /** @type {string | null} */
  #sessionId;
  #timeoutMs;
  // The unregister token of this client's FinalizationRegistry entry.
  #registration = {};
  // Native calls on this client running on worker threads, and the pointer close() left to them.
  #workers = 0;
  /** @type {any} */
  #freeAfterWorkers = null;
  /** @type {Session | null} */
  #session = null;
  /** @type {{open: OpenChannel, options: AttachOptions} | null} */
  #reopen = null;

  /**
   * Throws InvalidArgumentError for bad options, or an Error when libmcpgw cannot be loaded.
   *
   * @param {ClientOptions} options
   */
  constructor(options) {
    if (options === null || typeof options !== 'object') {
      throw invalid('new Client() needs an options object with an exec function');
    }
    if (typeof options.exec !== 'function') {
      throw invalid(
        'options.exec must be a function (command, {timeoutMs, signal, stdin}) => ' +
          'Promise<{exitCode, stdout, stderr}>, e.g. localExec()',
      );
    }
    this.#exec = options.exec;
    this.#agentId = optText(options.agentId, 'agentId');
    this.#sessionId = optText(options.sessionId, 'sessionId');
    /** @type {Record<string, unknown>} */
    const values = { ...options, execStdin: options.execStdin ?? options.exec.stdin === true };
    // Checked before anything native is allocated, so a bad option leaks nothing.
    const settings = [];
    for (const [key, setter, convert] of CONFIG_SETTERS) {
      if (values[key] !== undefined && values[key] !== null) {
        settings.push([key, setter, convert(values[key])]);
      }
    }
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;

    const n = native();
    const cfgOut = [null];
    const rc = n.mcpgw_client_config_new(cfgOut);
    if (rc !== n.RESULT.OK) throw errorFor(rc, 'creating a client configuration failed');
    const cfg = cfgOut[0];
    try {
      for (const [key, setter, value] of settings) {
        const r = n[setter](cfg, value);
        if (r !== n.RESULT.OK) {
          throw errorFor(r, `option ${key}: ${n.mcpgw_result_message(r)}`);
        }
      }
      const clientOut = [null];
      const errOut = [null];
      const r = n.mcpgw_client_new(cfg, null, null, null, clientOut, errOut);
      if (r !== n.RESULT.OK) {
        throw errOut[0] ? takeError(n, errOut[0]) : errorFor(r, n.mcpgw_result_message(r));
      }
      this.#ptr = clientOut[0];
      live.clients++;
      finalizer.register(this, this.#ptr, this.#registration);
    } finally {
      n.mcpgw_client_config_free(cfg);
    }
  }

  /**
   * The gateway's port once known (configured, launched, or learned from a session), else 0.
   *
   * @returns {number}
   */
  get port() {
    return this.#ptr === null ? 0 : native().mcpgw_client_port(this.#ptr);
  }

  /** Whether `close()` was called. */
  get closed() {
    return this.#ptr === null;
  }

  /** The attached session while it is open, else null (calls then go one-shot through `exec`). */
  get session() {
    return this.#session && !this.#session.lost ? this.#session : null;
  }

  /**
   * Launches the gateway in the sandbox (one command; the token is minted there) and confirms it
   * answers. Resolves with `{port, pid, token_file, instance_nonce, state_dir}`.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<GatewayInfo>}
   */
  async startGateway(opts) {
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_start_gateway(c, o, out));
  }

  /**
   * Stops the gateway this client launched (SIGTERM, SIGKILL after the timeout) and removes its
   * state directory.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async stopGateway(opts) {
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_stop_gateway(c, o, out));
  }

  /**
   * Installs the gateway binary read from `hostPath` (on the host; by default the one this
   * package bundles, {@link gatewayBinary}) at `gatewayPath` (absolute) in the sandbox unless an
   * identical one is there (SHA-256). With an exec that passes stdin the binary travels in one
   * command; else in staged pieces. The file is read and hashed on a worker thread.
   *
   * @param {string} [hostPath]
   * @param {CallOptions} [opts]
   * @returns {Promise<BinaryStatus>}
   */
  async ensureGatewayBinary(hostPath, opts) {
    const path = cText(hostPath ?? gatewayBinary(), 'hostPath');
    // This prepare reads and hashes the whole binary: a worker thread does it, not the event loop.
    return this.#run(opts, (n, c, o, out) =>
      this.#offThread(n.mcpgw_client_prepare_ensure_gateway_binary, c, o, path, out),
    );
  }

  /**
   * Asks whether the gateway is up, checking its instance nonce when known.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<Health>}
   */
  async health(opts) {
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_health(c, o, out), {
      session: true,
    });
  }

  /**
   * Registers an MCP server in the scope; resolves once the gateway has connected it and listed
   * its tools.
   *
   * @param {McpSpec} spec
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async addMcp(spec, opts) {
    const json = jsonObject(spec, 'the MCP spec');
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_add_mcp(c, o, json, out), {
      session: true,
    });
  }

  /**
   * Removes an MCP server from the scope; the gateway closes it and its processes.
   *
   * @param {string} name
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async removeMcp(name, opts) {
    const mcp = cText(name, 'the MCP name');
    await this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_remove_mcp(c, o, mcp, out), {
      session: true,
    });
  }

  /**
   * The MCP servers of the scope: each spec as registered, with the gateway's `status`.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<McpEntry[]>}
   */
  async listMcps(opts) {
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_list_mcps(c, o, out), {
      session: true,
    });
  }

  /**
   * The tools of an MCP server, as it described them.
   *
   * @param {string} name
   * @param {CallOptions} [opts]
   * @returns {Promise<Tool[]>}
   */
  async listTools(name, opts) {
    const mcp = cText(name, 'the MCP name');
    return this.#run(opts, (n, c, o, out) => n.mcpgw_client_prepare_list_tools(c, o, mcp, out), {
      session: true,
    });
  }

  /**
   * Calls a tool and resolves with its ToolChunk. A tool that reports an error resolves with
   * `state: "error"`; failures to call it reject.
   *
   * @param {string} mcp
   * @param {string} tool
   * @param {Record<string, unknown> | null} [args]
   * @param {CallOptions} [opts]
   * @returns {Promise<ToolChunk>}
   */
  async callTool(mcp, tool, args, opts) {
    return this.#run(opts, this.#prepareCall(mcp, tool, args), { session: true });
  }

  /**
   * Calls a tool and yields its chunks as they happen: over a session, each progress chunk
   * (`is_last: false`, see `progressOf`) as the server reports it, then the final chunk; without
   * one, only the final chunk. The call starts when iteration begins; leaving the loop early
   * (`break`) or aborting `opts.signal` cancels it.
   *
   * @param {string} mcp
   * @param {string} tool
   * @param {Record<string, unknown> | null} [args]
   * @param {CallOptions} [opts]
   * @returns {AsyncGenerator<ToolChunk, void, undefined>}
   */
  async *callToolStream(mcp, tool, args, opts = {}) {
    const prepare = this.#prepareCall(mcp, tool, args);
    const stop = new AbortController();
    const outer = opts?.signal;
    const onOuterAbort = () => stop.abort(outer?.reason);
    if (outer?.aborted) onOuterAbort();
    outer?.addEventListener('abort', onOuterAbort, { once: true });
    /** @type {ToolChunk[]} */
    const queue = [];
    let finished = false;
    /** @type {unknown} */
    let failure;
    let wake = () => {};
    const call = this.#run({ ...opts, signal: stop.signal }, prepare, {
      session: true,
      stream: true,
      onProgress: (chunk) => {
        queue.push(chunk);
        wake();
      },
    }).then(
      (last) => {
        queue.push(last);
        finished = true;
        wake();
      },
      (e) => {
        // Aborted through the outer signal: the AbortError names it as the cause.
        failure = e;
        finished = true;
        wake();
      },
    );
    try {
      for (;;) {
        const next = queue.shift();
        if (next) {
          yield next;
          continue;
        }
        if (finished) {
          if (failure) throw failure;
          return;
        }
        await new Promise((resolve) => (wake = () => resolve(undefined)));
      }
    } finally {
      outer?.removeEventListener('abort', onOuterAbort);
      if (!finished) stop.abort(new Error('the consumer stopped reading the stream'));
      await call;
    }
  }

  /**
   * Replaces the runtime headers of a streamable-HTTP MCP server (`{}` clears them) without
   * reconnecting it.
   *
   * @param {string} mcp
   * @param {Record<string, string>} headers
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async setRuntimeHeaders(mcp, headers, opts) {
    const m = cText(mcp, 'the MCP name');
    const json = jsonObject(headers, 'the runtime headers');
    await this.#run(
      opts,
      (n, c, o, out) => n.mcpgw_client_prepare_set_runtime_headers(c, o, m, json, out),
      { session: true },
    );
  }

  /**
   * Opens a session channel and routes every REST call of this client over it (`health`,
   * `listMcps`, `addMcp`, `removeMcp`, `listTools`, `callTool`, `callToolStream`,
   * `setRuntimeHeaders`; starting, stopping and installing the gateway stay one-shot). `open`
   * runs the session's command in the sandbox with stdin and stdout piped and returns the
   * channel (a child process, `{stdin, stdout}`, or a duplex stream); `localSession`,
   * `dockerSession` and `kubectlSession` do it for you. When the client knows no gateway, the
   * channel launches one first (one exec gives a ready session; `stopGateway` then stops it).
   *
   * The session is used at once: calls made before the channel answers are queued and written
   * when it does. Resolves with the Session once it answered; rejects with SessionLostError when
   * the channel died first (queued calls then go one-shot through `exec`). When the channel dies
   * later, calls in flight fail with SessionLostError and later calls go one-shot, until
   * `attach` is called again, or, with `reopen: true`, the next call opens a new channel itself.
   *
   * @param {OpenChannel} open
   * @param {AttachOptions} [options]
   * @returns {Promise<Session>}
   */
  attach(open, options = {}) {
    if (typeof open !== 'function') {
      return Promise.reject(invalid('attach needs a function (command) => channel'));
    }
    if (this.#ptr === null) {
      return Promise.reject(errorNamed('INVALID_STATE', 'the client is closed'));
    }
    if (this.session) {
      return Promise.reject(
        errorNamed('INVALID_STATE', 'a session is attached already: close it first'),
      );
    }
    this.#reopen = options.reopen ? { open, options } : null;
    try {
      const session = this.#openSession(open, options);
      return session.opened.then(() => session);
    } catch (e) {
      return Promise.reject(e);
    }
  }

  /**
   * Frees the native client. Idempotent. Calls already under way finish normally (their
   * operations do not need the client); new calls throw InvalidStateError. Closes an attached
   * session (without waiting: `await client.session?.close()` first to wait for its channel to
   * exit). Does not stop the gateway: call `stopGateway()` first for that.
   */
  close() {
    if (this.#ptr === null) return;
    this.#reopen = null;
    this.#session?.close().catch(() => {});
    finalizer.unregister(this.#registration);
    const ptr = this.#ptr;
    this.#ptr = null;
    // A worker thread may still be using the client: the last one to finish frees it.
    if (this.#workers > 0) this.#freeAfterWorkers = ptr;
    else freeClient(ptr);
  }

  /** A new session on `open`, attached at once. */
  #openSession(open, options) {
    /** @type {Session} */
    const session = new Session(this.#ptr, open, {
      openTimeoutMs: options.openTimeoutMs ?? this.#timeoutMs,
      onNotice: options.onNotice,
      onLost: (byHost) => {
        if (this.#session === session) this.#session = null;
        // A session the host closed is not reopened.
        if (byHost) this.#reopen = null;
      },
    });
    this.#session = session;
    return session;
  }

  /** The session a REST call goes over, opening a new one when `reopen` asks for it; or null. */
  #sessionForCall() {
    const current = this.session;
    if (current) return current;
    if (this.#reopen && this.#ptr !== null) {
      return this.#openSession(this.#reopen.open, this.#reopen.options);
    }
    return null;
  }

  /** The prepare step of a tool call, its arguments checked first. */
  #prepareCall(mcp, tool, args) {
    const m = cText(mcp, 'the MCP name');
    const t = cText(tool, 'the tool name');
    const json = args === undefined || args === null ? '' : jsonObject(args, 'the tool arguments');
    return (n, c, o, out) => n.mcpgw_client_prepare_call_tool(c, o, m, t, json, out);
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

  /**
   * The per-call options, checked.
   *
   * @param {CallOptions | undefined} opts
   */
  #callOptions(opts = {}) {
    if (opts === null || typeof opts !== 'object') {
      throw invalid('the call options must be an object');
    }
    const signal = opts.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw invalid('signal must be an AbortSignal');
    }
    return {
      signal,
      agentId: optText(opts.agentId, 'agentId') ?? this.#agentId,
      sessionId: optText(opts.sessionId, 'sessionId') ?? this.#sessionId,
      timeoutMs: integer(opts.timeoutMs, 'timeoutMs', 0, MAX_U32, 0),
    };
  }

  /**
   * Prepares an operation with `prepare`, given the call options as a native handle (freed
   * after). Returns the op; the caller frees it.
   */
  async #prepare(n, call, prepare) {
    const optionsOut = [null];
    let rc = n.mcpgw_call_options_new(optionsOut);
    if (rc !== n.RESULT.OK) throw errorFor(rc, 'creating call options failed');
    const o = optionsOut[0];
    try {
      const set = (r, what) => {
        if (r !== n.RESULT.OK) throw errorFor(r, `${what}: ${n.mcpgw_result_message(r)}`);
      };
      if (call.agentId !== null) set(n.mcpgw_call_options_set_agent_id(o, call.agentId), 'agentId');
      if (call.sessionId !== null) {
        set(n.mcpgw_call_options_set_session_id(o, call.sessionId), 'sessionId');
      }
      if (call.timeoutMs) set(n.mcpgw_call_options_set_timeout_ms(o, call.timeoutMs), 'timeoutMs');
      const opOut = [null];
      // Usually synchronous; a prepare that does host I/O resolves from a worker thread.
      rc = await prepare(n, this.#ptr, o, opOut);
      if (rc !== n.RESULT.OK) {
        throw errorFor(rc, `preparing the operation failed: ${n.mcpgw_result_message(rc)}`);
      }
      return opOut[0];
    } finally {
      n.mcpgw_call_options_free(o);
    }
  }

  /**
   * Prepares an operation, drives it (over the session when `via.session` and one is attached,
   * else one-shot through the exec function) and returns its result JSON, parsed. The op is
   * freed exactly once.
   *
   * @param {CallOptions | undefined} opts
   * @param {(n: any, client: any, options: any, out: any[]) => number | Promise<number>} prepare
   * @param {{session?: boolean, stream?: boolean, onProgress?: (chunk: ToolChunk) => void}} [via]
   * @returns {Promise<any>}
   */
  async #run(opts, prepare, via = {}) {
    const call = this.#callOptions(opts);
    if (this.#ptr === null) {
      throw errorNamed('INVALID_STATE', 'the client is closed');
    }
    const n = native();
    if (via.session && this.port === 0) {
      // A session launching the gateway: until its hello the client knows no gateway to prepare
      // a request for, so the call waits for the hello (or for the channel to fail).
      const opening = this.#sessionForCall();
      if (opening && !opening.hello) await untilOpened(opening, call.signal);
      if (this.#ptr === null) throw errorNamed('INVALID_STATE', 'the client is closed');
    }
    const op = await this.#prepare(n, call, prepare);
    live.ops++;
    try {
      const name = n.mcpgw_op_name(op);
      const { signal } = call;
      if (signal?.aborted) throw aborted(name, signal);
      let outcome = 'unsent';
      // An op that failed while being prepared (a bad name) has its result already.
      const session =
        via.session && n.mcpgw_op_result(op) === n.RESULT.INVALID_STATE
          ? this.#sessionForCall()
          : null;
      if (session) {
        outcome = await session.run(op, name, {
          signal,
          stream: via.stream,
          onProgress: via.onProgress,
          limitMs: call.timeoutMs || this.#timeoutMs,
        });
      }
      const execError =
        outcome === 'unsent' ? await drive(n, op, name, this.#exec, signal) : undefined;
      const result = n.mcpgw_op_result(op);
      if (result !== n.RESULT.OK) {
        const err = n.mcpgw_op_error(op);
        // The op's error is borrowed from the op: read here, freed with the op.
        throw err
          ? readError(n, err, result === n.RESULT.EXEC_FAILED ? execError : undefined)
          : errorFor(result, `${name}: ${n.mcpgw_result_message(result)}`);
      }
      const out = [null];
      const rc = n.mcpgw_op_result_json(op, out);
      if (rc !== n.RESULT.OK) throw errorFor(rc, `${name}: reading the result failed`);
      return JSON.parse(takeString(n, out[0]));
    } finally {
      n.mcpgw_op_free(op);
      live.ops--;
    }
  }
}

/**
 * Resolves when `session` has answered or failed to open; rejects with AbortError when `signal`
 * aborts first.
 *
 * @param {Session} session
 * @param {AbortSignal | undefined} signal
 */
async function untilOpened(session, signal) {
  if (signal?.aborted) throw aborted('the call', signal);
  /** @type {() => void} */
  let onAbort = () => {};
  try {
    await Promise.race([
      session.opened.catch(() => {}),
      new Promise((_, reject) => {
        onAbort = () => reject(aborted('the call', /** @type {AbortSignal} */ (signal)));
        signal?.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/**
 * Drives `op` one-shot to its end: each command it names is run through `exec` and its output
 * handed back. Returns what the exec last threw (the cause of an EXEC_FAILED result), if anything.
 *
 * @param {any} n
 * @param {any} op
 * @param {string} name
 * @param {ExecFn} exec
 * @param {AbortSignal | undefined} signal
 * @returns {Promise<unknown>}
 */
async function drive(n, op, name, exec, signal) {
  let execError;
  for (;;) {
    if (signal?.aborted) throw aborted(name, signal);
    const cmdOut = [null];
    const timeoutOut = [0];
    // INVALID_STATE here means the operation has finished and wants no more commands.
    if (n.mcpgw_op_command(op, cmdOut, timeoutOut) !== n.RESULT.OK) return execError;
    // Copied now: text and stdin are borrowed and die with the next complete/fail_exec.
    const command = decodeCString(cmdOut[0]);
    const timeoutMs = timeoutOut[0];
    const stdinOut = [null];
    const stdinLen = [0];
    let stdin;
    if (n.mcpgw_op_command_stdin(op, stdinOut, stdinLen) === n.RESULT.OK && stdinLen[0] > 0) {
      stdin = copyBytes(stdinOut[0], Number(stdinLen[0]));
    }
    const outcome = await runCommand(exec, command, timeoutMs, signal, stdin);
    if (outcome.kind === 'aborted') throw aborted(name, /** @type {AbortSignal} */ (signal));
    if (outcome.kind === 'timeout') {
      throw errorNamed(
        'DEADLINE',
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
      if (rcf !== n.RESULT.OK) throw errorFor(rcf, `${name}: reporting the exec failure failed`);
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
    if (rcc !== n.RESULT.OK) throw errorFor(rcc, `${name}: handing back the output failed`);
  }
}

/**
 * Runs one command through the exec function, racing it against the caller's signal and the
 * command's timeout. The exec function gets a signal that aborts on either, so it can stop the
 * command; a call that ignores it is simply left behind (its result discarded).
 *
 * @param {ExecFn} exec
 * @param {string} command
 * @param {number} timeoutMs
 * @param {AbortSignal | undefined} signal
 * @param {Uint8Array | undefined} stdin
 * @returns {Promise<{kind: 'done', value: unknown} | {kind: 'threw', error: unknown} | {kind: 'aborted'} | {kind: 'timeout'}>}
 */
async function runCommand(exec, command, timeoutMs, signal, stdin) {
  const controller = new AbortController();
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  /** @type {() => void} */
  let onAbort = () => {};
  /** @type {Promise<{kind: 'aborted'} | {kind: 'timeout'}>} */
  const stopped = new Promise((resolve) => {
    onAbort = () => {
      controller.abort(signal?.reason);
      resolve({ kind: 'aborted' });
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    timer = setTimeout(
      () => {
        controller.abort(
          errorNamed('DEADLINE', `the command did not finish within ${timeoutMs} ms`),
        );
        resolve({ kind: 'timeout' });
      },
      Math.min(timeoutMs, MAX_TIMER_MS),
    );
  });
  /** @type {ExecOptions} */
  const options = { timeoutMs, signal: controller.signal };
  if (stdin) options.stdin = stdin;
  // An async wrapper turns a synchronous throw of the exec function into a rejection.
  /** @type {Promise<{kind: 'done', value: unknown} | {kind: 'threw', error: unknown}>} */
  const running = (async () => exec(command, options))().then(
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
