"""The binding through real sandboxes, one command per operation: Linux namespaces entered with
nsenter (tests/sandbox.sh, through the argv backend), one with a minimal busybox root (no curl,
no python), Docker and podman containers, and kubectl without a cluster. Each skips, printing
why, where it cannot run."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcpgw_client as mcpgw
from conftest import (
    DOCKER,
    GATEWAY,
    IMAGE_TESTSERVER,
    REPO,
    TESTSERVER,
    Container,
    namespace_sandbox_reason,
    skip,
    ts_spec,
    wait_for,
)

SANDBOX_SH = REPO / "tests" / "sandbox.sh"


@pytest.fixture
def namespace(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[mcpgw.Backend, Path]]:
    reason = namespace_sandbox_reason()
    if reason:
        skip(f"no namespace sandbox: {reason}")
    minimal = getattr(request, "param", False)
    d = tmp_path / "ns"
    args = ["sh", str(SANDBOX_SH), "start", str(d)]
    if minimal:
        args += ["--minimal", "--libs-for", str(GATEWAY)]
    pid = subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()
    try:
        yield mcpgw.argv(["nsenter", "-t", pid, "-n", "-p", "-m", "-r", "-w"]), d
    finally:
        subprocess.run(["sh", str(SANDBOX_SH), "stop", str(d)], check=False)


async def test_namespace_sandbox(namespace: tuple[mcpgw.Backend, Path]) -> None:
    backend, _ = namespace
    async with mcpgw.AsyncClient(backend, gateway_path=str(GATEWAY)) as client:
        info = await client.start_gateway()
        # The host shares no network with the sandbox: the gateway is not reachable from here.
        async with mcpgw.AsyncClient(
            mcpgw.local(), port=info["port"], instance_nonce=info["instance_nonce"], token_file=info["token_file"]
        ) as host:
            with pytest.raises(mcpgw.McpgwError):
                await host.health(timeout=5)
        await client.add_mcp(ts_spec())
        chunk = await client.call_tool("ts", "echo", {"text": "inside the namespace"})
        assert chunk["content"][0]["text"] == "inside the namespace"
        big = "y" * (200 * 1024)
        assert (await client.call_tool("ts", "echo", {"text": big}))["content"][0]["text"] == big
        await client.stop_gateway()


@pytest.mark.parametrize("namespace", [True], indirect=True, ids=["minimal-root"])
async def test_minimal_root_without_curl(namespace: tuple[mcpgw.Backend, Path], gateway_to_install: Path) -> None:
    backend, d = namespace
    # Only busybox and the gateway's libraries are there; the test server is copied in, the
    # gateway installed through the backend (its bytes on stdin).
    bindir = d / "root" / "usr" / "local" / "bin"
    shutil.copy2(TESTSERVER, bindir / "mcpgw-testserver")
    for lib in subprocess.run(["ldd", str(TESTSERVER)], capture_output=True, text=True).stdout.split():
        if lib.startswith("/") and not (d / "root" / lib.lstrip("/")).exists():
            (d / "root" / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, d / "root" / lib.lstrip("/"))
    assert not (d / "root" / "usr" / "bin" / "curl").exists() and not (d / "root" / "bin" / "curl").exists()
    async with mcpgw.AsyncClient(backend, gateway_path="/usr/local/bin/mcpgw-gateway") as client:
        installed = await client.ensure_gateway_binary(str(gateway_to_install))
        assert installed["uploaded"] is True
        await client.start_gateway()
        await client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        chunk = await client.call_tool("ts", "echo", {"text": "no curl here"})
        assert chunk["content"][0]["text"] == "no curl here"
        await client.stop_gateway()


# ── Docker and podman ─────────────────────────────────────────────


def _calls(mcps: list[mcpgw.McpSpec]) -> int:
    return int(next(m for m in mcps if m["name"] == "ts")["status"]["calls"])


async def _start_call(client: mcpgw.AsyncClient, arguments: dict[str, object]) -> asyncio.Future[mcpgw.ToolChunk]:
    """A slow call, returned once the gateway runs it."""
    before = _calls(await client.list_mcps())
    task = asyncio.ensure_future(client.call_tool("ts", "slow", arguments))

    async def started() -> bool:
        return _calls(await client.list_mcps()) > before

    await wait_for(started, "the gateway to start the call", timeout=30)
    return task


async def test_one_shot_through_a_container(any_container: Container) -> None:
    engine = any_container.engine
    async with mcpgw.AsyncClient(any_container.backend) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        chunk = await client.call_tool("ts", "echo", {"text": "in a container"})
        assert chunk["content"][0]["text"] == "in a container"
        big = "z" * (200 * 1024)
        assert (await client.call_tool("ts", "echo", {"text": big}))["content"][0]["text"] == big

        # Cancelling the task kills the exec on the host, and the command in the container
        # with it: the gateway cancels the call upstream.
        task = await _start_call(client, {"seconds": 30, "steps": 300, "cancel_marker": "/tmp/cancelled"})
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for(
            lambda: engine.cli("exec", any_container.name, "cat", "/tmp/cancelled").stdout == "cancelled",
            "the cancel marker",
            timeout=30,
        )

        # The sandbox gone: the backend says so, the call fails to run.
        any_container.remove()
        with pytest.raises(mcpgw.BackendError) as e:
            await client.call_tool("ts", "echo", {"text": "anyone?"})
        assert e.value.state == "gone" and e.value.backend == engine.name and e.value.target == any_container.name


async def test_a_container_killed_under_a_call(any_container: Container) -> None:
    async with mcpgw.AsyncClient(any_container.backend) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        task = await _start_call(client, {"seconds": 30})
        any_container.kill()
        # Exit 137 with no output is asked about: the container is not running, so it is the
        # sandbox's failure, not the command's.
        with pytest.raises(mcpgw.BackendError) as e:
            await task
        assert e.value.state == "gone" and "killed or removed" in e.value.reason


async def test_a_container_that_does_not_exist(any_container: Container) -> None:
    async with mcpgw.AsyncClient(any_container.engine.backend(f"{any_container.name}-missing")) as client:
        with pytest.raises(mcpgw.BackendError) as e:
            await client.start_gateway()
        assert e.value.state == "gone" and e.value.exit_code != 0


async def test_a_stopped_container(any_container: Container) -> None:
    assert any_container.engine.cli("stop", "--time", "0", any_container.name).returncode == 0
    async with mcpgw.AsyncClient(any_container.backend) as client:
        with pytest.raises(mcpgw.BackendError) as e:
            await client.start_gateway()
        assert e.value.state == "not_running", e.value
        with pytest.raises(mcpgw.BackendError) as e:
            await client.open_session()
        assert e.value.state == "not_running", e.value


def test_docker_blocking_client(container: Container) -> None:
    with mcpgw.Client(container.backend) as client:
        client.start_gateway()
        client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        assert client.call_tool("ts", "echo", {"text": "blocking docker"})["content"][0]["text"] == "blocking docker"
        container.remove()
        with pytest.raises(mcpgw.BackendError):
            client.health()


async def test_docker_daemon_unreachable() -> None:
    if not shutil.which("docker"):
        skip("no docker CLI")
    backend = mcpgw.docker("any", options=["--host", "unix:///nonexistent/docker.sock"])
    async with mcpgw.AsyncClient(backend, port=1, token_file="/t") as client:
        with pytest.raises(mcpgw.BackendError) as e:
            await client.health()
    assert e.value.state == "unreachable" and "Cannot connect to the Docker daemon" in e.value.reason
    assert DOCKER.name == e.value.backend


async def test_kubectl_without_a_cluster_is_unreachable() -> None:
    if not shutil.which("kubectl"):
        skip("no kubectl CLI")
    # An API server nothing listens on: kubectl logs its retries, then says it was refused.
    backend = mcpgw.kubectl("web-0", namespace="agents", options=["--server", "http://127.0.0.1:1"])
    async with mcpgw.AsyncClient(backend, port=1, token_file="/t") as client:
        with pytest.raises(mcpgw.BackendError) as e:
            await client.health()
    assert e.value.backend == "kubectl" and e.value.target == "web-0" and e.value.state == "unreachable"
    assert "was refused" in e.value.reason


async def test_a_backend_program_that_is_not_installed() -> None:
    backend = mcpgw.docker("box", program="/nonexistent/docker")
    async with mcpgw.AsyncClient(backend, port=1, token_file="/t") as client:
        with pytest.raises(mcpgw.ExecFailedError, match="/nonexistent/docker"):
            await client.health()
