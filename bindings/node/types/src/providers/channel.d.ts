import { PassThrough, Writable } from 'node:stream';
/** Where a one-shot command's stdin is written before it runs; removed by the command. */
export declare const STDIN_DIR = "/tmp";
/**
 * What an SDK's command is given beyond the library's own time limit (ms): the library kills
 * the command at its limit, and the SDK's deadline only backs that up.
 */
export declare const TIME_LIMIT_GRACE_MS = 5000;
/** `text` quoted for a POSIX shell. */
export declare function quote(text: any): string;
/** The library's command text as one `sh -c` command. */
export declare function sh(command: any): string;
/** A fresh path in the sandbox for a command's stdin. */
export declare function stdinPath(): string;
/** `command` (the library's text) reading its stdin from `path`, which it removes. */
export declare function withStdinFrom(command: any, path: any): string;
/** An SDK's output chunk as bytes (text is UTF-8). */
export declare function asBuffer(data: any): Buffer<ArrayBuffer>;
/**
 * What an SDK raised, as the library reads it: `Class: message` (or what an adapter set as its
 * `mcpgwReason`: that with the sandbox's state, say).
 */
export declare function describe(e: any): any;
/**
 * A long-lived command of a provider SDK as the binding's loop follows a channel.
 *
 * @param {object} sdk
 * @param {(data: Buffer) => Promise<unknown>} sdk.send sends input, in order
 * @param {() => Promise<unknown>} sdk.close closes the command's stdin
 * @param {() => Promise<unknown>} sdk.kill ends the command
 */
export declare function sdkChannel({ send, close, kill }: {
    send: (data: Buffer) => Promise<unknown>;
    close: () => Promise<unknown>;
    kill: () => Promise<unknown>;
}): {
    stdin: Writable;
    stdout: PassThrough;
    stderr: PassThrough;
    exited: Promise<number>;
    /** Output the SDK delivered on stdout. */
    out: (/** @type {unknown} */ data: unknown) => boolean;
    /** Output the SDK delivered on stderr. */
    err: (/** @type {unknown} */ data: unknown) => boolean;
    /** The command ended with exit status `code`. */
    exit: (/** @type {number} */ code: number) => void;
    /** The SDK lost the command. */
    fail: (/** @type {unknown} */ e: unknown) => void;
    /** Ends the command. */
    kill: () => void;
};
/**
 * A provider adapter's backend: the library's configuration of `kind` for sandbox `id`, and
 * the adapter's `run` and `open`.
 *
 * @param {'e2b' | 'opensandbox' | 'daytona'} kind
 * @param {string} id
 * @param {import('../backends.js').RunFn} run
 * @param {import('../backends.js').OpenFn} open
 * @returns {import('../backends.js').Backend}
 */
export declare function providerBackend(kind: 'e2b' | 'opensandbox' | 'daytona', id: string, run: import('../backends.js').RunFn, open: import('../backends.js').OpenFn): import('../backends.js').Backend;
