// Shared by the tests: the repository's binaries, local sandboxes (a temp dir entered through a
// recording argv prefix, or through an exec function of the test's own), real Docker and podman
// containers (tests/docker/sandbox.sh), process checks, and waiting on conditions with deadlines
// (never on fixed sleeps).

import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client, argv, exec } from '../index.js';

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
      `${path} is missing: build it with \`cargo build --bin ${name}\` in ${REPO} ` +
        '(or run `make -C bindings/node test`, which builds everything the tests need)',
    );
  }
  return path;
}

/** The gateway binary. */
export const gatewayPath = () => binary('mcpgw-gateway', 'MCPGW_GATEWAY');
/** The project's MCP test server. */
export const testserverPath = () => binary('mcpgw-testserver', 'MCPGW_TESTSERVER');
/** testkit's comparison of two runs of an SDK client's script. */
export const sameAnswersPath = () => binary('mcpgw-same-answers', 'MCPGW_SAME_ANSWERS');
/** The static gateway (`make static`), as the container images hold it. */
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
 * A running gateway for the current suite: its `before` hook starts one through `sandbox`'s
 * backend (state in `DIR/st`) with the test server registered as `ts`; its `after` hook stops
 * it, closes the client, kills what is left of the sandbox and removes it. `client` is set once
 * the hook ran.
 *
 * @param {{dir: string, backend: import('../index.js').Backend, remove: () => void}} sandbox
 */
export function runningGateway(sandbox) {
  /** @type {{client: Client, stateDir: string}} */
  const gw = { client: /** @type {any} */ (null), stateDir: join(sandbox.dir, 'st') };
  before(async () => {
    gw.client = new Client(sandbox.backend, { gatewayPath: gatewayPath(), stateDir: gw.stateDir });
    await gw.client.startGateway();
    await gw.client.addMcp(testserverSpec('ts'));
  });
  after(async () => {
    await gw.client?.stopGateway().catch(() => {});
    await gw.client?.close();
    for (const pid of processesMentioning(sandbox.dir)) process.kill(pid, 'SIGKILL');
    sandbox.remove();
  });
  return gw;
}

/** Writes an executable shell script at `path`. */
export function script(path, text) {
  writeFileSync(path, `#!/bin/sh\n${text}`);
  chmodSync(path, 0o755);
  return path;
}

/**
 * A fresh local sandbox: a temp dir, entered through an argv prefix (the `argv` backend, as
 * `nsenter ...` would be) that records each invocation, then runs it in the dir.
 * `invocations()` gives each recorded argv (after the prefix); `commands()` the one-shot
 * commands among them (a session channel runs `attach`).
 */
export function makeSandbox() {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-test-'));
  const log = join(dir, 'invocations');
  mkdirSync(log);
  // One file per invocation, named by its time: its words, each followed by US (\037).
  const enter = script(
    join(dir, 'enter'),
    `f=${JSON.stringify(log)}/$(date +%s%N).$$\nfor a in "$@"; do printf '%s\\037' "$a"; done > "$f"\n` +
      `cd ${JSON.stringify(dir)} && exec "$@"\n`,
  );
  const invocations = () =>
    readdirSync(log)
      .sort()
      .map((f) => readFileSync(join(log, f), 'utf8').split('\x1f').slice(0, -1));
  const commands = () => invocations().filter((a) => !a.some((w) => / attach /.test(w)));
  return {
    dir,
    backend: argv([enter]),
    invocations,
    commands,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * Runs `sh -c command` in `cwd`, with `stdin` when given, collecting its output; kills its
 * process group when `signal` aborts. The test's own exec function for the `exec` backend.
 *
 * @returns {Promise<{exitCode: number, stdout: Buffer, stderr: Buffer}>}
 */
export function shell(command, { cwd, stdin, signal } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], {
      cwd,
      stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      detached: true,
    });
    const out = [];
    const err = [];
    child.stdout.on('data', (b) => out.push(b));
    child.stderr.on('data', (b) => err.push(b));
    child.stdin?.on('error', () => {});
    child.stdin?.end(stdin);
    const onAbort = () => {
      try {
        process.kill(-(child.pid ?? 0), 'SIGKILL');
      } catch {
        // Gone already.
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', reject);
    child.on('close', (code, sig) => {
      signal?.removeEventListener('abort', onAbort);
      resolve({
        exitCode: code ?? (sig === 'SIGKILL' ? 137 : 143),
        stdout: Buffer.concat(out),
        stderr: Buffer.concat(err),
      });
    });
  });
}

/**
 * A local sandbox behind the `exec` backend: the test's own function runs each command with
 * `sh -c` in a temp dir and records it (`commands`, `stdins`: sizes, `outputs`: stdout), and
 * sessions open with `sh -c` there too.
 *
 * @param {{passesStdin?: boolean, run?: import('../index.js').RunFn}} [options] `run` wraps
 *   the recording runner
 */
export function execSandbox({ passesStdin = true } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-exec-'));
  /** @type {string[]} */
  const commands = [];
  /** @type {number[]} */
  const stdins = [];
  /** @type {Buffer[]} */
  const outputs = [];
  /** @type {import('../index.js').RunFn} */
  const run = async (command, { stdin, signal }) => {
    commands.push(command);
    stdins.push(stdin?.length ?? 0);
    const r = await shell(command, { cwd: dir, stdin, signal });
    outputs.push(r.stdout);
    return r;
  };
  const open = (command) => spawn('sh', ['-c', command], { cwd: dir, stdio: 'pipe' });
  return {
    dir,
    backend: exec(run, { open, passesStdin }),
    commands,
    stdins,
    outputs,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Whether process `pid` has exited (a zombie counts as exited). */
export function processGone(pid) {
  try {
    return /^State:\s*Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return true;
  }
}

/** Pids of live (non-zombie) processes whose command line contains every one of `texts`. */
export function processesMentioning(...texts) {
  const pids = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (texts.every((t) => cmdline.includes(t)) && !processGone(entry)) pids.push(Number(entry));
    } catch {
      // Exited while we looked.
    }
  }
  return pids;
}

/** The command lines of every live process, for scanning. */
export function commandLines() {
  const lines = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      lines.push(readFileSync(`/proc/${entry}/cmdline`, 'utf8'));
    } catch {
      // Exited while we looked.
    }
  }
  return lines;
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

// ---- Docker and podman ----------------------------------------------------------------------

const SANDBOX_SH = join(REPO, 'tests', 'docker', 'sandbox.sh');

/**
 * A container engine for the tests, through tests/docker/sandbox.sh: Docker, or podman (with
 * `--storage-driver vfs`, containers without an init and with the rlimits podman cannot raise
 * here; see NOTES.md). `skip` says why its tests cannot run here; `cli(...args)` runs its CLI.
 *
 * @param {'docker' | 'podman'} kind
 */
export function engine(kind) {
  const options = kind === 'podman' ? ['--storage-driver', 'vfs'] : [];
  // sandbox.sh runs "$DOCKER": for podman a wrapper adding the options.
  let program = kind;
  if (kind === 'podman') {
    const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-podman-'));
    program = script(join(dir, 'podman'), `exec podman ${options.join(' ')} "$@"\n`);
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  const sandboxSh = (...args) => {
    const r = spawnSync('sh', [SANDBOX_SH, ...args], {
      encoding: 'utf8',
      timeout: 300_000,
      env: { ...process.env, DOCKER: program },
    });
    return { ok: r.status === 0, stdout: (r.stdout ?? '').trim(), stderr: (r.stderr ?? '').trim() };
  };
  /** @type {{image: string} | {skip: string} | undefined} */
  let state;
  const image = () => {
    if (state) return state;
    if (spawnSync('sh', ['-c', `command -v ${kind}`]).status !== 0) {
      return (state = { skip: `${kind} is not installed` });
    }
    const check = sandboxSh('check');
    if (!check.ok) return (state = { skip: check.stdout || `no ${kind} answers` });
    if (!existsSync(staticGatewayPath())) {
      return (state = {
        skip: `${staticGatewayPath()} is missing: run \`make static\` in ${REPO}`,
      });
    }
    const built = sandboxSh('image');
    if (!built.ok) return (state = { skip: `the test image cannot be built: ${built.stderr}` });
    return (state = { image: built.stdout.split('\n').pop() ?? '' });
  };
  const runOptions =
    kind === 'podman'
      ? ['--no-init', '--', '--ulimit', 'nofile=20000:20000', '--ulimit', 'nproc=20000:20000']
      : [];
  /** @type {string | undefined} */
  let nodeImage;
  /** Starts a container of `img` named `name` with `extra` run options; returns the name. */
  const startFrom = (img, name, extra) => {
    const args = [...runOptions, ...(extra.length && !runOptions.length ? ['--'] : []), ...extra];
    const r = sandboxSh('start', img, name, ...args);
    if (!r.ok) throw new Error(`starting container ${name} failed: ${r.stderr}`);
    return name;
  };
  return {
    kind,
    /** The options the backend needs (`podman(box, {options})`). */
    options,
    image,
    /** Starts a container of the test image named `name`; `extra` are more run options. */
    start(name, ...extra) {
      const img = image();
      if (!('image' in img)) throw new Error(img.skip);
      return startFrom(img.image, name, extra);
    },
    /**
     * Starts a container named `name` of the test image with node and tests/servers' npm
     * servers inside too (`sandbox.sh image --node`), built on first use.
     */
    startNode(name) {
      const img = image();
      if (!('image' in img)) throw new Error(img.skip);
      if (!nodeImage) {
        const built = sandboxSh('image', '--node');
        if (!built.ok) throw new Error(`the node test image cannot be built: ${built.stderr}`);
        nodeImage = built.stdout.split('\n').pop() ?? '';
      }
      return startFrom(nodeImage, name, []);
    },
    /** Removes containers, whatever state they are in. */
    stop: (...names) => sandboxSh('stop', ...names),
    /** Runs the CLI; returns its stdout (trimmed), or throws with its stderr. */
    cli: (...args) =>
      execFileSync(kind, [...options, ...args], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }).trim(),
  };
}
