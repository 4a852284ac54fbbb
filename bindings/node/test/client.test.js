// The Client without a gateway: options, the exec contract (failures, garbage, hangs, aborts),
// closing, binary installation and the garbage-collection backstop. Commands run for real with
// `sh -c` where they run at all.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AbortError,
  Client,
  ExecError,
  GatewayDownError,
  InvalidArgumentError,
  InvalidStateError,
  ProtocolError,
  TimeoutError,
  nativeStats,
} from '../index.js';
import { makeSandbox } from './helpers.js';

const ZERO = { clients: 0, ops: 0, chunks: 0, errors: 0, strings: 0, sessions: 0 };

/** A client attached to a gateway that is not there: every call runs commands through `exec`. */
function attached(exec, extra = {}) {
  return new Client({
    exec,
    port: 1,
    tokenFile: '/nonexistent/token',
    transport: 'curl',
    ...extra,
  });
}

async function rejectsWith(promise, Class) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof Class, `expected ${Class.name}, got ${e?.name}: ${e?.message}`);
    return e;
  }
  assert.fail(`expected ${Class.name}, but it succeeded`);
}

test('bad options are refused before anything native is allocated', () => {
  const exec = async () => ({ exitCode: 0 });
  const bad = [
    undefined,
    {},
    { exec: 'sh' },
    { exec, port: 70000 },
    { exec, port: 1.5 },
    { exec, transport: 'telnet' },
    { exec, gatewayPath: 'a\0b' },
    { exec, timeoutMs: 0 },
    { exec, agentId: 7 },
    { exec, execStdin: 'yes' },
  ];
  for (const options of bad) {
    assert.throws(() => new Client(options), InvalidArgumentError, JSON.stringify(options));
  }
  assert.deepEqual(nativeStats(), ZERO);
});

test('options the library refuses come back with its message, and leak nothing', () => {
  const exec = async () => ({ exitCode: 0 });
  assert.throws(
    () => new Client({ exec, gatewayPath: '' }),
    (e) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match(e.message, /gateway path/);
      return true;
    },
  );
  assert.throws(() => new Client({ exec, maxCommandBytes: 10 }), InvalidArgumentError);
  assert.deepEqual(nativeStats(), ZERO);
});

test('without a known gateway, calls fail at once and run nothing', async () => {
  let ran = 0;
  const client = new Client({ exec: async () => (ran++, { exitCode: 0 }) });
  await rejectsWith(client.health(), GatewayDownError);
  await rejectsWith(client.stopGateway(), GatewayDownError);
  assert.equal(ran, 0);
  client.close();
});

test('an exec that throws fails the call with ExecError, the original as cause', async () => {
  const gone = new Error('the sandbox is gone');
  const client = attached(async () => {
    throw gone;
  });
  const e = await rejectsWith(client.listMcps(), ExecError);
  assert.equal(e.code, 'EXEC_FAILED');
  assert.equal(e.cause, gone);
  assert.match(e.message, /the sandbox is gone/);
  // A synchronous throw is the same failure.
  const sync = attached(() => {
    throw gone;
  });
  assert.equal((await rejectsWith(sync.health(), ExecError)).cause, gone);
  client.close();
  sync.close();
  assert.deepEqual(nativeStats(), ZERO);
});

test('an exec that returns garbage fails the call with ExecError saying what is wrong', async () => {
  const cases = [
    [{}, /exitCode/],
    [{ exitCode: 'zero' }, /exitCode/],
    [{ exitCode: 0, stdout: 42 }, /stdout/],
    [null, /exitCode, stdout, stderr/],
    [() => {}, /localExec\(\)/],
  ];
  for (const [value, message] of cases) {
    const client = attached(async () => value);
    const e = await rejectsWith(client.health(), ExecError);
    assert.match(e.message, message);
    assert.ok(e.cause instanceof TypeError);
    client.close();
  }
});

test('the exec gets the command, its timeout and a signal', async () => {
  const seen = [];
  const client = attached(
    async (command, opts) => {
      seen.push({ command, ...opts });
      return { exitCode: 7, stdout: '', stderr: 'curl: (7) Failed to connect' };
    },
    { timeoutMs: 3000 },
  );
  await rejectsWith(client.health({ timeoutMs: 2000 }), GatewayDownError);
  assert.equal(seen.length, 1);
  assert.match(seen[0].command, /curl/);
  assert.match(seen[0].command, /127\.0\.0\.1:1\/health/);
  // The request's own limit plus the library's grace for the exec backend.
  assert.ok(seen[0].timeoutMs > 2000, `timeoutMs ${seen[0].timeoutMs}`);
  assert.ok(seen[0].signal instanceof AbortSignal);
  assert.equal(seen[0].signal.aborted, false);
  client.close();
});

test('abort: a call is rejected at once even when the exec ignores its signal', async () => {
  let execSignal;
  let execCalled;
  const called = new Promise((resolve) => (execCalled = resolve));
  const client = attached((command, { signal }) => {
    execSignal = signal;
    execCalled();
    return new Promise(() => {});
  });
  const ac = new AbortController();
  const call = client.callTool('x', 'y', {}, { signal: ac.signal });
  await called;
  assert.equal(nativeStats().ops, 1);
  ac.abort();
  const e = await rejectsWith(call, AbortError);
  assert.equal(e.cause?.name, 'AbortError');
  assert.equal(execSignal.aborted, true, 'the exec was told to stop');
  assert.equal(nativeStats().ops, 0);
  client.close();
});

test('timeout: an exec that never finishes is given up on after the command timeout', async () => {
  let execSignal;
  const client = attached(
    (command, { signal }) => {
      execSignal = signal;
      return new Promise(() => {});
    },
    { timeoutMs: 100 },
  );
  const started = Date.now();
  const e = await rejectsWith(client.health(), TimeoutError);
  const took = Date.now() - started;
  // 100 ms for the request and the library's 5 s grace for the exec backend.
  assert.ok(took >= 5000 && took < 7000, `took ${took} ms`);
  assert.equal(e.code, 'DEADLINE');
  assert.equal(execSignal.aborted, true);
  assert.ok(execSignal.reason instanceof TimeoutError);
  assert.equal(nativeStats().ops, 0);
  client.close();
});

test('close: idempotent; later calls throw InvalidStateError; calls under way finish', async () => {
  let release;
  let execCalled;
  const called = new Promise((resolve) => (execCalled = resolve));
  const client = attached(
    () =>
      new Promise((resolve) => {
        release = () => resolve({ exitCode: 0, stdout: 'not http' });
        execCalled();
      }),
  );
  const pending = client.health();
  await called;
  client.close();
  client.close();
  assert.equal(client.closed, true);
  assert.equal(client.port, 0);
  await rejectsWith(client.health(), InvalidStateError);
  // The op outlives its client: it finishes, here with the library's verdict on the output.
  release();
  const e = await rejectsWith(pending, ProtocolError);
  assert.match(e.message, /not http/);
  assert.deepEqual(nativeStats(), ZERO);
});

test('arguments that cannot cross into C are refused', async () => {
  const client = attached(async () => ({ exitCode: 0 }));
  await rejectsWith(client.callTool('ts', 'e\0cho', {}), InvalidArgumentError);
  await rejectsWith(client.callTool('ts', 'echo', [1, 2]), InvalidArgumentError);
  await rejectsWith(client.callTool('ts', 'echo', {}, { agentId: 'a\0' }), InvalidArgumentError);
  await rejectsWith(client.callTool('ts', 'echo', {}, { timeoutMs: -1 }), InvalidArgumentError);
  await rejectsWith(client.callTool('ts', 'echo', {}, { signal: 'stop' }), InvalidArgumentError);
  await rejectsWith(client.addMcp('{"name":"x"}'), InvalidArgumentError);
  client.close();
});

/** Installs a random 300 kB "binary" into a local sandbox with `exec`; returns what happened. */
async function install(stdin) {
  const sb = makeSandbox({ stdin });
  try {
    const host = join(sb.dir, 'host');
    mkdirSync(host);
    const source = join(host, 'gateway');
    const content = randomBytes(300_000);
    writeFileSync(source, content);
    const target = join(sb.dir, 'bin', 'mcpgw-gateway');
    mkdirSync(join(sb.dir, 'bin'));
    const client = new Client({ exec: sb.exec, gatewayPath: target });
    const first = await client.ensureGatewayBinary(source);
    assert.equal(first.uploaded, true);
    assert.equal(first.path, target);
    assert.deepEqual(readFileSync(target), content);
    assert.equal(first.sha256, execFileSync('sha256sum', [source]).toString().split(' ')[0]);
    const commands = sb.commands.length;
    const stdins = [...sb.stdins];
    const again = await client.ensureGatewayBinary(source);
    assert.equal(again.uploaded, false);
    client.close();
    return { commands, stdins };
  } finally {
    sb.remove();
  }
}

test('ensureGatewayBinary with an exec that passes stdin: the file goes in one command', async () => {
  const { commands, stdins } = await install(true);
  const withStdin = stdins.filter((n) => n > 0);
  assert.deepEqual(withStdin, [300_000], `stdin sizes ${stdins}`);
  assert.ok(commands <= 3, `${commands} commands`);
});

test('ensureGatewayBinary with an exec that passes no stdin: the file is staged in pieces', async () => {
  const { commands, stdins } = await install(false);
  assert.ok(commands > 3, `uploaded over ${commands} commands`);
  assert.ok(
    stdins.every((n) => n === 0),
    'no stdin for an exec that did not declare it',
  );
});

test('ensureGatewayBinary reads and hashes the host file off the event loop; close() meanwhile is safe', async () => {
  // Reading and hashing an 8 MB file takes a while (longer with a debug build of the library),
  // on a worker thread. Measured as the call's synchronous part and as timer ticks while it runs,
  // not as timer lag: the hashing thread competes for the CPU with everything else here.
  const sb = makeSandbox();
  const big = join(sb.dir, 'big');
  writeFileSync(big, randomBytes(8 << 20));
  const stop = new Error('stop after the first command');
  const client = new Client({
    exec: async () => {
      throw stop;
    },
    gatewayPath: '/nonexistent/mcpgw-gateway',
  });
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  try {
    const started = performance.now();
    const call = client.ensureGatewayBinary(big);
    const sync = performance.now() - started;
    assert.ok(sync < 50, `the call blocked for ${sync} ms`);
    // The client is in use by a worker thread: it is freed once that returns, not now.
    client.close();
    assert.equal(nativeStats().clients, 1);
    const e = await rejectsWith(call, ExecError);
    assert.equal(e.cause, stop);
    const took = performance.now() - started;
    assert.ok(ticks >= Math.min(20, took / 20), `${ticks} timer ticks in ${took} ms`);
  } finally {
    clearInterval(timer);
    sb.remove();
  }
  assert.deepEqual(nativeStats(), ZERO);
});

test('a client that is never closed is freed when garbage-collected', () => {
  const script = `
    import { Client, nativeStats } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    for (let i = 0; i < 10; i++) new Client({ exec: async () => ({ exitCode: 0 }) });
    if (nativeStats().clients !== 10) throw new Error('expected 10 live clients');
    for (let i = 0; i < 100 && nativeStats().clients > 0; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    console.log(nativeStats().clients);
  `;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script]);
  assert.equal(out.toString().trim(), '0');
});
