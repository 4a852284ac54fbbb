// Ready-made exec functions: run a command with `sh -c` on this machine, in a Docker container or
// in a Kubernetes pod, through child_process (never a shell on the host side: the argv is built
// here, so no byte of the command is interpreted before it reaches the sandbox's `sh -c`). Each
// passes the command's standard input when it has one, and says so (`exec.stdin = true`).

import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/**
 * What an exec function reports about one command it ran.
 *
 * @typedef {object} ExecResult
 * @property {number} exitCode the command's exit status (128 + N when signal N ended it)
 * @property {Uint8Array | ArrayBuffer | string | null} [stdout] everything it wrote to stdout
 *   (text is taken as UTF-8)
 * @property {Uint8Array | ArrayBuffer | string | null} [stderr] everything it wrote to stderr
 */

/**
 * What an exec function is given besides the command.
 *
 * @typedef {object} ExecOptions
 * @property {number} timeoutMs how long the command may take, in milliseconds (for backends with
 *   a timeout of their own)
 * @property {AbortSignal} signal aborts when the caller aborts the call or the command's time is
 *   up: stop the command then. The call does not wait for the exec after that.
 * @property {Uint8Array} [stdin] bytes to write to the command's standard input, then close it.
 *   Given only to an exec that declares `stdin: true` (the gateway binary upload, large bodies).
 */

/**
 * Runs `command` with `sh -c` inside the sandbox and resolves with its exit status and output,
 * whatever the exit status. Rejects (or throws) only when the command could not be run at all
 * (the sandbox is gone, the backend refused): the call then fails with ExecError, the
 * rejection as its `cause`. May be called concurrently. An exec that passes `options.stdin` to
 * the command says so with a `stdin` property set to true: the library then sends the gateway
 * binary and large bodies in one command instead of staged pieces.
 *
 * @typedef {{(command: string, options: ExecOptions): Promise<ExecResult> | ExecResult, stdin?: boolean}} ExecFn
 */

/**
 * Options of {@link run}.
 *
 * @typedef {object} RunOptions
 * @property {string} [cwd]
 * @property {NodeJS.ProcessEnv} [env]
 * @property {number} [timeoutMs] kill the process group after this long (0 or absent: never)
 * @property {AbortSignal} [signal] kill the process group when it aborts
 * @property {Uint8Array} [stdin] written to the process's stdin, which is then closed
 */

/**
 * Runs `file` with `args`, collecting stdout and stderr. Stops the whole process group when
 * `signal` aborts or `timeoutMs` passes (a `sh -c` that started curl must not leave curl behind:
 * its connection closing is what tells the gateway to cancel the call upstream).
 *
 * @param {string} file
 * @param {string[]} args
 * @param {RunOptions} [options]
 * @returns {Promise<{exitCode: number, stdout: Buffer, stderr: Buffer}>}
 */
export function run(file, args, { cwd, env, timeoutMs, signal, stdin } = {}) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    /** @type {import('node:child_process').ChildProcess} */
    let child;
    try {
      // detached: the child leads its own process group, so it can be killed with all it started.
      child = spawn(file, args, {
        cwd,
        env,
        stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
        detached: true,
      });
    } catch (e) {
      reject(new Error(`cannot run ${file}: ${/** @type {Error} */ (e).message}`, { cause: e }));
      return;
    }
    /** @type {Buffer[]} */
    const out = [];
    /** @type {Buffer[]} */
    const err = [];
    let settled = false;
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    const killGroup = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const finish = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      fn(value);
    };
    const onAbort = () => {
      killGroup();
      finish(reject, signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs && timeoutMs > 0) {
      timer = setTimeout(
        () => {
          killGroup();
          finish(reject, new Error(`${file} did not finish within ${timeoutMs} ms and was killed`));
        },
        Math.min(timeoutMs, 2 ** 31 - 1),
      );
    }
    if (stdin && child.stdin) {
      // A command that exits without reading all of it closes the pipe: not an error here.
      child.stdin.on('error', () => {});
      child.stdin.end(stdin);
    }
    child.stdout?.on('data', (b) => out.push(b));
    child.stderr?.on('data', (b) => err.push(b));
    child.on('error', (e) =>
      finish(reject, new Error(`cannot run ${file}: ${e.message}`, { cause: e })),
    );
    child.on('close', (code, sig) => {
      // A signal N is reported as 128 + N, as a shell reports it.
      const exitCode = code ?? 128 + (sig ? constants.signals[sig] : 0);
      finish(resolve, { exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err) });
    });
  });
}

/**
 * Options of {@link localExec} and {@link localSession}.
 *
 * @typedef {object} LocalExecOptions
 * @property {string} [cwd] the directory commands run in
 * @property {NodeJS.ProcessEnv} [env] their environment (default: this process's)
 * @property {string} [shell] the shell, run as `SHELL -c COMMAND`; default `sh`
 */

/**
 * An exec function that runs each command with `sh -c` on this machine, optionally in `cwd` and
 * with `env`: the local machine (or a directory of it) used as the sandbox. Passes stdin. An
 * abort or timeout kills the command's whole process group.
 *
 * @param {LocalExecOptions} [options]
 * @returns {ExecFn}
 */
export function localExec({ cwd, env, shell = 'sh' } = {}) {
  /** @type {ExecFn} */
  const exec = (command, { timeoutMs, signal, stdin } = /** @type {any} */ ({})) =>
    run(shell, ['-c', command], { cwd, env, timeoutMs, signal, stdin });
  exec.stdin = true;
  return exec;
}

/**
 * Options of {@link dockerExec}, {@link dockerArgv} and {@link dockerSession}.
 *
 * @typedef {object} DockerExecOptions
 * @property {string} [docker] the program; default `docker` (e.g. `podman`)
 * @property {string} [user] `--user`
 * @property {string} [workdir] `--workdir`
 * @property {Record<string, string>} [env] `--env K=V` for each entry
 * @property {boolean} [interactive] `-i`: keep stdin open (for a command given stdin, a session)
 */

/**
 * The argv (after the program name) of `docker exec` running `sh -c command` in `container`.
 *
 * @param {string} container
 * @param {string} command
 * @param {DockerExecOptions} [options]
 * @returns {string[]}
 */
export function dockerArgv(container, command, { user, workdir, env, interactive } = {}) {
  const argv = ['exec'];
  if (interactive) argv.push('-i');
  if (user) argv.push('--user', user);
  if (workdir) argv.push('--workdir', workdir);
  for (const [k, v] of Object.entries(env ?? {})) argv.push('--env', `${k}=${v}`);
  argv.push(container, 'sh', '-c', command);
  return argv;
}

/**
 * Why `docker exec` (or `docker inspect`) did not reach a running container, from its exit status
 * and stderr, or `null` when it did. Measured with Docker CLI 28 (tests/docker/README.md): exit 1
 * with stderr `Error response from daemon: ...` (no such container, not running, paused),
 * `Cannot connect to the Docker daemon ...` or `unable to upgrade to tcp` (the container is being
 * killed as the exec starts); 125 for the CLI's own failures. A command inside the
 * container that exits 1 says something else on stderr.
 *
 * @param {{exitCode: number, stderr: Uint8Array}} r
 * @returns {string | null}
 */
export function dockerFailure(r) {
  const text = Buffer.from(r.stderr).toString('utf8').trim();
  if (r.exitCode === 125) return text || 'docker failed (exit 125)';
  if (
    r.exitCode === 1 &&
    /^(docker: )?(Error response from daemon:|Cannot connect to the Docker daemon|unable to upgrade to tcp)/.test(
      text,
    )
  ) {
    return text;
  }
  return null;
}

/**
 * An exec function that runs each command with `docker exec [-i] CONTAINER sh -c COMMAND`, with
 * `-i` and the command's stdin when it has one. Rejects (the call fails with ExecError,
 * `EXEC_FAILED`: the sandbox is gone) when docker did not reach a running container: exit 1 with
 * docker's daemon error (no such container, not running, paused, no daemon), exit 125, or exit
 * 137 with no output while the container no longer runs (killed during the command: asked with
 * `docker inspect`). Anything else is the command's own result (a command that ran and failed:
 * `COMMAND_FAILED` and friends).
 *
 * @param {string} container
 * @param {DockerExecOptions} [options]
 * @returns {ExecFn}
 */
export function dockerExec(container, options = {}) {
  if (!container) throw new TypeError('dockerExec needs a container name or id');
  const program = options.docker ?? 'docker';
  /** @type {ExecFn} */
  const exec = async (command, { timeoutMs, signal, stdin } = /** @type {any} */ ({})) => {
    const argv = dockerArgv(container, command, { ...options, interactive: Boolean(stdin) });
    const r = await run(program, argv, { timeoutMs, signal, stdin });
    const failure = dockerFailure(r);
    if (failure) throw new Error(`the sandbox is gone: ${program} exec ${container}: ${failure}`);
    if (r.exitCode === 137 && r.stdout.length === 0 && r.stderr.length === 0) {
      const state = await run(program, ['inspect', '-f', '{{.State.Running}}', container], {
        timeoutMs: 10_000,
      }).catch((e) => ({ exitCode: 1, stdout: Buffer.alloc(0), stderr: Buffer.from(e.message) }));
      if (state.stdout.toString().trim() !== 'true') {
        throw new Error(
          `the sandbox is gone: container ${container} was killed during the command (exit 137)`,
        );
      }
    }
    return r;
  };
  exec.stdin = true;
  return exec;
}

/**
 * Options of {@link kubectlExec}, {@link kubectlArgv} and {@link kubectlSession}.
 *
 * @typedef {object} KubectlExecOptions
 * @property {string} [kubectl] the program; default `kubectl`
 * @property {string} [namespace]
 * @property {string} [container] the container of the pod
 * @property {string} [context]
 * @property {string} [kubeconfig]
 * @property {boolean} [interactive] `-i`: pass stdin (for a command given stdin, a session)
 */

/**
 * The argv (after the program name) of `kubectl exec` running `sh -c command` in `pod`.
 *
 * @param {string} pod
 * @param {string} command
 * @param {KubectlExecOptions} [options]
 * @returns {string[]}
 */
export function kubectlArgv(
  pod,
  command,
  { namespace, container, context, kubeconfig, interactive } = {},
) {
  const argv = [];
  if (kubeconfig) argv.push('--kubeconfig', kubeconfig);
  if (context) argv.push('--context', context);
  argv.push('exec');
  if (interactive) argv.push('-i');
  if (namespace) argv.push('--namespace', namespace);
  if (container) argv.push('--container', container);
  argv.push(pod, '--', 'sh', '-c', command);
  return argv;
}

/**
 * Why `kubectl exec` did not reach the pod, or `null` when the command ran. kubectl passes the
 * command's exit status through and then prints `command terminated with exit code N`; its own
 * failures (no such pod or container, no API server, no permission) exit 1 with
 * `Error from server ...`, `error: ...`, `The connection to the server ...` or `Unable to connect
 * to the server ...` on stderr.
 *
 * @param {{exitCode: number, stderr: Uint8Array}} r
 * @returns {string | null}
 */
export function kubectlFailure(r) {
  const text = Buffer.from(r.stderr).toString('utf8').trim();
  if (r.exitCode !== 1 || /command terminated with exit code/.test(text)) return null;
  if (
    /^(Error from server|error: |The connection to the server|Unable to connect to the server)/m.test(
      text,
    )
  ) {
    return text;
  }
  return null;
}

/**
 * An exec function that runs each command with `kubectl exec [-i] POD -- sh -c COMMAND`, with
 * `-i` and the command's stdin when it has one. Rejects (ExecError, `EXEC_FAILED`: the sandbox
 * is gone) when kubectl did not reach the pod ({@link kubectlFailure}); the command's own exit
 * status otherwise.
 *
 * @param {string} pod
 * @param {KubectlExecOptions} [options]
 * @returns {ExecFn}
 */
export function kubectlExec(pod, options = {}) {
  if (!pod) throw new TypeError('kubectlExec needs a pod name');
  const program = options.kubectl ?? 'kubectl';
  /** @type {ExecFn} */
  const exec = async (command, { timeoutMs, signal, stdin } = /** @type {any} */ ({})) => {
    const argv = kubectlArgv(pod, command, { ...options, interactive: Boolean(stdin) });
    const r = await run(program, argv, { timeoutMs, signal, stdin });
    const failure = kubectlFailure(r);
    if (failure) throw new Error(`the sandbox is gone: ${program} exec ${pod}: ${failure}`);
    return r;
  };
  exec.stdin = true;
  return exec;
}
