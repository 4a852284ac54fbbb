// The official SDK client's script of tests/clients (tests/clients/ts/everything.mjs: every
// feature of server-everything), run as a process, and the comparison of two of its runs: the
// same rules as the endpoint's tests (host/tests/clients.rs, testkit's `assert_same_answers` and
// `normalized`), so that a run through this binding's transport is held to what a run straight
// to the server gets.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { REPO } from './helpers.js';

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

const TIMEY = /^(timestamp|time|createdAt|lastUpdatedAt|date)$/i;

/**
 * `value` without what differs between two runs of the same exchange: ids, and the values of
 * members named like times (a blob's bytes may hold a time too), clock times in text.
 *
 * @param {unknown} value
 * @returns {unknown}
 */
export function normalized(value) {
  if (Array.isArray(value)) return value.map(normalized);
  if (typeof value === 'string') return maskTimes(value);
  if (value === null || typeof value !== 'object') return value;
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'id' || k === 'jsonrpc') continue;
    if (TIMEY.test(k)) out[k] = '<time>';
    else if (k === 'blob' && typeof v === 'string' && isBase64(v)) {
      out[k] = `<base64 of ${maskTimes(Buffer.from(v, 'base64').toString('utf8'))}>`;
    } else out[k] = normalized(v);
  }
  return out;
}

/** Whether `text` is canonical padded base64 (what a strict decoder accepts). */
function isBase64(text) {
  return (
    /^[A-Za-z0-9+/]*={0,2}$/.test(text) && Buffer.from(text, 'base64').toString('base64') === text
  );
}

/** Clock times in `text` (`9:05:58`, `21:05:58.123`, with ` AM`/` PM`) as `<time>`. */
function maskTimes(text) {
  const isDigit = (at) => at < text.length && text[at] >= '0' && text[at] <= '9';
  const digits = (at) => {
    let n = 0;
    while (isDigit(at + n)) n++;
    return n;
  };
  let out = '';
  let i = 0;
  while (i < text.length) {
    const h = digits(i);
    const isTime =
      h >= 1 &&
      h <= 2 &&
      !isDigit(i - 1) &&
      text[i + h] === ':' &&
      digits(i + h + 1) === 2 &&
      text[i + h + 3] === ':' &&
      digits(i + h + 4) === 2;
    if (!isTime) {
      out += text[i++];
      continue;
    }
    let end = i + h + 6;
    if (text[end] === '.') end += 1 + digits(end + 1);
    for (const suffix of [' AM', ' PM']) if (text.startsWith(suffix, end)) end += suffix.length;
    out += '<time>';
    i = end;
  }
  return out;
}

/**
 * Asserts that two runs of the script got the same answers, but for ids and times, naming each
 * step that differs.
 *
 * @param {Record<string, unknown>} got
 * @param {Record<string, unknown>} want
 */
export function assertSameAnswers(got, want) {
  const differ = [];
  for (const [step, w] of Object.entries(want)) {
    if (!(step in got)) differ.push(`${step}: missing`);
    else if (!isDeepStrictEqual(normalized(got[step]), normalized(w))) {
      differ.push(`${step}:\n  got  ${JSON.stringify(got[step])}\n  want ${JSON.stringify(w)}`);
    }
  }
  for (const step of Object.keys(got)) {
    if (!(step in want)) differ.push(`${step}: not in the direct run`);
  }
  assert.deepEqual(
    differ,
    [],
    `the typescript client's answers differ from a direct connection's:\n${differ.join('\n')}`,
  );
}
