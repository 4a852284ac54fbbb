// The host's rules through the binding, end to end in a local sandbox: a policy's refusals, one
// audit record per call to `onAudit`, and a secret that reaches the server but never comes back.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { Client, InvalidArgumentError, PolicyDeniedError } from '../index.js';
import { gatewayPath, makeSandbox, processesMentioning, testserverSpec } from './helpers.js';

describe("the host's policy, audit and secrets", () => {
  const sb = makeSandbox();
  const value = `node-secret-${randomBytes(8).toString('hex')}`;
  /** @type {Record<string, unknown>[]} */
  const records = [];
  const client = new Client(sb.backend, {
    gatewayPath: gatewayPath(),
    stateDir: join(sb.dir, 'state'),
    policy: { servers: { ts: { tools: { deny: ['crash'] } } } },
    // A function the client calls for each secret a spec names.
    secrets: (name) => (name === 'MCPGW_NODE_KEY' ? value : undefined),
    onAudit: (r) => records.push(r),
  });

  after(async () => {
    await client.stopGateway().catch(() => {});
    await client.close();
    for (const pid of processesMentioning(sb.dir)) process.kill(pid, 'SIGKILL');
    sb.remove();
  });

  test('refused, recorded, and the secret shown by its name', async () => {
    await client.openSession();
    const spec = testserverSpec('ts');
    spec.mcp_config.env = { MCPGW_TEST_KEY: { secret: 'MCPGW_OTHER_KEY' } };
    await assert.rejects(
      () => client.addMcp(spec),
      (e) =>
        e instanceof InvalidArgumentError && /no text for secret "MCPGW_OTHER_KEY"/.test(e.message),
    );
    spec.mcp_config.env = { MCPGW_TEST_KEY: { secret: 'MCPGW_NODE_KEY' } };
    await client.addMcp(spec);
    // The server got the value (its info tool prints MCPGW_TEST_* variables); the answer names
    // the secret instead.
    const shown = JSON.stringify(await client.callTool('ts', 'info', {}));
    assert.ok(!shown.includes(value) && shown.includes('[secret:MCPGW_NODE_KEY]'), shown);
    assert.ok(!JSON.stringify(await client.listMcps()).includes(value));
    await assert.rejects(
      () => client.callTool('ts', 'crash', {}),
      (e) =>
        e instanceof PolicyDeniedError && /servers\."ts"\.tools\.deny: "crash"/.test(e.message),
    );
    const tools = (await client.listTools('ts')).map((t) => t.name);
    assert.ok(tools.includes('info') && !tools.includes('crash'), String(tools));
    assert.deepEqual(
      records.map((r) => [r.name, r.outcome]),
      [
        ['info', 'ok'],
        ['crash', 'denied'],
      ],
    );
    assert.ok(!JSON.stringify(records).includes(value));
    // No command the sandbox ran carried it in its words.
    assert.ok(
      !sb
        .invocations()
        .flat()
        .some((w) => w.includes(value)),
    );
  });

  test('bad options are refused before anything runs', () => {
    assert.throws(
      () => new Client(sb.backend, { secrets: { K: 'short' } }),
      (e) => e instanceof InvalidArgumentError && /shorter than 8 bytes/.test(e.message),
    );
    assert.throws(
      () => new Client(sb.backend, { onAudit: 'yes' }),
      (e) => e instanceof InvalidArgumentError && /onAudit must be a function/.test(e.message),
    );
  });
});
