// End to end: a real mcpgw-gateway in a local sandbox (a temp dir, entered through an argv
// prefix that records every command), with the project's MCP test server as upstream.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { once } from 'node:events';
import {
  CancelledError,
  Client,
  ConflictError,
  DeadlineError,
  GatewayNotRunningError,
  InvalidArgumentError,
  McpgwError,
  NotFoundError,
  PolicyDeniedError,
  dataBytes,
  exec,
  nativeStats,
  textOf,
} from '../index.js';
import {
  commandLines,
  gatewayPath,
  makeSandbox,
  processesMentioning,
  shell,
  testserverPath,
  testserverSpec,
  waitFile,
  waitFor,
  waitGone,
} from './helpers.js';

/** The WAV clip the test server's `media` tool returns: 8 kHz mono 8-bit, 16 square samples. */
function expectedWav() {
  const samples = Array.from({ length: 16 }, (_, i) => (i % 4 < 2 ? 0xc0 : 0x40));
  const b = Buffer.alloc(44 + samples.length);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + samples.length, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20);
  b.writeUInt16LE(1, 22);
  b.writeUInt32LE(8000, 24);
  b.writeUInt32LE(8000, 28);
  b.writeUInt16LE(1, 32);
  b.writeUInt16LE(8, 34);
  b.write('data', 36);
  b.writeUInt32LE(samples.length, 40);
  Buffer.from(samples).copy(b, 44);
  return new Uint8Array(b);
}

describe('a gateway in a local sandbox', () => {
  const sb = makeSandbox();
  /** Every error a call threw, to check none carries the token. */
  const errors = [];
  let client;
  let info;

  /** Runs `fn`, expecting it to throw an error of `Class`; returns the error. */
  async function rejects(fn, Class) {
    try {
      await fn();
    } catch (e) {
      errors.push(e);
      assert.ok(e instanceof Class, `expected ${Class.name}, got ${e?.name}: ${e?.message}`);
      assert.ok(e instanceof McpgwError);
      return e;
    }
    assert.fail(`expected ${Class.name}, but the call succeeded`);
  }

  before(() => {
    client = new Client(sb.backend, {
      gatewayPath: gatewayPath(),
      stateDir: join(sb.dir, 'state'),
    });
  });

  after(async () => {
    // Leaves nothing behind even when a test failed half-way.
    if (info && !client.closed) await client.stopGateway().catch(() => {});
    await client.close();
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  test('launch: the gateway starts and answers with its nonce', async () => {
    info = await client.startGateway();
    assert.ok(info.port > 0 && info.pid > 0, JSON.stringify(info));
    assert.equal(client.port, info.port);
    assert.equal(info.state_dir, join(sb.dir, 'state'));
    assert.match(info.instance_nonce, /^[0-9a-f]{64}$/);
    assert.equal(info.token_file, join(sb.dir, 'state', 'token'));
    const h = await client.health();
    assert.deepEqual(h, { status: 'ok', instance_nonce: info.instance_nonce });
  });

  test('add and list: the test server is registered, its tools listed', async () => {
    await client.addMcp(testserverSpec('ts'));
    const mcps = await client.listMcps();
    assert.deepEqual(
      mcps.map((m) => m.name),
      ['ts'],
    );
    assert.equal(mcps[0].mcp_config.command, testserverPath());
    // The gateway's status of each upstream (states: McpState in src/wire/rest.rs).
    assert.equal(mcps[0].status?.state, 'connected');
    assert.ok(mcps[0].status.pid > 0);
    assert.equal(mcps[0].status.restarts, 0);
    const tools = await client.listTools('ts');
    const names = tools.map((t) => t.name);
    for (const name of ['echo', 'add', 'media', 'fail', 'slow', 'info']) {
      assert.ok(names.includes(name), `${name} missing from ${names}`);
    }
    assert.equal(tools.find((t) => t.name === 'add').inputSchema.type, 'object');
    const e = await rejects(() => client.addMcp(testserverSpec('ts')), ConflictError);
    assert.equal(e.status, 409);
    assert.equal(e.code, 'CONFLICT');
    assert.ok(e.detail, 'a 409 carries the gateway detail');
  });

  test('call, text: echo returns its text', async () => {
    const chunk = await client.callTool('ts', 'echo', { text: 'héllo, wörld ✓' });
    assert.equal(chunk.state, 'running');
    assert.equal(chunk.is_last, true);
    assert.match(chunk.id, /^[0-9a-f]{32}$/);
    assert.equal(chunk.content.length, 1);
    assert.equal(chunk.content[0].type, 'text');
    assert.equal(textOf(chunk), 'héllo, wörld ✓');
  });

  test('call, media: the wire blocks, and PNG and WAV bytes decoded with dataBytes', async () => {
    const { content } = await client.callTool('ts', 'media', {});
    assert.deepEqual(
      content.map((b) => [b.type, b.type === 'data' ? b.source.type : null]),
      [
        ['data', 'base64'],
        ['data', 'base64'],
        ['text', null],
        ['data', 'base64'],
        ['data', 'url'],
      ],
    );
    const [png, wav, text, blob, link] = content;
    assert.equal(png.source.media_type, 'image/png');
    assert.equal(wav.source.media_type, 'audio/wav');
    assert.equal(blob.source.media_type, 'application/octet-stream');
    assert.equal(link.source.media_type, 'text/plain');
    const pngBytes = dataBytes(png);
    assert.ok(pngBytes instanceof Uint8Array);
    const p = Buffer.from(pngBytes);
    assert.deepEqual([...p.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(p.toString('latin1', 12, 16), 'IHDR');
    assert.deepEqual([p.readUInt32BE(16), p.readUInt32BE(20)], [1, 1]);
    assert.equal(p.toString('latin1', p.length - 8, p.length - 4), 'IEND');
    assert.deepEqual(dataBytes(wav), expectedWav());
    assert.match(text.text, /hello resource/);
    assert.deepEqual(dataBytes(blob), new Uint8Array(Array.from({ length: 256 }, (_, i) => i)));
    assert.equal(dataBytes(link), null);
    assert.equal(link.source.url, 'test://resource/link');
    assert.equal(link.name, 'linked');
    assert.equal(dataBytes(text), null);
  });

  test('call, structured: add returns structured content in the metadata', async () => {
    const chunk = await client.callTool('ts', 'add', { a: 2, b: 3 });
    assert.equal(chunk.state, 'running');
    assert.deepEqual(chunk.metadata.structured_content, { sum: 5, product: 6 });
  });

  test('call, tool error: fail gives state "error" with its message', async () => {
    const chunk = await client.callTool('ts', 'fail', { message: 'it broke' });
    assert.equal(chunk.state, 'error');
    assert.equal(textOf(chunk), 'it broke');
  });

  test('errors are typed, with code, HTTP status and detail', async () => {
    let e = await rejects(() => client.callTool('nope', 'echo', {}), NotFoundError);
    assert.equal(e.status, 404);
    assert.equal(e.result, 7105);
    assert.match(e.detail, /nope/);
    e = await rejects(() => client.callTool('ts', 'no_such_tool', {}), NotFoundError);
    assert.equal(e.status, 404);
    // A tool the spec disables is refused on call, as well as not listed.
    await client.addMcp({ ...testserverSpec('off'), disable_tools: ['echo'] });
    e = await rejects(() => client.callTool('off', 'echo', { text: 'x' }), PolicyDeniedError);
    assert.equal(e.status, 403);
    assert.equal(e.result, 7112);
    assert.match(e.detail, /disable_tools/);
    const listed = (await client.listTools('off')).map((t) => t.name);
    assert.ok(listed.length > 0 && !listed.includes('echo'), String(listed));
    await client.removeMcp('off');
    // Refused by the library before any command runs: no HTTP status.
    const before = sb.commands().length;
    e = await rejects(() => client.listTools('bad name'), InvalidArgumentError);
    assert.equal(e.status, undefined);
    assert.equal(e.code, 'INVALID_ARGUMENT');
    assert.equal(sb.commands().length, before);
  });

  test('large arguments and results cross intact (body on stdin, big stdout)', async () => {
    // Larger than one command may be: the backend passes stdin, so the body goes there.
    const text = 'x'.repeat(150_000) + 'é'.repeat(50_000);
    const before = sb.commands().length;
    const chunk = await client.callTool('ts', 'echo', { text });
    const ran = sb.commands().slice(before);
    assert.equal(ran.length, 1, 'one command');
    const argvBytes = ran[0].reduce((n, w) => n + Buffer.byteLength(w), 0);
    assert.ok(argvBytes < 20_000, `the body is not in the argv (${argvBytes} bytes)`);
    assert.equal(textOf(chunk), text);
    const big = await client.callTool('ts', 'big', { bytes: 3_000_000 });
    assert.equal(Buffer.byteLength(textOf(big)), 3_000_000);
  });

  test('scopes: agentId and sessionId keep MCPs apart', async () => {
    const scope = { agentId: 'agent-1', sessionId: 'session 1/ü' };
    await client.addMcp(testserverSpec('scoped'), scope);
    assert.deepEqual(
      (await client.listMcps()).map((m) => m.name),
      ['ts'],
    );
    assert.deepEqual(
      (await client.listMcps(scope)).map((m) => m.name),
      ['scoped'],
    );
    await rejects(() => client.callTool('scoped', 'echo', { text: 'a' }), NotFoundError);
    const chunk = await client.callTool('scoped', 'echo', { text: 'in scope' }, scope);
    assert.equal(textOf(chunk), 'in scope');
    await client.removeMcp('scoped', scope);
    assert.deepEqual(await client.listMcps(scope), []);
  });

  test('runtime headers reach a streamable-HTTP upstream', async (t) => {
    const server = spawn(testserverPath(), ['http', '--port', '0'], {
      cwd: sb.dir,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    t.after(() => server.kill('SIGKILL'));
    let line = '';
    while (!/listening (\S+)/.test(line)) {
      const [data] = await once(server.stdout, 'data');
      line += data.toString();
    }
    const url = line.match(/listening (\S+)/)[1];
    await client.addMcp({ name: 'web', mcp_config: { type: 'http_mcp', url } });
    await client.setRuntimeHeaders('web', { 'x-trace': 'abc-123' });
    let chunk = await client.callTool('web', 'headers', {});
    assert.equal(chunk.metadata.structured_content['x-trace'], 'abc-123');
    await client.setRuntimeHeaders('web', {});
    chunk = await client.callTool('web', 'headers', {});
    assert.equal(chunk.metadata.structured_content['x-trace'], undefined);
    // Only HTTP upstreams take runtime headers: the gateway says 400.
    const e = await rejects(() => client.setRuntimeHeaders('ts', { a: 'b' }), InvalidArgumentError);
    assert.equal(e.status, 400);
    await client.removeMcp('web');
  });

  /** How many tool calls the gateway has received for `mcp` (its `status.calls`). */
  async function callsOf(mcp) {
    const entries = await client.listMcps();
    return entries.find((e) => e.name === mcp)?.status?.calls ?? 0;
  }

  test('cancel: an AbortSignal stops a slow call, the upstream learns it, the next call works', async () => {
    const marker = join(sb.dir, 'cancelled');
    const ac = new AbortController();
    const reason = new Error('the user changed their mind');
    const callsBefore = await callsOf('ts');
    const call = client.callTool(
      'ts',
      'slow',
      { seconds: 30, steps: 300, cancel_marker: marker },
      { signal: ac.signal },
    );
    // In flight once the gateway counts it: it received the call and passed it upstream.
    await waitFor(async () => (await callsOf('ts')) > callsBefore, { what: 'the call' });
    const abortedAt = Date.now();
    ac.abort(reason);
    const e = await rejects(() => call, CancelledError);
    assert.ok(Date.now() - abortedAt < 200, `the cancel took ${Date.now() - abortedAt} ms`);
    assert.equal(e.name, 'CancelledError');
    assert.equal(e.code, 'CANCELLED');
    assert.equal(e.cause, reason);
    // Killing the request's command closed its connection; the gateway cancelled upstream.
    assert.equal(await waitFile(marker), 'cancelled');
    // An already aborted signal runs nothing.
    const before = sb.commands().length;
    await rejects(
      () => client.callTool('ts', 'echo', { text: 'x' }, { signal: AbortSignal.abort() }),
      CancelledError,
    );
    assert.equal(sb.commands().length, before);
    const chunk = await client.callTool('ts', 'echo', { text: 'still here' });
    assert.equal(textOf(chunk), 'still here');
  });

  test('deadline: timeoutMs bounds a call at the gateway (504)', async () => {
    const started = Date.now();
    const e = await rejects(
      () => client.callTool('ts', 'slow', { seconds: 30 }, { timeoutMs: 500 }),
      DeadlineError,
    );
    assert.ok(Date.now() - started < 3000);
    assert.equal(e.status, 504);
    assert.equal(e.code, 'DEADLINE');
    assert.match(e.detail, /0\.5s/);
  });

  test('64 concurrent calls each get their own answer', async (t) => {
    const started = Date.now();
    const calls = Array.from({ length: 64 }, (_, i) =>
      i % 2
        ? client
            .callTool('ts', 'add', { a: i, b: 1000 })
            .then((c) => c.metadata.structured_content.sum)
        : client.callTool('ts', 'echo', { text: `request ${i}` }).then(textOf),
    );
    const answers = await Promise.all(calls);
    t.diagnostic(`64 concurrent calls took ${Date.now() - started} ms`);
    answers.forEach((a, i) => assert.equal(a, i % 2 ? i + 1000 : `request ${i}`));
  });

  test('calls overlap: eight 1 s tool calls at once take about 1 s', async () => {
    const started = performance.now();
    const chunks = await Promise.all(
      Array.from({ length: 8 }, () => client.callTool('ts', 'slow', { seconds: 1, steps: 2 })),
    );
    const took = performance.now() - started;
    for (const c of chunks) assert.match(textOf(c), /done after 2 steps/);
    assert.ok(took >= 1000 && took < 2500, `the calls took ${took} ms`);
  });

  test('the event loop stays responsive during a 1 s tool call', async (t) => {
    const period = 10;
    let maxLag = 0;
    let ticks = 0;
    let expected = performance.now() + period;
    const timer = setInterval(() => {
      const now = performance.now();
      maxLag = Math.max(maxLag, now - expected);
      expected = now + period;
      ticks++;
    }, period);
    const started = performance.now();
    let chunk;
    try {
      chunk = await client.callTool('ts', 'slow', { seconds: 1, steps: 4 });
    } finally {
      clearInterval(timer);
    }
    const took = performance.now() - started;
    t.diagnostic(
      `took ${took.toFixed(0)} ms, ${ticks} ticks, max timer lag ${maxLag.toFixed(1)} ms`,
    );
    assert.match(textOf(chunk), /done after 4 steps/);
    assert.ok(took >= 1000, `the call took ${took} ms`);
    assert.ok(maxLag < 50, `the timer was ${maxLag} ms late`);
    // Half the ideal count: other builds on a shared machine delay timers too, not only us.
    assert.ok(ticks >= (took / period) * 0.5, `only ${ticks} ticks in ${took} ms`);
  });

  test('a second client, with an exec function of its own, reaches the running gateway by port and token file', async () => {
    // This exec hands stdout and stderr back as strings, which the binding accepts too.
    const stringExec = exec(async (command, { signal }) => {
      const r = await shell(command, { cwd: sb.dir, signal });
      return {
        exitCode: r.exitCode,
        stdout: r.stdout.toString('utf8'),
        stderr: r.stderr.toString('utf8'),
      };
    });
    const other = new Client(stringExec, {
      port: info.port,
      tokenFile: info.token_file,
      instanceNonce: info.instance_nonce,
    });
    try {
      assert.equal(other.port, info.port);
      assert.equal((await other.health()).instance_nonce, info.instance_nonce);
      assert.deepEqual(
        (await other.listMcps()).map((m) => m.name),
        ['ts'],
      );
      const chunk = await other.callTool('ts', 'echo', { text: 'from another client' });
      assert.equal(textOf(chunk), 'from another client');
      // A client that did not launch the gateway does not stop it.
      await rejects(() => other.stopGateway(), GatewayNotRunningError);
    } finally {
      await other.close();
    }
    await client.health();
  });

  test('the token appears in no command, no process and no error', async () => {
    const token = readFileSync(info.token_file, 'utf8').trim();
    assert.ok(token.length >= 32);
    // The command lines of every process while eight calls run.
    const calls = Promise.all(
      Array.from({ length: 8 }, () => client.callTool('ts', 'slow', { seconds: 0.5, steps: 2 })),
    );
    const seen = [];
    while (seen.length < 20) {
      seen.push(...commandLines());
      await new Promise((r) => setTimeout(r, 20));
    }
    await calls;
    for (const line of seen) assert.ok(!line.includes(token), 'a process carries the token');
    const commands = sb.commands();
    assert.ok(commands.length > 64, `only ${commands.length} commands`);
    for (const c of commands)
      assert.ok(!c.join(' ').includes(token), 'a command carries the token');
    for (const e of errors) {
      assert.ok(!`${e.message} ${e.detail}`.includes(token), 'an error carries the token');
    }
  });

  test('remove: the MCP and its process are gone', async () => {
    const { pid } = (await client.callTool('ts', 'info', {})).metadata.structured_content;
    assert.ok(pid > 0);
    await client.removeMcp('ts');
    assert.deepEqual(await client.listMcps(), []);
    assert.ok(await waitGone(pid), `the test server (pid ${pid}) is still running`);
    const e = await rejects(() => client.removeMcp('ts'), NotFoundError);
    assert.equal(e.status, 404);
  });

  test('stop: no gateway process is left, nor its upstreams; the state directory is removed', async () => {
    await client.addMcp(testserverSpec('last'));
    const { pid } = (await client.callTool('last', 'info', {})).metadata.structured_content;
    await client.stopGateway();
    assert.ok(await waitGone(info.pid), `the gateway (pid ${info.pid}) is still running`);
    assert.ok(await waitGone(pid), `its upstream (pid ${pid}) is still running`);
    assert.deepEqual(processesMentioning(sb.dir), []);
    assert.equal(existsSync(info.state_dir), false);
    await rejects(() => client.health(), GatewayNotRunningError);
    await client.close();
    assert.deepEqual(nativeStats(), { hosts: 0, actions: 0, errors: 0, strings: 0, chunks: 0 });
  });
});
