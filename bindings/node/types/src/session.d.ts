import type { Hello } from './wire.js';
export type ChannelStreams = {
    stdin: NodeJS.WritableStream;
    stdout: NodeJS.ReadableStream;
    stderr?: NodeJS.ReadableStream | null;
};
export type Channel = ChannelStreams | import('node:stream').Duplex;
export type OpenChannel = (command: string) => Channel | Promise<Channel>;
export type AttachOptions = {
    /**
     * when the channel is lost, the next call opens a new one with the
     * same `open` function (queued until it answers). Default false: calls go one-shot through
     * `exec` until `attach` is called again.
     */
    reopen?: boolean;
    /**
     * how long the channel may take to answer before it is given
     * up (calls queued meanwhile then go one-shot). Default: the client's `timeoutMs`.
     */
    openTimeoutMs?: number;
    /**
     * receives what the channel says that concerns no
     * call (a frame it refused, an answer to a cancelled call), for a log
     */
    onNotice?: (text: string) => void;
};
/**
 * The two streams of a session channel, as a child process has them (a `ChildProcess` spawned
 * with `stdio: 'pipe'` is one): the session writes frames to `stdin` and reads frames from
 * `stdout`. A child process is also waited for (its exit status goes into the message when it
 * dies) and killed if it outlives `close()`; `stderr`, when given, is kept for that message.
 *
 * @typedef {object} ChannelStreams
 * @property {NodeJS.WritableStream} stdin
 * @property {NodeJS.ReadableStream} stdout
 * @property {NodeJS.ReadableStream | null} [stderr]
 */
/**
 * A session channel: its two streams, or one duplex stream (both directions on one object).
 *
 * @typedef {ChannelStreams | import('node:stream').Duplex} Channel
 */
/**
 * Opens a session channel: runs `command` with `sh -c` inside the sandbox with its stdin and
 * stdout piped (e.g. `spawn('docker', ['exec', '-i', C, 'sh', '-c', command])`) and returns its
 * streams. The command runs as long as the channel stays open.
 *
 * @typedef {(command: string) => Channel | Promise<Channel>} OpenChannel
 */
/**
 * Options of `client.attach`.
 *
 * @typedef {object} AttachOptions
 * @property {boolean} [reopen] when the channel is lost, the next call opens a new one with the
 *   same `open` function (queued until it answers). Default false: calls go one-shot through
 *   `exec` until `attach` is called again.
 * @property {number} [openTimeoutMs] how long the channel may take to answer before it is given
 *   up (calls queued meanwhile then go one-shot). Default: the client's `timeoutMs`.
 * @property {(text: string) => void} [onNotice] receives what the channel says that concerns no
 *   call (a frame it refused, an answer to a cancelled call), for a log
 */
/**
 * One session channel of a client, from `client.attach` or the `*Session` helpers. While it is
 * open every REST call of the client goes over it. Closing it ends the channel's process.
 */
export declare class Session {
    #private;
    /**
     * Not for direct use: `client.attach` (or `localSession`, `dockerSession`, `kubectlSession`)
     * makes a session.
     *
     * @param {any} clientPtr the native client
     * @param {OpenChannel} open
     * @param {{openTimeoutMs: number, onNotice?: (text: string) => void, onLost: (byHost: boolean) => void}} options
     */
    constructor(clientPtr: any, open: OpenChannel, { openTimeoutMs, onNotice, onLost }: {
        openTimeoutMs: number;
        onNotice?: (text: string) => void;
        onLost: (byHost: boolean) => void;
    });
    /**
     * The `sh -c` text the channel runs in the sandbox (`mcpgw-gateway attach ...`).
     *
     * @returns {string}
     */
    get command(): string;
    /** The channel's hello once it answered: the gateway's version, port, pid; whether it launched it. */
    get hello(): Hello | null;
    /** Whether the channel is gone (closed, or it died); calls then go one-shot. */
    get lost(): boolean;
    /** Resolves with the hello when the channel answers; rejects with SessionLostError when it dies first. */
    get opened(): Promise<Hello>;
    /**
     * Resolves when the channel is gone: its process exited (or was killed) and the session's
     * native state is freed.
     *
     * @returns {Promise<void>}
     */
    get finished(): Promise<void>;
    /**
     * Ends the session: calls in flight fail with SessionLostError, calls not yet written go
     * one-shot, the channel's stdin is closed (so `attach` cancels what was in flight in the
     * gateway and exits), and the promise resolves once its process has exited (killed after 5 s
     * if it has not). Idempotent. The gateway keeps running: `stopGateway` stops it.
     *
     * @returns {Promise<void>}
     */
    close(): Promise<void>;
}
