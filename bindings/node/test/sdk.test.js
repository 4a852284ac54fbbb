// The official TypeScript SDK's Client over McpgwTransport (mcpgw/sdk), in a local sandbox:
// against the project's test server (initialize, tools/list, tools/call with progress, a list
// change, a cancel that reaches the server) and against server-everything (its sampling,
// elicitation and roots requests answered by the SDK's own handlers); closing the SDK's client
// closes the connection and not the session; a connection that ends on its own reaches the
// SDK's onerror and onclose; bad input fails with the binding's errors.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client as McpClient } from '@modelcontextprotocol/sdk/client/index.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import {
  Client,
  InvalidArgumentError,
  InvalidStateError,
  NotFoundError,
  SessionLostError,
  UpstreamError,
  local,
  nativeStats,
} from '../index.js';
import { McpgwTransport } from '../src/sdk.js';
import { everythingOnHost } from './clients.js';
import {
  gatewayPath,
  makeSandbox,
  processesMentioning,
  rejection,
  runningGateway,
  testserverSpec,
  waitFor,
} from './helpers.js';

/** An SDK client declaring what a host offers the server. */
const sdkClient = () =>
  new McpClient(
    { name: 'mcpgw-node-test', version: '1.0.0' },
    { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
  );

/**
 * An SDK client connected over a transport to `mcp`, with the transport's events recorded.
 *
 * @param {Client} client
 * @param {string} mcp
 */
async function connected(client, mcp) {
  const sdk = sdkClient();
  /** @type {Error[]} */
  const errors = [];
  let closes = 0;
  sdk.onerror = (e) => errors.push(e);
  sdk.onclose = () => closes++;
  const transport = new McpgwTransport(client, mcp);
  await sdk.connect(transport);
  return { sdk, transport, errors, closes: () => closes };
}

describe('the SDK client over McpgwTransport, against the test server', () => {
  const sb = makeSandbox();
  const gw = runningGateway(sb);
  /** @type {Client} */
  let client;
  /** The live attach processes of this sandbox. */
  const attaches = () => processesMentioning('attach', gw.stateDir);

  before(async () => {
    client = gw.client;
    await client.openSession();
  });

  test('initialize, tools/list, tools/call with progress, a list change', async () => {
    const { sdk } = await connected(client, 'ts');
    assert.equal(sdk.getServerVersion()?.name, 'mcpgw-testserver');
    assert.equal(sdk.getInstructions(), "The MCP server mcpgw's tests run against.");
    const { tools } = await sdk.listTools();
    for (const name of ['echo', 'add', 'slow'])
      assert.ok(
        tools.some((t) => t.name === name),
        name,
      );
    const echoed = await sdk.callTool({ name: 'echo', arguments: { text: 'through the SDK' } });
    assert.deepEqual(echoed.content, [{ type: 'text', text: 'through the SDK' }]);
    const sum = await sdk.callTool({ name: 'add', arguments: { a: 2, b: 40 } });
    assert.equal(/** @type {any} */ (sum.structuredContent).sum, 42);
    const progress = [];
    const slow = await sdk.callTool(
      { name: 'slow', arguments: { seconds: 0.3, steps: 3 } },
      undefined,
      {
        onprogress: (p) => progress.push(p.progress),
      },
    );
    assert.match(/** @type {any} */ (slow.content)[0].text, /done after 3 steps/);
    assert.deepEqual(progress, [1, 2, 3]);
    let changed = () => {};
    const listChanged = new Promise((resolve) => (changed = () => resolve(undefined)));
    sdk.setNotificationHandler(ToolListChangedNotificationSchema, () => changed());
    await sdk.callTool({ name: 'change_tools', arguments: {} });
    await listChanged;
    await sdk.close();
  });

  test("the SDK's cancel reaches the server", async () => {
    const { sdk } = await connected(client, 'ts');
    const marker = join(sb.dir, 'sdk-cancelled');
    const ac = new AbortController();
    let started = () => {};
    const progressed = new Promise((resolve) => (started = () => resolve(undefined)));
    const call = sdk.callTool(
      { name: 'slow', arguments: { seconds: 30, steps: 300, cancel_marker: marker } },
      undefined,
      { signal: ac.signal, onprogress: () => started() },
    );
    await progressed;
    ac.abort('the test cancels it');
    await rejection(call);
    await waitFor(() => existsSync(marker), { what: 'the cancel marker' });
    assert.equal((await sdk.ping()).constructor, Object, 'the connection goes on');
    await sdk.close();
  });

  test('closing the SDK client closes the connection, not the session', async () => {
    const [channel] = attaches();
    const { sdk, transport, closes } = await connected(client, 'ts');
    // A call in flight when the client closes: the gateway cancels it upstream.
    const marker = join(sb.dir, 'closed-under-a-call');
    let started = () => {};
    const progressed = new Promise((resolve) => (started = () => resolve(undefined)));
    const call = sdk.callTool(
      { name: 'slow', arguments: { seconds: 30, steps: 300, cancel_marker: marker } },
      undefined,
      { onprogress: () => started() },
    );
    await progressed;
    await sdk.close();
    assert.equal(closes(), 1);
    const e = await rejection(call);
    assert.ok(e instanceof McpError && e.code === ErrorCode.ConnectionClosed, `${e}`);
    await waitFor(() => existsSync(marker), { what: 'the gateway cancelling the call upstream' });
    // The session and its channel go on.
    assert.equal(client.state().session, 'open');
    assert.deepEqual(attaches(), [channel]);
    assert.equal((await client.callTool('ts', 'echo', { text: 'still' })).content.length, 1);
    // Sending after the close fails clearly, from the SDK and from the transport alike.
    await assert.rejects(sdk.ping(), /Not connected/);
    const late = await rejection(transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    assert.ok(late instanceof InvalidStateError, `${late}`);
    assert.match(late.message, /"ts": the connection is closed/);
    await transport.close(); // idempotent
    assert.equal(closes(), 1);
  });

  test("a server that exits: the SDK's onerror gets an UpstreamError saying why, then onclose", async () => {
    await client.addMcp(testserverSpec('crashes'));
    const { sdk, errors, closes } = await connected(client, 'crashes');
    // The call in flight gets the gateway's JSON-RPC error saying why; the connection ends.
    const e = await rejection(sdk.callTool({ name: 'crash', arguments: {} }));
    assert.ok(e instanceof McpError, `${e}`);
    assert.match(e.message, /the upstream session ended/);
    await waitFor(() => closes() === 1, { what: 'onclose' });
    const ours = errors.filter((x) => x instanceof UpstreamError);
    assert.equal(ours.length, 1, `${errors}`);
    assert.match(ours[0].message, /"crashes" ended: the upstream's session ended/);
    await assert.rejects(sdk.ping(), /Not connected/);
    await client.removeMcp('crashes');
  });

  test('an unknown MCP: connect rejects with NotFoundError naming it', async () => {
    const sdk = sdkClient();
    let closes = 0;
    sdk.onclose = () => closes++;
    const e = await rejection(sdk.connect(new McpgwTransport(client, 'no-such-mcp')));
    assert.ok(e instanceof NotFoundError, `${e}`);
    assert.equal(e.status, 404);
    assert.match(e.message, /connection to MCP "no-such-mcp" was refused: 'no-such-mcp' not found/);
    await waitFor(() => closes === 1, { what: 'onclose' });
  });

  test('bad arguments, a second start, a send before start: the binding errors', async () => {
    for (const args of [
      [null, 'ts'],
      [{}, 'ts'],
      [client, 5],
      [client, 'ts', { agent: 'a' }],
      [client, 'ts', 'options'],
    ]) {
      assert.throws(
        () => new McpgwTransport(.../** @type {[any, any, any]} */ (args)),
        InvalidArgumentError,
      );
    }
    // A name the library refuses, caught when the transport starts.
    const nul = await rejection(new McpgwTransport(client, 't\0s').start());
    assert.ok(nul instanceof InvalidArgumentError, `${nul}`);
    const transport = new McpgwTransport(client, 'ts');
    const early = await rejection(transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' }));
    assert.ok(early instanceof InvalidStateError && /not started/.test(early.message), `${early}`);
    await transport.start();
    const twice = await rejection(transport.start());
    assert.ok(
      twice instanceof InvalidStateError && /already started/.test(twice.message),
      `${twice}`,
    );
    await transport.close();
  });

  test('the session closed under the SDK client: onerror gets SessionLostError, then onclose; nothing native is left', async () => {
    const { sdk, errors, closes } = await connected(client, 'ts');
    await client.closeSession();
    await waitFor(() => closes() === 1, { what: 'onclose' });
    const lost = errors.filter((x) => x instanceof SessionLostError);
    assert.equal(lost.length, 1, `${errors}`);
    assert.match(lost[0].message, /"ts" ended: the session was closed by the host/);
    await assert.rejects(sdk.ping(), /Not connected/);
    // Without a session, a transport cannot start.
    const e = await rejection(sdkClient().connect(new McpgwTransport(client, 'ts')));
    assert.ok(e instanceof InvalidStateError, `${e}`);
    assert.equal(nativeStats().actions, 0);
  });
});

describe("the SDK client's own handlers answer server-everything's requests", () => {
  const sb = makeSandbox();
  /** @type {Client} */
  let client;

  before(async () => {
    client = new Client(sb.backend, { gatewayPath: gatewayPath(), stateDir: join(sb.dir, 'st') });
    await client.openSession();
    await client.addMcp({
      name: 'ev',
      mcp_config: {
        type: 'stdio_mcp',
        command: process.execPath,
        args: [everythingOnHost(), 'stdio'],
      },
    });
  });

  after(async () => {
    await client?.stopGateway().catch(() => {});
    await client?.close();
    assert.deepEqual(processesMentioning(sb.dir), [], 'nothing left running');
    sb.remove();
  });

  test('sampling, elicitation and roots, over the connection', async () => {
    const sdk = sdkClient();
    const asked = [];
    sdk.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      asked.push('sampling');
      const text = /** @type {any} */ (req.params.messages[0].content).text;
      return { role: 'assistant', model: 'm', content: { type: 'text', text: `sampled: ${text}` } };
    });
    sdk.setRequestHandler(ElicitRequestSchema, async () => {
      asked.push('elicitation');
      return { action: 'decline' };
    });
    sdk.setRequestHandler(ListRootsRequestSchema, async () => {
      asked.push('roots');
      return { roots: [{ uri: 'file:///work/host-root', name: 'host-root' }] };
    });
    await sdk.connect(new McpgwTransport(client, 'ev'));
    assert.equal(sdk.getServerVersion()?.name, 'mcp-servers/everything');
    // The tools that need the client's capabilities come with a list change after initialized.
    const wanted = ['trigger-sampling-request', 'trigger-elicitation-request', 'get-roots-list'];
    await waitFor(
      async () => {
        const names = new Set((await sdk.listTools()).tools.map((t) => t.name));
        return wanted.every((n) => names.has(n));
      },
      { what: 'the conditional tools', every: 50 },
    );
    const text = async (name, args) =>
      /** @type {any} */ ((await sdk.callTool({ name, arguments: args })).content)[0].text;
    assert.match(
      await text('trigger-sampling-request', { prompt: 'hello', maxTokens: 5 }),
      /"text": "sampled: .*hello"/,
    );
    assert.match(await text('trigger-elicitation-request', {}), /declin/i);
    assert.match(await text('get-roots-list', {}), /file:\/\/\/work\/host-root/);
    assert.deepEqual(
      asked.filter((a) => a !== 'roots'),
      ['sampling', 'elicitation'],
    );
    assert.ok(asked.includes('roots'));
    await sdk.close();
  });
});

describe('a transport on a closed client', () => {
  test('start rejects with InvalidStateError: the client is closed', async () => {
    const client = new Client(local(), { gatewayPath: gatewayPath() });
    const transport = new McpgwTransport(client, 'ts');
    await client.close();
    const e = await rejection(sdkClient().connect(transport));
    assert.ok(e instanceof InvalidStateError, `${e}`);
    assert.match(e.message, /the client is closed/);
  });
});
