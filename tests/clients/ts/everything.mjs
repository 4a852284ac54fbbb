// Every feature of @modelcontextprotocol/server-everything through the official TypeScript SDK
// client, its results printed as one JSON object on stdout, so that two runs (straight to the
// server, and through `mcpgw mcp`) can be compared.
//
//   node everything.mjs stdio COMMAND [ARG...]
//   node everything.mjs http URL [TOKEN_FILE]
//   node everything.mjs binding docker CONTAINER COMMAND [ARG...]   (binding.mjs)
//
// The SDK's own handlers answer the server's sampling, elicitation and roots requests.
import { readFileSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { SCRIPT, transportArgs } from './script.mjs';

const LIMIT_MS = 30_000;

const [mode, target, rest] = transportArgs(process.argv.slice(2));
let teardown = async () => {};
let transport;
if (mode === 'stdio') {
  transport = new StdioClientTransport({
    command: target,
    args: rest,
    env: process.env,
    stderr: 'inherit',
  });
} else if (mode === 'http') {
  transport = new StreamableHTTPClientTransport(new URL(target), {
    requestInit: rest
      ? { headers: { Authorization: `Bearer ${readFileSync(rest, 'utf8').trim()}` } }
      : {},
  });
} else {
  // Loaded only in this mode: it needs the Node binding's own dependencies (koffi).
  const { dockerTransport } = await import('./binding.mjs');
  ({ transport, teardown } = await dockerTransport(target, rest));
}

const client = new Client(
  { name: 'mcpgw-test-ts', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } } },
);

// Notifications, kept in order, with waiters for the next one of a kind.
const seen = [];
const waiters = [];
function noted(kind, params) {
  seen.push({ kind, params });
  for (const w of waiters.splice(0)) w();
}
async function waitFor(pred, what) {
  const deadline = Date.now() + LIMIT_MS;
  for (;;) {
    const hit = seen.find(pred);
    if (hit) return hit;
    if (Date.now() > deadline) throw new Error(`no ${what} within ${LIMIT_MS} ms`);
    await new Promise((resolve) => {
      waiters.push(resolve);
      setTimeout(resolve, deadline - Date.now());
    });
  }
}

const asked = [];
client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
  asked.push(`sampling/createMessage: ${req.params.messages[0].content.text}`);
  return SCRIPT.answers.sampling;
});
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  asked.push(`elicitation/create: ${req.params.message}`);
  return SCRIPT.answers.elicitation;
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  asked.push('roots/list');
  return SCRIPT.answers.roots;
});
client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => noted('tools', n.params));
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => noted('log', n.params));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => noted('updated', n.params));

// A request's outcome: its result, or the error the SDK raised.
async function outcome(promise) {
  try {
    return { result: await promise };
  } catch (e) {
    return { error: { code: e.code ?? null, message: String(e.message ?? e) } };
  }
}

const out = {};
await client.connect(transport);
out.server = {
  version: client.getServerVersion(),
  capabilities: client.getServerCapabilities(),
  instructions: client.getInstructions(),
};
// The tools that depend on the client's capabilities come with list changes after initialized.
for (;;) {
  const { tools } = await client.listTools();
  const names = new Set(tools.map((t) => t.name));
  if (SCRIPT.conditional_tools.every((t) => names.has(t))) {
    out.tools = tools;
    break;
  }
  const before = seen.filter((n) => n.kind === 'tools').length;
  await waitFor((_, i, all) => all.filter((n) => n.kind === 'tools').length > before, 'tools/list_changed');
}
out.prompts = await client.listPrompts();
out.resources = await client.listResources();
out.templates = await client.listResourceTemplates();
for (const [label, name, args] of SCRIPT.calls) {
  out[`call ${label}`] = await outcome(client.callTool({ name, arguments: args }));
}
for (const uri of [out.resources.resources[0].uri, ...SCRIPT.reads]) {
  out[`read ${uri}`] = await outcome(client.readResource({ uri }));
}
for (const [label, name, args] of SCRIPT.prompts) {
  out[label] = await client.getPrompt(args ? { name, arguments: args } : { name });
}
out.complete = await client.complete(SCRIPT.complete);
out.ping = await client.ping();

// Logging: the level set, then the log line the server writes for a subscription.
out.setLevel = await client.setLoggingLevel('debug');
const uri = SCRIPT.subscribe;
out.subscribe = await client.subscribeResource({ uri });
out['log of subscribe'] = (await waitFor((n) => n.kind === 'log' && String(n.params.data).includes(uri), 'log message')).params;
out['toggle updates'] = await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
out.updated = (await waitFor((n) => n.kind === 'updated' && n.params.uri === uri, 'resources/updated')).params;
out['toggle updates off'] = await client.callTool({ name: 'toggle-subscriber-updates', arguments: {} });
out.unsubscribe = await client.unsubscribeResource({ uri });

// Progress, by the SDK's own token.
const progress = [];
out.long = await client.callTool(
  { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
  undefined,
  { onprogress: (p) => progress.push(p) },
);
// The last step's progress comes back to back with the answer: whether the SDK's handler sees
// it before the answer depends on the transport's timing, so it is left out of the comparison.
out.progress = progress.filter((p) => p.progress < p.total);

// Cancel: a long call aborted once it reported progress; the session goes on.
const abort = new AbortController();
let first;
const reported = new Promise((resolve) => (first = resolve));
const cancelled = outcome(
  client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
    undefined,
    { signal: abort.signal, onprogress: () => first() },
  ),
);
await reported;
abort.abort('the test cancels it');
const c = await cancelled;
out.cancelled = { error: c.error ? 'raised' : null, result: c.result ?? null };
out['after cancel'] = await client.callTool({ name: 'echo', arguments: { message: 'still here' } });
// The server asks for roots on its own 350 ms after initialized, and again from `get-roots-list`
// when that answer has not come yet: how many times it asks is its own timing, so roots/list
// counts once; every other request exactly as often as it came.
const others = asked.filter((a) => a !== 'roots/list');
out.asked = (others.length < asked.length ? [...others, 'roots/list'] : others).sort();

await client.close();
await teardown();
process.stdout.write(JSON.stringify(out) + '\n');
process.exit(0);
