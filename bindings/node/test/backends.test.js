// The argv backends end to end where no cluster or remote host is at hand: kubectl and ssh
// played by stand-in scripts that record their argv and run the command here (as the real
// ones would run it in the pod or on the host), against a real gateway. The argv each backend
// builds, kubectl's failures as the backend judges them, and ssh's joined arguments quoted
// once more.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BackendError, Client, argv, kubectl, textOf } from '../index.js';
import { gatewayPath, processesMentioning, rejection, script, testserverSpec } from './helpers.js';

describe('kubectl, played by a stand-in', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-kubectl-'));
  const log = join(dir, 'argv');
  // Records its argv (one line per word, a blank line after), then runs what follows `--`;
  // $KUBE_SAYS makes it fail as kubectl does instead.
  const fake = script(
    join(dir, 'kubectl'),
    `printf '%s\\n' "$@" '' >> ${JSON.stringify(log)}
case "\${KUBE_SAYS:-}" in
  nopod) echo 'Error from server (NotFound): pods "pod-0" not found' >&2; exit 1 ;;
  noserver) echo 'The connection to the server localhost:8080 was refused - did you specify the right host or port?' >&2; exit 1 ;;
  cmd1) echo 'curl: (7) Failed to connect' >&2; echo 'command terminated with exit code 1' >&2; exit 1 ;;
esac
while [ "$1" != "--" ]; do shift; done
shift
cd ${JSON.stringify(dir)} && exec "$@"
`,
  );
  const backend = kubectl('pod-0', {
    namespace: 'agents',
    container: 'work',
    options: ['--context', 'prod'],
    program: fake,
  });
  /** How every command and channel enters the pod. */
  const ENTER = ['--context', 'prod', 'exec', '-i', '--namespace', 'agents'].concat([
    '--container',
    'work',
    'pod-0',
    '--',
    'sh',
    '-c',
  ]);
  /** Each recorded argv. */
  const argvs = () =>
    readFileSync(log, 'utf8')
      .split('\n\n')
      .filter(Boolean)
      .map((a) => a.split('\n'));
  /** @type {Client} */
  let client;

  before(async () => {
    client = new Client(backend, { gatewayPath: gatewayPath(), stateDir: join(dir, 's') });
    await client.startGateway();
    await client.addMcp(testserverSpec('ts'));
  });

  after(async () => {
    delete process.env.KUBE_SAYS;
    await client.stopGateway().catch(() => {});
    await client.close();
    for (const pid of processesMentioning(dir)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('one-shot and over a session, with the argv kubectl needs', async () => {
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'one-shot' })), 'one-shot');
    const oneShot = argvs().at(-1) ?? [];
    assert.deepEqual(oneShot.slice(0, 12), ENTER);
    // Without stdin of its own, the command runs under the cancel wrapper, which holds stdin.
    assert.match(oneShot[12], /setsid/);
    assert.equal(oneShot.length, 15, 'sh -c WATCHED sh TEXT');
    await client.openSession();
    const calls = argvs().length;
    assert.equal(textOf(await client.callTool('ts', 'echo', { text: 'session' })), 'session');
    assert.equal(argvs().length, calls, 'no exec while the session is open');
    const channel = argvs().find((a) => a.some((w) => / attach /.test(w))) ?? [];
    assert.deepEqual(channel.slice(0, 12), ENTER);
    await client.closeSession();
  });

  test("kubectl's own failures are a BackendError; the command's exit status is its own", async () => {
    for (const [says, state] of [
      ['nopod', 'gone'],
      ['noserver', 'unreachable'],
    ]) {
      process.env.KUBE_SAYS = says;
      const e = await rejection(client.health());
      assert.ok(e instanceof BackendError, `${says}: ${e}`);
      assert.equal(e.state, state, e.message);
      assert.equal(e.backend, fake);
      assert.equal(e.target, 'pod-0');
      assert.equal(e.exitCode, 1);
    }
    process.env.KUBE_SAYS = 'cmd1';
    const e = await rejection(client.health());
    assert.ok(!(e instanceof BackendError), `${e}`);
    delete process.env.KUBE_SAYS;
    assert.equal((await client.health()).status, 'ok');
  });
});

describe('ssh, played by a stand-in: arguments joined into one line', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mcpgw-node-ssh-'));
  // As ssh does: the host, then every other argument joined with spaces for the remote shell.
  const fake = script(join(dir, 'ssh'), `shift\ncd ${JSON.stringify(dir)} && exec sh -c "$*"\n`);
  /** @type {Client} */
  let client;

  after(async () => {
    await client?.stopGateway().catch(() => {});
    await client?.close();
    for (const pid of processesMentioning(dir)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  test('every byte of a call crosses the joined line intact, one-shot and over a session', async () => {
    client = new Client(argv([fake, 'box'], { joinsArguments: true }), {
      gatewayPath: gatewayPath(),
      stateDir: join(dir, "it's $(here)"),
    });
    await client.startGateway();
    await client.addMcp(testserverSpec('ts'));
    const text = `it's "quoted" $(not run) \`nor this\` \\ ; | & \n é ✓`;
    assert.equal(textOf(await client.callTool('ts', 'echo', { text })), text);
    await client.openSession();
    assert.equal(textOf(await client.callTool('ts', 'echo', { text })), text);
    await client.closeSession();
  });
});
