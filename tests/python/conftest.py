"""Shared by the Python binding's tests: the repository's binaries, local sandboxes, and waits on
real conditions with deadlines (never a sleep standing in for an event)."""

from __future__ import annotations

import asyncio
import os
import shutil
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
        pytest.fail(f"{path} is missing: run `cargo build -p mcpgw-ffi -p mcpgw-gateway -p mcpgw-testserver`")
    return path


GATEWAY = binary("mcpgw-gateway", "MCPGW_GATEWAY")
TESTSERVER = binary("mcpgw-testserver", "MCPGW_TESTSERVER")


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


class RecordingExec(mcpgw.LocalExec):
    """A local sandbox's exec (``sh -c`` in a directory) that records every command."""

    def __init__(self, cwd: str) -> None:
        super().__init__(cwd=cwd)
        self.commands: list[str] = []

    def argv(self, command: str) -> list[str]:
        self.commands.append(command)
        return super().argv(command)


@pytest.fixture
def sandbox_dir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="mcpgw-py-test-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class Gateway:
    """A gateway launched in a local sandbox: its client, the exec, what the launch said."""

    client: mcpgw.AsyncClient
    exec: RecordingExec
    info: mcpgw.GatewayInfo


@pytest.fixture
async def gateway(sandbox_dir: Path) -> AsyncIterator[Gateway]:
    """A gateway launched in a local sandbox with the test server registered as `ts`."""
    exec = RecordingExec(str(sandbox_dir))
    client = mcpgw.AsyncClient(exec, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state"))
    info = await client.start_gateway()
    try:
        await client.add_mcp(ts_spec())
        yield Gateway(client, exec, info)
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


def docker_reason() -> str | None:
    """Why the Docker tests cannot run here, or None."""
    r = subprocess.run(["sh", str(REPO / "tests" / "docker" / "sandbox.sh"), "check"], capture_output=True, text=True)
    if r.returncode != 0:
        return r.stdout.strip() or r.stderr.strip() or "tests/docker/sandbox.sh check failed"
    for name in ("mcpgw-gateway", "mcpgw-testserver"):
        if not (TARGET / "x86_64-unknown-linux-gnu" / "release" / name).is_file():
            return f"the static {name} is missing: run `make static`"
    return None


DOCKER_SH = REPO / "tests" / "docker" / "sandbox.sh"
STATIC_GATEWAY = TARGET / "x86_64-unknown-linux-gnu" / "release" / "mcpgw-gateway"


@pytest.fixture(scope="session")
def docker_image() -> str:
    reason = docker_reason()
    if reason:
        skip(f"no docker sandbox: {reason}")
    return subprocess.run(["sh", str(DOCKER_SH), "image"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
async def container(docker_image: str) -> AsyncIterator[str]:
    name = f"mcpgw-py-{uuid.uuid4().hex[:10]}"
    subprocess.run(["sh", str(DOCKER_SH), "start", docker_image, name], capture_output=True, text=True, check=True)
    try:
        yield name
    finally:
        subprocess.run(["sh", str(DOCKER_SH), "stop", name], capture_output=True, check=False)


def docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)
