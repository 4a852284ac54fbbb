// A session channel: one long-lived process in the sandbox (`mcpgw-gateway attach`, reached
// through `docker exec -i`, `kubectl exec -i`, a local pipe) carries every REST operation of a
// client, many at once, with live progress and real cancellation. The library's session is
// sans-IO: this file moves bytes between it and the channel's streams and turns its events into
// settled promises. Everything here runs on the event loop and never blocks it.

import { EVENT, copyBytes, native } from './native.js';
import { SessionLostError, aborted, errorFor, errorNamed } from './errors.js';
import { chunkJson, live, takeError } from './memory.js';

/** @import { Hello, ToolChunk } from './wire.js' */

/** Time an answer may take beyond the call's own limit before the session gives up on it. */
const ANSWER_GRACE_MS = 5000;
/** How long a channel that lost its output may take to report its exit status. */
const EXIT_WAIT_MS = 500;
/** How long a closed channel may take to exit before it is killed. */
const CLOSE_WAIT_MS = 5000;
/** How much of the channel's stderr is kept for the message when it dies. */
const STDERR_KEEP = 2048;
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The two streams of a session channel, as a child process has them (a `ChildProcess` spawned
 * with `stdio: 'pipe'` is one): the session writes frames to `stdin` and reads frames from
 * `stdout`. A child process is also waited for (its exit status goes into the message when it
 * dies) and killed if it outlives `close()`; `stderr`, when given, is kept for that message.
 *
 * @typedef {object} ChannelStreams
 * @property {NodeJS.WritableStream} stdin
 * @property {NodeJS.ReadableStream} stdout
 * @property {NodeJS.ReadableStream | null} [stderr]
 */

/**
 * A session channel: its two streams, or one duplex stream (both directions on one object).
 *
 * @typedef {ChannelStreams | import('node:stream').Duplex} Channel
 */

/**
 * Opens a session channel: runs `command` with `sh -c` inside the sandbox with its stdin and
 * stdout piped (e.g. `spawn('docker', ['exec', '-i', C, 'sh', '-c', command])`) and returns its
 * streams. The command runs as long as the channel stays open.
 *
 * @typedef {(command: string) => Channel | Promise<Channel>} OpenChannel
 */

/**
 * Options of `client.attach`.
 *
 * @typedef {object} AttachOptions
 * @property {boolean} [reopen] when the channel is lost, the next call opens a new one with the
 *   same `open` function (queued until it answers). Default false: calls go one-shot through
 *   `exec` until `attach` is called again.
 * @property {number} [openTimeoutMs] how long the channel may take to answer before it is given
 *   up (calls queued meanwhile then go one-shot). Default: the client's `timeoutMs`.
 * @property {(text: string) => void} [onNotice] receives what the channel says that concerns no
 *   call (a frame it refused, an answer to a cancelled call), for a log
 */

/**
 * One session channel of a client, from `client.attach` or the `*Session` helpers. While it is
 * open every REST call of the client goes over it. Closing it ends the channel's process.
 */
export class Session {
  #n;
  /** @type {any} */
  #ptr = null;
  #command;
  /** @type {NodeJS.WritableStream | null} */
  #write = null;
  /** @type {any} */
  #child = null;
  #stderr = '';
  /** @type {Map<number, {settle: (outcome: 'finished' | 'unsent') => void, onProgress?: (chunk: ToolChunk) => void}>} */
  #pending = new Map();
  /** @type {Hello | null} */
  #hello = null;
  /** @type {SessionLostError | null} */
  #lost = null;
  #closedByHost = false;
  #ending = false;
  /** @type {NodeJS.Timeout | undefined} */
  #openTimer;
  #onNotice;
  #onLost;
  /** @type {Promise<Hello>} */
  #opened;
  /** @type {(hello: Hello) => void} */
  #openedResolve = () => {};
  /** @type {(e: Error) => void} */
  #openedReject = () => {};
  /** @type {Promise<void>} */
  #finished;
  /** @type {() => void} */
  #finishedResolve = () => {};

  /**
   * Not for direct use: `client.attach` (or `localSession`, `dockerSession`, `kubectlSession`)
   * makes a session.
   *
   * @param {any} clientPtr the native client
   * @param {OpenChannel} open
   * @param {{openTimeoutMs: number, onNotice?: (text: string) => void, onLost: (byHost: boolean) => void}} options
   */
  constructor(clientPtr, open, { openTimeoutMs, onNotice, onLost }) {
    const n = native();
    this.#n = n;
    this.#onNotice = onNotice;
    this.#onLost = onLost;
    const out = [null];
    const errOut = [null];
    const rc = n.mcpgw_session_open(clientPtr, out, errOut);
    if (rc !== n.RESULT.OK) {
      throw errOut[0] ? takeError(n, errOut[0]) : errorFor(rc, n.mcpgw_result_message(rc));
    }
    this.#ptr = out[0];
    live.sessions++;
    this.#command = n.mcpgw_session_command(this.#ptr);
    this.#opened = new Promise((resolve, reject) => {
      this.#openedResolve = resolve;
      this.#openedReject = reject;
    });
    // Nobody need wait for the hello: calls are queued until it comes.
    this.#opened.catch(() => {});
    this.#finished = new Promise((resolve) => (this.#finishedResolve = resolve));
    this.#openTimer = setTimeout(
      () => this.#end(`it did not answer within ${openTimeoutMs} ms`),
      Math.min(openTimeoutMs, MAX_TIMER_MS),
    );
    this.#connect(open);
  }

  /**
   * The `sh -c` text the channel runs in the sandbox (`mcpgw-gateway attach ...`).
   *
   * @returns {string}
   */
  get command() {
    return this.#command;
  }

  /** The channel's hello once it answered: the gateway's version, port, pid; whether it launched it. */
  get hello() {
    return this.#hello;
  }

  /** Whether the channel is gone (closed, or it died); calls then go one-shot. */
  get lost() {
    return this.#lost !== null;
  }

  /** Resolves with the hello when the channel answers; rejects with SessionLostError when it dies first. */
  get opened() {
    return this.#opened;
  }

  /**
   * Resolves when the channel is gone: its process exited (or was killed) and the session's
   * native state is freed.
   *
   * @returns {Promise<void>}
   */
  get finished() {
    return this.#finished;
  }

  /**
   * Ends the session: calls in flight fail with SessionLostError, calls not yet written go
   * one-shot, the channel's stdin is closed (so `attach` cancels what was in flight in the
   * gateway and exits), and the promise resolves once its process has exited (killed after 5 s
   * if it has not). Idempotent. The gateway keeps running: `stopGateway` stops it.
   *
   * @returns {Promise<void>}
   */
  async close() {
    this.#closedByHost = true;
    if (this.#ptr !== null && this.#lost === null) {
      this.#n.mcpgw_session_close(this.#ptr);
      this.#pump();
    }
    await this.#finished;
  }

  /**
   * Sends the prepared operation `op` over the session. Resolves `finished` once the op holds its
   * result, `unsent` when the session could not take it or lost it before writing it (the op is
   * then in one-shot form). Rejects with AbortError (a cancel frame is sent) or, when no answer
   * comes within `limitMs` and a grace, TimeoutError (cancelled too). Used by the Client.
   *
   * @internal
   * @param {any} op
   * @param {string} name
   * @param {{signal?: AbortSignal, stream?: boolean, onProgress?: (chunk: ToolChunk) => void, limitMs: number}} options
   * @returns {Promise<'finished' | 'unsent'>}
   */
  run(op, name, { signal, stream = false, onProgress, limitMs }) {
    const n = this.#n;
    if (this.#ptr === null || this.#lost !== null) return Promise.resolve('unsent');
    const idOut = [0];
    if (n.mcpgw_session_submit(this.#ptr, op, stream, idOut) !== n.RESULT.OK) {
      // Refused: an op the session cannot carry is unchanged (run it one-shot); one whose body
      // exceeds the frame limit has failed (its error says so).
      const finished = n.mcpgw_op_result(op) !== n.RESULT.INVALID_STATE;
      return Promise.resolve(finished ? 'finished' : 'unsent');
    }
    const id = Number(idOut[0]);
    this.#flush();
    return new Promise((resolve, reject) => {
      const limit = limitMs + ANSWER_GRACE_MS;
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#pending.delete(id);
      };
      const cancel = () => {
        if (this.#ptr === null) return;
        n.mcpgw_session_cancel(this.#ptr, id);
        this.#flush();
      };
      const onAbort = () => {
        done();
        cancel();
        reject(aborted(name, /** @type {AbortSignal} */ (signal)));
      };
      const timer = setTimeout(
        () => {
          done();
          cancel();
          reject(
            errorNamed(
              'DEADLINE',
              `${name}: no answer came over the session within ${limit} ms; the call was cancelled`,
            ),
          );
        },
        Math.min(limit, MAX_TIMER_MS),
      );
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.set(id, {
        settle: (outcome) => {
          done();
          resolve(outcome);
        },
        onProgress,
      });
    });
  }

  /** Runs `open` and wires the channel's streams to the session. */
  async #connect(open) {
    let channel;
    try {
      channel = await open(this.#command);
    } catch (e) {
      this.#end(`opening it failed: ${/** @type {Error} */ (e)?.message ?? e}`);
      return;
    }
    let streams;
    try {
      streams = channelStreams(channel);
    } catch (e) {
      this.#end(/** @type {Error} */ (e).message);
      return;
    }
    const { read, write, stderr, child } = streams;
    this.#write = write;
    this.#child = child;
    if (this.#lost !== null) {
      // Lost (or closed) while it was opening: nothing to carry.
      this.#shutdown();
      return;
    }
    read.on('data', (b) => this.#feed(b));
    read.on('end', () => this.#end('its output ended'));
    read.on('error', (e) => this.#end(`reading it failed: ${e.message}`));
    write.on('error', (e) => this.#end(`writing to it failed: ${e.message}`));
    stderr?.on('data', (b) => {
      this.#stderr = (this.#stderr + b.toString()).slice(-STDERR_KEEP);
    });
    stderr?.on('error', () => {});
    if (child) {
      child.on('error', (e) => this.#end(`its process failed: ${e.message}`));
      // A process that left a descendant holding its stdout open: its exit ends the channel.
      child.on('exit', () => setTimeout(() => this.#end('its process exited'), EXIT_WAIT_MS));
    }
    this.#flush();
  }

  /** Takes bytes the channel printed. */
  #feed(bytes) {
    if (this.#ptr === null || this.#lost !== null) return;
    this.#n.mcpgw_session_feed(this.#ptr, bytes, bytes.length);
    this.#pump();
    this.#flush();
  }

  /** The channel ended (or was given up on): tells the session why, once. */
  async #end(why) {
    if (this.#ending || this.#ptr === null || this.#lost !== null) return;
    this.#ending = true;
    const child = this.#child;
    if (child && child.exitCode === null && child.signalCode === null) {
      // Its exit status says more than "the output ended" (docker: 137 when the container died).
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, EXIT_WAIT_MS);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
    }
    if (this.#ptr === null || this.#lost !== null) return;
    const parts = [why];
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      parts.push(
        child.exitCode !== null ? `exit status ${child.exitCode}` : `killed by ${child.signalCode}`,
      );
    }
    const stderr = this.#stderr.trim();
    if (stderr) parts.push(`stderr: ${stderr}`);
    this.#n.mcpgw_session_feed_eof(this.#ptr, parts.join('; ').replaceAll('\0', ' '));
    this.#pump();
  }

  /** Writes what the session has for the channel. */
  #flush() {
    const n = this.#n;
    if (this.#ptr === null || this.#write === null || this.#lost !== null) return;
    const bufOut = [null];
    const lenOut = [0];
    if (n.mcpgw_session_output(this.#ptr, bufOut, lenOut) !== n.RESULT.OK) return;
    const len = Number(lenOut[0]);
    if (len === 0) return;
    const bytes = copyBytes(bufOut[0], len);
    n.mcpgw_session_consume(this.#ptr, len);
    this.#write.write(bytes);
  }

  /** Handles every event the session has now. */
  #pump() {
    const n = this.#n;
    let lostText = null;
    while (this.#ptr !== null) {
      const out = [null];
      if (n.mcpgw_session_next_event(this.#ptr, out) !== n.RESULT.OK) break;
      const event = out[0];
      try {
        const kind = n.mcpgw_session_event_get_kind(event);
        const id = Number(n.mcpgw_session_event_id(event));
        switch (kind) {
          case EVENT.OPENED:
            clearTimeout(this.#openTimer);
            this.#hello = JSON.parse(n.mcpgw_session_event_text(event));
            this.#openedResolve(/** @type {Hello} */ (this.#hello));
            break;
          case EVENT.PROGRESS: {
            const pending = this.#pending.get(id);
            if (pending?.onProgress) {
              try {
                pending.onProgress(chunkJson(n, n.mcpgw_session_event_chunk(event)));
              } catch (e) {
                // Runs inside the channel's data handler: a throw here must not crash the process.
                this.#notice(`a progress chunk of call ${id} was dropped: ${e}`);
              }
            }
            break;
          }
          case EVENT.FINISHED:
            this.#pending.get(id)?.settle('finished');
            break;
          case EVENT.UNSENT:
            this.#pending.get(id)?.settle('unsent');
            break;
          case EVENT.NOTICE:
            this.#notice(n.mcpgw_session_event_text(event));
            break;
          case EVENT.LOST:
            lostText = n.mcpgw_session_event_text(event) ?? 'the session channel is lost';
            break;
        }
      } finally {
        n.mcpgw_session_event_free(event);
      }
      if (lostText !== null) {
        this.#lose(lostText);
        return;
      }
    }
  }

  /** Hands `text` to the `onNotice` callback, whose own failure is ignored. */
  #notice(text) {
    try {
      this.#onNotice?.(text);
    } catch {
      // A logging callback that throws must not take the channel down.
    }
  }

  /** The session is lost: every call it carried has been settled; end the channel. */
  #lose(text) {
    clearTimeout(this.#openTimer);
    this.#lost = /** @type {SessionLostError} */ (errorNamed('SESSION_LOST', text));
    this.#openedReject(this.#lost);
    this.#onLost(this.#closedByHost);
    this.#shutdown();
  }

  /** Closes the channel's stdin, waits for its process (killing it if it lingers), frees the session. */
  async #shutdown() {
    const child = this.#child;
    try {
      this.#write?.end();
    } catch {
      // Already closed.
    }
    if (child && child.exitCode === null && child.signalCode === null) {
      await new Promise((resolve) => {
        const timer = setTimeout(() => {
          child.kill('SIGKILL');
          resolve(undefined);
        }, CLOSE_WAIT_MS);
        child.once('exit', () => {
          clearTimeout(timer);
          resolve(undefined);
        });
      });
    }
    if (this.#ptr !== null) {
      this.#n.mcpgw_session_free(this.#ptr);
      this.#ptr = null;
      live.sessions--;
    }
    this.#finishedResolve();
  }
}

/**
 * The streams of what an OpenChannel returned.
 *
 * @param {any} channel
 */
function channelStreams(channel) {
  if (channel && channel.stdin && channel.stdout) {
    const isChild = typeof channel.kill === 'function' && 'exitCode' in channel;
    return {
      read: channel.stdout,
      write: channel.stdin,
      stderr: channel.stderr ?? null,
      child: isChild ? channel : null,
    };
  }
  if (channel && typeof channel.write === 'function' && typeof channel.on === 'function') {
    return { read: channel, write: channel, stderr: null, child: null };
  }
  throw new TypeError(
    'the open function must return a child process, {stdin, stdout} streams or a duplex stream',
  );
}
