// The Client without a gateway: backends and options refused with the library's reasons, the
// exec backend's contract (failures, garbage, hangs, cancels, timeouts), arguments that cannot
// be sent, closing, installing the gateway binary, and the garbage-collection backstop.
// Commands run for real with `sh -c` where they run at all.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  CancelledError,
  Client,
  DeadlineError,
  ExecFailedError,
  GatewayNotRunningError,
  InvalidArgumentError,
  InvalidStateError,
  ProtocolError,
  argv,
  docker,
  exec,
  kubectl,
  local,
  nativeStats,
  podman,
} from '../index.js';
import { execSandbox, rejection, script, waitGone } from './helpers.js';

const ZERO = { hosts: 0, actions: 0, errors: 0, strings: 0, chunks: 0 };

/** A client of a gateway that is not there: every call runs a command through `run`. */
function attached(run, extra = {}) {
  return new Client(exec(run), {
    port: 1,
    tokenFile: '/nonexistent/token',
    transport: 'curl',
    ...extra,
  });
}

async function rejectsWith(promise, Class) {
  const e = await rejection(promise);
  assert.ok(e instanceof Class, `expected ${Class.name}, got ${e?.name}: ${e?.message}`);
  return e;
}

test('bad backends and options are refused with the reason, and leak nothing', async () => {
  for (const [make, says] of [
    [() => new Client(), /needs a backend/],
    [() => new Client(/** @type {any} */ ({})), /needs a backend/],
    [() => new Client(docker('')), /container must not be empty/],
    [() => new Client(docker('-rm')), /starts with '-'/],
    [() => new Client(podman('box;rm -rf /')), /holds ';'/],
    [() => new Client(kubectl('pod$(x)')), /holds '\$'/],
    [() => new Client(kubectl('web-0', { namespace: 'a b' })), /holds ' '/],
    [() => new Client(argv([])), /must name a program/],
    [() => new Client(docker(/** @type {any} */ (5))), /invalid type: integer `5`/],
    [() => exec(/** @type {any} */ ('sh')), /needs a function/],
    [() => new Client(local(), { port: 70000 }), /port/],
    [() => new Client(local(), /** @type {any} */ ({ transport: 'telnet' })), /transport/],
    [() => new Client(local(), { openTimeoutMs: 0 }), /open_timeout_ms/],
    [() => new Client(local(), /** @type {any} */ ({ reopen: 'yes' })), /reopen/],
    [() => new Client(local(), /** @type {any} */ ({ agentId: 'a' })), /unknown option agentId/],
    [() => new Client(local(), /** @type {any} */ ({ onNotice: 3 })), /onNotice/],
  ]) {
    assert.throws(make, (e) => {
      assert.ok(e instanceof InvalidArgumentError, `${e}`);
      assert.equal(e.code, 'INVALID_ARGUMENT');
      assert.match(e.message, says);
      return true;
    });
  }
  assert.deepEqual(nativeStats(), ZERO);
});

test('without a known gateway, calls fail at once and run nothing', async () => {
  let ran = 0;
  const client = new Client(exec(async () => (ran++, { exitCode: 0 })));
  await rejectsWith(client.health(), GatewayNotRunningError);
  await rejectsWith(client.stopGateway(), GatewayNotRunningError);
  assert.equal(ran, 0);
  await client.close();
});

test('an exec that throws fails the call with ExecFailedError, the original as cause', async () => {
  const gone = new Error('the sandbox is gone');
  const client = attached(async () => {
    throw gone;
  });
  const e = await rejectsWith(client.listMcps(), ExecFailedError);
  assert.equal(e.code, 'EXEC_FAILED');
  assert.equal(e.cause, gone);
  assert.match(e.message, /the sandbox is gone/);
  // A synchronous throw is the same failure.
  const sync = attached(() => {
    throw gone;
  });
  assert.equal((await rejectsWith(sync.health(), ExecFailedError)).cause, gone);
  await client.close();
  await sync.close();
  assert.deepEqual(nativeStats(), ZERO);
});

test('an exec that returns garbage fails the call with ExecFailedError saying what is wrong', async () => {
  const cases = [
    [{}, /exitCode/],
    [{ exitCode: 'zero' }, /exitCode/],
    [{ exitCode: 0, stdout: 42 }, /stdout/],
    [null, /exitCode, stdout, stderr/],
    [() => {}, /returned a function/],
  ];
  for (const [value, message] of cases) {
    const client = attached(async () => value);
    const e = await rejectsWith(client.health(), ExecFailedError);
    assert.match(e.message, message);
    assert.ok(e.cause instanceof TypeError);
    await client.close();
  }
});

test('the exec gets the command, its time limit and a signal', async () => {
  const seen = [];
  const client = attached(
    async (command, opts) => {
      seen.push({ command, ...opts });
      return { exitCode: 7, stdout: '', stderr: 'curl: (7) Failed to connect' };
    },
    { timeoutMs: 3000 },
  );
  await rejectsWith(client.health({ timeoutMs: 2000 }), GatewayNotRunningError);
  assert.equal(seen.length, 1);
  assert.match(seen[0].command, /curl/);
  assert.match(seen[0].command, /127\.0\.0\.1:1\/health/);
  assert.ok(seen[0].timeoutMs >= 2000, `timeoutMs ${seen[0].timeoutMs}`);
  assert.ok(seen[0].signal instanceof AbortSignal);
  assert.equal(seen[0].signal.aborted, false);
  assert.equal(seen[0].stdin, undefined, 'no stdin for an exec that does not pass it');
  await client.close();
});

test('cancel: a call is rejected at once even when the exec ignores its signal', async () => {
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
  const reason = new Error('the user changed their mind');
  ac.abort(reason);
  const e = await rejectsWith(call, CancelledError);
  assert.equal(e.code, 'CANCELLED');
  assert.equal(e.cause, reason);
  assert.equal(execSignal.aborted, true, 'the exec was told to stop');
  // An already aborted signal runs nothing.
  await rejectsWith(client.health({ signal: AbortSignal.abort() }), CancelledError);
  await client.close();
  assert.deepEqual(nativeStats(), ZERO);
});

test('deadline: an exec that never finishes is given up on after its time limit', async () => {
  let execSignal;
  const client = attached(
    (command, { signal }) => {
      execSignal = signal;
      return new Promise(() => {});
    },
    { timeoutMs: 300 },
  );
  const started = Date.now();
  const e = await rejectsWith(client.health(), DeadlineError);
  const took = Date.now() - started;
  assert.ok(took >= 300 && took < 10_000, `took ${took} ms`);
  assert.equal(e.code, 'DEADLINE');
  assert.equal(execSignal.aborted, true);
  await client.close();
});

test('close: idempotent; later calls reject with InvalidStateError; calls under way finish', async () => {
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
  const closing = client.close();
  assert.equal(client.close(), closing);
  assert.equal(client.closed, true);
  await rejectsWith(client.health(), InvalidStateError);
  // The call under way finishes, here with the library's verdict on the output.
  release();
  const e = await rejectsWith(pending, ProtocolError);
  assert.match(e.message, /not http/);
  await closing;
  assert.deepEqual(nativeStats(), ZERO);
});

test('arguments that cannot be sent are refused with InvalidArgumentError', async () => {
  let ran = 0;
  const client = attached(async () => (ran++, { exitCode: 0 }));
  const circular = /** @type {any} */ ({ a: 1 });
  circular.self = circular;
  for (const call of [
    () => client.callTool('ts', '', {}),
    () => client.callTool('ts', 'echo', /** @type {any} */ ([1, 2])),
    () => client.callTool('ts', 'echo', circular),
    () => client.callTool('ts', 'echo', { n: 10n }),
    () => client.callTool('ts', 'echo', {}, { agentId: /** @type {any} */ (7) }),
    () => client.callTool('ts', 'echo', {}, { timeoutMs: -1 }),
    () => client.callTool('ts', 'echo', {}, { signal: /** @type {any} */ ('stop') }),
    () => client.callTool('ts', 'echo', {}, /** @type {any} */ ({ retries: 3 })),
    () => client.callTool('ts', 'echo', {}, /** @type {any} */ ({ onProgress: 1 })),
    () => client.addMcp(/** @type {any} */ ('{"name":"x"}')),
    () => client.listTools('bad name'),
    () => client.health(/** @type {any} */ (5)),
  ]) {
    const e = await rejectsWith(call(), InvalidArgumentError);
    assert.equal(e.status, undefined, e.message);
  }
  assert.equal(ran, 0, 'nothing ran');
  await client.close();
  assert.deepEqual(nativeStats(), ZERO);
});

/** Installs a random 300 kB "binary" into an exec sandbox; returns what happened. */
async function install(passesStdin) {
  const sb = execSandbox({ passesStdin });
  try {
    const source = join(sb.dir, 'host-gateway');
    const content = randomBytes(300_000);
    writeFileSync(source, content);
    mkdirSync(join(sb.dir, 'bin'));
    const target = join(sb.dir, 'bin', 'mcpgw-gateway');
    const client = new Client(sb.backend, { gatewayPath: target });
    const first = await client.ensureGatewayBinary(source);
    assert.equal(first.uploaded, true);
    assert.equal(first.path, target);
    assert.deepEqual(readFileSync(target), content);
    assert.equal(first.sha256, execFileSync('sha256sum', [source]).toString().split(' ')[0]);
    const commands = sb.commands.length;
    const stdins = [...sb.stdins];
    const again = await client.ensureGatewayBinary(source);
    assert.equal(again.uploaded, false);
    await client.close();
    return { commands, stdins };
  } finally {
    sb.remove();
  }
}

test('ensureGatewayBinary with an exec that passes stdin: the file goes in one command', async () => {
  const { commands, stdins } = await install(true);
  assert.deepEqual(
    stdins.filter((n) => n > 0),
    [300_000],
    `stdin sizes ${stdins}`,
  );
  assert.ok(commands <= 3, `${commands} commands`);
});

test('ensureGatewayBinary with an exec that passes no stdin: the file is staged in pieces', async () => {
  const { commands, stdins } = await install(false);
  assert.ok(commands > 3, `uploaded over ${commands} commands`);
  assert.ok(
    stdins.every((n) => n === 0),
    'no stdin for an exec that does not pass it',
  );
});

test('ensureGatewayBinary reads and hashes the host file off the event loop; close() meanwhile waits for it', async () => {
  // Reading and hashing 8 MB takes a while (longer with a debug build of the library), on a
  // worker thread: measured as the call's synchronous part and as timer ticks while it runs.
  const sb = execSandbox();
  const big = join(sb.dir, 'big');
  writeFileSync(big, randomBytes(8 << 20));
  const stop = new Error('stop after the first command');
  const client = new Client(
    exec(async () => {
      throw stop;
    }),
    { gatewayPath: '/nonexistent/mcpgw-gateway' },
  );
  let ticks = 0;
  const timer = setInterval(() => ticks++, 5);
  try {
    const started = performance.now();
    const call = client.ensureGatewayBinary(big);
    const sync = performance.now() - started;
    assert.ok(sync < 200, `the call blocked for ${sync} ms`);
    const closing = client.close();
    const e = await rejectsWith(call, ExecFailedError);
    assert.equal(e.cause, stop);
    await closing;
    const took = performance.now() - started;
    assert.ok(ticks >= Math.min(20, took / 20), `${ticks} timer ticks in ${took} ms`);
  } finally {
    clearInterval(timer);
    sb.remove();
  }
  assert.deepEqual(nativeStats(), ZERO);
});

test(
  'a command whose leftover child holds its output is killed with its group at its deadline',
  { timeout: 60_000 },
  async () => {
    const sb = execSandbox();
    try {
      // The prefix runs the command, then leaves a child that holds the command's stdout.
      const leave = script(
        join(sb.dir, 'leave'),
        `"$@"; s=$?; sleep 3600 & echo $! > ${JSON.stringify(join(sb.dir, 'left.pid'))}; exit $s\n`,
      );
      const client = new Client(argv([leave]), {
        port: 1,
        tokenFile: '/nonexistent/token',
        transport: 'curl',
        timeoutMs: 300,
      });
      await rejectsWith(client.health(), DeadlineError);
      await client.close();
      const left = Number(readFileSync(join(sb.dir, 'left.pid'), 'utf8'));
      assert.ok(await waitGone(left), `the leftover child (pid ${left}) still runs`);
    } finally {
      sb.remove();
    }
  },
);

test('an exec backend without a channel opener cannot open a session, and says so', async () => {
  const client = attached(async () => ({ exitCode: 0 }));
  const e = await rejection(client.openSession());
  assert.match(e.message, /no channel opener/);
  await client.close();
});

test('a client that is never closed is freed when garbage-collected', () => {
  const script = `
    import { Client, local, nativeStats } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    for (let i = 0; i < 10; i++) new Client(local());
    if (nativeStats().hosts !== 10) throw new Error('expected 10 live hosts');
    for (let i = 0; i < 100 && nativeStats().hosts > 0; i++) {
      globalThis.gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    console.log(nativeStats().hosts);
  `;
  const out = execFileSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', script]);
  assert.equal(out.toString().trim(), '0');
});
