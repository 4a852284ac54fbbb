// The one vocabulary: the README's table (operation x Node) names what this package exports,
// and its operations are exactly the library's (`OP_NAMES` in src/driver/config.rs).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as mcpgw from '../index.js';
import { CODES, Client, ExecFailedError } from '../index.js';
import { className } from '../scripts/generate.mjs';
import { PACKAGE, REPO } from './helpers.js';

/** The rows of the README's vocabulary table: first cell, Node cell. */
function table() {
  const readme = readFileSync(join(PACKAGE, 'README.md'), 'utf8');
  const section = readme.split('## The vocabulary')[1]?.split('\n## ')[0] ?? '';
  return section
    .split('\n')
    .filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l))
    .slice(1)
    .map((l) =>
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
}

/** The names in backticks of a cell. */
const names = (cell) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

test('every operation of the library is in the table, with the method the Client has', () => {
  const config = readFileSync(join(REPO, 'src', 'driver', 'config.rs'), 'utf8');
  const list = config.match(/pub const OP_NAMES: &\[&str\] = &\[([\s\S]*?)\];/)?.[1] ?? '';
  const ops = [...list.matchAll(/"(\w+)"/g)].map((m) => m[1]);
  assert.ok(ops.length >= 12, `OP_NAMES: ${ops}`);
  const rows = table().filter(([op]) => /^`\w+`$/.test(op));
  assert.deepEqual(
    rows.map(([op]) => names(op)[0]),
    ops,
  );
  for (const [op, node] of rows) {
    const method = node.match(/^`client\.(\w+)\(/)?.[1];
    assert.ok(method, `${op}: ${node}`);
    // The same name in camelCase.
    const camel = names(op)[0].replace(/_(\w)/g, (_, c) => c.toUpperCase());
    assert.equal(method, camel);
    assert.equal(typeof Client.prototype[/** @type {keyof Client} */ (method)], 'function', method);
  }
});

test('the rest of the table names what the package exports', () => {
  const rows = new Map(table().map(([what, node]) => [what, node]));
  for (const method of names(rows.get('progress') ?? '').map(
    (n) => n.match(/client\.(\w+)/)?.[1],
  )) {
    assert.equal(typeof Client.prototype[/** @type {keyof Client} */ (method)], 'function');
  }
  assert.match(rows.get('progress') ?? '', /onProgress/);
  assert.equal(typeof Client.prototype.connect, 'function');
  const backends = names(rows.get('backend') ?? '');
  assert.deepEqual(backends, ['local', 'docker', 'podman', 'kubectl', 'argv', 'exec']);
  for (const b of backends) assert.equal(typeof (/** @type {any} */ (mcpgw)[b]), 'function', b);
  assert.ok(mcpgw.BackendError.prototype instanceof ExecFailedError);
  // Every result code has its class, named after it, exported.
  for (const [code, { Class }] of CODES) {
    assert.equal(/** @type {any} */ (mcpgw)[className(code)], Class, code);
  }
  for (const name of names(rows.get('errors') ?? '').filter((n) => n.endsWith('Error'))) {
    assert.equal(typeof (/** @type {any} */ (mcpgw)[name]), 'function', name);
  }
});
