// The thin I/O loop around one `mcpgw_host`, the library's host driver, which makes every
// decision (session or one-shot, fallbacks, reopening, resuming, every timer, the backends and
// their failures). This loop only submits what the caller asks, does what each action says
// (spawn, write, close, kill: procs.js), reports back what happened, settles each operation with
// its DONE, and keeps one timer at the driver's next deadline. Everything runs on the JS thread.

import { debuglog } from 'node:util';
import { codeName, errorFromJson, errorNamed, invalid } from './errors.js';
import { ACTION_KIND, RESULT_OK } from './ffi.js';
import { actionBytes, actionSpec, live, native, takeError, takeString } from './native.js';
import { openChannel, openExec, runCommand, runExec } from './procs.js';

/** @import { Backend } from './backends.js' */
/** @import { Proc, Report } from './procs.js' */

const log = debuglog('mcpgw');
// setTimeout fires at once for delays above this; a later deadline is re-armed when it fires.
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * An operation waiting for its DONE.
 *
 * @typedef {object} Pending
 * @property {(value: any) => void} resolve
 * @property {(error: unknown) => void} reject
 * @property {((chunk: any) => void) | undefined} onProgress
 * @property {AbortSignal | undefined} signal
 * @property {() => void} onAbort
 * @property {unknown} [failure] what the progress callback threw (the call was cancelled for it)
 */

/**
 * What a virtual connection is told.
 *
 * @typedef {object} ConnectionEvents
 * @property {() => void} opened
 * @property {(message: string) => void} message
 * @property {(reason: string | null, status: number, code: string | null) => void} closed
 */

/**
 * Calls the caller's `fn(value)` outside the loop: what it throws is thrown from its own tick,
 * as an event listener's error is, never into the driver's drain.
 */
export function later(fn, value) {
  queueMicrotask(() => fn(value));
}

/** The CancelledError of an operation its signal aborted. */
export function cancelled(what, signal) {
  return errorNamed('CANCELLED', `${what}: cancelled by its AbortSignal`, {
    cause: signal.reason,
  });
}

/** One host driver and the processes, operations and connections it is steering. */
export class HostLoop {
  #n = native();
  /** @type {any} */
  #ptr;
  /** @type {Backend} */
  #backend;
  /** @type {Map<number, Pending>} */
  #pending = new Map();
  /** @type {Map<number, Proc>} */
  #procs = new Map();
  /** @type {Map<number, ConnectionEvents>} */
  #conns = new Map();
  /** @type {NodeJS.Timeout | null} */
  #timer = null;
  #due = 0;
  #draining = false;
  // What the exec backend's function threw, while its failure is being reported: the cause of
  // the EXEC_FAILED that the same report settles.
  /** @type {unknown} */
  #execCause;
  /** @type {((text: string) => void) | undefined} */
  #onNotice;
  /** @type {((record: Record<string, unknown>) => void) | undefined} */
  #onAudit;
  /** @type {(() => void) | null} */
  #whenIdle = null;
  // Submissions running on a worker thread.
  #offThread = 0;

  /**
   * Throws the library's error (InvalidArgumentError naming the field) for a bad configuration.
   *
   * @param {Record<string, unknown>} config the library's `HostConfig`
   * @param {Backend} backend
   * @param {((text: string) => void) | undefined} onNotice
   * @param {((record: Record<string, unknown>) => void) | undefined} [onAudit]
   */
  constructor(config, backend, onNotice, onAudit) {
    const n = this.#n;
    const hostOut = [null];
    const errOut = [null];
    if (n.mcpgw_host_new(JSON.stringify(config), hostOut, errOut) !== RESULT_OK) {
      throw takeError(n, errOut[0]);
    }
    this.#ptr = hostOut[0];
    live.hosts++;
    this.#backend = backend;
    this.#onNotice = onNotice;
    this.#onAudit = onAudit;
  }

  /** Whether anything is under way: an operation, a process, a connection. */
  get busy() {
    const { size } = this.#pending;
    return size + this.#procs.size + this.#conns.size + this.#offThread > 0;
  }

  /** Whether the driver has been freed. */
  get freed() {
    return this.#ptr === null;
  }

  /**
   * Submits operation `op` (a `Submit` of the library: `{op: 'call_tool', ...}`); resolves with
   * its result's JSON, parsed, or rejects with its error.
   *
   * @param {Record<string, unknown>} op
   * @param {{signal?: AbortSignal, onProgress?: (chunk: any) => void}} [options]
   * @returns {Promise<any>}
   */
  submit(op, options = {}) {
    const text = this.#encode(op, options.signal);
    if (typeof text !== 'string') return text;
    const n = this.#n;
    const idOut = [0];
    const errOut = [null];
    if (n.mcpgw_host_submit(this.#ptr, text, idOut, errOut) !== RESULT_OK) {
      return Promise.reject(takeError(n, errOut[0]));
    }
    return this.#track(Number(idOut[0]), options);
  }

  /**
   * {@link HostLoop.submit} on a worker thread, for an operation whose submission reads and
   * hashes a host file (the gateway binary): the event loop goes on meanwhile. Only for a
   * driver nothing else uses until this resolves (it is then used from that thread).
   *
   * @param {Record<string, unknown>} op
   * @param {{signal?: AbortSignal}} [options]
   * @returns {Promise<any>}
   */
  async submitOffThread(op, options = {}) {
    const text = this.#encode(op, options.signal);
    if (typeof text !== 'string') return text;
    const n = this.#n;
    const idOut = [0];
    const errOut = [null];
    this.#offThread++;
    let rc;
    try {
      rc = await new Promise((resolve, reject) =>
        n.mcpgw_host_submit.async(this.#ptr, text, idOut, errOut, (e, r) =>
          e ? reject(e) : resolve(r),
        ),
      );
    } finally {
      this.#offThread--;
    }
    if (rc !== RESULT_OK) throw takeError(n, errOut[0]);
    return this.#track(Number(idOut[0]), options);
  }

  /** `op` as JSON text, or a rejected promise saying why it cannot be submitted. */
  #encode(op, signal) {
    if (this.#ptr === null)
      return Promise.reject(errorNamed('INVALID_STATE', 'the client is closed'));
    try {
      const text = JSON.stringify(op);
      if (signal?.aborted) return Promise.reject(cancelled(String(op.op), signal));
      return text;
    } catch (e) {
      const why = /** @type {Error} */ (e).message;
      return Promise.reject(invalid(`${op.op}: its arguments cannot be sent as JSON: ${why}`));
    }
  }

  /**
   * Waits for submitted operation `id`'s DONE; its signal cancels it.
   *
   * @param {number} id
   * @param {{signal?: AbortSignal, onProgress?: (chunk: any) => void}} options
   */
  #track(id, { signal, onProgress }) {
    const n = this.#n;
    const promise = new Promise((resolve, reject) => {
      const onAbort = () => this.#report(() => n.mcpgw_host_cancel(this.#ptr, id));
      this.#pending.set(id, { resolve, reject, onProgress, signal, onAbort });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
    this.#drain();
    if (signal?.aborted) this.#pending.get(id)?.onAbort();
    return promise;
  }

  /**
   * Opens a virtual MCP connection over the session; its events go to `events`. Throws the
   * library's error when no session is open or opening.
   *
   * @param {string} mcp
   * @param {string} agentId
   * @param {string} sessionId
   * @param {ConnectionEvents} events
   * @returns {number} its id
   */
  openConnection(mcp, agentId, sessionId, events) {
    if (this.#ptr === null) throw errorNamed('INVALID_STATE', 'the client is closed');
    const n = this.#n;
    const idOut = [0];
    const errOut = [null];
    const rc = n.mcpgw_host_open_connection(this.#ptr, mcp, agentId, sessionId, idOut, errOut);
    if (rc !== RESULT_OK) throw takeError(n, errOut[0]);
    const id = Number(idOut[0]);
    this.#conns.set(id, events);
    this.#drain();
    return id;
  }

  /**
   * Sends one JSON-RPC message (its text) on connection `id`.
   *
   * @param {number} id
   * @param {string} message
   */
  send(id, message) {
    if (this.#ptr === null) throw errorNamed('INVALID_STATE', 'the client is closed');
    const n = this.#n;
    const bytes = Buffer.from(message, 'utf8');
    const errOut = [null];
    const rc = n.mcpgw_host_send(this.#ptr, id, bytes, bytes.length, errOut);
    if (rc !== RESULT_OK) throw takeError(n, errOut[0]);
    this.#drain();
  }

  /**
   * Closes connection `id` (its `closed` event follows).
   *
   * @param {number} id
   */
  closeConnection(id) {
    if (this.#ptr !== null) this.#report(() => this.#n.mcpgw_host_close_connection(this.#ptr, id));
  }

  /**
   * What the driver knows: `{session: 'off' | 'opening' | 'open', gateway, hello}`.
   *
   * @returns {{session: 'off' | 'opening' | 'open', gateway: any, hello: any}}
   */
  state() {
    if (this.#ptr === null) return { session: 'off', gateway: null, hello: null };
    return JSON.parse(takeString(this.#n, this.#n.mcpgw_host_state_json(this.#ptr)));
  }

  /** Resolves once nothing is under way (at once when nothing is). */
  idle() {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => {
      const before = this.#whenIdle;
      this.#whenIdle = () => {
        before?.();
        resolve(undefined);
      };
    });
  }

  /**
   * Frees the driver: what is still under way ends (processes killed, operations rejected with
   * InvalidStateError, connections closed). Idempotent.
   */
  free() {
    if (this.#ptr === null) return;
    const n = this.#n;
    n.mcpgw_host_free(this.#ptr);
    this.#ptr = null;
    live.hosts--;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    for (const proc of this.#procs.values()) proc.kill();
    this.#procs.clear();
    const closed = errorNamed('INVALID_STATE', 'the client was closed before this finished');
    for (const p of this.#pending.values()) {
      p.signal?.removeEventListener('abort', p.onAbort);
      p.reject(closed);
    }
    this.#pending.clear();
    for (const c of this.#conns.values()) c.closed('the client was closed', 0, 'INVALID_STATE');
    this.#conns.clear();
    this.#settledAll();
  }

  /** Runs `fn` (a report to the driver), then does what the driver says. */
  #report(fn) {
    if (this.#ptr === null) return;
    fn();
    this.#drain();
  }

  /** Takes every action the driver has, does each, and sets the timer to its next deadline. */
  #drain() {
    // A report made while draining (a process killed at once) is picked up by this loop.
    if (this.#draining || this.#ptr === null) return;
    const n = this.#n;
    this.#draining = true;
    try {
      for (;;) {
        const action = n.mcpgw_host_next_action(this.#ptr);
        if (!action) break;
        live.actions++;
        try {
          this.#act(action);
        } finally {
          n.mcpgw_action_free(action);
          live.actions--;
        }
      }
    } finally {
      this.#draining = false;
    }
    this.#arm();
    if (!this.busy) this.#settledAll();
  }

  #settledAll() {
    const idle = this.#whenIdle;
    this.#whenIdle = null;
    idle?.();
  }

  /** One timer, at the driver's next deadline; it keeps the process alive only for operations. */
  #arm() {
    if (this.#ptr === null) return;
    const ms = Number(this.#n.mcpgw_host_timeout_ms(this.#ptr));
    if (ms < 0) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = null;
      return;
    }
    const due = performance.now() + ms;
    if (!this.#timer || Math.abs(due - this.#due) >= 1) {
      if (this.#timer) clearTimeout(this.#timer);
      this.#due = due;
      this.#timer = setTimeout(
        () => {
          this.#timer = null;
          this.#report(() => this.#n.mcpgw_host_on_timeout(this.#ptr));
        },
        Math.min(ms, MAX_TIMER_MS),
      );
    }
    if (this.#pending.size > 0) this.#timer.ref();
    else this.#timer.unref();
  }

  /** Does what `action` says. */
  #act(action) {
    const n = this.#n;
    const kind = n.mcpgw_action_get_kind(action);
    switch (kind) {
      case ACTION_KIND.RUN:
      case ACTION_KIND.OPEN: {
        const proc = Number(n.mcpgw_action_proc(action));
        const spec = actionSpec(n, action);
        const report = this.#reporter(proc);
        const { run, open } = this.#backend;
        /** @type {Proc} */
        let p;
        if (kind === ACTION_KIND.RUN) {
          p = spec.shell !== null && run ? runExec(run, spec, report) : runCommand(spec, report);
        } else {
          p = spec.shell !== null ? openExec(open, spec, report) : openChannel(spec, report);
        }
        this.#procs.set(proc, p);
        return;
      }
      case ACTION_KIND.WRITE:
        this.#procs.get(Number(n.mcpgw_action_proc(action)))?.write?.(actionBytes(n, action));
        return;
      case ACTION_KIND.CLOSE_INPUT:
        this.#procs.get(Number(n.mcpgw_action_proc(action)))?.closeInput?.();
        return;
      case ACTION_KIND.KILL:
        this.#procs.get(Number(n.mcpgw_action_proc(action)))?.kill();
        return;
      case ACTION_KIND.PROGRESS:
        return this.#progress(Number(n.mcpgw_action_id(action)), actionBytes(n, action));
      case ACTION_KIND.DONE:
        return this.#done(Number(n.mcpgw_action_id(action)), action);
      case ACTION_KIND.CONNECTION_OPENED:
        return this.#conns.get(Number(n.mcpgw_action_id(action)))?.opened();
      case ACTION_KIND.CONNECTION_MESSAGE:
        return this.#conns
          .get(Number(n.mcpgw_action_id(action)))
          ?.message(actionBytes(n, action).toString('utf8'));
      case ACTION_KIND.CONNECTION_CLOSED: {
        const id = Number(n.mcpgw_action_id(action));
        const events = this.#conns.get(id);
        this.#conns.delete(id);
        return events?.closed(
          n.mcpgw_action_text(action),
          n.mcpgw_action_status(action),
          codeName(n.mcpgw_action_result(action)),
        );
      }
      case ACTION_KIND.NOTICE: {
        const text = n.mcpgw_action_text(action) ?? '';
        log('%s', text);
        if (this.#onNotice) later(this.#onNotice, text);
        return;
      }
      case ACTION_KIND.AUDIT: {
        if (this.#onAudit) {
          later(this.#onAudit, JSON.parse(actionBytes(n, action).toString('utf8')));
        }
        return;
      }
      default:
        log('an action of a kind this binding does not know: %d', kind);
    }
  }

  /**
   * Where process `proc`'s events go: the driver's reports.
   *
   * @returns {Report}
   */
  #reporter(proc) {
    const n = this.#n;
    const ended = () => this.#procs.delete(proc);
    return {
      exit: (code, stdout, stderr) => {
        ended();
        this.#report(() =>
          n.mcpgw_host_on_exit(
            this.#ptr,
            proc,
            code,
            stdout ?? null,
            stdout?.length ?? 0,
            stderr ?? null,
            stderr?.length ?? 0,
          ),
        );
      },
      failed: (reason, cause) => {
        ended();
        this.#execCause = cause;
        try {
          this.#report(() => n.mcpgw_host_on_exec_failed(this.#ptr, proc, reason));
        } finally {
          this.#execCause = undefined;
        }
      },
      data: (b) => this.#report(() => n.mcpgw_host_on_data(this.#ptr, proc, b, b.length)),
      stderr: (b) => this.#report(() => n.mcpgw_host_on_stderr(this.#ptr, proc, b, b.length)),
      eof: () => this.#report(() => n.mcpgw_host_on_eof(this.#ptr, proc)),
    };
  }

  /** A progress chunk for operation `id`; a callback that throws cancels the call. */
  #progress(id, bytes) {
    const p = this.#pending.get(id);
    if (!p?.onProgress || p.failure !== undefined) return;
    try {
      p.onProgress(JSON.parse(bytes.toString('utf8')));
    } catch (e) {
      p.failure = e;
      this.#n.mcpgw_host_cancel(this.#ptr, id);
    }
  }

  /** Operation `id` finished: its promise settles. */
  #done(id, action) {
    const p = this.#pending.get(id);
    if (!p) return;
    this.#pending.delete(id);
    p.signal?.removeEventListener('abort', p.onAbort);
    const n = this.#n;
    const json = JSON.parse(actionBytes(n, action).toString('utf8'));
    if (n.mcpgw_action_result(action) === RESULT_OK) return p.resolve(json);
    if (p.failure !== undefined) return p.reject(p.failure);
    let cause;
    if (json.name === 'CANCELLED' && p.signal?.aborted) cause = p.signal.reason;
    if (json.name === 'EXEC_FAILED') cause = this.#execCause;
    p.reject(errorFromJson(json, cause));
  }
}
