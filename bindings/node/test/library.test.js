// Finding and loading libmcpgw: the search order, the error when it is missing or of another ABI,
// the version, and the result codes read from the library.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ABI_VERSION,
  McpgwError,
  NotFoundError,
  SessionLostError,
  gatewayBinary,
  gatewayCandidates,
  library,
  libraryCandidates,
  resultCodes,
} from '../index.js';
import { errorFor } from '../src/errors.js';
import { PACKAGE, REPO } from './helpers.js';

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

test('the library is looked for in the package, then (in this repository) in the cargo outputs', () => {
  assert.deepEqual(libraryCandidates({}), [
    join(PACKAGE, 'prebuilds', `${process.platform}-${process.arch}`, 'libmcpgw.so'),
    join(REPO, 'target', 'release', 'libmcpgw.so'),
    join(REPO, 'target', 'debug', 'libmcpgw.so'),
  ]);
  assert.deepEqual(libraryCandidates({ MCPGW_LIB: '/opt/lib/libmcpgw.so' }), [
    '/opt/lib/libmcpgw.so',
  ]);
});

test('the gateway is looked for in the package, then (in this repository) in the static build', () => {
  const bundled = (arch) => join(PACKAGE, 'gateway', `linux-${arch}`, 'mcpgw-gateway');
  const built = join(REPO, 'target', 'x86_64-unknown-linux-gnu', 'release', 'mcpgw-gateway');
  assert.deepEqual(gatewayCandidates('x64'), [bundled('x64'), built]);
  // The static build is for x64 sandboxes only.
  assert.deepEqual(gatewayCandidates('arm64'), [bundled('arm64')]);
  assert.throws(
    () => gatewayBinary('arm64'),
    /no bundled mcpgw-gateway for linux-arm64: tried .*linux-arm64\/mcpgw-gateway\. .*make static/,
  );
});

test('a missing library is a clear error naming what was tried and how to build it', () => {
  const r = newClientWith({ MCPGW_LIB: '/nonexistent/libmcpgw.so' });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /libmcpgw was not found; tried \/nonexistent\/libmcpgw\.so/);
  assert.match(r.stderr, /cargo build -p mcpgw-ffi/);
  assert.match(r.stderr, /MCPGW_LIB/);
});

test('a file that is not the library is refused with the loader message', () => {
  const r = newClientWith({ MCPGW_LIB: join(PACKAGE, 'package.json') });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /libmcpgw at .*package\.json could not be loaded/);
});

test('a library of another ABI version is refused before anything else is declared', (t) => {
  // A stand-in with only mcpgw_abi_version, as an ABI 1 library would answer it.
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-abi-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const source = join(dir, 'old.c');
  writeFileSync(source, 'unsigned int mcpgw_abi_version(void) { return 1; }\n');
  const lib = join(dir, 'libmcpgw.so');
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-o', lib, source], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) {
    t.skip(`SKIPPED: no C compiler to build the stand-in (${cc.error?.message ?? cc.stderr})`);
    return;
  }
  const r = newClientWith({ MCPGW_LIB: lib });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr, /has ABI version 1, but this binding needs 2/);
});

test('the loaded library has the ABI this binding needs and the crate version', () => {
  const lib = library();
  const cargo = readFileSync(join(REPO, 'Cargo.toml'), 'utf8');
  const version = cargo.match(/^version\s*=\s*"([^"]+)"/m)?.[1];
  assert.equal(lib.version, version);
  assert.equal(lib.abiVersion, ABI_VERSION);
  assert.equal(ABI_VERSION, 2);
});

test("the result codes are the library's, and every code has a typed error", () => {
  const codes = resultCodes();
  // The header's enum, which the library's list generates (mcpgw_result_codes).
  const header = readFileSync(join(REPO, 'include', 'mcpgw.h'), 'utf8');
  const declared = [...header.matchAll(/^\s+MCPGW_RESULT_(\w+) = (\d+),/gm)].map((m) => ({
    name: m[1],
    code: Number(m[2]),
  }));
  assert.deepEqual(
    codes.map(({ name, code }) => ({ name, code })),
    declared,
  );
  for (const { code, name, message } of codes) {
    assert.ok(message.length > 0, name);
    const e = errorFor(code, 'x');
    assert.ok(e instanceof McpgwError);
    assert.equal(e.code, name);
    assert.equal(e.result, code);
  }
  assert.ok(errorFor(7105, 'x') instanceof NotFoundError);
  assert.ok(errorFor(7110, 'x') instanceof SessionLostError);
  // A number that is no code still gives an error, named so.
  assert.equal(errorFor(1, 'x').code, 'UNKNOWN_1');
});
