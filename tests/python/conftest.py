"""Shared by the Python binding's tests: the repository's binaries, local sandboxes, and waits on
real conditions with deadlines (never a sleep standing in for an event)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
#: The release's version, the workspace's.
VERSION: str = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]
# The in-repo tests use the debug build of the library unless MCPGW_LIB names another.
os.environ.setdefault("MCPGW_LIB", str(TARGET / "debug" / "libmcpgw.so"))
sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))

import mcpgw_client as mcpgw  # noqa: E402


def binary(name: str, env: str) -> Path:
    """A binary of the repository's debug build (or the one `env` names); fails with the command
    that builds it."""
    path = Path(os.environ.get(env) or TARGET / "debug" / name)
    if not path.is_file():
        pytest.fail(f"{path} is missing: run `make -C bindings/python native`")
    return path


GATEWAY = binary("mcpgw-gateway", "MCPGW_GATEWAY")
TESTSERVER = binary("mcpgw-testserver", "MCPGW_TESTSERVER")
#: testkit's comparison of two runs of an SDK client's script.
SAME_ANSWERS = binary("mcpgw-same-answers", "MCPGW_SAME_ANSWERS")


def gateway_has_attach(gateway: Path = GATEWAY) -> bool:
    """Whether `gateway` has the session channel's side, `mcpgw-gateway attach`."""
    r = subprocess.run([str(gateway), "--help"], capture_output=True, text=True, check=False)
    return "mcpgw-gateway attach" in r.stdout + r.stderr


def ts_spec(name: str = "ts", command: str | Path = TESTSERVER) -> dict[str, Any]:
    """The spec registering the test server over stdio under `name`."""
    return {
        "name": name,
        "is_stateful": True,
        "mcp_config": {"type": "stdio_mcp", "command": str(command), "args": ["stdio"]},
    }


def skip(reason: str) -> None:
    """Skips a test, printing why (so a CI log shows what did not run)."""
    print(f"SKIPPED: {reason}", file=sys.stderr)
    pytest.skip(reason)


async def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
    """Polls `predicate` (sync or async) until it returns something truthy, for at most
    `timeout` seconds: a wait on a real condition, with a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


async def wait_file(path: Path, timeout: float = 10.0) -> str:
    """The text of `path` once it exists."""
    await wait_for(path.exists, f"{path} to exist", timeout)
    return path.read_text()


def process_gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status


def processes_mentioning(text: str) -> list[int]:
    """Pids of live processes whose command line contains `text`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and not process_gone(int(entry.name)):
            pids.append(int(entry.name))
    return pids


class RecordingShell:
    """A local sandbox reached through the exec backend (``sh -c`` in a directory, run by this
    test's own functions), recording every command: a user's own exec function, as E2B's."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.commands: list[str] = []

    def backend(self, passes_stdin: bool = True) -> mcpgw.Backend:
        return mcpgw.exec(self.run, self.open, passes_stdin=passes_stdin)

    async def run(self, command: str, timeout: float, stdin: bytes | None) -> mcpgw.ExecResult:
        self.commands.append(command)
        proc = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            start_new_session=True,
        )
        try:
            out, err = await proc.communicate(stdin)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            await asyncio.shield(proc.wait())
            raise
        return mcpgw.ExecResult(proc.returncode or 0, out, err)

    async def open(self, command: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            start_new_session=True,
        )


@pytest.fixture
def sandbox_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mcpgw-py-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class Gateway:
    """A gateway launched in a local sandbox: its client, the sandbox, what the launch said."""

    client: mcpgw.AsyncClient
    dir: Path
    info: mcpgw.GatewayInfo


@pytest.fixture
async def gateway(sandbox_dir: Path) -> AsyncIterator[Gateway]:
    """A gateway launched in a local sandbox with the test server registered as `ts`."""
    client = mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state")
    )
    info = await client.start_gateway()
    try:
        await client.add_mcp(ts_spec())
        yield Gateway(client, sandbox_dir, info)
    finally:
        try:
            await client.stop_gateway()
        finally:
            await client.aclose()


@pytest.fixture(scope="session")
def gateway_to_install(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stripped copy of the debug gateway (a sevenths of its size), for the tests that install
    the binary into a sandbox: hashing and moving 140 MB of debug symbols proves nothing more."""
    path = tmp_path_factory.mktemp("gw") / "mcpgw-gateway"
    shutil.copy2(GATEWAY, path)
    if shutil.which("strip"):
        subprocess.run(["strip", str(path)], check=True)
    return path


def namespace_sandbox_reason() -> str | None:
    """Why no namespace sandbox can be made here, or None."""
    r = subprocess.run(["sh", str(REPO / "tests" / "sandbox.sh"), "check"], capture_output=True, text=True)
    return None if r.returncode == 0 else (r.stdout.strip() or r.stderr.strip() or "sandbox.sh check failed")


DOCKER_SH = REPO / "tests" / "docker" / "sandbox.sh"
STATIC_GATEWAY = TARGET / "x86_64-unknown-linux-gnu" / "release" / "mcpgw-gateway"
#: The static host endpoint (`make static-host`), which the wheel bundles.
STATIC_HOST = TARGET / "x86_64-unknown-linux-gnu" / "release" / "mcpgw"
#: Where the test image holds the binaries.
IMAGE_TESTSERVER = "/usr/local/bin/mcpgw-testserver"


@dataclass(frozen=True)
class Engine:
    """A container engine for sandboxes: Docker, or podman through the same
    tests/docker/sandbox.sh (``DOCKER=podman``, vfs storage, the limits podman needs here)."""

    name: str
    #: Options of every CLI command (podman: its storage driver).
    options: tuple[str, ...] = ()
    #: Extra options of ``run``.
    run_options: tuple[str, ...] = ()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.name, *self.options, *args], capture_output=True, text=True, check=False)

    def sandbox(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCKER": self.name}
        if self.name == "podman":
            env["STORAGE_DRIVER"] = "vfs"
        return subprocess.run(["sh", str(DOCKER_SH), *args], capture_output=True, text=True, env=env, check=False)

    def backend(self, container: str) -> mcpgw.Backend:
        make = mcpgw.podman if self.name == "podman" else mcpgw.docker
        return make(container, options=list(self.options))

    def reason(self) -> str | None:
        """Why this engine's tests cannot run here, or None."""
        r = self.sandbox("check")
        if r.returncode != 0:
            return r.stdout.strip() or r.stderr.strip() or f"sandbox.sh check failed for {self.name}"
        for name in ("mcpgw-gateway", "mcpgw-testserver"):
            if not (TARGET / "x86_64-unknown-linux-gnu" / "release" / name).is_file():
                return f"the static {name} is missing: run `make static`"
        return None


DOCKER = Engine("docker")
PODMAN = Engine(
    "podman",
    options=("--storage-driver", "vfs"),
    run_options=(
        "--init-path",
        # The image has no libc: a static init.
        shutil.which("tini-static") or "/usr/bin/tini-static",
        "--ulimit",
        "nofile=20000:20000",
        "--ulimit",
        "nproc=20000:20000",
    ),
)
_IMAGES: dict[str, str] = {}


def engine_image(engine: Engine) -> str:
    """The test image in `engine` (built once per run), or a skip saying why there is none."""
    if engine.name not in _IMAGES:
        reason = engine.reason()
        if reason:
            skip(f"no {engine.name} sandbox: {reason}")
        r = engine.sandbox("image")
        if r.returncode != 0:
            pytest.fail(f"building the {engine.name} test image failed: {r.stderr}")
        _IMAGES[engine.name] = r.stdout.strip()
    return _IMAGES[engine.name]


@dataclass
class Container:
    """A running test container: its engine and name, and the backend that enters it."""

    engine: Engine
    name: str

    @property
    def backend(self) -> mcpgw.Backend:
        return self.engine.backend(self.name)

    def remove(self) -> None:
        assert self.engine.cli("rm", "-f", self.name).returncode == 0

    def kill(self) -> None:
        assert self.engine.cli("kill", self.name).returncode == 0


def start_container(engine: Engine) -> Container:
    image = engine_image(engine)
    name = f"mcpgw-py-{uuid.uuid4().hex[:10]}"
    r = engine.sandbox("start", image, name, "--", *engine.run_options)
    if r.returncode != 0:
        pytest.fail(f"starting a {engine.name} container failed: {r.stderr}")
    return Container(engine, name)


@pytest.fixture
def container() -> Iterator[Container]:
    """A Docker container of the test image."""
    c = start_container(DOCKER)
    try:
        yield c
    finally:
        DOCKER.sandbox("stop", c.name)


@pytest.fixture(params=[DOCKER, PODMAN], ids=["docker", "podman"])
def any_container(request: pytest.FixtureRequest) -> Iterator[Container]:
    """A container of the test image, in Docker and in podman."""
    engine: Engine = request.param
    c = start_container(engine)
    try:
        yield c
    finally:
        engine.sandbox("stop", c.name)
