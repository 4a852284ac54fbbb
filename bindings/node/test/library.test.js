// Finding and loading libmcpgw: the search order, the error when it is missing, the version.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ABI_VERSION, library, libraryCandidates } from '../index.js';
import { REPO } from './helpers.js';

const PACKAGE = join(REPO, 'bindings', 'node');

/** Runs `new Client(...)` in a fresh process with `env`; returns its stderr and status. */
function newClientWith(env) {
  const script = `
    import { Client, localExec } from ${JSON.stringify(join(PACKAGE, 'index.js'))};
    new Client({ exec: localExec() });
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  return { status: r.status, stderr: r.stderr };
}

test('the library is looked for next to the package, then in the cargo outputs', () => {
  assert.deepEqual(libraryCandidates({}), [
    join(PACKAGE, 'libmcpgw.so'),
    join(REPO, 'target', 'release', 'libmcpgw.so'),
    join(REPO, 'target', 'debug', 'libmcpgw.so'),
  ]);
  assert.deepEqual(libraryCandidates({ MCPGW_LIB: '/opt/lib/libmcpgw.so' }), [
    '/opt/lib/libmcpgw.so',
  ]);
});

test('a missing library is a clear error naming what was tried and how to build it', () => {
  const r = newClientWith({ MCPGW_LIB: '/nonexistent/libmcpgw.so' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /libmcpgw was not found; tried \/nonexistent\/libmcpgw\.so/);
  assert.match(r.stderr, /cargo build -p mcpgw/);
  assert.match(r.stderr, /MCPGW_LIB/);
});

test('a file that is not the library is refused with the loader message', () => {
  const r = newClientWith({ MCPGW_LIB: join(PACKAGE, 'package.json') });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /libmcpgw at .*package\.json could not be loaded/);
});

test('the loaded library has the ABI this binding needs and the crate version', () => {
  const lib = library();
  const cargo = readFileSync(join(REPO, 'Cargo.toml'), 'utf8');
  const version = cargo.match(/^version\s*=\s*"([^"]+)"/m)[1];
  assert.equal(lib.version, version);
  assert.equal(lib.abiVersion, ABI_VERSION);
  assert.ok(libraryCandidates().includes(lib.path));
});
