// The cloud sandboxes' providers through their own software and official SDKs (providers.js):
// the gateway installed through the SDK's file API, a session on the SDK's streaming process
// API, a stdio server registered, its tools listed and called with progress and cancel, the
// channel killed mid-call and the call resumed, the sandbox killed and the error naming it; and
// the same one-shot.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BackendError, CancelledError, Client, e2b, progressOf, textOf } from '../index.js';
import { rejection, staticGatewayPath, testserverSpec, waitFor } from './helpers.js';
import {
  E2B_ENVD,
  GATEWAY_IN_SANDBOX,
  TESTSERVER,
  daemonSkip,
  e2bSandbox,
  startEnvd,
} from './providers.js';

const e2bSkip = daemonSkip(E2B_ENVD, "E2B's envd", 'MCPGW_E2B_ENVD');
if (e2bSkip) console.log(e2bSkip);

describe('an E2B sandbox through the e2b SDK', { skip: e2bSkip || false }, () => {
  /** @type {Awaited<ReturnType<typeof startEnvd>>} */
  let envd;
  /** @type {Client} */
  let client;

  before(async () => {
    envd = await startEnvd();
    client = new Client(e2b(await e2bSandbox(envd)), { gatewayPath: GATEWAY_IN_SANDBOX });
  });

  after(async () => {
    await client?.close();
    envd?.stop();
  });

  test('one-shot: the gateway uploaded with the file API, launched, a server called', async () => {
    const status = await client.ensureGatewayBinary(staticGatewayPath());
    assert.equal(status.uploaded, true);
    assert.equal(status.path, GATEWAY_IN_SANDBOX);
    await client.startGateway();
    await client.addMcp(testserverSpec('ts', TESTSERVER));
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'one-shot' })), 'one-shot');
  });

  test('a session: calls, progress, a cancel, a resume after the channel is killed', async (t) => {
    const hello = await client.openSession();
    const tools = (await client.listTools('ts')).map((x) => x.name);
    assert.ok(tools.includes('slow'), `${tools}`);
    const big = 'e2b '.repeat(50_000);
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: big })), big);
    /** @type {any[]} */
    let got = [];
    const last = await client.callTool(
      'ts',
      'slow',
      { seconds: 0.3, steps: 3 },
      { onProgress: (c) => got.push(c) },
    );
    assert.ok(last.is_last);
    assert.equal(got.length, 3);

    const ac = new AbortController();
    got = [];
    const call = client.callTool(
      'ts',
      'slow',
      { seconds: 30, steps: 300, cancel_marker: '/tmp/cancelled' },
      { signal: ac.signal, onProgress: (c) => got.push(c) },
    );
    await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
    ac.abort();
    assert.ok((await rejection(call)) instanceof CancelledError);
    await waitFor(() => envd.exec('cat', '/tmp/cancelled').stdout === 'cancelled', {
      ms: 30_000,
      what: 'the cancel marker',
    });

    if (!hello.retention_ms) {
      t.diagnostic('SKIPPED: resume: this attach keeps no call (retention_ms 0)');
    } else {
      got = [];
      const resumed = client.callTool(
        'ts',
        'slow',
        { seconds: 2, steps: 4 },
        { onProgress: (c) => got.push(c) },
      );
      await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
      assert.ok(envd.killAttach());
      assert.ok((await resumed).is_last);
      const steps = new Set(got.map((c) => progressOf(c)?.progress));
      assert.equal(got.length, 4);
      assert.equal(steps.size, 4);
    }

    got = [];
    const doomed = client.callTool(
      'ts',
      'slow',
      { seconds: 30, steps: 30 },
      { onProgress: (c) => got.push(c) },
    );
    await waitFor(() => got.length > 0, { ms: 30_000, what: 'the first progress chunk' });
    envd.kill();
    await rejection(doomed);
    const e = await rejection(client.callTool('ts', 'echo', { text: 'anyone?' }));
    assert.ok(e instanceof BackendError, `${e}`);
    assert.equal(e.backend, 'e2b');
    assert.equal(e.state, 'unreachable', `${e}`);
  });

  test('what is not a sandbox is refused', () => {
    assert.throws(() => e2b({}), /E2B Sandbox/);
  });
});
