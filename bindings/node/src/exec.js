// Ready-made exec functions: run a command with `sh -c` on this machine, in a Docker container or
// in a Kubernetes pod, through child_process (never a shell on the host side: the argv is built
// here, so no byte of the command is interpreted before it reaches the sandbox's `sh -c`).

import { spawn } from 'node:child_process';
import { constants } from 'node:os';

/**
 * Runs `file` with `args`, collecting stdout and stderr. Stops the whole process group when
 * `signal` aborts or `timeoutMs` passes (a `sh -c` that started curl must not leave curl behind:
 * its connection closing is what tells the gateway to cancel the call upstream).
 *
 * @param {string} file
 * @param {string[]} args
 * @param {{cwd?: string, env?: NodeJS.ProcessEnv, timeoutMs?: number, signal?: AbortSignal}} opts
 * @returns {Promise<{exitCode: number, stdout: Buffer, stderr: Buffer}>}
 */
export function run(file, args, { cwd, env, timeoutMs, signal } = {}) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    let child;
    try {
      // detached: the child leads its own process group, so it can be killed with all it started.
      child = spawn(file, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    } catch (e) {
      reject(new Error(`cannot run ${file}: ${e.message}`, { cause: e }));
      return;
    }
    const out = [];
    const err = [];
    let settled = false;
    let timer;
    const killGroup = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
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
      finish(reject, signal.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeoutMs > 0) {
      timer = setTimeout(
        () => {
          killGroup();
          finish(reject, new Error(`${file} did not finish within ${timeoutMs} ms and was killed`));
        },
        Math.min(timeoutMs, 2 ** 31 - 1),
      );
    }
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => err.push(b));
    child.on('error', (e) =>
      finish(reject, new Error(`cannot run ${file}: ${e.message}`, { cause: e })),
    );
    child.on('close', (code, sig) => {
      // A signal N is reported as 128 + N, as a shell reports it.
      const exitCode = code ?? 128 + (constants.signals[sig] ?? 0);
      finish(resolve, { exitCode, stdout: Buffer.concat(out), stderr: Buffer.concat(err) });
    });
  });
}

/**
 * An exec function that runs each command with `sh -c` on this machine, optionally in `cwd` and
 * with `env`: the local machine (or a directory of it) used as the sandbox.
 *
 * @param {{cwd?: string, env?: NodeJS.ProcessEnv, shell?: string}} [options]
 * @returns {import('../index.js').ExecFn}
 */
export function localExec({ cwd, env, shell = 'sh' } = {}) {
  return (command, { timeoutMs, signal } = {}) =>
    run(shell, ['-c', command], { cwd, env, timeoutMs, signal });
}

/**
 * The argv (after the program name) of `docker exec` running `sh -c command` in `container`.
 *
 * @param {string} container
 * @param {string} command
 * @param {{user?: string, workdir?: string, env?: Record<string, string>}} [options]
 * @returns {string[]}
 */
export function dockerArgv(container, command, { user, workdir, env } = {}) {
  const argv = ['exec'];
  if (user) argv.push('--user', user);
  if (workdir) argv.push('--workdir', workdir);
  for (const [k, v] of Object.entries(env ?? {})) argv.push('--env', `${k}=${v}`);
  argv.push(container, 'sh', '-c', command);
  return argv;
}

/**
 * An exec function that runs each command with `docker exec CONTAINER sh -c COMMAND`. Exit status
 * 125 is docker's own failure (no such container, daemon down) and is reported as a failure to run
 * the command, with docker's message. `docker` names the program (default `docker`; e.g. `podman`).
 *
 * @param {string} container
 * @param {{docker?: string, user?: string, workdir?: string, env?: Record<string, string>}} [options]
 * @returns {import('../index.js').ExecFn}
 */
export function dockerExec(container, options = {}) {
  if (!container) throw new TypeError('dockerExec needs a container name or id');
  const program = options.docker ?? 'docker';
  return async (command, { timeoutMs, signal } = {}) => {
    const r = await run(program, dockerArgv(container, command, options), { timeoutMs, signal });
    if (r.exitCode === 125) {
      throw new Error(`${program} exec failed: ${r.stderr.toString('utf8').trim()}`);
    }
    return r;
  };
}

/**
 * The argv (after the program name) of `kubectl exec` running `sh -c command` in `pod`.
 *
 * @param {string} pod
 * @param {string} command
 * @param {{namespace?: string, container?: string, context?: string, kubeconfig?: string}} [options]
 * @returns {string[]}
 */
export function kubectlArgv(pod, command, { namespace, container, context, kubeconfig } = {}) {
  const argv = [];
  if (kubeconfig) argv.push('--kubeconfig', kubeconfig);
  if (context) argv.push('--context', context);
  argv.push('exec');
  if (namespace) argv.push('--namespace', namespace);
  if (container) argv.push('--container', container);
  argv.push(pod, '--', 'sh', '-c', command);
  return argv;
}

/**
 * An exec function that runs each command with `kubectl exec POD -- sh -c COMMAND` (kubectl passes
 * the command's exit status through). `kubectl` names the program (default `kubectl`).
 *
 * @param {string} pod
 * @param {{kubectl?: string, namespace?: string, container?: string, context?: string, kubeconfig?: string}} [options]
 * @returns {import('../index.js').ExecFn}
 */
export function kubectlExec(pod, options = {}) {
  if (!pod) throw new TypeError('kubectlExec needs a pod name');
  const program = options.kubectl ?? 'kubectl';
  return (command, { timeoutMs, signal } = {}) =>
    run(program, kubectlArgv(pod, command, options), { timeoutMs, signal });
}
