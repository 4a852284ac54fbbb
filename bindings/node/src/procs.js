// The processes the host driver asks for, in Node's own I/O: a command run to its end (RUN), a
// long-lived channel with its pipes (OPEN), each spawned from the driver's argv in a process
// group of its own (never through a host shell), or handed to the exec backend's own functions.
// Each reports what happened to the driver through `report`, exactly one end per process.

import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { errorNamed } from './errors.js';
import { describe } from './providers/channel.js';
import { STDIN_KIND } from './ffi.js';

/** @import { ChildProcess } from 'node:child_process' */
/** @import { Channel, OpenFn, RunFn } from './backends.js' */

/**
 * Where a process's events go (the driver's `mcpgw_host_on_*`).
 *
 * @typedef {object} Report
 * @property {(code: number, stdout?: Buffer, stderr?: Buffer) => void} exit it ended
 * @property {(reason: string, cause?: unknown) => void} failed it could not be run
 * @property {(bytes: Buffer) => void} data the channel's stdout
 * @property {(bytes: Buffer) => void} stderr the channel's stderr
 * @property {() => void} eof the channel's stdout ended
 */

/**
 * A process under way, as the driver steers it.
 *
 * @typedef {object} Proc
 * @property {() => void} kill kill it and what it started
 * @property {(bytes: Buffer) => void} [write] write to its stdin
 * @property {() => void} [closeInput] close its stdin
 */

/**
 * What a RUN or OPEN action asks for.
 *
 * @typedef {object} Spec
 * @property {string[]} argv the program and its arguments (empty for the exec backend)
 * @property {string | null} shell the `sh -c` text for the exec backend
 * @property {string | undefined} cwd
 * @property {number} stdinKind `STDIN_KIND`
 * @property {Buffer | null} stdin the bytes of a BYTES stdin
 * @property {number} timeoutMs
 */

/** A shell's exit status of a process that ended with `code` or `signal`. */
function status(code, signal) {
  return code ?? 128 + (signal ? (constants.signals[signal] ?? 0) : 0);
}

/** Exactly one end per process: later ones are dropped. */
function once(fn) {
  let done = false;
  return (/** @type {() => void} */ end) => {
    if (done) return;
    done = true;
    fn?.();
    end();
  };
}

/**
 * Kills `child`'s process group (it leads one; the group may outlive it, what it started still
 * holding its pipes), or the child alone when it leads none.
 */
function killTree(child) {
  if (!child.pid) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}

/** Spawns `argv` in a process group of its own; a spawn refused at once is reported. */
function spawnGroup(spec, stdio, report) {
  const [file, ...args] = spec.argv;
  try {
    return spawn(file, args, { cwd: spec.cwd, stdio, detached: true });
  } catch (e) {
    const reason = `cannot run ${file}: ${/** @type {Error} */ (e).message}`;
    queueMicrotask(() => report.failed(reason, e));
    return null;
  }
}

/**
 * Runs a RUN action's argv to its end: its stdin `/dev/null`, the given bytes, or a pipe held
 * open (and empty) until it exits; its output collected and reported with its exit status.
 *
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export function runCommand(spec, report) {
  const piped = spec.stdinKind !== STDIN_KIND.NULL;
  const child = spawnGroup(spec, [piped ? 'pipe' : 'ignore', 'pipe', 'pipe'], report);
  if (!child) return { kill() {} };
  /** @type {Buffer[]} */
  const out = [];
  /** @type {Buffer[]} */
  const err = [];
  const end = once();
  // A held stdin ends when the process does: in the sandbox that tells the command's watcher
  // that the host gave up (what the command started may hold stdout open until then).
  child.on('exit', () => child.stdin?.destroy());
  child.stdout?.on('data', (b) => out.push(b));
  child.stderr?.on('data', (b) => err.push(b));
  // A command that exits without reading all of its input closes the pipe: not an error here.
  child.stdin?.on('error', () => {});
  if (spec.stdinKind === STDIN_KIND.BYTES) child.stdin?.end(spec.stdin);
  child.on('error', (e) => end(() => report.failed(`cannot run ${spec.argv[0]}: ${e.message}`, e)));
  child.on('close', (code, signal) =>
    end(() => report.exit(status(code, signal), Buffer.concat(out), Buffer.concat(err))),
  );
  return { kill: () => killTree(child) };
}

/**
 * Starts an OPEN action's argv with its three pipes: stdout and stderr are reported as they
 * come, then the end of stdout and the exit.
 *
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export function openChannel(spec, report) {
  const child = spawnGroup(spec, ['pipe', 'pipe', 'pipe'], report);
  if (!child) return { kill() {} };
  return follow(child, report, () => killTree(child));
}

/**
 * Follows a channel: its stdout, stderr and end go to `report`; writes queue until it exists.
 *
 * @param {ChildProcess | {stdin: any, stdout: any, stderr?: any}} channel
 * @param {Report} report
 * @param {() => void} kill
 * @returns {Required<Proc>}
 */
function follow(channel, report, kill) {
  const end = once();
  const { stdin, stdout, stderr } = channel;
  stdin.on('error', () => {});
  stdout.on('data', (b) => report.data(Buffer.isBuffer(b) ? b : Buffer.from(b)));
  stderr?.on('data', (b) => report.stderr(Buffer.isBuffer(b) ? b : Buffer.from(b)));
  stdout.once('end', () => report.eof());
  const isProcess = 'pid' in channel && 'exitCode' in channel;
  const exited = /** @type {any} */ (channel).exited;
  if (isProcess) {
    channel.on('error', (e) => end(() => report.failed(`cannot run the channel: ${e.message}`, e)));
    channel.on('exit', (code, signal) => end(() => report.exit(status(code, signal))));
  } else if (typeof exited?.then === 'function') {
    // An SDK's channel says how it ended: an exit status, or what the SDK raised.
    /** @type {Promise<number>} */ (exited).then(
      (code) => end(() => report.exit(code)),
      (e) => end(() => report.failed(describe(e), e)),
    );
  } else {
    // Streams without a process: their end is the channel's.
    stdout.once('close', () => end(() => report.failed("the channel's output ended")));
  }
  return {
    write: (bytes) => stdin.write(bytes),
    closeInput: () => stdin.end(),
    kill: () => {
      kill();
      // A process reports its own exit; streams end here.
      if (!isProcess) end(() => report.failed('the channel was closed'));
    },
  };
}

/**
 * Runs a RUN action through the exec backend's own function.
 *
 * @param {RunFn} run
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export function runExec(run, spec, report) {
  const stop = new AbortController();
  const end = once();
  const options = { timeoutMs: spec.timeoutMs, signal: stop.signal };
  if (spec.stdin) Object.assign(options, { stdin: spec.stdin });
  // An async wrapper turns a synchronous throw of the exec function into a rejection.
  (async () => run(/** @type {string} */ (spec.shell), options))().then(
    (r) => {
      let result;
      try {
        result = execResult(r);
      } catch (e) {
        return end(() => report.failed(/** @type {Error} */ (e).message, e));
      }
      end(() => report.exit(result.exitCode, result.stdout, result.stderr));
    },
    (e) => end(() => report.failed(describe(e), e)),
  );
  return {
    kill: () => {
      stop.abort(errorNamed('CANCELLED', 'the command was stopped (cancelled, or out of time)'));
      end(() => report.failed('the command was stopped'));
    },
  };
}

/**
 * Opens an OPEN action's channel through the exec backend's opener.
 *
 * @param {OpenFn | undefined} open
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export function openExec(open, spec, report) {
  /** @type {Required<Proc> | null} */
  let channel = null;
  /** @type {((c: Required<Proc>) => void)[]} */
  const queued = [];
  let killed = false;
  const failed = once();
  (async () => {
    if (!open) {
      throw new Error('this exec backend has no channel opener: pass exec(run, { open })');
    }
    return open(/** @type {string} */ (spec.shell));
  })().then(
    (c) => {
      const streams = channelStreams(c);
      channel = follow(streams, report, () => {
        if ('pid' in streams) killTree(streams);
        else if (typeof (/** @type {any} */ (c).kill) === 'function') /** @type {any} */ (c).kill();
        else for (const s of [streams.stdin, streams.stdout]) s.destroy?.();
      });
      for (const step of queued.splice(0)) step(channel);
      if (killed) channel.kill();
    },
    (e) => failed(() => report.failed(`the channel could not be opened: ${describe(e)}`, e)),
  );
  const later = (/** @type {(c: Required<Proc>) => void} */ step) =>
    channel ? step(channel) : queued.push(step);
  return {
    write: (bytes) => later((c) => c.write(bytes)),
    closeInput: () => later((c) => c.closeInput()),
    kill: () => {
      killed = true;
      if (channel) channel.kill();
    },
  };
}

/**
 * The stdin, stdout and stderr of what a channel opener returned; throws naming what is wrong.
 *
 * @param {Channel} c
 * @returns {ChildProcess | {stdin: any, stdout: any, stderr?: any}}
 */
function channelStreams(c) {
  const any = /** @type {any} */ (c);
  if (any?.stdin?.write && any?.stdout?.on) return any;
  if (typeof any?.write === 'function' && typeof any?.on === 'function') {
    return { stdin: any, stdout: any };
  }
  throw new TypeError(
    'the channel opener must return a child process, {stdin, stdout} streams or a duplex stream',
  );
}

/** Bytes of an exec result field: Buffer/Uint8Array, ArrayBuffer, string (UTF-8) or nothing. */
function bytes(value, what) {
  if (value == null) return Buffer.alloc(0);
  if (Buffer.isBuffer(value)) return value;
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.length);
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  if (value instanceof ArrayBuffer) return Buffer.from(value);
  throw new TypeError(`${what} must be a Buffer, Uint8Array or string, not ${typeof value}`);
}

/**
 * The exec function's answer, checked; a TypeError says what is wrong with it.
 *
 * @returns {{exitCode: number, stdout: Buffer, stderr: Buffer}}
 */
function execResult(r) {
  if (typeof r === 'function') {
    throw new TypeError('the exec function returned a function, not {exitCode, stdout, stderr}');
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
