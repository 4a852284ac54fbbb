// Sessions end to end in a local sandbox: one `mcpgw-gateway attach` process carries every REST
// call, with live progress and real cancellation; a lost channel fails what it carried and is
// opened again; closing it ends its process. The sandbox is entered through a recording argv
// prefix, so a test can tell what went one-shot. No test waits by sleeping: each waits on a
// progress chunk, a marker file, a process exit or a promise, with deadlines.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { PassThrough } from 'node:stream';
import { join } from 'node:path';
import {
  CancelledError,
  Client,
  InvalidArgumentError,
  InvalidStateError,
  SessionLostError,
  StartFailedError,
  exec,
  local,
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
  rejection,
  runningGateway,
  shell,
  streamFailure,
  testserverSpec,
  waitFor,
  waitGone,
} from './helpers.js';

describe('a session launching its gateway', () => {
  const sb = makeSandbox();
  const stateDir = join(sb.dir, 's');
  /** @type {Client} */
  let client;

  after(async () => {
    await client?.stopGateway().catch(() => {});
    await client?.close();
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  test('one exec gives a ready session; calls made before its hello wait for it', async () => {
    client = new Client(sb.backend, { gatewayPath: gatewayPath(), stateDir });
    const opening = client.openSession();
    assert.equal(client.state().session, 'opening');
    // Made before the channel answered: no gateway was known, so they wait for the hello.
    const health = client.health();
    const added = client.addMcp(testserverSpec('ts'));
    const hello = await opening;
    assert.equal(hello.launched, true);
    assert.equal(hello.v, 2);
    assert.equal(client.state().session, 'open');
    assert.equal(client.port, hello.port);
    assert.equal((await health).instance_nonce, hello.instance_nonce);
    await added;
    assert.equal(
      textOf(await client.callTool('ts', 'echo', { text: 'over the session' })),
      'over the session',
    );
    assert.deepEqual(sb.commands(), [], 'nothing went one-shot');
    assert.equal(sb.invocations().length, 1, 'one exec: the channel');
  });

  test('closeSession ends the channel; the gateway it launched runs on, stopGateway stops it', async () => {
    const { pid } = /** @type {any} */ (client.state().hello);
    const attach = processesMentioning('attach', stateDir);
    assert.equal(attach.length, 1, 'one attach process');
    await client.closeSession();
    assert.equal(client.state().session, 'off');
    assert.ok(await waitGone(attach[0]), 'attach exited');
    // One-shot now.
    assert.equal((await client.health()).status, 'ok');
    assert.ok(sb.commands().length > 0);
    await client.stopGateway();
    assert.ok(await waitGone(pid), 'the gateway exited');
    assert.equal(existsSync(stateDir), false);
  });
});

describe('a session to a running gateway', () => {
  const sb = makeSandbox();
  const gw = runningGateway(sb);
  const { stateDir } = gw;
  /** @type {Client} */
  let client;
  before(() => (client = gw.client));

  /** One-shot commands run since `from`. */
  const oneShotSince = (from) => sb.commands().length - from;
  /** The live attach processes of this sandbox. */
  const attaches = () => processesMentioning('attach', stateDir);
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

  test('one-shot, for comparison: each call runs a command', async () => {
    const from = sb.commands().length;
    oneShotP50 = await echoP50(20);
    assert.equal(oneShotSince(from), 20);
  });

  test('calls made before the hello are queued and written when it comes', async () => {
    const from = sb.commands().length;
    const opening = client.openSession();
    const early = Array.from({ length: 4 }, (_, i) =>
      client.callTool('ts', 'echo', { text: `early ${i}` }).then(textOf),
    );
    const hello = await opening;
    assert.equal(hello.launched, false);
    assert.deepEqual(await Promise.all(early), ['early 0', 'early 1', 'early 2', 'early 3']);
    assert.equal(oneShotSince(from), 0, 'nothing went one-shot');
    // Opening an open session is the same session.
    assert.deepEqual(await client.openSession(), hello);
    assert.equal(attaches().length, 1);
  });

  test('a call over the session costs less than one-shot', async (t) => {
    const from = sb.commands().length;
    const p50 = await echoP50(40);
    assert.equal(oneShotSince(from), 0);
    const line = `callTool p50 over a local session ${p50.toFixed(1)} ms, one-shot ${oneShotP50.toFixed(1)} ms`;
    t.diagnostic(line);
    console.log(`session: ${line}`);
    assert.ok(p50 < oneShotP50, line);
  });

  test('64 concurrent calls over one session each get their own answer', async (t) => {
    const from = sb.commands().length;
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
    assert.equal(oneShotSince(from), 0);
  });

  test('progress arrives as it happens, in order, before the last chunk: as a stream and as a callback', async (t) => {
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
    assert.equal(seen[4].chunk.is_last, true);
    assert.match(textOf(seen[4].chunk), /done after 4 steps/);
    // The server sends step k at k x 500 ms: each arrives then, not all at the end.
    assert.ok(seen[4].at - progress[0].at > 1200, 'the first step came long before the end');
    /** @type {import('../index.js').ToolChunk[]} */
    const called = [];
    const last = await client.callTool(
      'ts',
      'slow',
      { seconds: 0.3, steps: 3 },
      { onProgress: (c) => called.push(c) },
    );
    assert.deepEqual(
      called.map((c) => progressOf(c)?.progress),
      [1, 2, 3],
    );
    assert.equal(last.is_last, true);
  });

  test('a progress callback that throws cancels its call, which rejects with what it threw', async () => {
    const oops = new Error('the consumer broke');
    const e = await rejection(
      client.callTool(
        'ts',
        'slow',
        { seconds: 30, steps: 300 },
        {
          onProgress: () => {
            throw oops;
          },
        },
      ),
    );
    assert.equal(e, oops);
  });

  test("what a session yields is the gateway's chunk frames, decoded and re-serialized unchanged", async () => {
    // A second client on the same gateway, through an exec backend whose channel's output is
    // recorded on its way in.
    const info = /** @type {any} */ (client.state().hello);
    /** @type {Buffer[]} */
    const seen = [];
    const other = new Client(
      exec((command, { signal }) => shell(command, { cwd: sb.dir, signal }), {
        open: (command) => {
          const child = spawn('sh', ['-c', command], { cwd: sb.dir, stdio: 'pipe' });
          const tee = new PassThrough();
          child.stdout.on('data', (b) => seen.push(b));
          child.stdout.pipe(tee);
          return { stdin: child.stdin, stdout: tee, stderr: child.stderr };
        },
      }),
      {
        gatewayPath: gatewayPath(),
        port: info.port,
        tokenFile: info.token_file,
        instanceNonce: info.instance_nonce,
      },
    );
    try {
      await other.openSession();
      const chunks = [];
      for await (const c of other.callToolStream('ts', 'slow', { seconds: 0.3, steps: 3 })) {
        chunks.push(c);
      }
      const media = await other.callTool('ts', 'media', {});
      await other.closeSession();
      const frames = Buffer.concat(seen)
        .toString('utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line));
      const streamed = frames.filter((f) => f.t === 'chunk').map((f) => f.chunk);
      assert.equal(streamed.length, 4, 'three progress chunks and the last one');
      assert.deepEqual(chunks, streamed);
      assert.deepEqual(JSON.parse(JSON.stringify(chunks)), streamed);
      const answer = frames.find((f) => f.t === 'res' && f.body?.chunk?.content?.length === 5);
      assert.deepEqual(media, answer.body.chunk);
    } finally {
      await other.close();
    }
  });

  test('cancel over a session: a cancel frame, and the tool stops (its marker within 100 ms)', async (t) => {
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
          // The first progress chunk: the tool runs. Cancel now.
          assert.ok(progressOf(chunk));
          abortedAt = performance.now();
          ac.abort(reason);
        }
      })(),
    );
    assert.ok(e instanceof CancelledError, `${e}`);
    assert.equal(e.cause, reason);
    await waitFor(() => existsSync(marker), { ms: 2000, every: 1, what: 'the cancel marker' });
    const took = performance.now() - abortedAt;
    t.diagnostic(`cancel marker written ${took.toFixed(1)} ms after the abort`);
    console.log(
      `session cancel: the test server wrote its cancel marker ${took.toFixed(1)} ms after the abort`,
    );
    assert.ok(took < 100, `the marker took ${took} ms`);
  });

  test('cancelling a plain call over a session, and leaving a stream early, cancel too', async () => {
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
    assert.ok((await rejection(call)) instanceof CancelledError);
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

  test('a lost channel is opened again: the calls it carried resume on the new one (or fail when the gateway keeps no calls); the next call goes over it', async (t) => {
    const [first] = attaches();
    const resumes = Boolean(client.state().hello?.retention_ms);
    const seconds = resumes ? 2 : 30;
    const stream = client.callToolStream('ts', 'slow', { seconds, steps: 20 });
    const plain = client.callTool('ts', 'slow', { seconds });
    const it = stream[Symbol.asyncIterator]();
    assert.ok(progressOf(/** @type {any} */ ((await it.next()).value)), 'the call runs');
    const killedAt = performance.now();
    process.kill(first, 'SIGKILL');
    if (resumes) {
      /** @type {any[]} */
      const rest = [];
      for (let r = await it.next(); !r.done; r = await it.next()) rest.push(r.value);
      const done = await plain;
      t.diagnostic(
        `in-flight calls finished ${(performance.now() - killedAt).toFixed(0)} ms after the channel was killed`,
      );
      const last = rest.at(-1);
      assert.ok(last?.is_last, 'the stream ends with its last chunk');
      assert.notEqual(last.state, 'error', JSON.stringify(last));
      assert.notEqual(done.state, 'error', JSON.stringify(done));
      const steps = rest.map((c) => progressOf(c)?.progress).filter((p) => p !== undefined);
      for (let i = 1; i < steps.length; i++) {
        assert.ok(steps[i] > steps[i - 1], `each progress chunk once, in order: ${steps}`);
      }
      assert.equal(client.state().resumed >= 2, true, JSON.stringify(client.state()));
    } else {
      const [e1, e2] = await Promise.all([streamFailure(it), rejection(plain)]);
      t.diagnostic(
        `in-flight calls failed ${(performance.now() - killedAt).toFixed(0)} ms after the channel was killed`,
      );
      for (const e of [e1, e2]) {
        assert.ok(e instanceof SessionLostError, `${e}`);
        assert.equal(e.code, 'SESSION_LOST');
        assert.match(e.message, /137/);
      }
    }
    const from = sb.commands().length;
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'again' })), 'again');
    assert.equal(oneShotSince(from), 0, 'it went over a new channel');
    const now = attaches();
    assert.equal(now.length, 1);
    assert.notEqual(now[0], first);
    assert.equal(client.state().session, 'open');
  });

  test('a virtual connection over the session: JSON-RPC both ways with the MCP; an unknown MCP is refused with the reason', async () => {
    for (const [mcp, opts] of [
      [5, {}],
      ['t\0s', {}],
      ['ts', { agentId: 7 }],
    ]) {
      assert.throws(
        () => client.connect(/** @type {any} */ (mcp), /** @type {any} */ (opts)),
        InvalidArgumentError,
      );
    }
    const refused = client.connect('nosuch');
    assert.equal(await refused.opened, false);
    const end = await refused.closed;
    assert.equal(end.status, 404, JSON.stringify(end));
    assert.match(String(end.reason), /nosuch/);
    assert.throws(() => refused.send({ jsonrpc: '2.0', id: 1, method: 'ping' }), InvalidStateError);
    for await (const message of refused)
      assert.fail(`a message on a refused connection: ${message}`);

    const conn = client.connect('ts');
    assert.equal(await conn.opened, true);
    const messages = conn[Symbol.asyncIterator]();
    conn.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'node-test', version: '1' },
      },
    });
    const init = /** @type {any} */ ((await messages.next()).value);
    assert.equal(init.id, 1, JSON.stringify(init));
    assert.ok(init.result.serverInfo, JSON.stringify(init));
    conn.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    conn.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text: 'over a connection' } },
      }),
    );
    const call = /** @type {any} */ ((await messages.next()).value);
    assert.equal(call.id, 2, JSON.stringify(call));
    assert.equal(call.result.content[0].text, 'over a connection');
    conn.close();
    const closed = await conn.closed;
    assert.equal(closed.status, 0, JSON.stringify(closed));
    assert.throws(() => conn.send({ jsonrpc: '2.0', id: 3, method: 'ping' }), InvalidStateError);
    assert.equal(
      textOf(await client.callTool('ts', 'echo', { text: 'still there' })),
      'still there',
    );
  });

  test('closing the session fails what it carries and ends its process; nothing native is left', async () => {
    const [channel] = attaches();
    const before = await calls();
    const inFlight = rejection(client.callTool('ts', 'slow', { seconds: 30 }));
    await untilCalled(before);
    await client.closeSession();
    const e = await inFlight;
    assert.ok(e instanceof SessionLostError, `${e}`);
    assert.match(e.message, /closed by the host/);
    assert.ok(await waitGone(channel), 'the channel exited');
    assert.ok(processGone(channel));
    // A connection needs a session.
    assert.throws(() => client.connect('ts'), InvalidStateError);
    assert.equal(nativeStats().actions, 0);
  });

  test('with reopen off, a lost channel is not opened again: later calls go one-shot', async () => {
    const info = /** @type {any} */ (client.state().gateway);
    const other = new Client(sb.backend, {
      gatewayPath: gatewayPath(),
      port: info.port,
      tokenFile: info.token_file,
      instanceNonce: info.instance_nonce,
      reopen: false,
    });
    try {
      await other.openSession();
      const [channel] = attaches();
      process.kill(channel, 'SIGKILL');
      await waitFor(() => other.state().session === 'off', { what: 'the session ending' });
      const from = sb.commands().length;
      assert.equal(textOf(await other.callTool('ts', 'echo', { text: 'one-shot' })), 'one-shot');
      assert.ok(oneShotSince(from) > 0, 'it went one-shot');
    } finally {
      await other.close();
    }
  });
});

describe('sessions that cannot open', () => {
  const sb = makeSandbox();

  after(() => {
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  test('a channel that dies before its hello: the open fails saying why; calls go one-shot', async () => {
    const ran = [];
    const client = new Client(
      exec(async (command) => (ran.push(command), { exitCode: 7, stderr: 'curl: (7) refused' }), {
        open: () => spawn('sh', ['-c', 'echo no gateway here >&2; exit 3'], { stdio: 'pipe' }),
      }),
      { port: 1, tokenFile: '/nonexistent/token', transport: 'curl' },
    );
    try {
      const opening = client.openSession();
      const queued = rejection(client.health());
      const e = await rejection(opening);
      assert.match(e.message, /exited 3/);
      assert.match(e.message, /no gateway here/);
      // The health check went one-shot once the session was given up.
      assert.equal((await queued).code, 'GATEWAY_NOT_RUNNING');
      assert.equal(ran.length, 1);
      assert.equal(client.state().session, 'off');
    } finally {
      await client.close();
    }
  });

  test('a missing gateway binary: the session says so', async () => {
    const client = new Client(local({ cwd: sb.dir }), {
      gatewayPath: join(sb.dir, 'no-such-gateway'),
    });
    try {
      const e = await rejection(client.openSession());
      assert.ok(e instanceof StartFailedError, `${e}`);
      assert.match(e.message, /no-such-gateway/);
    } finally {
      await client.close();
    }
  });
});
