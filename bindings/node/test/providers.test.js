// The cloud sandboxes' providers through their own software and official SDKs (providers.js):
// the gateway installed through the SDK's file API, a session on the SDK's streaming process
// API, a stdio server registered, its tools listed and called with progress and cancel, the
// channel killed mid-call and the call resumed, the sandbox killed and the error naming it; and
// the same one-shot.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BackendError,
  CancelledError,
  Client,
  daytona,
  e2b,
  opensandbox,
  progressOf,
  textOf,
} from '../index.js';
import { rejection, staticGatewayPath, testserverSpec, waitFor } from './helpers.js';
import {
  DAYTONA_DAEMON,
  E2B_ENVD,
  GATEWAY_IN_SANDBOX,
  TESTSERVER,
  box,
  daemonSkip,
  e2bSandbox,
  opensandboxSkip,
  startDaytona,
  startEnvd,
  startOpenSandboxServer,
} from './providers.js';

/**
 * The scenario every provider passes: install, one-shot, a session with calls, progress, a
 * cancel, a resume after the channel's process was killed; then the sandbox killed: the
 * provider's failure names `backend` and the state `killed`.
 *
 * @param {import('node:test').TestContext} t
 * @param {Client} client
 * @param {ReturnType<typeof box>} sandbox
 */
async function scenario(t, client, sandbox, backend, killed) {
  const status = await client.ensureGatewayBinary(staticGatewayPath());
  assert.equal(status.uploaded, true);
  assert.equal(status.path, GATEWAY_IN_SANDBOX);
  await client.startGateway();
  await client.addMcp(testserverSpec('ts', TESTSERVER));
  assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'one-shot' })), 'one-shot');

  const hello = await client.openSession();
  const tools = (await client.listTools('ts')).map((x) => x.name);
  assert.ok(tools.includes('slow'), `${tools}`);
  const big = `${backend} `.repeat(50_000);
  assert.equal(textOf(await client.callTool('ts', 'echo', { text: big })), big);
  /** @type {any[]} */
  let got = [];
  const onProgress = (/** @type {any} */ c) => got.push(c);
  const last = await client.callTool('ts', 'slow', { seconds: 0.3, steps: 3 }, { onProgress });
  assert.ok(last.is_last);
  assert.equal(got.length, 3);

  const ac = new AbortController();
  got = [];
  const call = client.callTool(
    'ts',
    'slow',
    { seconds: 30, steps: 300, cancel_marker: '/tmp/cancelled' },
    { signal: ac.signal, onProgress },
  );
  await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
  ac.abort();
  assert.ok((await rejection(call)) instanceof CancelledError);
  await waitFor(() => sandbox.exec('cat', '/tmp/cancelled').stdout === 'cancelled', {
    ms: 30_000,
    what: 'the cancel marker',
  });

  if (!hello.retention_ms) {
    t.diagnostic('SKIPPED: resume: this attach keeps no call (retention_ms 0)');
  } else {
    got = [];
    const resumed = client.callTool('ts', 'slow', { seconds: 2, steps: 4 }, { onProgress });
    await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
    assert.ok(sandbox.killAttach());
    assert.ok((await resumed).is_last);
    assert.equal(got.length, 4);
    assert.equal(new Set(got.map((c) => progressOf(c)?.progress)).size, 4);
  }

  got = [];
  const doomed = client.callTool('ts', 'slow', { seconds: 30, steps: 30 }, { onProgress });
  await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
  sandbox.kill();
  await rejection(doomed);
  const e = await rejection(client.callTool('ts', 'echo', { text: 'anyone?' }));
  assert.ok(e instanceof BackendError, `${e}`);
  assert.equal(e.backend, backend);
  assert.equal(e.state, killed, `${e}`);
}

const e2bSkip = daemonSkip(E2B_ENVD, "E2B's envd", 'MCPGW_E2B_ENVD');
if (e2bSkip) console.log(e2bSkip);

describe('an E2B sandbox through the e2b SDK', { skip: e2bSkip || false }, () => {
  /** @type {Awaited<ReturnType<typeof startEnvd>>} */
  let envd;

  before(async () => {
    envd = await startEnvd();
  });

  after(() => envd?.stop());

  test('install, one-shot, a session: progress, cancel, resume; the sandbox killed', async (t) => {
    const client = new Client(e2b(await e2bSandbox(envd)), { gatewayPath: GATEWAY_IN_SANDBOX });
    try {
      // Killed, the sandbox is one E2B's SDK cannot reach (E2B's edge would say not running).
      await scenario(t, client, envd, 'e2b', 'unreachable');
    } finally {
      await client.close();
    }
  });

  test('what is not a sandbox is refused', () => {
    assert.throws(() => e2b({}), /E2B Sandbox/);
  });
});

const osSkip = opensandboxSkip();
if (osSkip) console.log(osSkip);

describe('an OpenSandbox sandbox through its SDK', { skip: osSkip || false }, () => {
  /** @type {Awaited<ReturnType<typeof startOpenSandboxServer>>} */
  let server;
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-opensandbox-'));

  before(async () => {
    server = await startOpenSandboxServer(dir);
  });

  after(() => {
    server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('install, one-shot, a session: progress, cancel, resume; the sandbox killed', async (t) => {
    const sandbox = await server.sandbox();
    const client = new Client(opensandbox(sandbox), { gatewayPath: GATEWAY_IN_SANDBOX });
    try {
      // Killed, its container has exited: the server says so, and the sandbox is gone.
      await scenario(t, client, box(`sandbox-${sandbox.id}`), 'opensandbox', 'gone');
    } finally {
      await client.close();
      await sandbox.kill().catch(() => {});
    }
  });

  test('what is not a sandbox is refused', () => {
    assert.throws(() => opensandbox({}), /OpenSandbox Sandbox/);
  });
});

const daytonaSkip = daemonSkip(DAYTONA_DAEMON, "Daytona's daemon", 'MCPGW_DAYTONA_DAEMON');
if (daytonaSkip) console.log(daytonaSkip);

describe('a Daytona sandbox through its SDK', { skip: daytonaSkip || false }, () => {
  /** @type {Awaited<ReturnType<typeof startDaytona>>} */
  let daemon;

  before(async () => {
    daemon = await startDaytona();
  });

  after(() => daemon?.stop());

  test('install, one-shot, a session: progress, cancel, resume; the sandbox killed', async (t) => {
    const client = new Client(daytona(await daemon.sandbox()), { gatewayPath: GATEWAY_IN_SANDBOX });
    try {
      // Killed, the sandbox is one Daytona's SDK cannot reach.
      await scenario(t, client, box(daemon.container), 'daytona', 'unreachable');
    } finally {
      await client.close();
    }
  });

  test('what is not a sandbox is refused', () => {
    assert.throws(() => daytona({}), /Daytona Sandbox/);
  });
});
