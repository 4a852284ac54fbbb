"""The binding through real sandboxes: Linux namespaces entered with nsenter (tests/sandbox.sh),
one with a minimal busybox root (no curl, no python), and Docker containers entered with
``docker exec -i`` (tests/docker/sandbox.sh). Each skips, printing why, where it cannot run."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcpgw_client as mcpgw
from conftest import GATEWAY, REPO, TESTSERVER, docker, namespace_sandbox_reason, skip, ts_spec, wait_for

SANDBOX_SH = REPO / "tests" / "sandbox.sh"


@pytest.fixture
def namespace(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[mcpgw.ArgvExec, Path]]:
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
        yield mcpgw.ArgvExec(["nsenter", "-t", pid, "-n", "-p", "-m", "-r", "-w"]), d
    finally:
        subprocess.run(["sh", str(SANDBOX_SH), "stop", str(d)], check=False)


async def test_namespace_sandbox(namespace: tuple[mcpgw.ArgvExec, Path]) -> None:
    exec, _ = namespace
    async with mcpgw.AsyncClient(exec, gateway_path=str(GATEWAY)) as client:
        info = await client.start_gateway()
        # The host shares no network with the sandbox: the gateway is not reachable from here.
        async with mcpgw.AsyncClient(
            mcpgw.LocalExec(), port=info["port"], instance_nonce=info["instance_nonce"]
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
async def test_minimal_root_without_curl(namespace: tuple[mcpgw.ArgvExec, Path], gateway_to_install: Path) -> None:
    exec, d = namespace
    # Only busybox and the gateway's libraries are there; the test server is copied in, the
    # gateway installed through the exec (its bytes on stdin).
    bindir = d / "root" / "usr" / "local" / "bin"
    shutil.copy2(TESTSERVER, bindir / "mcpgw-testserver")
    for lib in subprocess.run(["ldd", str(TESTSERVER)], capture_output=True, text=True).stdout.split():
        if lib.startswith("/") and not (d / "root" / lib.lstrip("/")).exists():
            (d / "root" / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(lib, d / "root" / lib.lstrip("/"))
    assert (await exec("command -v curl || echo none", 10, None)).stdout.strip() == b"none"
    async with mcpgw.AsyncClient(exec, gateway_path="/usr/local/bin/mcpgw-gateway") as client:
        installed = await client.ensure_gateway_binary(str(gateway_to_install))
        assert installed["uploaded"] is True
        await client.start_gateway()
        await client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        chunk = await client.call_tool("ts", "echo", {"text": "no curl here"})
        assert chunk["content"][0]["text"] == "no curl here"
        await client.stop_gateway()


# ── Docker ────────────────────────────────────────────────────────


async def test_docker_exec(container: str) -> None:
    exec = mcpgw.DockerExec(container)
    async with mcpgw.AsyncClient(exec) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        chunk = await client.call_tool("ts", "echo", {"text": "in a container"})
        assert chunk["content"][0]["text"] == "in a container"
        big = "z" * (200 * 1024)
        assert (await client.call_tool("ts", "echo", {"text": big}))["content"][0]["text"] == big

        # Cancelling the task kills `docker exec`; the gateway cancels the call upstream.
        before = _calls(await client.list_mcps())
        task = asyncio.ensure_future(
            client.call_tool("ts", "slow", {"seconds": 30, "steps": 300, "cancel_marker": "/tmp/cancelled"})
        )

        async def started() -> bool:
            return _calls(await client.list_mcps()) > before

        await wait_for(started, "the gateway to start the call")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_for(
            lambda: docker("exec", container, "cat", "/tmp/cancelled").stdout == "cancelled", "the cancel marker"
        )

        # The sandbox gone: docker says so with exit status 1, the call fails to run.
        docker("rm", "-f", container)
        with pytest.raises(mcpgw.ExecFailedError) as e:
            await client.call_tool("ts", "echo", {"text": "anyone?"})
        assert "Error response from daemon" in str(e.value)


async def test_docker_container_killed_under_a_call(container: str) -> None:
    async with mcpgw.AsyncClient(mcpgw.DockerExec(container)) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        before = _calls(await client.list_mcps())
        task = asyncio.ensure_future(client.call_tool("ts", "slow", {"seconds": 30}))

        async def started() -> bool:
            return _calls(await client.list_mcps()) > before

        await wait_for(started, "the gateway to start the call")
        assert docker("kill", container).returncode == 0
        with pytest.raises(mcpgw.ExecFailedError) as e:
            await task
        assert "killed" in str(e.value)


def test_docker_blocking_client(container: str) -> None:
    with mcpgw.Client(mcpgw.DockerExec(container)) as client:
        client.start_gateway()
        client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        assert client.call_tool("ts", "echo", {"text": "blocking docker"})["content"][0]["text"] == "blocking docker"
        docker("rm", "-f", container)
        with pytest.raises(mcpgw.ExecFailedError):
            client.health()


def _calls(mcps: list[mcpgw.McpSpec]) -> int:
    return int(next(m for m in mcps if m["name"] == "ts")["status"]["calls"])


async def test_docker_daemon_unreachable_is_an_exec_failure() -> None:
    if not shutil.which("docker"):
        skip("no docker CLI")
    exec = mcpgw.DockerExec("any", host="unix:///nonexistent/docker.sock")
    async with mcpgw.AsyncClient(exec, port=1, token_file="/t") as client:
        with pytest.raises(mcpgw.ExecFailedError) as e:
            await client.health()
    assert "Cannot connect to the Docker daemon" in str(e.value)


def test_kubectl_says_the_pod_is_gone() -> None:
    # kubectl's own failures, as it prints them, against a command's own exit status 1.
    exec = mcpgw.KubectlExec("web-0", namespace="agents", container="main")
    assert exec.argv("true") == [
        "kubectl",
        "exec",
        "-i",
        "--namespace",
        "agents",
        "--container",
        "main",
        "web-0",
        "--",
        "sh",
        "-c",
        "true",
    ]
    for stderr in (
        b'Error from server (NotFound): pods "web-0" not found',
        b"error: unable to upgrade connection: container not found",
    ):
        with pytest.raises(mcpgw.ExecFailure):
            exec.classify(mcpgw.ExecResult(1, b"", stderr))
    with pytest.raises(mcpgw.ExecFailure):
        exec.classify(mcpgw.ExecResult(137))
    own = mcpgw.ExecResult(1, b"", b"grep: no match")
    assert exec.classify(own) is own
