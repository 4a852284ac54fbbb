// The official TypeScript SDK client through McpgwTransport into a Docker container: the script
// of every feature of server-everything (tests/clients/ts/everything.mjs) run in its `binding
// docker` mode (a session into the container, the gateway launched there, server-everything
// registered, the SDK client on the transport) and straight to a server-everything on this
// machine over stdio; every answer compared as the endpoint's tests compare them. Nothing the
// run started is left in the container. `SKIPPED: <reason>` where Docker is not here.

import { after, before, describe, test } from 'node:test';
import { EVERYTHING_IN_IMAGE, assertSameAnswers, everythingOnHost, runScript } from './clients.js';
import { engine } from './helpers.js';
import assert from 'node:assert/strict';

const docker = engine('docker');
const img = docker.image();
const skip = 'skip' in img ? `SKIPPED: docker: ${img.skip}` : false;
if (skip) console.log(skip);

/**
 * The command lines of the container's processes (busybox `ps`), but for its init, its `sleep`
 * and the `ps` itself.
 *
 * @param {string} box
 */
function processesIn(box) {
  return docker
    .cli('exec', box, 'ps', '-o', 'pid,args')
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => !/^\d+\s+(\/sbin\/docker-init|sleep |ps )/.test(l));
}

describe('the TypeScript SDK client over McpgwTransport into Docker', { skip }, () => {
  const box = `mcpgw-node-sdk-${process.pid}`;

  before(() => docker.startNode(box));
  after(() => docker.stop(box));

  test('every feature of server-everything answers as over a direct connection', async () => {
    const direct = await runScript(['stdio', process.execPath, everythingOnHost(), 'stdio']);
    const through = await runScript([
      'binding',
      'docker',
      box,
      'node',
      EVERYTHING_IN_IMAGE,
      'stdio',
    ]);
    assertSameAnswers(through, direct);
    assert.deepEqual(processesIn(box), [], 'left running in the container');
  });
});
