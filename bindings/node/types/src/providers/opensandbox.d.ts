import type { Backend } from '../backends.js';
/**
 * An OpenSandbox sandbox (a `Sandbox` of `@alibaba-group/opensandbox`) as a backend: commands
 * through its command API, the session channel through execd's pipe session. `headers` go to
 * execd besides those of the sandbox's connection configuration (e.g. `X-EXECD-ACCESS-TOKEN`).
 *
 * @param {any} sandbox
 * @param {{ headers?: Record<string, string> }} [options]
 * @returns {Backend}
 */
export declare function opensandbox(sandbox: any, options?: {
    headers?: Record<string, string>;
}): Backend;
