import type { OpenFn, RunFn } from './backends.js';
export type Report = {
    /**
     * it ended
     */
    exit: (code: number, stdout?: Buffer, stderr?: Buffer) => void;
    /**
     * it could not be run
     */
    failed: (reason: string, cause?: unknown) => void;
    /**
     * the channel's stdout
     */
    data: (bytes: Buffer) => void;
    /**
     * the channel's stderr
     */
    stderr: (bytes: Buffer) => void;
    /**
     * the channel's stdout ended
     */
    eof: () => void;
};
export type Proc = {
    /**
     * kill it and what it started
     */
    kill: () => void;
    /**
     * write to its stdin
     */
    write?: (bytes: Buffer) => void;
    /**
     * close its stdin
     */
    closeInput?: () => void;
};
export type Spec = {
    /**
     * the program and its arguments (empty for the exec backend)
     */
    argv: string[];
    /**
     * the `sh -c` text for the exec backend
     */
    shell: string | null;
    cwd: string | undefined;
    /**
     * `STDIN_KIND`
     */
    stdinKind: number;
    /**
     * the bytes of a BYTES stdin
     */
    stdin: Buffer | null;
    timeoutMs: number;
};
/**
 * Runs a RUN action's argv to its end: its stdin `/dev/null`, the given bytes, or a pipe held
 * open (and empty) until it exits; its output collected and reported with its exit status.
 *
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export declare function runCommand(spec: Spec, report: Report): Proc;
/**
 * Starts an OPEN action's argv with its three pipes: stdout and stderr are reported as they
 * come, then the end of stdout and the exit.
 *
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export declare function openChannel(spec: Spec, report: Report): Proc;
/**
 * Runs a RUN action through the exec backend's own function.
 *
 * @param {RunFn} run
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export declare function runExec(run: RunFn, spec: Spec, report: Report): Proc;
/**
 * Opens an OPEN action's channel through the exec backend's opener.
 *
 * @param {OpenFn | undefined} open
 * @param {Spec} spec
 * @param {Report} report
 * @returns {Proc}
 */
export declare function openExec(open: OpenFn | undefined, spec: Spec, report: Report): Proc;
