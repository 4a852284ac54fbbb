// The client: one gateway in one sandbox, reached through a backend, with the operations every
// binding names the same way. Each method is one operation submitted to the library's host
// driver (loop.js), which decides how it travels (one-shot commands, or the session channel
// once `openSession` opened it) and settles it; the methods only check and shape arguments.

import { errorNamed, invalid } from './errors.js';
import { HostLoop } from './loop.js';
import { Connection } from './connection.js';
import { gatewayBinary } from './native.js';

/** @import { Backend } from './backends.js' */
/** @import { BinaryStatus, GatewayInfo, Health, Hello, McpEntry, McpSpec, Tool, ToolChunk } from './wire.js' */
/** @import { ConnectOptions } from './connection.js' */

/**
 * Settings of a {@link Client}, each the library's `HostConfig` key of the same name in
 * snake_case (`gatewayPath` is `gateway_path`); every one is optional.
 *
 * @typedef {object} ClientOptions
 * @property {string} [gatewayPath] the gateway binary inside the sandbox; a bare name is looked
 *   up on PATH. Default `mcpgw-gateway`.
 * @property {string} [host] the loopback address the gateway listens on. Default `127.0.0.1`.
 * @property {number} [port] 0 (default): `startGateway` (or a session) launches a gateway.
 *   Non-zero, with `tokenFile`: use the gateway that runs there.
 * @property {string} [tokenFile] the gateway's token file inside the sandbox
 * @property {string} [stateDir] the per-launch directory inside the sandbox (token, log).
 *   Default `/tmp/mcpgw-<16 hex>`.
 * @property {string} [instanceNonce] the instance nonce of a running gateway
 * @property {'curl' | 'built_in'} [transport] how requests reach the gateway inside the
 *   sandbox; detected once when absent
 * @property {string} [stagingDir] where large bodies are staged when the backend passes no stdin
 * @property {number} [maxCommandBytes] the longest command text handed to the backend
 * @property {number} [timeoutMs] the time limit of an operation that sets none. Default 60000.
 * @property {number} [openTimeoutMs] how long a session channel may take to say hello (a launch
 *   included). Default 60000.
 * @property {number} [answerGraceMs] how long an answer over a session may take beyond its
 *   operation's own limit. Default 5000.
 * @property {number} [closeGraceMs] how long a closed channel may take to exit before it is
 *   killed. Default 5000.
 * @property {boolean} [reopen] whether a lost session channel is opened again (its tool calls
 *   then resume). Default true.
 * @property {number} [reopenAttempts] how many failed opens in a row end the session. Default 5.
 * @property {number} [heartbeatMs] how often attach pings when idle (0: attach's default)
 * @property {number} [heartbeatTimeoutMs] how long the channel may stay silent before it is
 *   declared lost (0: three heartbeats)
 * @property {object} [policy] the host's rules (the structure of `mcpgw mcp --policy`'s file):
 *   what they refuse fails with PolicyDeniedError and is not listed
 * @property {Record<string, string> | ((name: string) => string)} [secrets] secret values by
 *   name, or a function from a name to its value (called when `addMcp` is given a spec that
 *   names it), which a spec's `{secret: NAME}` env or headers value resolves to (else the
 *   process's environment variable NAME); answers show `[secret:NAME]` in their place
 * @property {(record: Record<string, unknown>) => void} [onAudit] called with each call's audit
 *   record when the call ends (turns the library's audit on)
 * @property {boolean} [auditArguments] whether the records hold the arguments themselves
 *   (secrets shown by name), not only their digest and size
 * @property {(text: string) => void} [onNotice] what the driver says that concerns no call (a
 *   channel opened again, a frame for a call no longer waited for), for a log. The same lines go
 *   to `NODE_DEBUG=mcpgw`.
 */

/**
 * Per-call options.
 *
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] cancels the call: it rejects with CancelledError (the
 *   signal's reason as `cause`); its command is killed, or the gateway cancels it upstream
 * @property {number} [timeoutMs] the operation's time limit, in milliseconds; for a tool call
 *   also the gateway's deadline. Absent: the client's `timeoutMs`.
 * @property {string} [agentId] the agent part of the MCPs' scope. Default `""`.
 * @property {string} [sessionId] the session part of the MCPs' scope. Default `""`.
 */

/**
 * Per-call options of a tool call.
 *
 * @typedef {CallOptions & {onProgress?: (chunk: ToolChunk) => void}} CallToolOptions
 * `onProgress` receives each progress chunk as the server reports it (over a session); a
 * callback that throws cancels the call, which rejects with what it threw.
 */

/** The options that are `HostConfig` keys (in camelCase). */
export const CONFIG_OPTIONS = Object.freeze([
  'gatewayPath',
  'host',
  'port',
  'tokenFile',
  'stateDir',
  'instanceNonce',
  'transport',
  'stagingDir',
  'maxCommandBytes',
  'timeoutMs',
  'openTimeoutMs',
  'answerGraceMs',
  'closeGraceMs',
  'reopen',
  'reopenAttempts',
  'heartbeatMs',
  'heartbeatTimeoutMs',
  'policy',
  'secrets',
  'auditArguments',
]);

const CALL_OPTIONS = ['signal', 'timeoutMs', 'agentId', 'sessionId', 'onProgress'];

/** `gatewayPath` -> `gateway_path`. */
const snake = (key) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** The object `value` must be, or nothing; throws naming `what`. */
function optionsObject(value, what) {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object') throw invalid(`${what} must be an object, not ${typeof value}`);
  return value;
}

/** Refuses a key of `options` that is not in `known`. */
function onlyKnown(options, known, what) {
  const unknown = Object.keys(options).filter((k) => !known.includes(k));
  if (unknown.length) {
    throw invalid(`${what}: unknown option ${unknown.join(', ')} (known: ${known.join(', ')})`);
  }
}

/**
 * `spec` with each `{secret: NAME}` of its env and headers given the value `secretOf` returns
 * for NAME (the library uses it, covers it, and sends it over the session only).
 *
 * @param {any} spec
 * @param {((name: string) => string) | undefined} secretOf
 * @returns {any}
 */
function withSecrets(spec, secretOf) {
  const config = spec?.mcp_config;
  if (!secretOf || !config || typeof config !== 'object') return spec;
  const out = { ...config };
  for (const field of ['env', 'headers']) {
    const values = config[field];
    if (!values || typeof values !== 'object') continue;
    out[field] = Object.fromEntries(
      Object.entries(values).map(([key, value]) => {
        if (!value || typeof value !== 'object' || typeof value.secret !== 'string') {
          return [key, value];
        }
        if ('value' in value) return [key, value];
        const got = secretOf(value.secret);
        if (typeof got !== 'string') {
          throw invalid(
            `mcp_config.${field}.${key}: the secrets function gave no text for secret ${JSON.stringify(value.secret)}`,
          );
        }
        return [key, { secret: value.secret, value: got }];
      }),
    );
  }
  return { ...spec, mcp_config: out };
}

// Frees the driver of a client that was never closed, once it is idle (a backstop: close()
// unregisters it). The driver holds no reference to its client, so the client can be collected.
const finalizer = new FinalizationRegistry((/** @type {HostLoop} */ loop) => {
  loop.idle().then(() => loop.free());
});

/**
 * A client of one mcpgw gateway in one sandbox. Every method returns a promise and never blocks
 * the event loop; calls may run concurrently. One host driver steers them all: one-shot
 * commands through the backend, or, once `openSession()` opened it, one long-lived channel.
 */
export class Client {
  /** @type {HostLoop} */
  #loop;
  /** @type {Promise<void> | null} */
  #closing = null;
  #port;
  /** What makes a driver like this client's: its configuration, backend and notice callback. */
  #make;
  /** The secrets function, when the options gave one. @type {((name: string) => string) | undefined} */
  #secretOf;
  /** Installs under way, each on a driver of its own. @type {Set<Promise<unknown>>} */
  #installs = new Set();

  /**
   * Throws InvalidArgumentError for a bad backend or option (the library names what is wrong),
   * or an Error when libmcpgw cannot be loaded.
   *
   * @param {Backend} backend `local()`, `docker(container)`, `podman(container)`,
   *   `kubectl(pod)`, `argv(prefix)` or `exec(run)`
   * @param {ClientOptions} [options]
   */
  constructor(backend, options) {
    if (!backend || typeof backend !== 'object' || typeof backend.config !== 'object') {
      throw invalid(
        'new Client(backend, options) needs a backend: local(), docker(container), ' +
          'podman(container), kubectl(pod), argv(prefix) or exec(run)',
      );
    }
    const o = optionsObject(options, 'the client options');
    onlyKnown(o, [...CONFIG_OPTIONS, 'onNotice', 'onAudit'], 'new Client');
    if (o.onNotice !== undefined && typeof o.onNotice !== 'function') {
      throw invalid('onNotice must be a function (text) => void');
    }
    if (o.onAudit !== undefined && typeof o.onAudit !== 'function') {
      throw invalid('onAudit must be a function (record) => void');
    }
    /** @type {Record<string, unknown>} */
    const config = { backend: backend.config };
    for (const key of CONFIG_OPTIONS) if (o[key] !== undefined) config[snake(key)] = o[key];
    if (o.onAudit) config.audit = true;
    if (typeof o.secrets === 'function') {
      // Resolved by the client at addMcp (see withSecrets).
      delete config.secrets;
      this.#secretOf = o.secrets;
    }
    this.#make = () => new HostLoop(config, backend, o.onNotice, o.onAudit);
    this.#loop = this.#make();
    this.#port = typeof o.port === 'number' ? o.port : 0;
    finalizer.register(this, this.#loop, this);
  }

  /** The gateway's port once known (configured, launched, or told by a session), else 0. */
  get port() {
    const { gateway, hello } = this.#loop.state();
    return gateway?.port ?? hello?.port ?? this.#port;
  }

  /** Whether `close()` was called. */
  get closed() {
    return this.#closing !== null;
  }

  /**
   * What the driver knows: the session (`off`, `opening`, `open`), the gateway it launched
   * (`{port, pid, token_file, instance_nonce, state_dir}` or null), the channel's hello.
   *
   * @returns {{session: 'off' | 'opening' | 'open', gateway: GatewayInfo | null, hello: Hello | null}}
   */
  state() {
    return this.#loop.state();
  }

  /**
   * Launches the gateway in the sandbox (one command; the token is minted there) and confirms
   * it answers.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<GatewayInfo>}
   */
  startGateway(opts) {
    return this.#call({ op: 'start_gateway' }, opts);
  }

  /**
   * Stops the gateway this client launched (SIGTERM, SIGKILL after the timeout) and removes its
   * state directory.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async stopGateway(opts) {
    await this.#call({ op: 'stop_gateway' }, opts);
  }

  /**
   * Installs the gateway binary read from `binaryPath` (on the host; by default the one this
   * package bundles, {@link gatewayBinary}) at `gatewayPath` in the sandbox, unless an identical
   * one is there (SHA-256): in one command when the backend passes stdin, else in staged pieces.
   *
   * @param {string} [binaryPath]
   * @param {CallOptions} [opts]
   * @returns {Promise<BinaryStatus>}
   */
  ensureGatewayBinary(binaryPath, opts) {
    // Submitting it reads and hashes the whole binary: that happens on a worker thread, on a
    // driver of its own (installing needs nothing of the client's gateway or session).
    const binary_path = binaryPath ?? gatewayBinary();
    const install = this.#call({ op: 'ensure_gateway_binary', binary_path }, opts, {
      loop: this.#make(),
    });
    this.#installs.add(install);
    install.catch(() => {}).finally(() => this.#installs.delete(install));
    return install;
  }

  /**
   * Asks whether the gateway is up, checking its instance nonce when known.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<Health>}
   */
  health(opts) {
    return this.#call({ op: 'health' }, opts);
  }

  /**
   * The MCP servers of the scope: each spec as registered, with the gateway's `status`.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<McpEntry[]>}
   */
  listMcps(opts) {
    return this.#call({ op: 'list_mcps' }, opts);
  }

  /**
   * Registers an MCP server in the scope; resolves once the gateway has connected it and
   * listed its tools.
   *
   * @param {McpSpec} spec
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async addMcp(spec, opts) {
    await this.#call({ op: 'add_mcp', spec: withSecrets(spec, this.#secretOf) }, opts);
  }

  /**
   * Removes an MCP server from the scope; the gateway closes it and its processes.
   *
   * @param {string} name
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async removeMcp(name, opts) {
    await this.#call({ op: 'remove_mcp', name }, opts);
  }

  /**
   * The tools of an MCP server, as it described them.
   *
   * @param {string} mcp
   * @param {CallOptions} [opts]
   * @returns {Promise<Tool[]>}
   */
  listTools(mcp, opts) {
    return this.#call({ op: 'list_tools', mcp }, opts);
  }

  /**
   * Calls a tool and resolves with its last ToolChunk. A tool that reports an error resolves
   * with `state: "error"`; failures to call it reject. `opts.onProgress` receives each progress
   * chunk as it happens (over a session).
   *
   * @param {string} mcp
   * @param {string} tool
   * @param {Record<string, unknown> | null} [args]
   * @param {CallToolOptions} [opts]
   * @returns {Promise<ToolChunk>}
   */
  callTool(mcp, tool, args, opts) {
    return this.#call({ op: 'call_tool', mcp, tool, arguments: args ?? null }, opts);
  }

  /**
   * Calls a tool and yields its chunks: each progress chunk as the server reports it (over a
   * session; one-shot only the last), then the last chunk. The call starts when iteration
   * begins; leaving the loop early (`break`) or aborting `opts.signal` cancels it.
   *
   * @param {string} mcp
   * @param {string} tool
   * @param {Record<string, unknown> | null} [args]
   * @param {CallToolOptions} [opts]
   * @returns {AsyncGenerator<ToolChunk, void, undefined>}
   */
  async *callToolStream(mcp, tool, args, opts) {
    const o = optionsObject(opts, 'the call options');
    const stop = new AbortController();
    const outer = o.signal instanceof AbortSignal ? o.signal : undefined;
    const onOuterAbort = () => stop.abort(outer?.reason);
    if (outer?.aborted) onOuterAbort();
    outer?.addEventListener('abort', onOuterAbort, { once: true });
    /** @type {ToolChunk[]} */
    const queue = [];
    let finished = false;
    /** @type {unknown} */
    let failure;
    let wake = () => {};
    const onProgress = (/** @type {ToolChunk} */ chunk) => {
      o.onProgress?.(chunk);
      queue.push(chunk);
      wake();
    };
    const call = this.callTool(mcp, tool, args, { ...o, signal: stop.signal, onProgress }).then(
      (last) => queue.push(last),
      (e) => (failure = e),
    );
    call.finally(() => {
      finished = true;
      wake();
    });
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
    await this.#call({ op: 'set_runtime_headers', mcp, headers }, opts);
  }

  /**
   * Opens the session channel (`mcpgw-gateway attach` through the backend, launching the
   * gateway when the client knows none) and resolves with its hello; from then on every REST
   * operation travels over it. Calls made meanwhile wait for it. A channel that is lost is
   * opened again (option `reopen`), its tool calls resumed.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<Hello>}
   */
  openSession(opts) {
    return this.#call({ op: 'open_session' }, opts);
  }

  /**
   * Closes the session channel: calls it carries fail with SessionLostError; later calls go
   * one-shot. The gateway keeps running.
   *
   * @param {CallOptions} [opts]
   * @returns {Promise<void>}
   */
  async closeSession(opts) {
    await this.#call({ op: 'close_session' }, opts);
  }

  /**
   * Opens a virtual MCP connection to MCP `mcp` over the session: raw JSON-RPC both ways, the
   * gateway being the MCP server. Throws InvalidStateError when no session is open or opening.
   *
   * @param {string} mcp
   * @param {ConnectOptions} [opts]
   * @returns {Connection}
   */
  connect(mcp, opts) {
    if (this.closed) throw errorNamed('INVALID_STATE', 'the client is closed');
    return new Connection(this.#loop, mcp, optionsObject(opts, 'the connection options'));
  }

  /**
   * Closes the client: new calls reject with InvalidStateError; the session (if any) is closed;
   * one-shot calls under way finish. Resolves once every process the client started has ended
   * and its native driver is freed. Idempotent. Does not stop the gateway: `stopGateway()`
   * first for that.
   *
   * @returns {Promise<void>}
   */
  close() {
    if (this.#closing) return this.#closing;
    finalizer.unregister(this);
    const loop = this.#loop;
    const ending =
      loop.state().session === 'off' ? Promise.resolve() : loop.submit({ op: 'close_session' });
    this.#closing = Promise.allSettled([ending, ...this.#installs])
      .then(() => loop.idle())
      .then(() => loop.free());
    return this.#closing;
  }

  /**
   * Submits `op` with the per-call options; resolves with its result's JSON, parsed.
   *
   * @param {Record<string, unknown>} op
   * @param {CallToolOptions | undefined} opts
   * @param {{loop?: HostLoop}} [install] a driver of its own, freed after: the submission runs
   *   on a worker thread
   */
  #call(op, opts, { loop } = {}) {
    try {
      if (this.closed) throw errorNamed('INVALID_STATE', `${op.op}: the client is closed`);
      const o = optionsObject(opts, 'the call options');
      onlyKnown(o, op.op === 'call_tool' ? CALL_OPTIONS : CALL_OPTIONS.slice(0, 4), String(op.op));
      if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) {
        throw invalid('signal must be an AbortSignal');
      }
      if (o.onProgress !== undefined && typeof o.onProgress !== 'function') {
        throw invalid('onProgress must be a function (chunk) => void');
      }
      /** @type {Record<string, unknown>} */
      const submit = { ...op, agent_id: o.agentId, session_id: o.sessionId };
      submit.timeout_ms = o.timeoutMs;
      if (o.onProgress) submit.stream = true;
      const options = { signal: o.signal, onProgress: o.onProgress };
      if (!loop) return this.#loop.submit(submit, options);
      return loop
        .submitOffThread(submit, options)
        .finally(() => loop.idle().then(() => loop.free()));
    } catch (e) {
      loop?.free();
      return Promise.reject(e);
    }
  }
}
