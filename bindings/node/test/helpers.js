// Shared by the tests: the repository's binaries, a local sandbox (a temp dir, commands run with
// `sh -c` in it), real Docker containers (tests/docker/sandbox.sh), process checks, and waiting on
// conditions with deadlines (never on fixed sleeps).

import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { localExec } from '../index.js';

/** The root of the mcpgw repository. */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
/** This package's directory. */
export const PACKAGE = join(REPO, 'bindings', 'node');
const TARGET = process.env.CARGO_TARGET_DIR || join(REPO, 'target');

/**
 * The path of a binary of the repository's debug build (or `env` when set); throws with the
 * command that builds it when it is missing.
 */
export function binary(name, env) {
  const path = process.env[env] || join(TARGET, 'debug', name);
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: build it with \`cargo build -p ${name}\` in ${REPO} ` +
        '(or run `make -C bindings/node test`, which builds everything the tests need)',
    );
  }
  return path;
}

/** The gateway binary. */
export const gatewayPath = () => binary('mcpgw-gateway', 'MCPGW_GATEWAY');
/** The project's MCP test server. */
export const testserverPath = () => binary('mcpgw-testserver', 'MCPGW_TESTSERVER');
/** The static gateway (`make static`), as the Docker image holds it. */
export const staticGatewayPath = () =>
  join(TARGET, 'x86_64-unknown-linux-gnu', 'release', 'mcpgw-gateway');

/** The spec registering the test server over stdio under `name` (`command` inside the sandbox). */
export function testserverSpec(name = 'ts', command = testserverPath()) {
  return {
    name,
    is_stateful: true,
    mcp_config: { type: 'stdio_mcp', command, args: ['stdio'] },
  };
}

/**
 * Wraps an exec function to record every command it is given (`commands`), the size of its stdin
 * (`stdins`), what it printed (`outputs`: `{command, stdout}` as Buffers) and how long it took
 * (`durations`, ms), keeping its `stdin` declaration.
 *
 * @param {import('../index.js').ExecFn} inner
 */
export function recording(inner) {
  /** @type {string[]} */
  const commands = [];
  /** @type {number[]} */
  const stdins = [];
  /** @type {{command: string, stdout: Buffer}[]} */
  const outputs = [];
  /** @type {number[]} */
  const durations = [];
  /** @type {import('../index.js').ExecFn} */
  const exec = async (command, opts) => {
    commands.push(command);
    stdins.push(opts?.stdin?.length ?? 0);
    const started = performance.now();
    const r = await inner(command, opts);
    durations.push(performance.now() - started);
    outputs.push({ command, stdout: Buffer.from(/** @type {Uint8Array} */ (r.stdout ?? '')) });
    return r;
  };
  exec.stdin = inner.stdin;
  return { exec, commands, stdins, outputs, durations };
}

/**
 * A fresh local sandbox: a temp dir, and a recording exec function running `sh -c` in it.
 *
 * @param {{stdin?: boolean}} [options] `stdin: false` for an exec that declares no stdin
 */
export function makeSandbox({ stdin = true } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-test-'));
  const local = localExec({ cwd: dir });
  if (!stdin) local.stdin = false;
  return { dir, ...recording(local), remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Whether process `pid` has exited (a zombie counts as exited). */
export function processGone(pid) {
  try {
    return /^State:\s*Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/** Pids of live (non-zombie) processes whose command line contains `text`. */
export function processesMentioning(text) {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(text) && !processGone(entry)) pids.push(Number(entry));
    } catch {
      // Exited while we looked.
    }
  }
  return pids;
}

/**
 * Waits until `check()` returns a truthy value (awaited), polling every `every` ms, for at most
 * `ms`; returns that value, or throws naming `what`.
 *
 * @template T
 * @param {() => T | Promise<T>} check
 * @param {{ms?: number, every?: number, what?: string}} [options]
 * @returns {Promise<T>}
 */
export async function waitFor(check, { ms = 5000, every = 10, what = 'the condition' } = {}) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > end) throw new Error(`${what} did not happen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Waits up to `ms` for `pid` to exit; returns whether it did. */
export async function waitGone(pid, ms = 5000) {
  return waitFor(() => processGone(pid), { ms, every: 20 }).then(
    () => true,
    () => false,
  );
}

/** Waits up to `ms` for the file at `path` to exist; returns its text, or null. */
export async function waitFile(path, ms = 5000, every = 20) {
  return waitFor(() => existsSync(path) && readFileSync(path, 'utf8'), { ms, every }).catch(
    () => null,
  );
}

/** The p-th percentile (0..100) of `values`. */
export function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

// ---- Docker ---------------------------------------------------------------------------------

const SANDBOX_SH = join(REPO, 'tests', 'docker', 'sandbox.sh');

/** Runs tests/docker/sandbox.sh; returns its status and output. */
function sandboxSh(...args) {
  const r = spawnSync('sh', [SANDBOX_SH, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { ok: r.status === 0, stdout: r.stdout.trim(), stderr: r.stderr.trim() };
}

let dockerState;

/**
 * The Docker test image, or why Docker tests cannot run here (`{skip}`): no daemon answers
 * (`sandbox.sh check`), or the static binaries the image holds are not built (`make static`).
 *
 * @returns {{image: string} | {skip: string}}
 */
export function dockerImage() {
  if (dockerState) return dockerState;
  const check = sandboxSh('check');
  if (!check.ok) return (dockerState = { skip: check.stdout || 'no docker daemon answers' });
  if (!existsSync(staticGatewayPath())) {
    return (dockerState = {
      skip: `${staticGatewayPath()} is missing: run \`make static\` in ${REPO}`,
    });
  }
  const image = sandboxSh('image');
  if (!image.ok) return (dockerState = { skip: `the test image cannot be built: ${image.stderr}` });
  return (dockerState = { image: image.stdout.split('\n').pop() ?? '' });
}

/**
 * Starts a container of the test image; returns its name. `extra` goes to sandbox.sh start (e.g.
 * `'--', '-v', 'HOST:CONTAINER'`).
 */
export function startContainer(image, name, ...extra) {
  const r = sandboxSh('start', image, name, ...extra);
  if (!r.ok) throw new Error(`starting container ${name} failed: ${r.stderr}`);
  return name;
}

/** Removes containers, whatever state they are in. */
export function stopContainers(...names) {
  sandboxSh('stop', ...names);
}

/** Runs `docker ARGS...`; returns its stdout (trimmed), or throws with its stderr. */
export function docker(...args) {
  return execFileSync('docker', args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  }).trim();
}

/** The command lines of the live processes in `container` (busybox `ps -o pid,args`). */
export function containerProcesses(container) {
  return docker('exec', container, 'ps', '-o', 'pid,args')
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l && !/\bps -o pid,args$/.test(l));
}

/** Rejects with the error `promise` rejects with, failing when it resolves. */
export async function rejection(promise) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail('expected a rejection');
}

/**
 * The error a stream's iterator ends with, after the chunks it still yields (progress that came
 * before the failure); fails when the stream ends normally.
 *
 * @param {AsyncIterator<unknown>} it
 */
export async function streamFailure(it) {
  for (;;) {
    try {
      if ((await it.next()).done) assert.fail('the stream ended without an error');
    } catch (e) {
      return e;
    }
  }
}
