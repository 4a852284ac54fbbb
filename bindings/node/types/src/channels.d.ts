import type { Client } from './client.js';
import type { AttachOptions, Session } from './session.js';
import type { DockerExecOptions, KubectlExecOptions, LocalExecOptions } from './exec.js';
/** @import { Client } from './client.js' */
/** @import { AttachOptions, Session } from './session.js' */
/** @import { DockerExecOptions, KubectlExecOptions, LocalExecOptions } from './exec.js' */
/**
 * Attaches a session whose channel runs `sh -c COMMAND` on this machine (the local machine, or a
 * directory of it, as the sandbox).
 *
 * @param {Client} client
 * @param {LocalExecOptions & AttachOptions} [options]
 * @returns {Promise<Session>}
 */
export declare function localSession(client: Client, options?: LocalExecOptions & AttachOptions): Promise<Session>;
/**
 * Attaches a session whose channel runs `docker exec -i CONTAINER sh -c COMMAND`.
 *
 * @param {Client} client
 * @param {string} container
 * @param {DockerExecOptions & AttachOptions} [options]
 * @returns {Promise<Session>}
 */
export declare function dockerSession(client: Client, container: string, options?: DockerExecOptions & AttachOptions): Promise<Session>;
/**
 * Attaches a session whose channel runs `kubectl exec -i POD -- sh -c COMMAND`.
 *
 * @param {Client} client
 * @param {string} pod
 * @param {KubectlExecOptions & AttachOptions} [options]
 * @returns {Promise<Session>}
 */
export declare function kubectlSession(client: Client, pod: string, options?: KubectlExecOptions & AttachOptions): Promise<Session>;
