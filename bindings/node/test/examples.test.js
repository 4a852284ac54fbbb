// The examples work as documented; the TypeScript declarations (types/, generated from the JSDoc
// of the sources) are current, cover every export, and type-check the typed example.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import * as mcpgw from '../index.js';
import * as sdk from '../src/sdk.js';
import { PACKAGE, gatewayPath, testserverPath } from './helpers.js';

const TSC = join(PACKAGE, 'node_modules', '.bin', 'tsc');

/** Every file under `dir`, relative to it, sorted. */
function filesUnder(dir) {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath ?? e.path, e.name)))
    .sort();
}

test('examples/quickstart.mjs runs the whole cycle', () => {
  const r = spawnSync(
    process.execPath,
    [join(PACKAGE, 'examples', 'quickstart.mjs'), gatewayPath(), testserverPath()],
    { encoding: 'utf8', timeout: 60_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  for (const line of [
    /^gateway up: pid \d+, port \d+$/m,
    /^echo: hello from Node$/m,
    /^add: \{"sum":42,"product":80\}$/m,
    /^media: image\/png, 70 bytes$/m,
    /^expected error: NOT_FOUND \(HTTP 404\)/m,
    /^slow call cancelled after 300 ms$/m,
    /^progress 3\/3$/m,
    /^done: done after 3 steps/m,
    /^gateway stopped$/m,
  ]) {
    assert.match(r.stdout, line);
  }
});

test('types/ is what `npm run types` generates from the sources now', (t) => {
  const out = mkdtempSync(join(tmpdir(), 'mcpgw-types-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const r = spawnSync(TSC, ['-p', join(PACKAGE, 'tsconfig.types.json'), '--outDir', out], {
    encoding: 'utf8',
  });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
  const checkedIn = join(PACKAGE, 'types');
  assert.deepEqual(filesUnder(checkedIn), filesUnder(out), 'run `npm run types`');
  for (const file of filesUnder(out)) {
    assert.equal(
      readFileSync(join(checkedIn, file), 'utf8'),
      readFileSync(join(out, file), 'utf8'),
      `types/${file} is stale: run \`npm run types\``,
    );
  }
});

test('the declarations cover every export, and examples/typed.ts type-checks against them', (t) => {
  // A project that depends on the package by name, as an installed one would.
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-dts-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'node_modules'));
  symlinkSync(PACKAGE, join(dir, 'node_modules', 'mcpgw'));
  const names = Object.keys(mcpgw).sort();
  const sdkNames = Object.keys(sdk).sort();
  writeFileSync(
    join(dir, 'exports.ts'),
    `import * as m from 'mcpgw';\nexport const names: (keyof typeof m)[] = ${JSON.stringify(names)};\n` +
      `import * as s from 'mcpgw/sdk';\nexport const sdkNames: (keyof typeof s)[] = ${JSON.stringify(sdkNames)};\n`,
  );
  const common = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext'];
  const types = ['--types', 'node', '--typeRoots', join(PACKAGE, 'node_modules', '@types')];
  let r = spawnSync(TSC, [...common, ...types, 'exports.ts'], { cwd: dir, encoding: 'utf8' });
  assert.equal(r.status, 0, `an export has no declaration:\n${r.stdout}${r.stderr}`);
  r = spawnSync(TSC, ['-p', join(PACKAGE, 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});

/**
 * Runs the README's first `js` block after `heading` as a module, from the package directory
 * (where `import ... from 'mcpgw'` resolves to this package), with the gateway's and the test
 * server's paths as its arguments (`[eval]` stands in for the script path that `node -e` does
 * not put into process.argv).
 *
 * @param {string} heading
 * @param {Record<string, string>} [env] more environment
 */
function runReadmeExample(heading, env = {}) {
  const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  const code = readme.split(heading)[1]?.match(/```js\n([\s\S]*?)```/)?.[1];
  assert.ok(code, `no js block after ${heading} in README.md`);
  return spawnSync(
    process.execPath,
    ['--input-type=module', '-e', code, '[eval]', gatewayPath(), testserverPath()],
    { cwd: PACKAGE, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 },
  );
}

test("the README's quickstart runs as written", () => {
  const tmp = mkdtempSync(join(tmpdir(), 'mcpgw-readme-'));
  try {
    const r = runReadmeExample('## Quickstart', { TMPDIR: tmp });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^echo echo_json add media /m);
    assert.match(r.stdout, /^data: image\/png 70 bytes$/m);
    assert.match(r.stdout, /^data: audio\/wav 60 bytes$/m);
    assert.match(r.stdout, /^sum: 42$/m);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test("the README's example of the official MCP SDK runs as written", () => {
  const r = runReadmeExample('## The official MCP SDK');
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^echo echo_json add media /m);
  assert.match(r.stdout, /^\[ \{ type: 'text', text: 'hi' \} \]$/m);
});
