import type { Backend } from '../backends.js';
/**
 * A Daytona sandbox (a `Sandbox` of `@daytonaio/sdk`) as a backend: commands through
 * `process.executeCommand`, the session channel through a session command.
 *
 * @param {any} sandbox
 * @returns {Backend}
 */
export declare function daytona(sandbox: any): Backend;
