// Finding and loading libmcpgw (the search order, the error when it is missing or of another
// ABI, the version), and the facts that come from one source: the koffi declarations, enums
// and error classes generated from include/mcpgw.h are current, and the library's own list of
// result codes is the header's.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as mcpgw from '../index.js';
import {
  CODES,
  McpgwError,
  gatewayBinary,
  gatewayCandidates,
  library,
  libraryCandidates,
  resultCodes,
} from '../index.js';
import { PROTOTYPES } from '../src/ffi.js';
import { className, generated, koffiPrototype, parseHeader } from '../scripts/generate.mjs';
import { errorFromJson } from '../src/errors.js';
import { PACKAGE, REPO } from './helpers.js';

const HEADER = readFileSync(join(REPO, 'include', 'mcpgw.h'), 'utf8');

/** Runs `new Client(local())` in a fresh process with `env`; returns its stderr and status. */
function newClientWith(env) {
  const script = `
    import { Client, local } from ${JSON.stringify(join(PACKAGE, 'index.js'))};
    new Client(local());
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
  assert.match(r.stderr, /has ABI version 1, but this binding needs 3/);
});

test('the loaded library has the ABI of the header and the crate version', () => {
  const lib = library();
  const cargo = readFileSync(join(REPO, 'Cargo.toml'), 'utf8');
  const version = cargo.match(/^version\s*=\s*"([^"]+)"/m)?.[1];
  assert.equal(lib.version, version);
  assert.equal(lib.abiVersion, parseHeader(HEADER).abi);
  assert.equal(mcpgw.ABI_VERSION, lib.abiVersion);
});

test('src/ffi.js and src/codes.js are what include/mcpgw.h generates now', async () => {
  for (const [file, text] of Object.entries(await generated(HEADER))) {
    assert.equal(
      readFileSync(join(PACKAGE, file), 'utf8'),
      text,
      `${file} is stale: run \`npm run generate\``,
    );
  }
});

test('each declaration is the header prototype, argument by argument', () => {
  const { functions } = parseHeader(HEADER);
  const names = Object.keys(PROTOTYPES);
  // What the binding needs of the C ABI: the host driver, its actions, results, errors, chunks.
  for (const prefix of ['mcpgw_host_', 'mcpgw_action_']) {
    const all = [...functions.keys()].filter((n) => n.startsWith(prefix)).sort();
    assert.deepEqual(
      names.filter((n) => n.startsWith(prefix)),
      all,
    );
  }
  for (const name of names) {
    const declared = functions.get(name);
    assert.ok(declared, `${name} is not in mcpgw.h`);
    const koffi = PROTOTYPES[name];
    assert.equal(koffi, koffiPrototype(name, declared));
    const ret = koffi.slice(0, koffi.indexOf(`${name}(`)).trim();
    assert.equal(ret, declared.ret === 'char *' ? 'void *' : declared.ret, name);
    // The same argument names and types in the same order; only the marks koffi needs differ.
    const args = /\((.*)\)$/.exec(koffi)?.[1] ?? '';
    const parsed = args === 'void' ? [] : args.split(', ');
    assert.equal(parsed.length, declared.params.length, name);
    parsed.forEach((a, i) => {
      const { type, name: arg } = declared.params[i];
      const plain = a
        .replace(/^_Out_ /, '')
        .replace(/^void \*/, type.startsWith('char *') ? 'char *' : 'void *');
      assert.equal(plain.replace(/\s+/g, ''), `${type}${arg}`.replace(/\s+/g, ''), `${name}: ${a}`);
      assert.equal(a.startsWith('_Out_ '), arg.endsWith('_out'), `${name}: ${a}`);
    });
  }
  // The binding uses none of the operation and session functions that are going away.
  assert.ok(!names.some((n) => /^mcpgw_(op|session|blocking|client)_/.test(n)));
});

test("the library's result codes are the header's, and each has a class named after it", () => {
  const header = parseHeader(HEADER).enums.get('mcpgw_result') ?? [];
  assert.deepEqual(
    resultCodes().map(({ name, code }) => ({ name, code })),
    header.map((m) => ({ name: m.name.replace('MCPGW_RESULT_', ''), code: m.value })),
  );
  for (const { code, name, message } of resultCodes()) {
    assert.ok(message.length > 0, name);
    if (name === 'OK') continue;
    const Class = /** @type {any} */ (mcpgw)[className(name)];
    assert.equal(CODES.get(name)?.Class, Class, name);
    const e = errorFromJson({ code, name, message: 'x' });
    assert.ok(e instanceof Class && e instanceof McpgwError, name);
    assert.equal(e.name, className(name));
    assert.equal(e.code, name);
    assert.equal(e.result, code);
  }
  assert.equal(className('UPSTREAM_ERROR'), 'UpstreamError');
  assert.equal(className('PROTOCOL_ERROR'), 'ProtocolError');
  assert.equal(className('DEADLINE'), 'DeadlineError');
  // A code this binding does not know (a newer library) still gives an error, named so.
  const e = errorFromJson({ code: 7999, name: 'BRAND_NEW', message: 'x' });
  assert.equal(e.constructor, McpgwError);
  assert.equal(e.code, 'BRAND_NEW');
});
