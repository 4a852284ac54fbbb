export type ExecResult = {
    /**
     * the command's exit status (128 + N when signal N ended it)
     */
    exitCode: number;
    /**
     * everything it wrote to stdout
     * (text is taken as UTF-8)
     */
    stdout?: Uint8Array | ArrayBuffer | string | null;
    /**
     * everything it wrote to stderr
     */
    stderr?: Uint8Array | ArrayBuffer | string | null;
};
export type ExecOptions = {
    /**
     * how long the command may take, in milliseconds (for backends with
     * a timeout of their own)
     */
    timeoutMs: number;
    /**
     * aborts when the caller aborts the call or the command's time is
     * up: stop the command then. The call does not wait for the exec after that.
     */
    signal: AbortSignal;
    /**
     * bytes to write to the command's standard input, then close it.
     * Given only to an exec that declares `stdin: true` (the gateway binary upload, large bodies).
     */
    stdin?: Uint8Array;
};
export type ExecFn = {
    (command: string, options: ExecOptions): Promise<ExecResult> | ExecResult;
    stdin?: boolean;
};
export type RunOptions = {
    cwd?: string;
    env?: NodeJS.ProcessEnv;
    /**
     * kill the process group after this long (0 or absent: never)
     */
    timeoutMs?: number;
    /**
     * kill the process group when it aborts
     */
    signal?: AbortSignal;
    /**
     * written to the process's stdin, which is then closed
     */
    stdin?: Uint8Array;
};
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
export declare function run(file: string, args: string[], { cwd, env, timeoutMs, signal, stdin }?: RunOptions): Promise<{
    exitCode: number;
    stdout: Buffer;
    stderr: Buffer;
}>;
export type LocalExecOptions = {
    /**
     * the directory commands run in
     */
    cwd?: string;
    /**
     * their environment (default: this process's)
     */
    env?: NodeJS.ProcessEnv;
    /**
     * the shell, run as `SHELL -c COMMAND`; default `sh`
     */
    shell?: string;
};
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
export declare function localExec({ cwd, env, shell }?: LocalExecOptions): ExecFn;
export type DockerExecOptions = {
    /**
     * the program; default `docker` (e.g. `podman`)
     */
    docker?: string;
    /**
     * `--user`
     */
    user?: string;
    /**
     * `--workdir`
     */
    workdir?: string;
    /**
     * `--env K=V` for each entry
     */
    env?: Record<string, string>;
    /**
     * `-i`: keep stdin open (for a command given stdin, a session)
     */
    interactive?: boolean;
};
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
export declare function dockerArgv(container: string, command: string, { user, workdir, env, interactive }?: DockerExecOptions): string[];
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
export declare function dockerFailure(r: {
    exitCode: number;
    stderr: Uint8Array;
}): string | null;
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
export declare function dockerExec(container: string, options?: DockerExecOptions): ExecFn;
export type KubectlExecOptions = {
    /**
     * the program; default `kubectl`
     */
    kubectl?: string;
    namespace?: string;
    /**
     * the container of the pod
     */
    container?: string;
    context?: string;
    kubeconfig?: string;
    /**
     * `-i`: pass stdin (for a command given stdin, a session)
     */
    interactive?: boolean;
};
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
export declare function kubectlArgv(pod: string, command: string, { namespace, container, context, kubeconfig, interactive }?: KubectlExecOptions): string[];
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
export declare function kubectlFailure(r: {
    exitCode: number;
    stderr: Uint8Array;
}): string | null;
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
export declare function kubectlExec(pod: string, options?: KubectlExecOptions): ExecFn;
