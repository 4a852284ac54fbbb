// An E2B sandbox as a backend, through E2B's own SDK (npm `e2b`): `e2b(sandbox)`.
//
// - One-shot commands: `commands.run` (started in the background and awaited, so that a stopped
//   call kills its process); a command's stdin is written first with `files.write` (far faster
//   than `sendStdin`, which carries base64 in JSON).
// - The session channel: a background command with its stdin open and no time limit, its output
//   streamed to callbacks, its input sent with `sendStdin` one write after the other (concurrent
//   sends may arrive out of order), closed with `closeStdin`.
// - What the SDK raises (`SandboxError: 2: [unknown] terminated`, `AuthenticationError`, ...) is
//   handed to the library as `Class: message`, and the library's rules for E2B tell a sandbox
//   that is gone, not running or unreachable from the command's own failure. A non-zero exit
//   (`CommandExitError`) is the command's result.

import { invalid } from '../errors.js';
import {
  TIME_LIMIT_GRACE_MS,
  asBuffer,
  sdkChannel,
  sh,
  stdinPath,
  withStdinFrom,
  providerBackend,
} from './channel.js';

/** @import { Backend, ExecResult } from '../backends.js' */

/** The result a `CommandExitError` carries (E2B throws one for a non-zero exit), else null. */
function exitOf(e) {
  const err = /** @type {any} */ (e);
  if (err?.name !== 'CommandExitError' || !Number.isInteger(err?.exitCode)) return null;
  // A command killed by a signal reports -1 ("signal: killed"): the shell's 137.
  return {
    exitCode: err.exitCode < 0 ? 137 : err.exitCode,
    stdout: asBuffer(err.stdout),
    stderr: asBuffer(err.stderr),
  };
}

/**
 * An E2B sandbox (a `Sandbox` of the npm `e2b` SDK) as a backend: commands run as `user` (the
 * sandbox's default user when not given), the session channel through a background command
 * with stdin.
 *
 * @param {any} sandbox
 * @param {{ user?: string }} [options]
 * @returns {Backend}
 */
export function e2b(sandbox, options = {}) {
  if (typeof sandbox?.commands?.run !== 'function') {
    throw invalid('e2b() takes an E2B Sandbox (the npm e2b SDK)');
  }
  const user = options.user ? { user: options.user } : {};
  const commands = sandbox.commands;

  /** @type {import('../backends.js').RunFn} */
  async function run(command, { timeoutMs, signal, stdin }) {
    let text = sh(command);
    if (stdin) {
      const path = stdinPath();
      await sandbox.files.write(path, stdin, user);
      text = withStdinFrom(command, path);
    }
    const handle = await commands.run(text, {
      background: true,
      timeoutMs: timeoutMs + TIME_LIMIT_GRACE_MS,
      ...user,
    });
    const stop = () => handle.kill().catch(() => {});
    signal.addEventListener('abort', stop, { once: true });
    try {
      const r = await handle.wait();
      return { exitCode: r.exitCode, stdout: asBuffer(r.stdout), stderr: asBuffer(r.stderr) };
    } catch (e) {
      const result = exitOf(e);
      if (!result) throw e;
      return result;
    } finally {
      signal.removeEventListener('abort', stop);
    }
  }

  /** @type {import('../backends.js').OpenFn} */
  async function open(command) {
    /** @type {ReturnType<typeof sdkChannel> | null} */
    let channel = null;
    /** @type {[boolean, unknown][]} */
    const early = [];
    const take = (/** @type {boolean} */ err) => (/** @type {unknown} */ data) => {
      if (!channel) early.push([err, data]);
      else if (err) channel.err(data);
      else channel.out(data);
    };
    const handle = await commands.run(sh(command), {
      background: true,
      stdin: true,
      timeoutMs: 0,
      onStdout: take(false),
      onStderr: take(true),
      ...user,
    });
    const pid = handle.pid;
    const ch = sdkChannel({
      send: (data) => commands.sendStdin(pid, data),
      close: () => commands.closeStdin(pid),
      kill: () => handle.kill(),
    });
    channel = ch;
    for (const [err, data] of early) (err ? ch.err : ch.out)(data);
    handle.wait().then(
      (/** @type {any} */ r) => ch.exit(r.exitCode),
      (/** @type {unknown} */ e) => {
        const result = exitOf(e);
        if (result) ch.exit(result.exitCode);
        else ch.fail(e);
      },
    );
    return ch;
  }

  return providerBackend('e2b', String(sandbox.sandboxId ?? 'e2b'), run, open);
}
