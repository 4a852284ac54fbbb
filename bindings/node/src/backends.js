// How commands and channels reach the sandbox: the backends of the library's host driver
// (`Backend` in src/driver/backend.rs), which builds every argv, wraps commands so that a cancel
// ends them in the sandbox, and tells a backend's failure from the command's. The binding only
// names them here; the library checks every value (an empty or `-`-leading container name, a
// pod name with shell metacharacters are refused with the reason when the client is made).

import { invalid } from './errors.js';

/**
 * What the host's own exec function is given besides the command.
 *
 * @typedef {object} ExecOptions
 * @property {number} timeoutMs how long the command may take, in milliseconds
 * @property {AbortSignal} signal aborts when the caller gave up on the command (a cancel, its
 *   time limit): stop it then. Its result is no longer awaited.
 * @property {Uint8Array} [stdin] bytes for the command's standard input, then end of input;
 *   given only when the backend declares `passesStdin`
 */

/**
 * What the host's own exec function reports about one command it ran.
 *
 * @typedef {object} ExecResult
 * @property {number} exitCode the command's exit status (128 + N when signal N ended it)
 * @property {Uint8Array | ArrayBuffer | string | null} [stdout] everything it wrote to stdout
 *   (text is taken as UTF-8)
 * @property {Uint8Array | ArrayBuffer | string | null} [stderr] everything it wrote to stderr
 */

/**
 * Runs `command` with `sh -c` inside the sandbox and resolves with its exit status and output,
 * whatever the exit status. Rejects (or throws) only when it could not be run at all: the call
 * then fails with ExecFailedError, the rejection as its `cause`.
 *
 * @typedef {(command: string, options: ExecOptions) => Promise<ExecResult> | ExecResult} RunFn
 */

/**
 * A channel into the sandbox: a child process, `{stdin, stdout, stderr?}` streams, or one
 * duplex stream (stdin and stdout).
 *
 * @typedef {import('node:child_process').ChildProcess | {stdin: NodeJS.WritableStream, stdout: NodeJS.ReadableStream, stderr?: NodeJS.ReadableStream | null} | import('node:stream').Duplex} Channel
 */

/**
 * Starts `command` with `sh -c` inside the sandbox with its stdin and stdout piped (an SDK's
 * background command with stdin), and returns the channel, or a promise of it.
 *
 * @typedef {(command: string) => Channel | Promise<Channel>} OpenFn
 */

/**
 * A sandbox backend, made by {@link local}, {@link docker}, {@link podman}, {@link kubectl},
 * {@link argv} or {@link exec}, for `new Client(backend, options)`.
 *
 * @typedef {object} Backend
 * @property {'local' | 'docker' | 'podman' | 'kubectl' | 'argv' | 'exec' | 'e2b' | 'opensandbox' | 'daytona'} kind
 * @property {Record<string, unknown>} config the library's backend configuration (JSON)
 * @property {RunFn} [run] the exec backend's function
 * @property {OpenFn} [open] the exec backend's channel opener
 */

/**
 * Options of the Docker and podman backends.
 *
 * @typedef {object} ContainerOptions
 * @property {string[]} [execOptions] options of `exec`, e.g. `['--user', 'agent']`
 * @property {string[]} [options] options of the CLI itself, e.g. `['--host', 'ssh://box']`
 * @property {string} [program] the CLI; `docker` or `podman` by default
 */

/**
 * Options of the kubectl backend.
 *
 * @typedef {object} PodOptions
 * @property {string} [namespace]
 * @property {string} [container] the container in the pod
 * @property {string[]} [options] options of kubectl itself, e.g. `['--context', 'prod']`
 * @property {string} [program] the CLI; `kubectl` by default
 */

/** A frozen backend of `kind` with its configuration. */
function backend(kind, config, fns = {}) {
  return Object.freeze({ kind, config: Object.freeze({ kind, ...config }), ...fns });
}

/**
 * `sh -c` on this machine (the machine, or a directory of it, is the sandbox).
 *
 * @param {{cwd?: string}} [options]
 * @returns {Backend}
 */
export function local({ cwd } = {}) {
  return backend('local', { cwd });
}

/**
 * `docker exec` into a running container.
 *
 * @param {string} container its name or id
 * @param {ContainerOptions} [options]
 * @returns {Backend}
 */
export function docker(container, { execOptions, options, program } = {}) {
  return backend('docker', { container, exec_options: execOptions, options, program });
}

/**
 * `podman exec` into a running container.
 *
 * @param {string} container its name or id
 * @param {ContainerOptions} [options]
 * @returns {Backend}
 */
export function podman(container, { execOptions, options, program } = {}) {
  return backend('podman', { container, exec_options: execOptions, options, program });
}

/**
 * `kubectl exec` into a running pod.
 *
 * @param {string} pod `name` or `pod/name`
 * @param {PodOptions} [options]
 * @returns {Backend}
 */
export function kubectl(pod, { namespace, container, options, program } = {}) {
  return backend('kubectl', { pod, namespace, container, options, program });
}

/**
 * Any argv prefix that runs the rest of its arguments inside the sandbox: `['nsenter', '-t',
 * PID, '-m', '-n', '-p']`, `['bwrap', ...]`, `['ssh', 'host']` (with `joinsArguments`: ssh joins
 * its arguments into one line for the remote shell, so they are quoted once more).
 *
 * @param {string[]} prefix
 * @param {{joinsArguments?: boolean}} [options]
 * @returns {Backend}
 */
export function argv(prefix, { joinsArguments } = {}) {
  return backend('argv', { prefix, joins_arguments: joinsArguments });
}

/**
 * The host's own exec function, and optionally its channel opener (for sessions): an E2B or
 * Daytona SDK's `commands.run` and background command. Each gets `sh -c` text; a failure to
 * run is reported by rejecting.
 *
 * @param {RunFn} run
 * @param {{open?: OpenFn, passesStdin?: boolean}} [options] `passesStdin`: `run` passes
 *   `options.stdin` to the command (then the gateway binary and large bodies take one command)
 * @returns {Backend}
 */
export function exec(run, { open, passesStdin } = {}) {
  if (typeof run !== 'function') {
    throw invalid('exec() needs a function (command, {timeoutMs, signal, stdin}) => result');
  }
  if (open !== undefined && typeof open !== 'function') {
    throw invalid('the channel opener of exec() must be a function (command) => channel');
  }
  return backend('exec', { passes_stdin: passesStdin }, { run, open });
}
