// The examples work as documented, and the TypeScript types check.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mcpgw from '../index.js';
import { REPO, gatewayPath, testserverPath } from './helpers.js';

const PACKAGE = join(REPO, 'bindings', 'node');

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
    /^slow call aborted after 300 ms$/m,
    /^gateway stopped$/m,
  ]) {
    assert.match(r.stdout, line);
  }
});

test('index.d.ts declares every export of index.js, and type-checks with the typed example', () => {
  const dts = readFileSync(join(PACKAGE, 'index.d.ts'), 'utf8');
  const declared = new Set(
    [...dts.matchAll(/^export (?:declare )?(?:class|function|const) (\w+)/gm)].map((m) => m[1]),
  );
  assert.deepEqual([...declared].sort(), Object.keys(mcpgw).sort());
  const tsc = join(PACKAGE, 'node_modules', '.bin', 'tsc');
  const r = spawnSync(tsc, ['-p', join(PACKAGE, 'tsconfig.json')], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`);
});

test("the README's quickstart runs as written", () => {
  const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  const code = readme.split('## Quickstart')[1].match(/```js\n([\s\S]*?)```/)[1];
  const tmp = mkdtempSync(join(tmpdir(), 'mcpgw-readme-'));
  try {
    // From the package directory `import ... from 'mcpgw'` resolves to this package; `[eval]`
    // stands in for the script path that `node -e` does not put into process.argv.
    const r = spawnSync(
      process.execPath,
      ['--input-type=module', '-e', code, '[eval]', gatewayPath(), testserverPath()],
      { cwd: PACKAGE, env: { ...process.env, TMPDIR: tmp }, encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^echo echo_json add media /m);
    assert.match(r.stdout, /^data: image\/png 70 bytes$/m);
    assert.match(r.stdout, /^data: audio\/wav 60 bytes$/m);
    assert.match(r.stdout, /^sum: 42$/m);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
