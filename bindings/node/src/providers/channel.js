// What the provider adapters share: a session channel fed by an SDK's callbacks, the `sh -c`
// wrapping of the library's command text, and a one-shot command's stdin carried by the SDK's
// file API.
//
// A provider's SDK streams a long-lived command's output to callbacks (text, or bytes) and takes
// its input by calls; `sdkChannel` turns that into the channel the binding's loop follows:
// `stdin` a writable whose writes go out one after the other through the SDK, `stdout` and
// `stderr` readables the callbacks fill, and `exited`, a promise of the exit status that
// rejects with what the SDK raised when it lost the command (the library reads the provider's
// words in it).

import { randomBytes } from 'node:crypto';
import { PassThrough, Writable } from 'node:stream';

/** Where a one-shot command's stdin is written before it runs; removed by the command. */
export const STDIN_DIR = '/tmp';

/**
 * What an SDK's command is given beyond the library's own time limit (ms): the library kills
 * the command at its limit, and the SDK's deadline only backs that up.
 */
export const TIME_LIMIT_GRACE_MS = 5000;

/** `text` quoted for a POSIX shell. */
export function quote(text) {
  return `'${text.replaceAll("'", `'\\''`)}'`;
}

/** The library's command text as one `sh -c` command. */
export function sh(command) {
  return `sh -c ${quote(command)}`;
}

/** A fresh path in the sandbox for a command's stdin. */
export function stdinPath() {
  return `${STDIN_DIR}/mcpgw-stdin-${randomBytes(8).toString('hex')}`;
}

/** `command` (the library's text) reading its stdin from `path`, which it removes. */
export function withStdinFrom(command, path) {
  const p = quote(path);
  return `${sh(command)} <${p}; s=$?; rm -f ${p}; exit $s`;
}

/** An SDK's output chunk as bytes (text is UTF-8). */
export function asBuffer(data) {
  if (data === null || data === undefined) return Buffer.alloc(0);
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  return Buffer.from(/** @type {Uint8Array} */ (data));
}

/**
 * What an SDK raised, as the library reads it: `Class: message` (or what an adapter set as its
 * `mcpgwReason`: that with the sandbox's state, say).
 */
export function describe(e) {
  const err = /** @type {any} */ (e);
  if (typeof err?.mcpgwReason === 'string') return err.mcpgwReason;
  const name = err?.name && err.name !== 'Error' ? err.name : (err?.constructor?.name ?? 'Error');
  const message = err?.message ?? String(e);
  return message ? `${name}: ${message}` : name;
}

/**
 * A long-lived command of a provider SDK as the binding's loop follows a channel.
 *
 * @param {object} sdk
 * @param {(data: Buffer) => Promise<unknown>} sdk.send sends input, in order
 * @param {() => Promise<unknown>} sdk.close closes the command's stdin
 * @param {() => Promise<unknown>} sdk.kill ends the command
 */
export function sdkChannel({ send, close, kill }) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  /** @type {(code: number) => void} */
  let resolve = () => {};
  /** @type {(e: unknown) => void} */
  let reject = () => {};
  /** @type {Promise<number>} */
  const exited = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // Read by the loop; a failure is also reported there, not as an unhandled rejection.
  exited.catch(() => {});
  let settled = false;
  const stdin = new Writable({
    write(chunk, _encoding, done) {
      send(asBuffer(chunk)).then(
        () => done(),
        (e) => done(e),
      );
    },
    final(done) {
      close().then(
        () => done(),
        () => done(),
      );
    },
  });
  const settle = (/** @type {() => void} */ how) => {
    if (settled) return;
    settled = true;
    stdout.end();
    stderr.end();
    how();
  };
  return {
    stdin,
    stdout,
    stderr,
    exited,
    /** Output the SDK delivered on stdout. */
    out: (/** @type {unknown} */ data) => settled || stdout.write(asBuffer(data)),
    /** Output the SDK delivered on stderr. */
    err: (/** @type {unknown} */ data) => settled || stderr.write(asBuffer(data)),
    /** The command ended with exit status `code`. */
    exit: (/** @type {number} */ code) => settle(() => resolve(code)),
    /** The SDK lost the command. */
    fail: (/** @type {unknown} */ e) => settle(() => reject(e)),
    /** Ends the command. */
    kill: () => {
      if (!settled) kill().catch(() => {});
    },
  };
}

/**
 * A provider adapter's backend: the library's configuration of `kind` for sandbox `id`, and
 * the adapter's `run` and `open`.
 *
 * @param {'e2b' | 'opensandbox' | 'daytona'} kind
 * @param {string} id
 * @param {import('../backends.js').RunFn} run
 * @param {import('../backends.js').OpenFn} open
 * @returns {import('../backends.js').Backend}
 */
export function providerBackend(kind, id, run, open) {
  return Object.freeze({ kind, config: Object.freeze({ kind, sandbox: id }), run, open });
}
