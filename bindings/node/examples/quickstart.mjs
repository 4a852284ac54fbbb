// quickstart.mjs: the whole cycle against a local "sandbox" (a temp dir, commands run with sh -c).
//
//   node examples/quickstart.mjs [GATEWAY_BINARY [TESTSERVER_BINARY]]
//
// Defaults to the binaries of this repository's debug build (`cargo build -p mcpgw-gateway
// -p mcpgw-testserver`). Launches the gateway, registers the test MCP server, lists its tools,
// calls three of them, cancels a slow one, streams one over a session, stops the gateway.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CancelledError, Client, NotFoundError, dataBytes, local, progressOf, textOf } from 'mcpgw';

const repo = resolve(fileURLToPath(import.meta.url), '../../../..');
const gatewayPath = process.argv[2] ?? join(repo, 'target/debug/mcpgw-gateway');
const serverPath = process.argv[3] ?? join(repo, 'target/debug/mcpgw-testserver');

const sandbox = mkdtempSync(join(tmpdir(), 'mcpgw-quickstart-'));
// Any backend will do: docker('box'), podman('box'), kubectl('pod'), or your SDK through exec().
const client = new Client(local({ cwd: sandbox }), {
  gatewayPath,
  stateDir: join(sandbox, 'state'),
});

let gw;
try {
  gw = await client.startGateway();
  console.log(`gateway up: pid ${gw.pid}, port ${gw.port}`);

  await client.addMcp({
    name: 'ts',
    mcp_config: { type: 'stdio_mcp', command: serverPath, args: ['stdio'] },
  });
  const tools = await client.listTools('ts');
  console.log(`tools: ${tools.map((t) => t.name).join(', ')}`);

  const echo = await client.callTool('ts', 'echo', { text: 'hello from Node' });
  console.log(`echo: ${textOf(echo)}`);

  const sum = await client.callTool('ts', 'add', { a: 2, b: 40 });
  console.log(`add: ${JSON.stringify(sum.metadata.structured_content)}`);

  const media = await client.callTool('ts', 'media', {});
  for (const block of media.content) {
    const bytes = dataBytes(block); // null for text blocks and links
    if (bytes) console.log(`media: ${block.source.media_type}, ${bytes.length} bytes`);
  }

  try {
    await client.callTool('ts', 'no_such_tool', {});
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
    console.log(`expected error: ${e.code} (HTTP ${e.status}): ${e.detail}`);
  }

  // Cancel a call half-way: the command is killed, the gateway cancels the call upstream.
  try {
    await client.callTool('ts', 'slow', { seconds: 30 }, { signal: AbortSignal.timeout(300) });
  } catch (e) {
    if (!(e instanceof CancelledError)) throw e;
    console.log('slow call cancelled after 300 ms');
  }

  // One long-lived channel for every later call, with progress as it happens.
  await client.openSession();
  for await (const chunk of client.callToolStream('ts', 'slow', { seconds: 0.6, steps: 3 })) {
    const p = progressOf(chunk);
    console.log(p ? `progress ${p.progress}/${p.total}` : `done: ${textOf(chunk)}`);
  }
  await client.closeSession();
} finally {
  // Stopped even when something above failed: no gateway is left running.
  if (gw) {
    await client.stopGateway();
    console.log('gateway stopped');
  }
  await client.close();
  rmSync(sandbox, { recursive: true, force: true });
}
