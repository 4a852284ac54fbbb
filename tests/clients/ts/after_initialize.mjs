// What server-everything does on its own right after a client's `notifications/initialized`,
// as the official TypeScript SDK client sees it: it announces the tools that depend on the
// client's capabilities (`notifications/tools/list_changed`) and asks for the client's roots
// (`roots/list`). Prints {"tools/list_changed": bool, "roots/list": bool}: whether each came
// within 10 s, so that a run straight to the server and one through `mcpgw mcp` compare.
//
//   node after_initialize.mjs stdio COMMAND [ARG...]
//   node after_initialize.mjs http URL [TOKEN_FILE]
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ListRootsRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { SCRIPT, transportArgs } from './script.mjs';

const LIMIT_MS = 10_000;
const [mode, target, rest] = transportArgs(process.argv.slice(2));
const transport =
  mode === 'stdio'
    ? new StdioClientTransport({ command: target, args: rest, env: process.env, stderr: 'inherit' })
    : new StreamableHTTPClientTransport(new URL(target), {
        requestInit: rest
          ? { headers: { Authorization: `Bearer ${readFileSync(rest, 'utf8').trim()}` } }
          : {},
      });
const client = new Client(
  { name: 'mcpgw-test-ts', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } },
);
const came = (register) =>
  new Promise((resolve) => {
    register(() => resolve(true));
    setTimeout(() => resolve(false), LIMIT_MS);
  });
const listChanged = came((hit) =>
  client.setNotificationHandler(ToolListChangedNotificationSchema, hit),
);
const roots = came((hit) =>
  client.setRequestHandler(ListRootsRequestSchema, async () => {
    hit();
    return SCRIPT.answers.roots;
  }),
);
await client.connect(transport);
const out = { 'tools/list_changed': await listChanged, 'roots/list': await roots };
await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
