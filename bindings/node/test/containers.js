// The end-to-end runs through real containers, for Docker and for podman alike
// (tests/docker/sandbox.sh: a busybox-only image with the static gateway and test server, no
// network, entered only with `docker exec` / `podman exec`): the gateway binary uploaded in one
// exec with stdin, one-shot calls, a session over `exec -i` (progress, 64 concurrent calls,
// cancellation, a container removed mid-call), a cancelled one-shot command ending inside the
// container, and the backend's verdicts on containers that are gone, stopped or unreachable.
// Each engine's tests print `SKIPPED: <reason>` where it is not here.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BackendError,
  CancelledError,
  Client,
  ExecFailedError,
  SessionLostError,
  docker,
  podman,
  progressOf,
  textOf,
} from '../index.js';
import {
  engine,
  percentile,
  processesMentioning,
  rejection,
  script,
  staticGatewayPath,
  streamFailure,
  testserverSpec,
  waitFor,
} from './helpers.js';

/** The test server inside the image. */
const TESTSERVER = '/usr/local/bin/mcpgw-testserver';

/**
 * The container tests for one engine.
 *
 * @param {'docker' | 'podman'} kind
 */
export function containerTests(kind) {
  const e = engine(kind);
  const img = e.image();
  const skip = 'skip' in img ? `SKIPPED: ${kind}: ${img.skip}` : false;
  if (skip) console.log(skip);
  /** A name for a test container, unique to this run. */
  const name = (what) => `mcpgw-node-${kind}-${what}-${process.pid}`;
  /** The backend of container `box`, its CLI run by `program` when given. */
  const backend = (box, program) =>
    (kind === 'docker' ? docker : podman)(box, { options: e.options, program });

  describe(`a gateway in a ${kind} container`, { skip }, () => {
    const box = name('box');
    // Shared with the container, for the test server's cancel markers.
    const shared = mkdtempSync(join(tmpdir(), `mcpgw-node-${kind}-`));
    // The CLI, through a wrapper that records each invocation (one file each) and runs it.
    const log = join(shared, 'execs');
    const cli = script(
      join(shared, kind),
      `mkdir -p ${log}; printf '%s\\n' "$*" > ${log}/$(date +%s%N).$$\nexec ${kind} "$@"\n`,
    );
    const execs = () => (existsSync(log) ? readdirSync(log).length : 0);
    /** @type {Client} */
    let client;

    before(() => {
      chmodSync(shared, 0o777);
      e.start(box, '-v', `${shared}:/shared`);
      // Installed by the test below, at a path the image does not have.
      client = new Client(backend(box, cli), { gatewayPath: '/opt/mcpgw/bin/mcpgw-gateway' });
    });

    after(async () => {
      await client?.close();
      e.stop(box);
      rmSync(shared, { recursive: true, force: true });
    });

    test('ensureGatewayBinary uploads the static gateway in one exec, with stdin', async (t) => {
      e.cli('exec', box, 'mkdir', '-p', '/opt/mcpgw/bin');
      const from = execs();
      const started = performance.now();
      const status = await client.ensureGatewayBinary(staticGatewayPath());
      const took = performance.now() - started;
      const n = execs() - from;
      const line = `ensureGatewayBinary: the static gateway uploaded with ${n} ${kind} execs in ${took.toFixed(0)} ms (hashing on the host included)`;
      t.diagnostic(line);
      console.log(`${kind}: ${line}`);
      assert.equal(status.uploaded, true);
      assert.ok(n <= 2, `${n} execs`);
      assert.equal(e.cli('exec', box, 'sha256sum', status.path).split(' ')[0], status.sha256);
      assert.equal((await client.ensureGatewayBinary(staticGatewayPath())).uploaded, false);
    });

    test(`one-shot: launch, register, call through ${kind} exec`, async () => {
      const info = await client.startGateway();
      assert.ok(info.pid > 0);
      await client.addMcp(testserverSpec('ts', TESTSERVER));
      assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'in a box' })), 'in a box');
      assert.equal((await client.callTool('ts', 'media', {})).content.length, 5);
    });

    test('one-shot cancel: the command ends inside the container, and the upstream learns it', async () => {
      const ac = new AbortController();
      const calls = async () => (await client.listMcps())[0].status?.calls ?? 0;
      const before = await calls();
      const call = client.callTool(
        'ts',
        'slow',
        { seconds: 30, cancel_marker: '/shared/cancelled-one-shot' },
        { signal: ac.signal },
      );
      await waitFor(async () => (await calls()) > before, { what: 'the call', every: 100 });
      ac.abort();
      assert.ok((await rejection(call)) instanceof CancelledError);
      await waitFor(() => existsSync(join(shared, 'cancelled-one-shot')), {
        ms: 5000,
        what: 'the cancel marker',
      });
    });

    test(`session: calls over ${kind} exec -i, and p50 against one-shot`, async (t) => {
      const oneShot = [];
      for (let i = 0; i < 10; i++) {
        const s = performance.now();
        await client.callTool('ts', 'echo', { text: `one-shot ${i}` });
        oneShot.push(performance.now() - s);
      }
      const hello = await client.openSession();
      assert.equal(hello.launched, false);
      const from = execs();
      const overSession = [];
      for (let i = 0; i < 30; i++) {
        const s = performance.now();
        assert.equal(textOf(await client.callTool('ts', 'echo', { text: `s ${i}` })), `s ${i}`);
        overSession.push(performance.now() - s);
      }
      assert.equal(execs(), from, 'no exec while the session is open');
      const p50s = percentile(overSession, 50);
      const p50o = percentile(oneShot, 50);
      const line = `callTool p50 over the session ${p50s.toFixed(1)} ms (30 calls), one-shot ${kind} exec ${p50o.toFixed(1)} ms (10 calls)`;
      t.diagnostic(line);
      console.log(`${kind}: ${line}`);
      assert.ok(p50s < p50o, line);
    });

    test(`session: 64 concurrent calls over one ${kind} exec -i`, async (t) => {
      const from = execs();
      const started = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          client.callTool('ts', 'echo', { text: `request ${i}` }).then(textOf),
        ),
      );
      const line = `64 concurrent calls over one session: ${(performance.now() - started).toFixed(0)} ms`;
      t.diagnostic(line);
      console.log(`${kind}: ${line}`);
      answers.forEach((a, i) => assert.equal(a, `request ${i}`));
      assert.equal(execs(), from);
    });

    test('session: progress chunks arrive as they happen, before the last chunk', async () => {
      const started = performance.now();
      const seen = [];
      for await (const c of client.callToolStream('ts', 'slow', { seconds: 1.2, steps: 3 })) {
        seen.push({ at: performance.now() - started, c });
      }
      assert.deepEqual(
        seen.map((s) => progressOf(s.c)?.progress ?? 'last'),
        [1, 2, 3, 'last'],
      );
      assert.ok(seen[3].at - seen[0].at > 500);
    });

    test('session: a cancel makes the test server in the container stop at once', async (t) => {
      const ac = new AbortController();
      let abortedAt = 0;
      const err = await rejection(
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
      assert.ok(err instanceof CancelledError, `${err}`);
      await waitFor(() => existsSync(join(shared, 'cancelled')), {
        ms: 3000,
        every: 1,
        what: 'the cancel marker',
      });
      const took = performance.now() - abortedAt;
      t.diagnostic(`cancel marker ${took.toFixed(1)} ms after the abort`);
      console.log(`${kind}: cancel marker written ${took.toFixed(1)} ms after the abort`);
      assert.ok(took < 100, `took ${took} ms`);
    });

    test('closing the session leaves no process behind in the container', async () => {
      await client.closeSession();
      // Live processes only: a container without an init (podman's here) keeps its orphans
      // as zombies.
      const inBox = () =>
        e
          .cli('exec', box, 'ps', '-o', 'pid,stat,args')
          .split('\n')
          .slice(1)
          .map((l) => l.trim().split(/\s+/))
          .filter(([, stat, ...args]) => stat && !stat.startsWith('Z') && args[0] !== 'ps')
          .map(([pid, , ...args]) => `${pid} ${args.join(' ')}`);
      await waitFor(() => !inBox().some((p) => / attach /.test(p)), {
        what: 'attach exiting',
        every: 100,
      });
      await client.stopGateway();
      assert.deepEqual(
        inBox().filter((p) => !/^\d+\s+(\/sbin\/docker-init|sleep infinity)/.test(p)),
        [],
      );
    });
  });

  describe(`a ${kind} container removed during a session`, { skip }, () => {
    const box = name('kill');
    /** @type {Client} */
    let client;

    before(() => {
      e.start(box);
      client = new Client(backend(box));
    });

    after(async () => {
      await client?.close();
      e.stop(box);
    });

    test('in-flight calls fail with SessionLostError; later calls with a BackendError: gone', async (t) => {
      // One exec: the session launches the gateway.
      const hello = await client.openSession();
      assert.equal(hello.launched, true);
      await client.addMcp(testserverSpec('ts', TESTSERVER));
      const plain = rejection(client.callTool('ts', 'slow', { seconds: 30 }));
      const it = client
        .callToolStream('ts', 'slow', { seconds: 30, steps: 300 })
        [Symbol.asyncIterator]();
      assert.ok(progressOf(/** @type {any} */ ((await it.next()).value)), 'the call runs');
      const killedAt = performance.now();
      e.stop(box);
      const [e1, e2] = await Promise.all([streamFailure(it), plain]);
      const took = performance.now() - killedAt;
      t.diagnostic(`in-flight calls failed ${took.toFixed(0)} ms after ${kind} rm -f returned`);
      console.log(
        `${kind}: in-flight calls failed ${took.toFixed(0)} ms after ${kind} rm -f returned`,
      );
      for (const err of [e1, e2]) assert.ok(err instanceof SessionLostError, `${err}`);
      assert.equal(client.state().session, 'off', 'a gone container is not reopened');
      // The next call goes one-shot, and the backend says the container is gone.
      const err = await rejection(client.health());
      assert.ok(err instanceof BackendError, `${err}`);
      assert.ok(err instanceof ExecFailedError);
      assert.equal(err.code, 'EXEC_FAILED');
      assert.equal(err.state, 'gone');
      assert.equal(err.target, box);
    });
  });

  describe(`the ${kind} backend's verdicts against the real engine`, { skip }, () => {
    const box = name('verdict');
    const stopped = name('stopped');

    before(() => {
      e.start(box);
      e.start(stopped);
      e.cli('stop', '-t', '0', stopped);
    });

    after(() => e.stop(box, stopped));

    /** A client of the backend, to a gateway that would be on port 1. */
    const clientOf = (b) =>
      new Client(b, { port: 1, tokenFile: '/tmp/token', transport: 'built_in' });

    /** The error of one health check and of opening a session through backend `b`. */
    async function failures(b) {
      const client = clientOf(b);
      try {
        return [await rejection(client.health()), await rejection(client.openSession())];
      } finally {
        await client.close();
      }
    }

    test('a container that does not exist, one stopped: a BackendError saying which', async () => {
      for (const [target, state] of [
        [name('never-was'), 'gone'],
        [stopped, 'not_running'],
      ]) {
        for (const err of await failures(backend(target))) {
          assert.ok(err instanceof BackendError, `${target}: ${err}`);
          assert.equal(err.code, 'EXEC_FAILED');
          assert.equal(err.state, state, err.message);
          assert.equal(err.backend, kind);
          assert.equal(err.target, target);
          assert.doesNotMatch(err.message, /gateway binary/);
        }
      }
    });

    test('exec options the engine cannot run with: cannot_run, not the command failing', async () => {
      const b = (kind === 'docker' ? docker : podman)(box, {
        options: e.options,
        execOptions: ['--workdir', '/nonexistent'],
      });
      const [err] = await failures(b);
      assert.ok(err instanceof BackendError, `${err}`);
      assert.equal(err.state, 'cannot_run', err.message);
    });

    test('the gateway binary missing in a running container: the command failed, not the backend', async () => {
      const client = new Client(backend(box), { gatewayPath: '/nonexistent/mcpgw-gateway' });
      try {
        const err = await rejection(client.startGateway());
        assert.ok(!(err instanceof ExecFailedError), `${err}`);
        assert.match(err.code, /START_FAILED|COMMAND_FAILED/);
      } finally {
        await client.close();
      }
    });
  });

  return { engine: e, skip, name, backend };
}

/** Pids of this host's `exec -i` channel processes into `box`. */
export function channelsInto(kind, box) {
  return processesMentioning(kind, box, 'attach');
}

/** The host's record of a file, for diagnostics. */
export const readText = (path) => (existsSync(path) ? readFileSync(path, 'utf8') : '');
