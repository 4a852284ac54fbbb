export type ExecOptions = {
    /**
     * how long the command may take, in milliseconds
     */
    timeoutMs: number;
    /**
     * aborts when the caller gave up on the command (a cancel, its
     * time limit): stop it then. Its result is no longer awaited.
     */
    signal: AbortSignal;
    /**
     * bytes for the command's standard input, then end of input;
     * given only when the backend declares `passesStdin`
     */
    stdin?: Uint8Array;
};
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
export type RunFn = (command: string, options: ExecOptions) => Promise<ExecResult> | ExecResult;
export type Channel = import('node:child_process').ChildProcess | {
    stdin: NodeJS.WritableStream;
    stdout: NodeJS.ReadableStream;
    stderr?: NodeJS.ReadableStream | null;
} | import('node:stream').Duplex;
export type OpenFn = (command: string) => Channel | Promise<Channel>;
export type Backend = {
    kind: 'local' | 'docker' | 'podman' | 'kubectl' | 'argv' | 'exec' | 'e2b' | 'opensandbox' | 'daytona';
    /**
     * the library's backend configuration (JSON)
     */
    config: Record<string, unknown>;
    /**
     * the exec backend's function
     */
    run?: RunFn;
    /**
     * the exec backend's channel opener
     */
    open?: OpenFn;
};
export type ContainerOptions = {
    /**
     * options of `exec`, e.g. `['--user', 'agent']`
     */
    execOptions?: string[];
    /**
     * options of the CLI itself, e.g. `['--host', 'ssh://box']`
     */
    options?: string[];
    /**
     * the CLI; `docker` or `podman` by default
     */
    program?: string;
};
export type PodOptions = {
    namespace?: string;
    /**
     * the container in the pod
     */
    container?: string;
    /**
     * options of kubectl itself, e.g. `['--context', 'prod']`
     */
    options?: string[];
    /**
     * the CLI; `kubectl` by default
     */
    program?: string;
};
/**
 * `sh -c` on this machine (the machine, or a directory of it, is the sandbox).
 *
 * @param {{cwd?: string}} [options]
 * @returns {Backend}
 */
export declare function local({ cwd }?: {
    cwd?: string;
}): Backend;
/**
 * `docker exec` into a running container.
 *
 * @param {string} container its name or id
 * @param {ContainerOptions} [options]
 * @returns {Backend}
 */
export declare function docker(container: string, { execOptions, options, program }?: ContainerOptions): Backend;
/**
 * `podman exec` into a running container.
 *
 * @param {string} container its name or id
 * @param {ContainerOptions} [options]
 * @returns {Backend}
 */
export declare function podman(container: string, { execOptions, options, program }?: ContainerOptions): Backend;
/**
 * `kubectl exec` into a running pod.
 *
 * @param {string} pod `name` or `pod/name`
 * @param {PodOptions} [options]
 * @returns {Backend}
 */
export declare function kubectl(pod: string, { namespace, container, options, program }?: PodOptions): Backend;
/**
 * Any argv prefix that runs the rest of its arguments inside the sandbox: `['nsenter', '-t',
 * PID, '-m', '-n', '-p']`, `['bwrap', ...]`, `['ssh', 'host']` (with `joinsArguments`: ssh joins
 * its arguments into one line for the remote shell, so they are quoted once more).
 *
 * @param {string[]} prefix
 * @param {{joinsArguments?: boolean}} [options]
 * @returns {Backend}
 */
export declare function argv(prefix: string[], { joinsArguments }?: {
    joinsArguments?: boolean;
}): Backend;
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
export declare function exec(run: RunFn, { open, passesStdin }?: {
    open?: OpenFn;
    passesStdin?: boolean;
}): Backend;
