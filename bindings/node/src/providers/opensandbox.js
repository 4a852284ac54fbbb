// An OpenSandbox sandbox as a backend, through OpenSandbox's own SDK (npm
// `@alibaba-group/opensandbox`): `opensandbox(sandbox)`.
//
// - One-shot commands: `commands.run` (its output comes as lines, joined again with their
//   newlines: the library's commands end what they print with one); a command's stdin is
//   written first with `files.writeFiles` (the command API has none); a stopped call is
//   `interrupt`-ed (execd runs a command to its end when its client goes away, and the SDK
//   ignores the abort signal once the answer began).
// - The session channel: execd's pipe session (`POST /pty`, then its WebSocket with `?pty=0`:
//   binary stdin, stdout and stderr frames, an `exit` frame) at the endpoint and with the
//   headers the SDK gives (`getEndpoint`). The SDK does not wrap it; it needs the `ws` package.
//   Closing the channel's stdin is a SIGTERM frame (the pipe session has no end of input;
//   `attach` ends on SIGTERM as at the end of its input), killing it `DELETE /pty/{id}`. The
//   command keeps its shell alive for 50 ms after it exits: execd sends the exit frame as soon
//   as the process ends, before the last output it read.
// - What the SDK raises is handed to the library as `Class: message` with the sandbox's state
//   (`getInfo`) appended, and the library's rules for OpenSandbox tell a sandbox that is gone
//   (its container exited), paused or unreachable from the command's own failure.

import { invalid } from '../errors.js';
import {
  TIME_LIMIT_GRACE_MS,
  describe,
  sdkChannel,
  sh,
  stdinPath,
  withStdinFrom,
  providerBackend,
} from './channel.js';

/** @import { Backend } from '../backends.js' */

/** execd's port inside the sandbox. */
const EXECD_PORT = 44772;

/** OpenSandbox's output messages (one per line, the newline stripped) as bytes. */
function lines(messages) {
  const texts = (messages ?? []).map((/** @type {any} */ m) => m?.text ?? '');
  return texts.length ? Buffer.from(`${texts.join('\n')}\n`) : Buffer.alloc(0);
}

/** execd reports a process killed by a signal as -1: the shell's 137. */
const status = (/** @type {number | null | undefined} */ code) =>
  code === null || code === undefined || code < 0 ? 137 : code;

/**
 * An OpenSandbox sandbox (a `Sandbox` of `@alibaba-group/opensandbox`) as a backend: commands
 * through its command API, the session channel through execd's pipe session. `headers` go to
 * execd besides those of the sandbox's connection configuration (e.g. `X-EXECD-ACCESS-TOKEN`).
 *
 * @param {any} sandbox
 * @param {{ headers?: Record<string, string> }} [options]
 * @returns {Backend}
 */
export function opensandbox(sandbox, options = {}) {
  if (typeof sandbox?.getEndpoint !== 'function' || !sandbox?.commands) {
    throw invalid('opensandbox() takes an OpenSandbox Sandbox (@alibaba-group/opensandbox)');
  }
  const extra = { ...(sandbox.connectionConfig?.headers ?? {}), ...(options.headers ?? {}) };

  /** `e` with the sandbox's state in the reason the library reads. */
  async function explained(e) {
    let state;
    try {
      const info = await Promise.race([
        sandbox.getInfo(),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), 5000)),
      ]);
      state = `state: ${info?.status?.state ?? '?'}, ${info?.status?.reason ?? '?'}`;
    } catch (failed) {
      state = `its state unreadable: ${describe(failed)}`;
    }
    const err = e instanceof Error ? e : new Error(String(e));
    /** @type {any} */ (err).mcpgwReason = `${describe(e)} (sandbox ${state})`;
    return err;
  }

  /** @type {import('../backends.js').RunFn} */
  async function run(command, { timeoutMs, signal, stdin }) {
    let text = sh(command);
    try {
      if (stdin) {
        const path = stdinPath();
        await sandbox.files.writeFiles([{ path, data: stdin, mode: 600 }]);
        text = withStdinFrom(command, path);
      }
      /** @type {string | null} */
      let id = null;
      const stop = () => {
        if (id) sandbox.commands.interrupt(id).catch(() => {});
      };
      signal.addEventListener('abort', stop, { once: true });
      try {
        const r = await sandbox.commands.run(
          text,
          { timeoutSeconds: Math.ceil((timeoutMs + TIME_LIMIT_GRACE_MS) / 1000) },
          { onInit: (/** @type {any} */ init) => void (id = init.id) },
        );
        return {
          exitCode: status(r.exitCode),
          stdout: lines(r.logs?.stdout),
          stderr: lines(r.logs?.stderr),
        };
      } finally {
        signal.removeEventListener('abort', stop);
      }
    } catch (e) {
      throw await explained(e);
    }
  }

  /** @type {import('../backends.js').OpenFn} */
  async function open(command) {
    const { default: WebSocket } = await import('ws');
    let endpoint;
    try {
      endpoint = await sandbox.getEndpoint(EXECD_PORT);
    } catch (e) {
      throw await explained(e);
    }
    const headers = { ...(endpoint.headers ?? {}), ...extra };
    const base = endpoint.endpoint;
    const started = await fetch(`http://${base}/pty`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ command: `${sh(command)}; s=$?; sleep 0.05; exit $s` }),
    });
    if (!started.ok) {
      throw new Error(`execd refused the pipe session: ${started.status} ${await started.text()}`);
    }
    const session = (await started.json()).session_id;
    const ws = new WebSocket(`ws://${base}/pty/${session}/ws?pty=0`, {
      headers,
      perMessageDeflate: false,
      maxPayload: 0,
    });
    await new Promise((resolve, reject) => {
      ws.once('message', (data) => {
        const hello = JSON.parse(data.toString());
        if (hello.type === 'connected') resolve(undefined);
        else reject(new Error(`execd's pipe session did not connect: ${data}`));
      });
      ws.once('error', reject);
      ws.once('unexpected-response', (_req, res) =>
        reject(new Error(`execd refused the pipe session's WebSocket: ${res.statusCode}`)),
      );
    });
    const send = (/** @type {Buffer} */ data) =>
      new Promise((resolve, reject) =>
        ws.send(Buffer.concat([Buffer.from([0]), data]), (e) =>
          e ? reject(e) : resolve(undefined),
        ),
      );
    const ch = sdkChannel({
      send,
      close: async () => ws.send(JSON.stringify({ type: 'signal', signal: 'SIGTERM' })),
      kill: async () => {
        await fetch(`http://${base}/pty/${session}`, { method: 'DELETE', headers });
      },
    });
    let ended = false;
    ws.on('message', (data, binary) => {
      const bytes = /** @type {Buffer} */ (data);
      if (binary) {
        if (bytes[0] === 1) ch.out(bytes.subarray(1));
        else if (bytes[0] === 2) ch.err(bytes.subarray(1));
        return;
      }
      const message = JSON.parse(bytes.toString());
      if (message.type === 'exit') {
        ended = true;
        ch.exit(status(message.exit_code));
        ws.close();
      } else if (message.type === 'error') {
        ended = true;
        explained(new Error(`execd's pipe session failed: ${bytes}`)).then(ch.fail);
      }
    });
    ws.on('close', (code) => {
      if (ended) return;
      ended = true;
      const e = new Error(`execd's pipe session closed without an exit (${code})`);
      e.name = 'ConnectionClosed';
      explained(e).then(ch.fail);
    });
    ws.on('error', () => {});
    return ch;
  }

  return providerBackend('opensandbox', String(sandbox.id ?? 'opensandbox'), run, open);
}
