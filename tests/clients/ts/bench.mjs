// make bench: tools/call through the official TypeScript SDK client, over stdio, to a command
// that serves MCP: server-everything on this machine, or `mcpgw mcp` into a container.
//
//   node bench.mjs CALLS COMMAND [ARG...]   (bench/host_endpoint.sh runs it)
//
// Prints {"p50_ms", "calls_per_s"}: p50 of CALLS sequential `echo` calls, then calls/s of
// 4 x CALLS calls with 16 in flight.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [calls, command, ...args] = process.argv.slice(2);
const n = Number(calls);
const client = new Client({ name: 'mcpgw-bench', version: '1.0.0' });
await client.connect(new StdioClientTransport({ command, args, env: process.env, stderr: 'ignore' }));
const echo = () => client.callTool({ name: 'echo', arguments: { message: 'bench' } });
for (let i = 0; i < 20; i++) await echo();
const times = [];
for (let i = 0; i < n; i++) {
  const t0 = process.hrtime.bigint();
  await echo();
  times.push(Number(process.hrtime.bigint() - t0) / 1e6);
}
times.sort((a, b) => a - b);
const total = 4 * n;
let next = 0;
const t0 = process.hrtime.bigint();
await Promise.all(
  Array.from({ length: 16 }, async () => {
    while (next++ < total) await echo();
  }),
);
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
await client.close();
process.stdout.write(
  JSON.stringify({ p50_ms: times[Math.floor(n / 2)], calls_per_s: total / seconds }) + '\n',
);
