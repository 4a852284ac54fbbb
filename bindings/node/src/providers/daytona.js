// A Daytona sandbox as a backend, through Daytona's own SDK (npm `@daytonaio/sdk`):
// `daytona(sandbox)`.
//
// - One-shot commands: `process.executeCommand`, which gives stdout and stderr as one text: the
//   command writes its stderr to a file and prints it after a separator, and the two are told
//   apart again here. A command's stdin is written first with `fs.uploadFile`.
// - The session channel: a command of a session of its own, run asynchronously with its input
//   not echoed, its output streamed by `getSessionCommandLogs` with callbacks, its input sent
//   with `sendSessionCommandInput` (whole lines: Daytona ends each input with a newline, and
//   the channel's frames are lines). A session has no end of input: closing the channel and
//   killing it both delete the session. Daytona's daemon reads a command's output from a file
//   it polls every 20 ms: that is this channel's floor.
// - What the SDK raises is handed to the library as `Class: message`, and the library's rules
//   for Daytona tell a sandbox that is gone or unreachable from the command's own failure.

import { randomBytes } from 'node:crypto';
import { invalid } from '../errors.js';
import {
  TIME_LIMIT_GRACE_MS,
  quote,
  sdkChannel,
  sh,
  stdinPath,
  providerBackend,
} from './channel.js';

/** @import { Backend } from '../backends.js' */

/** Between a one-shot command's stdout and its stderr, in the one text `executeCommand` gives. */
const STDERR_MARK = '\x1emcpgw-stderr\x1e';
/** How long input may wait for a new command's input pipe (the daemon makes it just after). */
const INPUT_READY_MS = 2000;

/**
 * `command` (the library's text) run with `sh -c`, reading `stdin` (a path it removes) when
 * given, its stderr printed after its stdout and a separator.
 */
function split(command, stdin) {
  const err = quote(`/tmp/mcpgw-stderr-${randomBytes(8).toString('hex')}`);
  let text = sh(command);
  if (stdin) {
    const path = quote(stdin);
    text = `${text} <${path} 2>${err}; s=$?; rm -f ${path}`;
  } else {
    text = `${text} 2>${err}; s=$?`;
  }
  return `${text}; printf '${STDERR_MARK}'; cat ${err} 2>/dev/null; rm -f ${err}; exit $s`;
}

/**
 * A Daytona sandbox (a `Sandbox` of `@daytonaio/sdk`) as a backend: commands through
 * `process.executeCommand`, the session channel through a session command.
 *
 * @param {any} sandbox
 * @returns {Backend}
 */
export function daytona(sandbox) {
  if (typeof sandbox?.process?.executeCommand !== 'function') {
    throw invalid('daytona() takes a Daytona Sandbox (@daytonaio/sdk)');
  }
  const process = sandbox.process;

  /** @type {import('../backends.js').RunFn} */
  async function run(command, { timeoutMs, stdin }) {
    /** @type {string | null} */
    let path = null;
    if (stdin) {
      path = stdinPath();
      await sandbox.fs.uploadFile(Buffer.from(stdin), path);
    }
    const timeout = Math.ceil((timeoutMs + TIME_LIMIT_GRACE_MS) / 1000);
    const r = await process.executeCommand(split(command, path), undefined, undefined, timeout);
    const output = r.result ?? '';
    const at = output.lastIndexOf(STDERR_MARK);
    const [out, err] =
      at < 0 ? [output, ''] : [output.slice(0, at), output.slice(at + STDERR_MARK.length)];
    const code = Number.isInteger(r.exitCode) ? r.exitCode : -1;
    // The daemon could not start the shell (exit -1, its reason as the output).
    if (code < 0) throw new Error(`Daytona could not run the command: ${output.trim()}`);
    return { exitCode: code, stdout: Buffer.from(out), stderr: Buffer.from(err) };
  }

  /** @type {import('../backends.js').OpenFn} */
  async function open(command) {
    const session = `mcpgw-${randomBytes(8).toString('hex')}`;
    await process.createSession(session);
    let started;
    try {
      started = await process.executeSessionCommand(session, {
        command: sh(command),
        runAsync: true,
        suppressInputEcho: true,
      });
    } catch (e) {
      await process.deleteSession(session).catch(() => {});
      throw e;
    }
    const cmd = started.cmdId;
    let ended = false;
    const end = async () => {
      if (ended) return;
      ended = true;
      await process.deleteSession(session).catch(() => {});
    };
    const send = async (/** @type {Buffer} */ data) => {
      const text = data.toString('utf8');
      const deadline = Date.now() + INPUT_READY_MS;
      for (;;) {
        try {
          return await process.sendSessionCommandInput(session, cmd, text);
        } catch (e) {
          if (
            !String(/** @type {any} */ (e)?.message).includes('input pipe') ||
            Date.now() > deadline
          ) {
            throw e;
          }
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      }
    };
    const ch = sdkChannel({ send, close: end, kill: end });
    (async () => {
      try {
        await process.getSessionCommandLogs(session, cmd, ch.out, ch.err);
        const finished = await process.getSessionCommand(session, cmd);
        ch.exit(Number.isInteger(finished.exitCode) ? finished.exitCode : 137);
      } catch (e) {
        // A session deleted by the channel's own close or kill ended it.
        if (ended) ch.exit(143);
        else ch.fail(e);
      } finally {
        await end();
      }
    })();
    return ch;
  }

  return providerBackend('daytona', String(sandbox.id ?? 'daytona'), run, open);
}
