// The cloud sandboxes' own software, run here for the provider tests: each provider's in-sandbox
// daemon in a Docker container of the test image (tests/docker/sandbox.sh image --daemon),
// reached by that provider's official SDK exactly as it reaches its cloud sandbox.
//
// The daemons are built from their public sources by whoever runs the tests (this repository
// carries neither them nor a recipe that builds them: tests/providers/README.md says where each
// comes from) and found at $MCPGW_E2B_ENVD, $MCPGW_OPENSANDBOX_EXECD and $MCPGW_DAYTONA_DAEMON,
// by default under /opt/mcpgw-sandboxd. Without one, its tests say SKIPPED and why.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { REPO, engine, waitFor } from './helpers.js';

const DAEMONS = '/opt/mcpgw-sandboxd';
export const E2B_ENVD = process.env.MCPGW_E2B_ENVD || join(DAEMONS, 'e2b', 'envd');
/** The envd version the binary reports, which the SDK needs to be told in debug mode. */
export const E2B_ENVD_VERSION = '0.6.13';
/** Where the provider tests install the gateway: uploaded through the SDK's file API. */
export const GATEWAY_IN_SANDBOX = '/tmp/mcpgw-bin/mcpgw-gateway';
/** The test server inside the image. */
export const TESTSERVER = '/usr/local/bin/mcpgw-testserver';

const docker = (/** @type {string[]} */ ...args) =>
  spawnSync('docker', args, { encoding: 'utf8', timeout: 120_000 });

/** Why the provider tests of `what` cannot run here, or null. */
export function daemonSkip(path, what, env) {
  const img = engine('docker').image();
  if ('skip' in img) return `SKIPPED: ${img.skip}`;
  if (!existsSync(path)) {
    return `SKIPPED: ${what} is not at ${path} (set ${env}; tests/providers/README.md says where it comes from)`;
  }
  return null;
}

/** The test image with `kind`'s daemon. */
function imageWith(kind, daemon) {
  const r = spawnSync(
    'sh',
    [join(REPO, 'tests', 'docker', 'sandbox.sh'), 'image', '--daemon', `${kind}=${daemon}`],
    {
      encoding: 'utf8',
      timeout: 300_000,
    },
  );
  if (r.status !== 0) throw new Error(`building the ${kind} image failed: ${r.stderr}`);
  return r.stdout.trim().split('\n').pop() ?? '';
}

/** Waits until `url` answers `status` (a daemon up). */
async function answers(url, status, what) {
  await waitFor(
    async () => {
      try {
        return (await fetch(url)).status === status;
      } catch {
        return false;
      }
    },
    { ms: 60_000, every: 50, what },
  );
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {import('node:net').AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/**
 * A test container, started detached on `network` by `docker run` with `args` (its image and
 * command last); its id, or an error naming `what` when Docker cannot start it.
 * @param {string} what
 * @param {string} network
 * @param {...string} args
 */
function runContainer(what, network, ...args) {
  const run = docker(
    'run',
    '-d',
    '--pull',
    'never',
    '--init',
    '--network',
    network,
    '--label',
    'mcpgw-test=1',
    ...args,
  );
  if (run.status !== 0) throw new Error(`docker run of ${what} failed: ${run.stderr}`);
  return run.stdout.trim();
}

/**
 * E2B's envd in a container (on this machine's network: the SDK reaches it at 127.0.0.1:PORT
 * as it reaches a sandbox's envd through E2B's edge), locked at once with an access token as
 * E2B's control plane does. `stop` removes it.
 */
export async function startEnvd() {
  const image = imageWith('e2b', E2B_ENVD);
  const port = await freePort();
  const container = runContainer(
    'envd',
    'host',
    image,
    'envd',
    '-isnotfc',
    '-no-cgroups',
    '-port',
    String(port),
  );
  const url = `http://127.0.0.1:${port}`;
  const stop = () => docker('rm', '-f', '-v', container);
  try {
    await answers(`${url}/health`, 204, 'envd to answer /health');
    const token = randomBytes(16).toString('hex');
    const init = await fetch(`${url}/init`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ accessToken: token }),
    });
    if (init.status !== 204) throw new Error(`envd's /init answered ${init.status}`);
    return { ...box(container), url, token, container, stop };
  } catch (e) {
    stop();
    throw e;
  }
}

/**
 * E2B's SDK's sandbox for `envd`, in debug mode (no E2B account, no control plane), with the
 * access token: what `Sandbox.connect` gives against E2B's cloud.
 */
export async function e2bSandbox(envd) {
  const { Sandbox } = await import('e2b');
  return new Sandbox({
    sandboxId: 'mcpgw-test',
    envdVersion: E2B_ENVD_VERSION,
    envdAccessToken: envd.token,
    debug: true,
    sandboxUrl: envd.url,
  });
}

const OPENSANDBOX_DIR = process.env.MCPGW_OPENSANDBOX_EXECD || join(DAEMONS, 'opensandbox');
const OPENSANDBOX_SERVER = join(
  REPO,
  'tests',
  'providers',
  '.venv-opensandbox',
  'bin',
  'opensandbox-server',
);
/** The Docker network the server's sandboxes join (the daemon's default bridge is off here). */
const OPENSANDBOX_NETWORK = 'mcpgw-test-opensandbox';

/** Why the OpenSandbox tests cannot run here, or null. */
export function opensandboxSkip() {
  const skip = daemonSkip(
    join(OPENSANDBOX_DIR, 'execd'),
    "OpenSandbox's execd",
    'MCPGW_OPENSANDBOX_EXECD',
  );
  if (skip) return skip;
  if (!existsSync(join(OPENSANDBOX_DIR, 'bootstrap.sh'))) {
    return `SKIPPED: execd's bootstrap.sh is not beside it in ${OPENSANDBOX_DIR} (tests/providers/README.md)`;
  }
  if (!existsSync(OPENSANDBOX_SERVER))
    return `SKIPPED: ${OPENSANDBOX_SERVER} is missing (make deps)`;
  return null;
}

/**
 * opensandbox-server on this machine's loopback with the Docker runtime; `sandbox()` makes a
 * sandbox of the test image with its execd locked by a token of its own; `stop()` ends it all.
 */
export async function startOpenSandboxServer(workdir) {
  const sandboxSh = (/** @type {string[]} */ ...args) =>
    spawnSync('sh', [join(REPO, 'tests', 'docker', 'sandbox.sh'), ...args], {
      encoding: 'utf8',
      timeout: 300_000,
    });
  const execdImage = sandboxSh('execd-image', OPENSANDBOX_DIR);
  if (execdImage.status !== 0)
    throw new Error(`building execd's image failed: ${execdImage.stderr}`);
  const image = sandboxSh('image', '--bash');
  if (image.status !== 0) throw new Error(`building the sandbox image failed: ${image.stderr}`);
  if (docker('network', 'inspect', OPENSANDBOX_NETWORK).status !== 0) {
    docker('network', 'create', '--label', 'mcpgw-test=1', OPENSANDBOX_NETWORK);
  }
  const port = await freePort();
  const key = randomBytes(16).toString('hex');
  const config = join(workdir, 'opensandbox.toml');
  writeFileSync(
    config,
    `[server]\nhost = "127.0.0.1"\nport = ${port}\napi_key = "${key}"\n[log]\nlevel = "WARNING"\n` +
      `[runtime]\ntype = "docker"\nexecd_image = "${execdImage.stdout.trim()}"\n` +
      `[store]\ntype = "sqlite"\npath = "${join(workdir, 'opensandbox.db')}"\n` +
      `[docker]\nnetwork_mode = "${OPENSANDBOX_NETWORK}"\npublish_host = "127.0.0.1"\n` +
      `[docker.sandbox_env]\nEXECD_API_GRACE_SHUTDOWN = "0s"\n[proxy]\nresolve_internal = false\n`,
  );
  const server = spawn(OPENSANDBOX_SERVER, ['--config', config], { stdio: 'ignore' });
  const stop = () => {
    server.kill('SIGTERM');
    const ids = docker('ps', '-aq', '--filter', 'label=mcpgw-test=1', '--filter', 'name=sandbox-')
      .stdout.split(/\s+/)
      .filter(Boolean);
    if (ids.length) docker('rm', '-f', '-v', ...ids);
  };
  try {
    await answers(`http://127.0.0.1:${port}/health`, 200, 'opensandbox-server to answer /health');
  } catch (e) {
    stop();
    throw e;
  }
  return {
    stop,
    async sandbox() {
      const { ConnectionConfig, Sandbox } = await import('@alibaba-group/opensandbox');
      const token = randomBytes(16).toString('hex');
      return Sandbox.create({
        connectionConfig: new ConnectionConfig({
          domain: `127.0.0.1:${port}`,
          apiKey: key,
          protocol: 'http',
          headers: { 'X-EXECD-ACCESS-TOKEN': token },
        }),
        image: image.stdout.trim().split('\n').pop(),
        metadata: { 'mcpgw-test': '1' },
        env: { EXECD_ACCESS_TOKEN: token },
        timeoutSeconds: 1800,
        resource: { cpu: '1', memory: '512Mi' },
      });
    },
  };
}

/** What a test does to a provider's sandbox from outside, by its container. */
export function box(container) {
  return {
    kill: () => docker('kill', container),
    exec: (/** @type {string[]} */ ...argv) => docker('exec', container, ...argv),
    killAttach: () =>
      docker(
        'exec',
        container,
        'sh',
        '-c',
        "p=$(ps -o pid,args | grep '[m]cpgw-gateway attach' | awk '{print $1}'); [ -n \"$p\" ] && kill -9 $p",
      ).status === 0,
  };
}

export const DAYTONA_DAEMON =
  process.env.MCPGW_DAYTONA_DAEMON || join(DAEMONS, 'daytona', 'daytona-daemon');
/** The network of the providers' sandboxes whose port is published on loopback. */
const PROVIDERS_NETWORK = 'mcpgw-test-providers';

function providersNetwork() {
  if (docker('network', 'inspect', PROVIDERS_NETWORK).status !== 0) {
    docker('network', 'create', '--label', 'mcpgw-test=1', PROVIDERS_NETWORK);
  }
  return PROVIDERS_NETWORK;
}

/**
 * Daytona's daemon in a container of the test image, its toolbox API (port 2280: every
 * interface of its container, no authentication, Daytona's cloud puts its proxy in front)
 * published on 127.0.0.1 only; and a stand-in for Daytona's control plane answering the one
 * request `Daytona.get(id)` makes (the sandbox's record, its `toolboxProxyUrl` the daemon's own
 * `/proxy` route, which forwards to its API as Daytona's toolbox proxy does). `sandbox()` is
 * what `new Daytona({...}).get(id)` gives; `stop()` ends it all.
 */
export async function startDaytona() {
  const image = imageWith('daytona', DAYTONA_DAEMON);
  const container = runContainer(
    "Daytona's daemon",
    providersNetwork(),
    '-p',
    '127.0.0.1::2280',
    '-e',
    'DAYTONA_SANDBOX_ID=mcpgw-test',
    image,
    'daytona-daemon',
  );
  const port = docker('port', container, '2280').stdout.trim().split(':').pop();
  const url = `http://127.0.0.1:${port}`;
  const record = {
    id: '2280',
    organizationId: 'local',
    name: 'mcpgw-test',
    user: 'root',
    env: {},
    labels: {},
    public: false,
    networkBlockAll: true,
    kvm: false,
    target: 'local',
    cpu: 1,
    gpu: 0,
    memory: 1,
    disk: 1,
    state: 'started',
    toolboxProxyUrl: `${url}/proxy`,
  };
  const { createServer: httpServer } = await import('node:http');
  const controlPlane = httpServer((req, res) => {
    if (req.method === 'GET' && req.url?.startsWith('/api/sandbox/')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(record));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((resolve) => controlPlane.listen(0, '127.0.0.1', () => resolve(undefined)));
  const api = /** @type {import('node:net').AddressInfo} */ (controlPlane.address()).port;
  const stop = () => {
    controlPlane.close();
    docker('rm', '-f', '-v', container);
  };
  try {
    await answers(`${url}/version`, 200, "Daytona's daemon to answer /version");
  } catch (e) {
    stop();
    throw e;
  }
  return {
    container,
    stop,
    async sandbox() {
      const { Daytona } = await import('@daytonaio/sdk');
      const client = new Daytona({
        apiKey: 'none',
        apiUrl: `http://127.0.0.1:${api}/api`,
        target: 'local',
        useDeprecatedPolling: true,
      });
      return client.get('2280');
    },
  };
}
