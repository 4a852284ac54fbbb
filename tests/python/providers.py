"""The cloud sandboxes' own software, run here for the provider tests: each provider's
in-sandbox daemon in a Docker container of the test image (tests/docker/sandbox.sh image
--daemon), reached by that provider's official SDK exactly as it reaches its cloud sandbox.

The daemons are built from their public sources by whoever runs the tests (this repository
carries neither them nor a recipe that builds them; tests/providers/README.md says where each
comes from) and found at ``$MCPGW_E2B_ENVD``, ``$MCPGW_OPENSANDBOX_EXECD`` and
``$MCPGW_DAYTONA_DAEMON``, by default under ``/opt/mcpgw-sandboxd``. Without one, its tests say
SKIPPED and why.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import DOCKER, DOCKER_SH, STATIC_GATEWAY

#: Where the daemons are looked for by default.
DAEMONS = Path("/opt/mcpgw-sandboxd")
E2B_ENVD = Path(os.environ.get("MCPGW_E2B_ENVD") or DAEMONS / "e2b" / "envd")
#: The envd version the binary reports, which the SDK needs to be told in debug mode.
E2B_ENVD_VERSION = "0.6.13"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _until(check: object, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def daemon_reason(path: Path, what: str, env: str) -> str | None:
    """Why the provider tests of `what` cannot run here, or None."""
    reason = DOCKER.reason()
    if reason:
        return reason
    if not path.is_file():
        return f"{what} is not at {path} (set {env}; tests/providers/README.md says where it comes from)"
    return None


def image_with(kind: str, daemon: Path) -> str:
    r = subprocess.run(
        ["sh", str(DOCKER_SH), "image", "--daemon", f"{kind}={daemon}"], capture_output=True, text=True, check=False
    )
    if r.returncode != 0:
        raise AssertionError(f"building the {kind} image failed: {r.stderr}")
    return r.stdout.strip()


@dataclass
class Box:
    """A provider's sandbox as its container: what a test does to it from outside."""

    container: str

    def kill(self) -> None:
        subprocess.run(["docker", "kill", self.container], capture_output=True, check=False)

    def kill_attach(self) -> bool:
        """Kills the session channel's process (``mcpgw-gateway attach``) in the sandbox."""
        return kill_attach_in(self.container)

    def docker_exec(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "exec", self.container, *argv], capture_output=True, text=True, check=False)


@dataclass
class Envd(Box):
    """E2B's envd running in a container: its URL and the access token it was initialised with
    (so that nothing else on this machine can use it)."""

    url: str = ""
    token: str = ""


def kill_attach_in(container: str) -> bool:
    """Kills every ``mcpgw-gateway attach`` in `container` (SIGKILL); whether there was one."""
    script = "p=$(ps -o pid,args | grep '[m]cpgw-gateway attach' | awk '{print $1}'); [ -n \"$p\" ] && kill -9 $p"
    r = subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, check=False)
    return r.returncode == 0


def start_envd() -> Iterator[Envd]:
    """E2B's envd in a container (on this machine's network: the SDK reaches it at
    127.0.0.1:PORT as it reaches a sandbox's envd through E2B's edge), locked at once with an
    access token as E2B's control plane does; removed afterwards."""
    image = image_with("e2b", E2B_ENVD)
    port = free_port()
    r = subprocess.run(
        ["docker", "run", "-d", "--pull", "never", "--init", "--network", "host", "--label", "mcpgw-test=1", image,
         "envd", "-isnotfc", "-no-cgroups", "-port", str(port)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        raise AssertionError(f"docker run of envd failed: {r.stderr}")
    container = r.stdout.strip()
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as answer:
                return bool(answer.status == 204)
        except (urllib.error.URLError, OSError):
            return False

    try:
        _until(healthy, "envd to answer /health", 30)
        token = secrets.token_hex(16)
        init = urllib.request.Request(
            f"{url}/init",
            data=json.dumps({"accessToken": token}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(init, timeout=10) as answer:
            assert answer.status == 204, answer.status
        yield Envd(container=container, url=url, token=token)
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True, check=False)


def e2b_sandbox(envd: Envd, *, blocking: bool = False) -> object:
    """E2B's SDK's sandbox object for `envd`, in debug mode (no E2B account, no control plane),
    with the access token: what ``Sandbox.connect`` gives against E2B's cloud."""
    from e2b import AsyncSandbox, ConnectionConfig, Sandbox
    from packaging.version import Version

    cls = Sandbox if blocking else AsyncSandbox
    return cls(
        sandbox_id="mcpgw-test",
        sandbox_domain=None,
        envd_version=Version(E2B_ENVD_VERSION),
        envd_access_token=envd.token,
        traffic_access_token=None,
        connection_config=ConnectionConfig(
            debug=True, sandbox_url=envd.url, extra_sandbox_headers={"X-Access-Token": envd.token}
        ),
    )


#: Where the provider tests install the gateway (the image has one in /usr/local/bin too; this
#: path makes ensure_gateway_binary upload it through the SDK's file API).
GATEWAY_IN_SANDBOX = "/tmp/mcpgw-bin/mcpgw-gateway"
STATIC_GATEWAY_PATH = STATIC_GATEWAY


OPENSANDBOX_DIR = Path(os.environ.get("MCPGW_OPENSANDBOX_EXECD") or DAEMONS / "opensandbox")
#: opensandbox-server's virtualenv (make deps).
OPENSANDBOX_SERVER = (
    Path(__file__).resolve().parents[1] / "providers" / ".venv-opensandbox" / "bin" / "opensandbox-server"
)
#: The Docker network of the providers' sandboxes whose port is published on this machine's
#: loopback (OpenSandbox's execd, Daytona's daemon): a published port needs a container with an
#: address, which the daemon's default bridge (off here) would give.
PROVIDERS_NETWORK = "mcpgw-test-providers"


def providers_network() -> str:
    def exists() -> bool:
        inspect = ["docker", "network", "inspect", PROVIDERS_NETWORK]
        return subprocess.run(inspect, capture_output=True).returncode == 0

    if not exists():
        create = ["docker", "network", "create", "--label", "mcpgw-test=1", PROVIDERS_NETWORK]
        made = subprocess.run(create, capture_output=True, text=True)
        # Tests running side by side may create it first.
        if made.returncode != 0 and not exists():
            raise RuntimeError(f"docker network create {PROVIDERS_NETWORK} failed: {made.stderr.strip()}")
    return PROVIDERS_NETWORK


@contextmanager
def published_container(what: str, port: int, args: list[str]) -> Iterator[tuple[str, str]]:
    """A container of ``docker run ARGS`` (its image and command last) on the providers' network,
    its `port` published on this machine's loopback only: its id and that port's URL. Removed on
    exit."""
    r = subprocess.run(
        ["docker", "run", "-d", "--pull", "never", "--init", "--network", providers_network(),
         "-p", f"127.0.0.1::{port}", "--label", "mcpgw-test=1", *args],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if r.returncode != 0:
        raise AssertionError(f"docker run of {what} failed: {r.stderr}")
    container = r.stdout.strip()
    try:
        published = (
            subprocess.run(["docker", "port", container, str(port)], capture_output=True, text=True, check=True)
            .stdout.split(":")[-1]
            .strip()
        )
        yield container, f"http://127.0.0.1:{published}"
    finally:
        subprocess.run(["docker", "rm", "-f", "-v", container], capture_output=True, check=False)


def opensandbox_reason() -> str | None:
    reason = daemon_reason(OPENSANDBOX_DIR / "execd", "OpenSandbox's execd", "MCPGW_OPENSANDBOX_EXECD")
    if reason:
        return reason
    if not (OPENSANDBOX_DIR / "bootstrap.sh").is_file():
        return f"execd's bootstrap.sh is not beside it in {OPENSANDBOX_DIR} (tests/providers/README.md)"
    if not OPENSANDBOX_SERVER.is_file():
        return f"{OPENSANDBOX_SERVER} is missing (make deps installs it)"
    return None


@dataclass
class OpenSandboxServer:
    """opensandbox-server running on this machine's loopback with the Docker runtime."""

    domain: str
    api_key: str
    image: str

    async def sandbox(self) -> object:
        """A new sandbox of the test image (with bash, which execd's pipe sessions need), its
        execd locked with a token of its own, as a user's SDK code makes one."""
        from opensandbox import Sandbox
        from opensandbox.config import ConnectionConfig

        token = secrets.token_hex(16)
        config = ConnectionConfig(
            domain=self.domain,
            api_key=self.api_key,
            protocol="http",
            headers={"X-EXECD-ACCESS-TOKEN": token},
        )
        return await Sandbox.create(
            self.image,
            connection_config=config,
            metadata={"mcpgw-test": "1"},
            env={"EXECD_ACCESS_TOKEN": token},
            resource={"cpu": "1", "memory": "512Mi"},
        )


def start_opensandbox_server(workdir: Path) -> Iterator[OpenSandboxServer]:
    execd_image = subprocess.run(
        ["sh", str(DOCKER_SH), "execd-image", str(OPENSANDBOX_DIR)], capture_output=True, text=True, check=False
    )
    if execd_image.returncode != 0:
        raise AssertionError(f"building execd's image failed: {execd_image.stderr}")
    sandbox_image = subprocess.run(
        ["sh", str(DOCKER_SH), "image", "--bash"], capture_output=True, text=True, check=False
    )
    if sandbox_image.returncode != 0:
        raise AssertionError(f"building the sandbox image failed: {sandbox_image.stderr}")
    network = providers_network()
    port, key = free_port(), secrets.token_hex(16)
    config = workdir / "opensandbox.toml"
    config.write_text(
        f"""[server]
host = "127.0.0.1"
port = {port}
api_key = "{key}"
[log]
level = "WARNING"
[runtime]
type = "docker"
execd_image = "{execd_image.stdout.strip()}"
[store]
type = "sqlite"
path = "{workdir / "opensandbox.db"}"
[docker]
network_mode = "{network}"
publish_host = "127.0.0.1"
[docker.sandbox_env]
# execd waits this long after every command before it ends the answer (1 s by default).
EXECD_API_GRACE_SHUTDOWN = "0s"
[proxy]
resolve_internal = false
"""
    )
    log = (workdir / "opensandbox-server.log").open("w")
    server = subprocess.Popen([str(OPENSANDBOX_SERVER), "--config", str(config)], stdout=log, stderr=log)

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, OSError):
            return server.poll() is not None

    try:
        _until(healthy, "opensandbox-server to answer /health", 60)
        if server.poll() is not None:
            raise AssertionError(f"opensandbox-server exited: {(workdir / 'opensandbox-server.log').read_text()}")
        yield OpenSandboxServer(f"127.0.0.1:{port}", key, sandbox_image.stdout.strip())
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", "label=mcpgw-test=1", "--filter", "name=sandbox-"],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        if ids:
            subprocess.run(["docker", "rm", "-f", "-v", *ids], capture_output=True, check=False)


DAYTONA_DAEMON = Path(os.environ.get("MCPGW_DAYTONA_DAEMON") or DAEMONS / "daytona" / "daytona-daemon")


@dataclass
class DaytonaDaemon:
    """Daytona's toolbox daemon in a container, its API published on this machine's loopback."""

    url: str
    container: str


def start_daytona() -> Iterator[DaytonaDaemon]:
    """Daytona's daemon in a container of the test image: its toolbox API (port 2280, which it
    serves on every interface of its container, with no authentication: Daytona's cloud puts its
    proxy in front) published on 127.0.0.1 only."""
    image = image_with("daytona", DAYTONA_DAEMON)
    args = ["-e", "DAYTONA_SANDBOX_ID=mcpgw-test", image, "daytona-daemon"]
    with published_container("Daytona's daemon", 2280, args) as (container, url):

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"{url}/version", timeout=1) as answer:
                    return bool(answer.status == 200)
            except (urllib.error.URLError, OSError):
                return False

        _until(ready, "Daytona's daemon to answer /version", 30)
        yield DaytonaDaemon(url, container)


@asynccontextmanager
async def daytona_sandbox(daemon: DaytonaDaemon) -> AsyncIterator[object]:
    """Daytona's SDK's ``AsyncSandbox`` for `daemon`, from the sandbox record Daytona's control
    plane would give (its toolbox reached through ``toolboxProxyUrl``, here the daemon's own
    ``/proxy`` route, which forwards to its API as Daytona's toolbox proxy does). No control
    plane is asked anything."""
    from importlib.metadata import version

    from daytona import AsyncSandbox
    from daytona.internal.event_subscription_manager import AsyncEventSubscriptionManager
    from daytona_api_client_async import ApiClient as MainApiClient
    from daytona_api_client_async import Configuration as MainConfiguration
    from daytona_api_client_async import Sandbox as SandboxDto
    from daytona_api_client_async import SandboxApi
    from daytona_toolbox_api_client_async import ApiClient, Configuration

    toolbox = ApiClient(Configuration(host=""))
    toolbox.default_headers.update(
        {"Authorization": "Bearer none", "X-Daytona-Source": "sdk-python", "X-Daytona-SDK-Version": version("daytona")}
    )
    record = {
        "id": "2280", "organizationId": "local", "name": "mcpgw-test", "user": "root", "env": {}, "labels": {},
        "public": False, "networkBlockAll": True, "kvm": False, "target": "local", "cpu": 1, "gpu": 0,
        "memory": 1, "disk": 1, "state": "started", "toolboxProxyUrl": f"{daemon.url}/proxy",
    }  # fmt: skip
    # Never called: the sandbox's lifecycle is the test's.
    control_plane = MainApiClient(MainConfiguration(host="http://127.0.0.1:9"))
    try:
        yield AsyncSandbox(
            SandboxDto.from_dict(record),
            toolbox,
            SandboxApi(control_plane),
            "python",
            subscription_manager=AsyncEventSubscriptionManager(None),
        )
    finally:
        await toolbox.close()
        await control_plane.close()
