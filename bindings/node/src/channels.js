// Ready-made session channels: `client.attach` with the session's command spawned on this
// machine, in a Docker container (`docker exec -i`) or in a Kubernetes pod (`kubectl exec -i`).

import { spawn } from 'node:child_process';
import { dockerArgv, kubectlArgv } from './exec.js';

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
export function localSession(client, options = {}) {
  const { cwd, env, shell = 'sh', ...attach } = options;
  return client.attach(
    (command) => spawn(shell, ['-c', command], { cwd, env, stdio: ['pipe', 'pipe', 'pipe'] }),
    attach,
  );
}

/**
 * Attaches a session whose channel runs `docker exec -i CONTAINER sh -c COMMAND`.
 *
 * @param {Client} client
 * @param {string} container
 * @param {DockerExecOptions & AttachOptions} [options]
 * @returns {Promise<Session>}
 */
export function dockerSession(client, container, options = {}) {
  if (!container) throw new TypeError('dockerSession needs a container name or id');
  const { docker = 'docker', user, workdir, env, interactive: _, ...attach } = options;
  return client.attach(
    (command) =>
      spawn(docker, dockerArgv(container, command, { user, workdir, env, interactive: true }), {
        stdio: ['pipe', 'pipe', 'pipe'],
      }),
    attach,
  );
}

/**
 * Attaches a session whose channel runs `kubectl exec -i POD -- sh -c COMMAND`.
 *
 * @param {Client} client
 * @param {string} pod
 * @param {KubectlExecOptions & AttachOptions} [options]
 * @returns {Promise<Session>}
 */
export function kubectlSession(client, pod, options = {}) {
  if (!pod) throw new TypeError('kubectlSession needs a pod name');
  const {
    kubectl = 'kubectl',
    namespace,
    container,
    context,
    kubeconfig,
    interactive: _,
    ...attach
  } = options;
  return client.attach(
    (command) =>
      spawn(
        kubectl,
        kubectlArgv(pod, command, { namespace, container, context, kubeconfig, interactive: true }),
        { stdio: ['pipe', 'pipe', 'pipe'] },
      ),
    attach,
  );
}
