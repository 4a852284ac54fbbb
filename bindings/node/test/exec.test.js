// The ready-made exec functions, run for real: localExec through sh, dockerExec and kubectlExec
// on the argv they build (run through `echo` in place of docker/kubectl, which prints it back).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dockerArgv, dockerExec, kubectlArgv, kubectlExec, localExec } from '../index.js';
import { makeSandbox, processGone, waitFile, waitGone } from './helpers.js';

test('localExec reports exit status, binary stdout and stderr', async () => {
  const r = await localExec()(`printf 'a\\000\\377b'; printf 'to stderr' >&2; exit 3`);
  assert.equal(r.exitCode, 3);
  assert.deepEqual([...r.stdout], [0x61, 0x00, 0xff, 0x62]);
  assert.equal(r.stderr.toString(), 'to stderr');
});

test('localExec runs in its cwd with its env; a signal shows as 128 + N', async () => {
  const sb = makeSandbox();
  try {
    const exec = localExec({ cwd: sb.dir, env: { ...process.env, MCPGW_TEST_VAR: 'v 1' } });
    const r = await exec('pwd; echo "$MCPGW_TEST_VAR"');
    assert.equal(r.stdout.toString(), `${sb.dir}\nv 1\n`);
    assert.equal((await exec('kill -TERM $$')).exitCode, 143);
  } finally {
    sb.remove();
  }
});

test('localExec: an abort kills the command and everything it started', async () => {
  const sb = makeSandbox();
  try {
    const ac = new AbortController();
    const running = localExec({ cwd: sb.dir })('sleep 30 & echo $! > bg.pid; wait', {
      signal: ac.signal,
    });
    const bg = Number(await waitFile(join(sb.dir, 'bg.pid')));
    assert.ok(bg > 0 && !processGone(bg));
    const reason = new Error('stop');
    ac.abort(reason);
    await assert.rejects(running, (e) => e === reason);
    assert.ok(await waitGone(bg, 2000), 'the background sleep survived the abort');
    // An already aborted signal runs nothing.
    await assert.rejects(localExec()('touch never', { signal: AbortSignal.abort() }));
  } finally {
    sb.remove();
  }
});

test('localExec: a command past its timeout is killed', async () => {
  const started = Date.now();
  await assert.rejects(localExec()('sleep 30', { timeoutMs: 200 }), /did not finish within 200 ms/);
  assert.ok(Date.now() - started < 2000);
});

test('localExec: a shell that cannot be started is a rejection', async () => {
  await assert.rejects(
    localExec({ shell: '/nonexistent/sh' })('true'),
    /cannot run \/nonexistent\/sh/,
  );
});

test('dockerArgv and kubectlArgv build the exec argv', () => {
  assert.deepEqual(dockerArgv('box', 'echo "hi there"'), [
    'exec',
    'box',
    'sh',
    '-c',
    'echo "hi there"',
  ]);
  assert.deepEqual(
    dockerArgv('box', 'id', { user: '1000:1000', workdir: '/work', env: { A: '1', B: 'x y' } }),
    [
      'exec',
      '--user',
      '1000:1000',
      '--workdir',
      '/work',
      '--env',
      'A=1',
      '--env',
      'B=x y',
      'box',
      'sh',
      '-c',
      'id',
    ],
  );
  assert.deepEqual(kubectlArgv('pod-0', 'ls; exit 2'), [
    'exec',
    'pod-0',
    '--',
    'sh',
    '-c',
    'ls; exit 2',
  ]);
  assert.deepEqual(
    kubectlArgv('pod-0', 'ls', {
      namespace: 'agents',
      container: 'sandbox',
      context: 'prod',
      kubeconfig: '/k/config',
    }),
    [
      '--kubeconfig',
      '/k/config',
      '--context',
      'prod',
      'exec',
      '--namespace',
      'agents',
      '--container',
      'sandbox',
      'pod-0',
      '--',
      'sh',
      '-c',
      'ls',
    ],
  );
});

test('dockerExec and kubectlExec spawn exactly that argv', async () => {
  // `echo` stands in for the program and prints the argv it was given.
  const d = await dockerExec('box', { docker: 'echo', user: 'u' })(`a 'b' "c"`);
  assert.equal(d.exitCode, 0);
  assert.equal(d.stdout.toString(), `exec --user u box sh -c a 'b' "c"\n`);
  const k = await kubectlExec('pod-0', { kubectl: 'echo', namespace: 'ns' })('true');
  assert.equal(k.stdout.toString(), 'exec --namespace ns pod-0 -- sh -c true\n');
});

test("dockerExec: docker's own failure (exit 125) is a rejection with its message", async () => {
  const sb = makeSandbox();
  try {
    // A stand-in for docker that fails the way docker does when the container is gone.
    const fake = join(sb.dir, 'docker');
    writeFileSync(
      fake,
      '#!/bin/sh\necho "Error response from daemon: No such container: box" >&2\nexit 125\n',
    );
    chmodSync(fake, 0o755);
    await assert.rejects(dockerExec('box', { docker: fake })('true'), /No such container: box/);
  } finally {
    sb.remove();
  }
});

test('dockerExec and kubectlExec need a target', () => {
  assert.throws(() => dockerExec(''), TypeError);
  assert.throws(() => kubectlExec(undefined), TypeError);
});
