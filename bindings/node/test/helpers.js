// Shared by the tests: the repository's binaries, a local sandbox (a temp dir, commands run with
// `sh -c` in it) and process checks.

import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { localExec } from '../index.js';

/** The root of the mcpgw repository. */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/**
 * The path of a binary of the repository's debug build (or `env` when set); throws with the
 * command that builds it when it is missing.
 */
export function binary(name, env) {
  const path = process.env[env] || join(REPO, 'target', 'debug', name);
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

/** The spec registering the test server over stdio under `name`. */
export function testserverSpec(name = 'ts') {
  return {
    name,
    is_stateful: true,
    mcp_config: { type: 'stdio_mcp', command: testserverPath(), args: ['stdio'] },
  };
}

/**
 * A fresh local sandbox: a temp dir, and an exec function running `sh -c` in it that records
 * every command it is given.
 */
export function makeSandbox() {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-test-'));
  const local = localExec({ cwd: dir });
  const commands = [];
  const exec = (command, opts) => {
    commands.push(command);
    return local(command, opts);
  };
  return {
    dir,
    exec,
    commands,
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

/** Waits up to `ms` for `pid` to exit; returns whether it did. */
export async function waitGone(pid, ms = 5000) {
  const end = Date.now() + ms;
  while (!processGone(pid)) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
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

/** Waits up to `ms` for the file at `path` to exist; returns its text, or null. */
export async function waitFile(path, ms = 5000) {
  const end = Date.now() + ms;
  while (!existsSync(path)) {
    if (Date.now() > end) return null;
    await new Promise((r) => setTimeout(r, 20));
  }
  return readFileSync(path, 'utf8');
}
