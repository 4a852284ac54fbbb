// End to end through real Docker containers (tests/docker/sandbox.sh: a busybox-only image with
// the static gateway and test server, no network, entered only with `docker exec`): the gateway
// binary uploaded in one exec with stdin, one-shot calls through dockerExec, a session through
// `docker exec -i` (progress, 64 concurrent calls, cancellation, `docker kill` mid-call), and
// dockerExec's verdicts against the real daemon. Prints `SKIPPED: <reason>` without Docker.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  AbortError,
  Client,
  CommandError,
  ExecError,
  SessionLostError,
  dockerExec,
  dockerSession,
  nativeStats,
  progressOf,
  textOf,
} from '../index.js';
import {
  containerProcesses,
  docker,
  dockerImage,
  percentile,
  recording,
  staticGatewayPath,
  startContainer,
  stopContainers,
  testserverSpec,
  waitFor,
  rejection,
  streamFailure,
} from './helpers.js';

const docked = dockerImage();
const skip = 'skip' in docked ? `SKIPPED: ${docked.skip}` : false;
if (skip) console.log(skip);
const image = 'image' in docked ? docked.image : '';

/** A name for a test container, unique to this run. */
const containerName = (what) => `mcpgw-node-${what}-${process.pid}`;

/** The test server inside the image. */
const TESTSERVER = '/usr/local/bin/mcpgw-testserver';

describe('a gateway in a Docker container', { skip }, () => {
  const box = containerName('box');
  // Shared with the container, for the test server's cancel markers.
  const shared = mkdtempSync(join(tmpdir(), 'mcpgw-node-docker-'));
  const rec = recording(dockerExec(box));
  /** @type {Client} */
  let client;

  before(() => {
    chmodSync(shared, 0o777);
    startContainer(image, box, '--', '-v', `${shared}:/shared`);
    // Installed by the test below, at a path the image does not have.
    client = new Client({ exec: rec.exec, gatewayPath: '/opt/mcpgw/bin/mcpgw-gateway' });
  });

  after(async () => {
    await client?.session?.close();
    client?.close();
    stopContainers(box);
    rmSync(shared, { recursive: true, force: true });
  });

  test('ensureGatewayBinary uploads the static gateway in one exec, with stdin', async (t) => {
    docker('exec', box, 'mkdir', '-p', '/opt/mcpgw/bin');
    const from = rec.commands.length;
    const started = performance.now();
    const status = await client.ensureGatewayBinary(staticGatewayPath());
    const took = performance.now() - started;
    const uploads = rec.stdins
      .slice(from)
      .map((bytes, i) => ({ bytes, ms: rec.durations[from + i] }))
      .filter((u) => u.bytes > 0);
    const execs = rec.commands.length - from;
    const line =
      `ensureGatewayBinary: the static gateway (${(uploads[0]?.bytes / 1048576).toFixed(1)} MiB) ` +
      `uploaded in one docker exec with stdin taking ${uploads[0]?.ms.toFixed(0)} ms; ` +
      `${execs} execs and ${took.toFixed(0)} ms in all (hashing on the host included)`;
    t.diagnostic(line);
    console.log(`docker: ${line}`);
    assert.equal(status.uploaded, true);
    assert.equal(uploads.length, 1, 'the binary went in one command, on stdin');
    assert.ok(execs <= 2, `${execs} execs`);
    assert.equal(docker('exec', box, 'sha256sum', status.path).split(' ')[0], status.sha256);
    assert.equal((await client.ensureGatewayBinary(staticGatewayPath())).uploaded, false);
  });

  test('one-shot: launch, register, call through docker exec', async () => {
    const info = await client.startGateway();
    assert.ok(info.pid > 0);
    await client.addMcp(testserverSpec('ts', TESTSERVER));
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'in docker' })), 'in docker');
    const media = await client.callTool('ts', 'media', {});
    assert.equal(media.content.length, 5);
  });

  test('session: calls over docker exec -i, and p50 against one-shot', async (t) => {
    const sampleOneShot = [];
    for (let i = 0; i < 10; i++) {
      const s = performance.now();
      await client.callTool('ts', 'echo', { text: `one-shot ${i}` });
      sampleOneShot.push(performance.now() - s);
    }
    const from = rec.commands.length;
    const session = await dockerSession(client, box);
    assert.equal(session.hello?.launched, false);
    const sampleSession = [];
    for (let i = 0; i < 30; i++) {
      const s = performance.now();
      assert.equal(textOf(await client.callTool('ts', 'echo', { text: `s ${i}` })), `s ${i}`);
      sampleSession.push(performance.now() - s);
    }
    assert.equal(rec.commands.length, from, 'no exec while the session is open');
    const p50s = percentile(sampleSession, 50);
    const p50o = percentile(sampleOneShot, 50);
    t.diagnostic(`call p50: session ${p50s.toFixed(1)} ms, one-shot ${p50o.toFixed(1)} ms`);
    console.log(
      `docker: callTool p50 over the session ${p50s.toFixed(1)} ms (30 calls), one-shot docker exec ${p50o.toFixed(1)} ms (10 calls)`,
    );
    assert.ok(p50s < p50o, 'the session is faster than an exec per call');
  });

  test('session: 64 concurrent calls over one docker exec -i', async (t) => {
    const from = rec.commands.length;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        client.callTool('ts', 'echo', { text: `request ${i}` }).then(textOf),
      ),
    );
    const line = `64 concurrent calls over one session: ${(performance.now() - started).toFixed(0)} ms`;
    t.diagnostic(line);
    console.log(`docker: ${line}`);
    answers.forEach((a, i) => assert.equal(a, `request ${i}`));
    assert.equal(rec.commands.length, from);
  });

  test('session: progress chunks arrive as they happen, before the final chunk', async () => {
    const started = performance.now();
    const seen = [];
    for await (const c of client.callToolStream('ts', 'slow', { seconds: 1.2, steps: 3 })) {
      seen.push({ at: performance.now() - started, c });
    }
    assert.deepEqual(
      seen.map((s) => progressOf(s.c)?.progress ?? 'last'),
      [1, 2, 3, 'last'],
    );
    assert.ok(seen[0].at < 800, `the first step came at ${seen[0].at} ms`);
    assert.ok(seen[3].at - seen[0].at > 500);
  });

  test('session: an abort makes the test server in the container stop at once', async (t) => {
    const ac = new AbortController();
    let abortedAt = 0;
    const e = await rejection(
      (async () => {
        for await (const c of client.callToolStream(
          'ts',
          'slow',
          { seconds: 30, steps: 300, cancel_marker: '/shared/cancelled' },
          { signal: ac.signal },
        )) {
          assert.ok(progressOf(c));
          abortedAt = performance.now();
          ac.abort();
        }
      })(),
    );
    assert.ok(e instanceof AbortError);
    const marker = join(shared, 'cancelled');
    await waitFor(() => existsSync(marker), { ms: 3000, every: 1, what: 'the cancel marker' });
    const took = performance.now() - abortedAt;
    t.diagnostic(`cancel marker ${took.toFixed(1)} ms after the abort`);
    console.log(`docker: cancel marker written ${took.toFixed(1)} ms after the abort`);
    assert.ok(took < 100, `took ${took} ms`);
  });

  test('closing the session leaves no process behind in the container', async () => {
    const session = /** @type {import('../index.js').Session} */ (client.session);
    await session.close();
    await waitFor(() => !containerProcesses(box).some((p) => / attach /.test(p)), {
      what: 'attach exiting',
      every: 100,
    });
    await client.stopGateway();
    assert.deepEqual(
      containerProcesses(box).filter((p) => !/^\d+\s+(\/sbin\/docker-init|sleep infinity)/.test(p)),
      [],
    );
    assert.equal(nativeStats().sessions, 0);
  });
});

describe('docker kill during a session', { skip }, () => {
  const box = containerName('kill');
  /** @type {Client} */
  let client;

  before(() => {
    startContainer(image, box);
    client = new Client({ exec: dockerExec(box) });
  });

  after(() => {
    client?.close();
    stopContainers(box);
  });

  test('in-flight calls fail with SessionLostError within a second; the next call knows the sandbox is gone', async (t) => {
    // One exec: the session launches the gateway.
    const session = await dockerSession(client, box);
    assert.equal(session.hello?.launched, true);
    await client.addMcp(testserverSpec('ts', TESTSERVER));
    const plain = rejection(client.callTool('ts', 'slow', { seconds: 30 }));
    const stream = client.callToolStream('ts', 'slow', { seconds: 30, steps: 300 });
    const it = stream[Symbol.asyncIterator]();
    assert.ok(progressOf(/** @type {any} */ ((await it.next()).value)), 'the call runs');
    const killedAt = performance.now();
    docker('kill', box);
    const [e1, e2] = await Promise.all([streamFailure(it), plain]);
    const took = performance.now() - killedAt;
    t.diagnostic(`in-flight calls failed ${took.toFixed(0)} ms after docker kill`);
    console.log(
      `docker: in-flight calls failed ${took.toFixed(0)} ms after docker kill was issued`,
    );
    for (const e of [e1, e2]) {
      assert.ok(e instanceof SessionLostError, `${e}`);
      assert.match(e.message, /exit status 137/);
    }
    assert.ok(took < 1000, `took ${took} ms`);
    // The next call goes one-shot, and dockerExec says the container is gone.
    const e = await rejection(client.health());
    assert.ok(e instanceof ExecError, `${e}`);
    assert.equal(e.code, 'EXEC_FAILED');
    assert.match(e.message, /the sandbox is gone/);
  });
});

describe("dockerExec's verdicts against the real daemon", { skip }, () => {
  const box = containerName('verdict');
  const stopped = containerName('stopped');
  const scratch = mkdtempSync(join(tmpdir(), 'mcpgw-node-dockerexec-'));

  before(() => {
    startContainer(image, box);
    startContainer(image, stopped);
    docker('stop', '-t', '1', stopped);
  });

  after(() => {
    stopContainers(box, stopped);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A client whose calls go through `exec`, to a gateway that would be on port 1. */
  const clientOf = (exec) =>
    new Client({ exec, port: 1, tokenFile: '/tmp/token', transport: 'builtin' });

  test('no such container, a stopped one, no daemon: EXEC_FAILED, the sandbox is gone', async () => {
    const noDaemon = join(scratch, 'docker-no-daemon');
    writeFileSync(noDaemon, '#!/bin/sh\nDOCKER_HOST=unix:///nonexistent.sock exec docker "$@"\n');
    chmodSync(noDaemon, 0o755);
    for (const [exec, why] of [
      [dockerExec(containerName('never-was')), /No such container/],
      [dockerExec(stopped), /is not running/],
      [dockerExec(box, { docker: noDaemon }), /Cannot connect to the Docker daemon/],
    ]) {
      const client = clientOf(exec);
      const e = await rejection(client.health());
      client.close();
      assert.ok(e instanceof ExecError, `${e}`);
      assert.equal(e.code, 'EXEC_FAILED');
      assert.match(e.message, /the sandbox is gone/);
      assert.match(e.message, why);
    }
  });

  test('the container killed during a command: EXEC_FAILED', async () => {
    const victim = containerName('victim');
    startContainer(image, victim);
    try {
      const running = dockerExec(victim)('touch /tmp/started; sleep 30', {
        timeoutMs: 60_000,
        signal: new AbortController().signal,
      });
      await waitFor(
        () => {
          try {
            docker('exec', victim, 'test', '-f', '/tmp/started');
            return true;
          } catch {
            return false;
          }
        },
        { what: 'the command starting', every: 50 },
      );
      docker('kill', victim);
      await assert.rejects(running, /the sandbox is gone: container .* was killed/);
    } finally {
      stopContainers(victim);
    }
  });

  test('a command that fails in a running container is its own result, not a gone sandbox', async () => {
    const exec = dockerExec(box);
    const opts = { timeoutMs: 10_000, signal: new AbortController().signal };
    assert.equal((await exec('kill -9 $$', opts)).exitCode, 137);
    assert.equal((await exec('echo oops >&2; exit 1', opts)).exitCode, 1);
    // The gateway binary missing in the container: the command ran and failed.
    const client = new Client({ exec, gatewayPath: '/nonexistent/mcpgw-gateway' });
    const e = await rejection(client.startGateway());
    client.close();
    assert.ok(!(e instanceof ExecError), `${e}`);
    assert.ok(e instanceof CommandError || e.code === 'START_FAILED', `${e.code}: ${e.message}`);
  });
});
