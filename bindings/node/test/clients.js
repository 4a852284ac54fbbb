// The official SDK client's script of tests/clients (tests/clients/ts/everything.mjs: every
// feature of server-everything), run as a process, and the comparison of two of its runs by
// testkit's `mcpgw-same-answers`, the rules of the endpoint's tests (cli/tests/clients.rs), so
// that a run through this binding's transport is held to what a run straight to the server gets.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO, sameAnswersPath } from './helpers.js';

/** How long one run of the script may take (testkit's `RUN_LIMIT`). */
const RUN_LIMIT_MS = 180_000;

/** server-everything's entry point inside the node test image (`sandbox.sh image --node`). */
export const EVERYTHING_IN_IMAGE =
  '/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js';

/**
 * `dir/node_modules` of the repository, checked: the npm packages the root Makefile installs.
 *
 * @param {string} dir relative to the repository
 */
function installed(dir) {
  const modules = join(REPO, dir, 'node_modules');
  if (!existsSync(join(modules, '.package-lock.json'))) {
    throw new Error(
      `${modules} is missing: run \`make ${dir}/node_modules/.package-lock.json\` in ${REPO} ` +
        '(`make -C bindings/node test` does)',
    );
  }
  return modules;
}

/** server-everything's entry point on this machine (tests/servers). */
export function everythingOnHost() {
  return join(installed('tests/servers'), '@modelcontextprotocol/server-everything/dist/index.js');
}

/**
 * Runs the TypeScript SDK client's script with the transport `args` (`stdio COMMAND ...` or
 * `binding docker CONTAINER COMMAND ...`); resolves with what it printed, as JSON.
 *
 * @param {string[]} args
 * @returns {Promise<Record<string, unknown>>}
 */
export function runScript(args) {
  installed('tests/clients');
  const script = join(REPO, 'tests', 'clients', 'ts', 'everything.mjs');
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], {
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: RUN_LIMIT_MS,
    });
    const out = [];
    child.stdout.on('data', (b) => out.push(b));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      const text = Buffer.concat(out).toString('utf8').trim();
      if (code !== 0) {
        return reject(new Error(`the client failed (${signal ?? code}): ${args.join(' ')}`));
      }
      try {
        resolve(JSON.parse(text));
      } catch (e) {
        reject(
          new Error(`the client printed no JSON (${/** @type {Error} */ (e).message}): ${text}`),
        );
      }
    });
  });
}

/**
 * Asserts that two runs of the script got the same answers, but for ids and times, naming each
 * step that differs: testkit's `mcpgw-same-answers` judges, by the rules of the endpoint's tests.
 *
 * @param {Record<string, unknown>} got
 * @param {Record<string, unknown>} want
 */
export function assertSameAnswers(got, want) {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-same-answers-'));
  try {
    const files = [join(dir, 'got.json'), join(dir, 'want.json')];
    writeFileSync(files[0], JSON.stringify(got));
    writeFileSync(files[1], JSON.stringify(want));
    const r = spawnSync(sameAnswersPath(), ['typescript', ...files], { encoding: 'utf8' });
    // Exit 1: they differ, each step said; anything else is a failure of the comparison.
    if (r.status === 1) assert.fail(r.stdout);
    assert.equal(
      r.status,
      0,
      `mcpgw-same-answers failed (${r.error ?? r.signal ?? r.status}): ${r.stderr}`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
