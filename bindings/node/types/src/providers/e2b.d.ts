import type { Backend } from '../backends.js';
/**
 * An E2B sandbox (a `Sandbox` of the npm `e2b` SDK) as a backend: commands run as `user` (the
 * sandbox's default user when not given), the session channel through a background command
 * with stdin.
 *
 * @param {any} sandbox
 * @param {{ user?: string }} [options]
 * @returns {Backend}
 */
export declare function e2b(sandbox: any, options?: {
    user?: string;
}): Backend;
