// The end-to-end runs through real Docker containers (containers.js), plus Docker's own cases:
// no daemon answers, and a call that resumes after its `docker exec -i` channel is killed.

import { describe, test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackendError, Client, docker, progressOf, textOf } from '../index.js';
import { channelsInto, containerTests } from './containers.js';
import { rejection, script, testserverSpec, waitFor } from './helpers.js';

const { engine, skip, name } = containerTests('docker');

describe('no Docker daemon answers', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-nodaemon-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('a BackendError: unreachable', async () => {
    const cli = script(
      join(dir, 'docker'),
      'DOCKER_HOST=unix:///nonexistent.sock exec docker "$@"\n',
    );
    const client = new Client(docker('box', { program: cli }), {
      port: 1,
      tokenFile: '/tmp/token',
      transport: 'built_in',
    });
    try {
      const e = await rejection(client.health());
      assert.ok(e instanceof BackendError, `${e}`);
      assert.equal(e.state, 'unreachable');
      assert.match(e.reason, /Cannot connect to the Docker daemon/);
    } finally {
      await client.close();
    }
  });
});

describe('a call that outlives its docker exec -i channel', { skip }, () => {
  const box = name('resume');
  /** @type {Client} */
  let client;

  before(() => {
    engine.start(box);
    client = new Client(docker(box));
  });

  after(async () => {
    await client?.close();
    engine.stop(box);
  });

  test('the channel killed mid-call: the call finishes, each progress chunk once', async (t) => {
    const hello = await client.openSession();
    if (!hello.retention_ms) {
      t.skip(
        'SKIPPED: this attach keeps no call whose channel ended (its hello announces retention_ms 0)',
      );
      return;
    }
    await client.addMcp(testserverSpec('ts', '/usr/local/bin/mcpgw-testserver'));
    const seen = [];
    const [channel] = channelsInto('docker', box);
    let killed = false;
    for await (const c of client.callToolStream('ts', 'slow', { seconds: 3, steps: 6 })) {
      seen.push(c);
      if (!killed && progressOf(c)?.progress === 2) {
        killed = true;
        process.kill(channel, 'SIGKILL');
      }
    }
    assert.ok(killed);
    assert.deepEqual(
      seen.map((c) => progressOf(c)?.progress ?? 'last'),
      [1, 2, 3, 4, 5, 6, 'last'],
    );
    assert.match(textOf(seen.at(-1)), /done after 6 steps/);
    await waitFor(() => channelsInto('docker', box).some((p) => p !== channel), {
      what: 'a new channel',
    });
  });
});
