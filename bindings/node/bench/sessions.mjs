// One Node process holding many open sessions and calling across all of them.
//
//   node --expose-gc bench/sessions.mjs [--sessions N] [--gateways G] [--seconds S] [--in-flight K]
//
// G gateways run locally (the local backend; the static release gateway and test server by
// default, MCPGW_GATEWAY / MCPGW_TESTSERVER otherwise); N clients each open a session (an
// `attach` process) to one of them; one call goes over every session, then calls run for S
// seconds with K in flight, spread over all sessions. Prints
//
//   host sessions: N open, library KiB per session: X, threads: T, calls/s: Z
//
// with the baseline beside each figure: X is this process's resident memory growth per session
// (the attach processes are other processes: none of theirs), beside the process's memory before
// any session; T this process's threads, beside its threads before any session; Z beside the
// calls/s of one session alone with the same calls in flight.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Client, local } from '../index.js';

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '1000' },
    gateways: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '5' },
    'in-flight': { type: 'string', default: '64' },
  },
});
const N = Number(values.sessions);
const G = Number(values.gateways);
const SECONDS = Number(values.seconds);
const K = Number(values['in-flight']);

const repo = resolve(fileURLToPath(import.meta.url), '../../../..');
const staticDir = join(repo, 'target/x86_64-unknown-linux-gnu/release');
const gatewayPath = process.env.MCPGW_GATEWAY ?? join(staticDir, 'mcpgw-gateway');
const serverPath = process.env.MCPGW_TESTSERVER ?? join(staticDir, 'mcpgw-testserver');

/** This process's resident memory (KiB) and thread count. */
function self() {
  const status = readFileSync('/proc/self/status', 'utf8');
  const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+)`, 'm'))?.[1]);
  return { rssKiB: field('VmRSS'), threads: field('Threads') };
}

/** Settled memory: after a full garbage collection when the process allows one. */
async function settled() {
  for (let i = 0; i < 3; i++) {
    globalThis.gc?.();
    await new Promise((r) => setTimeout(r, 50));
  }
  return self();
}

/** Runs `fn(i)` for i < n with at most `k` at once. */
async function pool(n, k, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(k, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

/** Calls echo for `seconds` with `k` in flight, round robin over `clients`; calls/s. */
async function rate(clients, k, seconds) {
  const end = performance.now() + seconds * 1000;
  let calls = 0;
  let at = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: k }, async () => {
      while (performance.now() < end) {
        const c = clients[at++ % clients.length];
        await c.callTool('ts', 'echo', { text: 'x' });
        calls++;
      }
    }),
  );
  return calls / ((performance.now() - started) / 1000);
}

const root = mkdtempSync(join(tmpdir(), 'mcpgw-node-bench-'));
/** @type {Client[]} */
const launchers = [];
/** @type {Client[]} */
const clients = [];
try {
  const gateways = [];
  for (let g = 0; g < G; g++) {
    const launcher = new Client(local({ cwd: root }), {
      gatewayPath,
      stateDir: join(root, `gw${g}`),
    });
    launchers.push(launcher);
    gateways.push(await launcher.startGateway());
    await launcher.addMcp({
      name: 'ts',
      mcp_config: { type: 'stdio_mcp', command: serverPath, args: ['stdio'] },
    });
  }
  const before = await settled();
  for (let i = 0; i < N; i++) {
    const gw = gateways[i % G];
    clients.push(
      new Client(local({ cwd: root }), {
        gatewayPath,
        port: gw.port,
        tokenFile: gw.token_file,
        instanceNonce: gw.instance_nonce,
      }),
    );
  }
  const openedAt = performance.now();
  await pool(N, 32, (i) => clients[i].openSession());
  const openSeconds = (performance.now() - openedAt) / 1000;
  // One call over every session.
  await pool(N, K, (i) => clients[i].callTool('ts', 'echo', { text: `${i}` }));
  const open = clients.filter((c) => c.state().session === 'open').length;
  const after = await settled();
  const perSession = (after.rssKiB - before.rssKiB) / N;
  const callsPerSecond = await rate(clients, K, SECONDS);
  const during = self();
  const alone = await rate([clients[0]], K, Math.min(SECONDS, 3));
  console.log(
    `host sessions: ${open} open, library KiB per session: ${perSession.toFixed(1)}, ` +
      `threads: ${Math.max(after.threads, during.threads)}, calls/s: ${callsPerSecond.toFixed(0)}`,
  );
  console.log(
    `  baseline: ${(before.rssKiB / 1024).toFixed(1)} MiB resident and ${before.threads} threads ` +
      `before any session (${G} gateways started); one session alone: ${alone.toFixed(0)} calls/s ` +
      `with ${K} in flight; the ${N} sessions opened in ${openSeconds.toFixed(1)} s (32 at a time)`,
  );
  if (open !== N) process.exitCode = 1;
} finally {
  await Promise.all(clients.map((c) => c.close()));
  for (const l of launchers) await l.stopGateway().catch(() => {});
  await Promise.all(launchers.map((l) => l.close()));
  rmSync(root, { recursive: true, force: true });
}
