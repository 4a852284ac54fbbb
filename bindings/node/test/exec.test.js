// The ready-made exec functions, run for real: localExec through sh, dockerExec and kubectlExec
// on the argv they build (run through `echo` in place of docker/kubectl, which prints it back) and
// on kubectl's failure messages (a stand-in script; no cluster here). dockerExec against the real
// Docker daemon: docker.test.js.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  dockerArgv,
  dockerExec,
  dockerFailure,
  kubectlArgv,
  kubectlExec,
  kubectlFailure,
  localExec,
} from '../index.js';
import { makeSandbox, processGone, waitFile, waitGone } from './helpers.js';

test('localExec reports exit status, binary stdout and stderr', async () => {
  const r = await localExec()(`printf 'a\\000\\377b'; printf 'to stderr' >&2; exit 3`);
  assert.equal(r.exitCode, 3);
  assert.deepEqual([...r.stdout], [0x61, 0x00, 0xff, 0x62]);
  assert.equal(r.stderr.toString(), 'to stderr');
});

test('localExec passes stdin, binary and large, and declares it', async () => {
  const exec = localExec();
  assert.equal(exec.stdin, true);
  const data = Buffer.alloc(5_000_000, 0xab);
  data[0] = 0;
  const r = await exec('wc -c; head -c 1 | od -An -tx1', { stdin: data, timeoutMs: 10_000 });
  assert.equal(r.exitCode, 0);
  assert.match(r.stdout.toString(), /^\s*5000000\n/);
  // Without stdin the command reads an empty input, never the parent's.
  assert.equal((await exec('wc -c')).stdout.toString().trim(), '0');
  // A command that exits before reading its stdin is not an error.
  assert.equal((await exec('exit 4', { stdin: data })).exitCode, 4);
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
  assert.deepEqual(dockerArgv('box', 'cat', { interactive: true }), [
    'exec',
    '-i',
    'box',
    'sh',
    '-c',
    'cat',
  ]);
  assert.deepEqual(kubectlArgv('pod-0', 'cat', { interactive: true }), [
    'exec',
    '-i',
    'pod-0',
    '--',
    'sh',
    '-c',
    'cat',
  ]);
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

test('dockerExec and kubectlExec spawn exactly that argv, with -i when there is stdin', async () => {
  // `echo` stands in for the program and prints the argv it was given.
  const docker = dockerExec('box', { docker: 'echo', user: 'u' });
  assert.equal(docker.stdin, true);
  const d = await docker(`a 'b' "c"`);
  assert.equal(d.exitCode, 0);
  assert.equal(d.stdout.toString(), `exec --user u box sh -c a 'b' "c"\n`);
  const di = await docker('cat', { stdin: Buffer.from('x'), timeoutMs: 5000 });
  assert.equal(di.stdout.toString(), 'exec -i --user u box sh -c cat\n');
  const kubectl = kubectlExec('pod-0', { kubectl: 'echo', namespace: 'ns' });
  assert.equal(kubectl.stdin, true);
  const k = await kubectl('true');
  assert.equal(k.stdout.toString(), 'exec --namespace ns pod-0 -- sh -c true\n');
  const ki = await kubectl('cat', { stdin: Buffer.from('x'), timeoutMs: 5000 });
  assert.equal(ki.stdout.toString(), 'exec -i --namespace ns pod-0 -- sh -c cat\n');
});

test("dockerFailure tells docker's own failures from the command's", () => {
  const r = (exitCode, stderr) => ({ exitCode, stderr: Buffer.from(stderr) });
  for (const gone of [
    r(1, 'Error response from daemon: No such container: box'),
    r(1, 'Error response from daemon: Container 0123abcd is not running'),
    r(1, 'Error response from daemon: Container box is paused, unpause the container before exec'),
    r(1, 'Cannot connect to the Docker daemon at unix:///x.sock. Is the docker daemon running?'),
    r(125, 'docker: Error response from daemon: Conflict.'),
  ]) {
    assert.ok(dockerFailure(gone), gone.stderr.toString());
  }
  for (const ran of [r(1, ''), r(1, 'curl: (7) Failed to connect'), r(126, ''), r(137, '')]) {
    assert.equal(dockerFailure(ran), null, ran.stderr.toString());
  }
});

test("kubectlExec: kubectl's own failures reject, the command's exit status passes through", async () => {
  const sb = makeSandbox();
  try {
    // A stand-in for kubectl: prints what kubectl prints in each case, with its exit status.
    const fake = join(sb.dir, 'kubectl');
    writeFileSync(
      fake,
      `#!/bin/sh
case "$KUBE_CASE" in
  nopod) echo 'Error from server (NotFound): pods "pod-0" not found' >&2; exit 1 ;;
  noserver) echo 'The connection to the server localhost:8080 was refused - did you specify the right host or port?' >&2; exit 1 ;;
  nocontainer) echo 'error: unable to upgrade connection: container not found ("sandbox")' >&2; exit 1 ;;
  cmd1) echo 'curl: (7) Failed to connect' >&2; echo 'command terminated with exit code 1' >&2; exit 1 ;;
  cmd137) echo 'command terminated with exit code 137' >&2; exit 137 ;;
esac
`,
    );
    chmodSync(fake, 0o755);
    const run = (kase) => {
      process.env.KUBE_CASE = kase;
      return kubectlExec('pod-0', { kubectl: fake })('true');
    };
    for (const kase of ['nopod', 'noserver', 'nocontainer']) {
      await assert.rejects(run(kase), /the sandbox is gone: .*kubectl exec pod-0/, kase);
    }
    assert.equal((await run('cmd1')).exitCode, 1);
    assert.equal((await run('cmd137')).exitCode, 137);
    assert.equal(kubectlFailure({ exitCode: 1, stderr: Buffer.from('') }), null);
  } finally {
    delete process.env.KUBE_CASE;
    sb.remove();
  }
});

test("dockerExec: docker's own failure is a rejection with its message", async () => {
  const sb = makeSandbox();
  try {
    // A stand-in for docker that fails the way docker does when the container is gone.
    const fake = join(sb.dir, 'docker');
    writeFileSync(
      fake,
      '#!/bin/sh\necho "Error response from daemon: No such container: box" >&2\nexit 125\n',
    );
    chmodSync(fake, 0o755);
    await assert.rejects(
      dockerExec('box', { docker: fake })('true'),
      /the sandbox is gone: .* No such container: box/,
    );
  } finally {
    sb.remove();
  }
});

test('dockerExec and kubectlExec need a target', () => {
  assert.throws(() => dockerExec(''), TypeError);
  assert.throws(() => kubectlExec(undefined), TypeError);
});
