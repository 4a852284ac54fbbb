// Sessions end to end in a local sandbox: one `mcpgw-gateway attach` process carries every REST
// call, with live progress and real cancellation; its loss fails what it carried and the client
// goes on one-shot (or opens a new channel). No test here waits by sleeping: each waits on a
// progress chunk, a marker file, a process exit or a promise, with deadlines.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { join } from 'node:path';
import {
  AbortError,
  Client,
  SessionLostError,
  kubectlSession,
  localSession,
  nativeStats,
  progressOf,
  textOf,
} from '../index.js';
import {
  gatewayPath,
  makeSandbox,
  percentile,
  processGone,
  processesMentioning,
  testserverSpec,
  waitFor,
  waitGone,
  rejection,
  streamFailure,
} from './helpers.js';

/** Spawns the session's command with `sh -c` in `dir`, keeping the child for the test. */
function spawner(dir) {
  const spawned = [];
  const open = (command) => {
    const child = spawn('sh', ['-c', command], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    spawned.push(child);
    return child;
  };
  return { open, spawned };
}

describe('a session launching its gateway', () => {
  const sb = makeSandbox();
  /** @type {Client} */
  let client;

  after(async () => {
    await client?.session?.close();
    await client?.stopGateway().catch(() => {});
    client?.close();
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  test('one exec gives a ready session; calls made before its hello wait for it', async () => {
    client = new Client({ exec: sb.exec, gatewayPath: gatewayPath(), stateDir: join(sb.dir, 's') });
    const opening = localSession(client, { cwd: sb.dir });
    // Made before the channel answered: no gateway was known, so they wait for the hello.
    const health = client.health();
    const added = client.addMcp(testserverSpec('ts'));
    const session = await opening;
    assert.equal(session.hello?.launched, true);
    assert.equal(session.hello?.v, 1);
    assert.equal(client.port, session.hello?.port);
    assert.equal((await health).instance_nonce, session.hello?.instance_nonce);
    await added;
    assert.equal(
      textOf(await client.callTool('ts', 'echo', { text: 'over the session' })),
      'over the session',
    );
    assert.deepEqual(sb.commands, [], 'nothing went through exec');
  });

  test('close ends the channel; the gateway it launched runs on, stopGateway stops it', async () => {
    const session = /** @type {import('../index.js').Session} */ (client.session);
    const { pid } = /** @type {any} */ (session.hello);
    await session.close();
    assert.equal(session.lost, true);
    assert.equal(client.session, null);
    assert.deepEqual(
      processesMentioning(' attach ').filter((p) => processesMentioning(sb.dir).includes(p)),
      [],
      'no attach process is left',
    );
    // One-shot now, through exec.
    assert.equal((await client.health()).status, 'ok');
    assert.ok(sb.commands.length > 0);
    await client.stopGateway();
    assert.ok(await waitGone(pid), 'the gateway exited');
    assert.equal(existsSync(join(sb.dir, 's')), false);
  });
});

describe('a session to a running gateway', () => {
  const sb = makeSandbox();
  /** @type {Client} */
  let client;
  const { open, spawned } = spawner(sb.dir);

  before(async () => {
    client = new Client({ exec: sb.exec, gatewayPath: gatewayPath(), stateDir: join(sb.dir, 's') });
    await client.startGateway();
    await client.addMcp(testserverSpec('ts'));
  });

  after(async () => {
    await client.session?.close();
    await client.stopGateway().catch(() => {});
    client.close();
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  /** Commands that went through exec since `from`. */
  const execsSince = (from) => sb.commands.length - from;

  /** The gateway's count of tool calls of `ts` (its `status.calls`). */
  const calls = async () => (await client.listMcps())[0].status?.calls ?? 0;

  /** Waits until the gateway has received a tool call beyond `before`. */
  const untilCalled = (before) =>
    waitFor(async () => (await calls()) > before, { what: 'the call reaching the gateway' });

  /** p50 of `n` sequential echo calls, in ms. */
  async function echoP50(n) {
    const took = [];
    for (let i = 0; i < n; i++) {
      const started = performance.now();
      await client.callTool('ts', 'echo', { text: `${i}` });
      took.push(performance.now() - started);
    }
    return percentile(took, 50);
  }
  let oneShotP50 = 0;

  test('one-shot, for comparison: each call runs a command through exec', async () => {
    const from = sb.commands.length;
    oneShotP50 = await echoP50(40);
    assert.equal(execsSince(from), 40);
  });

  test('calls made before the hello are queued in the session and written when it comes', async () => {
    const from = sb.commands.length;
    const opening = client.attach(open);
    const early = Array.from({ length: 4 }, (_, i) =>
      client.callTool('ts', 'echo', { text: `early ${i}` }).then(textOf),
    );
    const session = await opening;
    assert.equal(session.hello?.launched, false);
    assert.deepEqual(await Promise.all(early), ['early 0', 'early 1', 'early 2', 'early 3']);
    assert.equal(execsSince(from), 0, 'nothing went through exec');
  });

  test('a call over the session costs less than one through exec', async (t) => {
    const from = sb.commands.length;
    const p50 = await echoP50(40);
    assert.equal(execsSince(from), 0);
    const line = `callTool p50 over a local session ${p50.toFixed(1)} ms, one-shot ${oneShotP50.toFixed(1)} ms (40 calls each)`;
    t.diagnostic(line);
    console.log(`session: ${line}`);
    assert.ok(p50 < oneShotP50, line);
  });

  test('64 concurrent calls over one session each get their own answer', async (t) => {
    const from = sb.commands.length;
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 64 }, (_, i) =>
        i % 2
          ? client
              .callTool('ts', 'add', { a: i, b: 1000 })
              .then((c) => c.metadata.structured_content.sum)
          : client.callTool('ts', 'echo', { text: `request ${i}` }).then(textOf),
      ),
    );
    const line = `64 concurrent calls over one session: ${(performance.now() - started).toFixed(0)} ms`;
    t.diagnostic(line);
    console.log(`session: ${line}`);
    answers.forEach((a, i) => assert.equal(a, i % 2 ? i + 1000 : `request ${i}`));
    assert.equal(execsSince(from), 0);
    assert.equal(nativeStats().ops, 0);
  });

  test('progress chunks arrive as they happen, in order, before the final chunk', async (t) => {
    const started = performance.now();
    const seen = [];
    for await (const chunk of client.callToolStream('ts', 'slow', { seconds: 2, steps: 4 })) {
      seen.push({ at: performance.now() - started, chunk });
    }
    t.diagnostic(seen.map((s) => `${s.at.toFixed(0)} ms`).join(', '));
    assert.equal(seen.length, 5);
    const progress = seen.slice(0, 4);
    assert.deepEqual(
      progress.map((s) => progressOf(s.chunk)?.progress),
      [1, 2, 3, 4],
    );
    for (const s of progress) assert.equal(s.chunk.is_last, false);
    const last = seen[4];
    assert.equal(last.chunk.is_last, true);
    assert.match(textOf(last.chunk), /done after 4 steps/);
    // The server sends step k at k x 500 ms: each arrives then, not all at the end.
    progress.forEach((s, k) => {
      assert.ok(s.at >= (k + 1) * 500 - 150, `step ${k + 1} at ${s.at} ms`);
      assert.ok(s.at < (k + 1) * 500 + 400, `step ${k + 1} only at ${s.at} ms`);
    });
    assert.ok(last.at - progress[0].at > 1200, 'the first step came long before the end');
  });

  test("what a session yields is the gateway's chunk frames, decoded and re-serialized unchanged", async () => {
    // A second client on the same gateway, whose channel's output is recorded on its way in.
    const info = /** @type {any} */ (client.session?.hello);
    const other = new Client({
      exec: sb.exec,
      gatewayPath: gatewayPath(),
      port: info.port,
      tokenFile: info.token_file,
      instanceNonce: info.instance_nonce,
    });
    /** @type {Buffer[]} */
    const seen = [];
    try {
      const session = await other.attach((command) => {
        const child = spawn('sh', ['-c', command], { cwd: sb.dir, stdio: 'pipe' });
        const tee = new PassThrough();
        child.stdout.on('data', (b) => seen.push(b));
        child.stdout.pipe(tee);
        return { stdin: child.stdin, stdout: tee };
      });
      const chunks = [];
      for await (const c of other.callToolStream('ts', 'slow', { seconds: 0.3, steps: 3 })) {
        chunks.push(c);
      }
      const media = await other.callTool('ts', 'media', {});
      await session.close();
      const frames = Buffer.concat(seen)
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
      const streamed = frames.filter((f) => f.t === 'chunk').map((f) => f.chunk);
      assert.equal(streamed.length, 4, 'three progress chunks and the last one');
      assert.deepEqual(chunks, streamed);
      assert.deepEqual(JSON.parse(JSON.stringify(chunks)), streamed);
      assert.ok(progressOf(chunks[0]));
      const answer = frames.find((f) => f.t === 'res' && f.body?.chunk?.content?.length === 5);
      assert.deepEqual(media, answer.body.chunk);
      assert.deepEqual(JSON.parse(JSON.stringify(media)), answer.body.chunk);
    } finally {
      other.close();
    }
  });

  test('abort over a session: a cancel frame, and the tool stops (its marker within 100 ms)', async (t) => {
    const marker = join(sb.dir, 'cancelled-stream');
    const ac = new AbortController();
    const reason = new Error('enough');
    const stream = client.callToolStream(
      'ts',
      'slow',
      { seconds: 30, steps: 300, cancel_marker: marker },
      { signal: ac.signal },
    );
    let abortedAt = 0;
    const e = await rejection(
      (async () => {
        for await (const chunk of stream) {
          // The first progress chunk: the tool runs. Abort now.
          assert.ok(progressOf(chunk));
          abortedAt = performance.now();
          ac.abort(reason);
        }
      })(),
    );
    assert.ok(e instanceof AbortError, `${e}`);
    assert.equal(e.cause, reason);
    await waitFor(() => existsSync(marker), { ms: 2000, every: 1, what: 'the cancel marker' });
    const took = performance.now() - abortedAt;
    t.diagnostic(`cancel marker written ${took.toFixed(1)} ms after the abort`);
    console.log(
      `session abort: the test server wrote its cancel marker ${took.toFixed(1)} ms after the abort`,
    );
    assert.ok(took < 100, `the marker took ${took} ms`);
    assert.equal(nativeStats().ops, 0);
  });

  test('abort of a plain call over a session, and leaving a stream early, cancel too', async () => {
    const marker = join(sb.dir, 'cancelled-call');
    const ac = new AbortController();
    const before = await calls();
    const call = client.callTool(
      'ts',
      'slow',
      { seconds: 30, cancel_marker: marker },
      { signal: ac.signal },
    );
    await untilCalled(before);
    ac.abort();
    assert.ok((await rejection(call)) instanceof AbortError);
    await waitFor(() => existsSync(marker), { ms: 2000, every: 1, what: 'the cancel marker' });

    const marker2 = join(sb.dir, 'cancelled-break');
    for await (const chunk of client.callToolStream('ts', 'slow', {
      seconds: 30,
      steps: 300,
      cancel_marker: marker2,
    })) {
      if (progressOf(chunk)) break;
    }
    await waitFor(() => existsSync(marker2), { ms: 2000, every: 1, what: 'the cancel marker' });
  });

  test('a lost channel fails calls in flight with SessionLostError within a second', async (t) => {
    const child = spawned.at(-1);
    const stream = client.callToolStream('ts', 'slow', { seconds: 30, steps: 300 });
    const plain = client.callTool('ts', 'slow', { seconds: 30 });
    const it = stream[Symbol.asyncIterator]();
    assert.ok(progressOf(/** @type {any} */ ((await it.next()).value)), 'the call runs');
    const killedAt = performance.now();
    child.kill('SIGKILL');
    const [e1, e2] = await Promise.all([streamFailure(it), rejection(plain)]);
    const took = performance.now() - killedAt;
    t.diagnostic(`in-flight calls failed ${took.toFixed(0)} ms after the channel was killed`);
    for (const e of [e1, e2]) {
      assert.ok(e instanceof SessionLostError, `${e}`);
      assert.equal(e.code, 'SESSION_LOST');
      assert.match(e.message, /killed by SIGKILL/);
    }
    assert.ok(took < 1000, `took ${took} ms`);
    assert.equal(client.session, null);
    // The next call goes one-shot: the gateway itself still runs.
    const from = sb.commands.length;
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'one-shot' })), 'one-shot');
    assert.ok(execsSince(from) > 0);
  });

  test('reopen: after a loss the next call opens a new channel itself', async () => {
    const session = await client.attach(open, { reopen: true });
    const first = spawned.at(-1);
    first.kill('SIGKILL');
    await session.finished;
    const from = sb.commands.length;
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'reopened' })), 'reopened');
    assert.equal(execsSince(from), 0, 'it went over a new channel');
    assert.notEqual(spawned.at(-1), first);
    assert.ok(client.session && client.session !== session);
    await client.session?.close();
    // A session the host closed is not reopened.
    const from2 = sb.commands.length;
    await client.health();
    assert.ok(execsSince(from2) > 0);
  });

  test('a channel that dies before its hello: queued calls go one-shot, attach says why', async () => {
    const from = sb.commands.length;
    const opening = client.attach(() =>
      spawn('sh', ['-c', 'echo no gateway here >&2; exit 3'], { stdio: 'pipe' }),
    );
    const queued = client.callTool('ts', 'echo', { text: 'fell back' });
    const e = await rejection(opening);
    assert.ok(e instanceof SessionLostError);
    assert.match(e.message, /exit status 3/);
    assert.match(e.message, /no gateway here/);
    assert.equal(textOf(await queued), 'fell back');
    assert.ok(execsSince(from) > 0, 'it went one-shot');
  });

  test('a missing gateway binary: the session says so', async () => {
    const other = new Client({ exec: sb.exec, gatewayPath: join(sb.dir, 'no-such-gateway') });
    try {
      const e = await rejection(localSession(other, { cwd: sb.dir }));
      assert.ok(e instanceof SessionLostError);
      assert.match(e.message, /no-such-gateway/);
    } finally {
      other.close();
    }
  });

  test('kubectlSession runs kubectl exec -i (a stand-in kubectl running the command here)', async () => {
    // No cluster here: the stand-in records its argv and runs what follows `sh -c` locally.
    const fake = join(sb.dir, 'kubectl');
    writeFileSync(
      fake,
      `#!/bin/sh\nprintf '%s\\n' "$@" > ${JSON.stringify(join(sb.dir, 'kubectl-argv'))}\n` +
        'while [ "$1" != "-c" ]; do shift; done\nexec sh -c "$2"\n',
    );
    chmodSync(fake, 0o755);
    const session = await kubectlSession(client, 'pod-0', { kubectl: fake, namespace: 'agents' });
    const from = sb.commands.length;
    assert.equal(
      textOf(await client.callTool('ts', 'echo', { text: 'via kubectl' })),
      'via kubectl',
    );
    assert.equal(execsSince(from), 0);
    await session.close();
    const argv = readFileSync(join(sb.dir, 'kubectl-argv'), 'utf8').split('\n');
    assert.deepEqual(argv.slice(0, 7), [
      'exec',
      '-i',
      '--namespace',
      'agents',
      'pod-0',
      '--',
      'sh',
    ]);
    assert.equal(argv[7], '-c');
    assert.equal(argv[8], session.command);
  });

  test('closing the session ends its process; nothing native is left', async () => {
    const session = await client.attach(open);
    const child = spawned.at(-1);
    const before = await calls();
    const inFlight = rejection(client.callTool('ts', 'slow', { seconds: 30 }));
    await untilCalled(before);
    await session.close();
    assert.ok((await inFlight) instanceof SessionLostError);
    assert.ok(child.exitCode !== null || child.signalCode !== null, 'the channel exited');
    assert.ok(processGone(child.pid));
    assert.equal(nativeStats().sessions, 0);
    assert.equal(nativeStats().ops, 0);
  });
});
