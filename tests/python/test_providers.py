"""The cloud sandboxes' providers through their own software and official SDKs (see
providers.py): the gateway installed through the SDK's file API, a session opened on the SDK's
streaming process API, a stdio server registered, its tools listed and called with progress and
cancel, the channel killed mid-call and the call resumed, the sandbox killed and the error that
names it; and the same one-shot."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import mcpgw_client as mcpgw
from conftest import IMAGE_TESTSERVER, REPO, STATIC_HOST, skip, ts_spec, wait_for
from providers import (
    DAYTONA_DAEMON,
    E2B_ENVD,
    GATEWAY_IN_SANDBOX,
    STATIC_GATEWAY,
    Box,
    DaytonaDaemon,
    Envd,
    OpenSandboxServer,
    daemon_reason,
    daytona_sandbox,
    e2b_sandbox,
    opensandbox_reason,
    start_daytona,
    start_envd,
    start_opensandbox_server,
)


def skip_unless_here(provider: str, reason: str | None, sdk: str) -> None:
    """Skips the test when `provider`'s sandbox cannot be had here (`reason`) or its SDK, the
    module `sdk`, is not installed."""
    if reason:
        skip(f"no {provider} sandbox here: {reason}")
    pytest.importorskip(sdk, reason=f"{provider}'s SDK is not installed (make deps)")


async def _started(
    client: mcpgw.AsyncClient, got: list[mcpgw.ToolChunk], arguments: dict[str, object]
) -> asyncio.Future[mcpgw.ToolChunk]:
    call = asyncio.ensure_future(client.call_tool("ts", "slow", arguments, on_progress=got.append))
    await wait_for(lambda: got or call.done(), "the call's first progress chunk", timeout=30)
    return call


async def a_session_through(client: mcpgw.AsyncClient, box: Box, backend: str, killed: str) -> None:
    """The scenario every provider passes: install, a session, calls with progress, a cancel, a
    resume after the channel's process was killed, then the sandbox killed: the provider's
    failure names `backend` and the state `killed`."""
    installed = await client.ensure_gateway_binary(str(STATIC_GATEWAY))
    assert installed["uploaded"] and installed["path"] == GATEWAY_IN_SANDBOX
    hello = await client.open_session()
    assert hello["launched"]
    await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
    names = {t["name"] for t in await client.list_tools("ts")}
    assert {"echo", "slow"} <= names
    big = f"{backend} " * 50_000
    assert (await client.call_tool("ts", "echo", {"text": big}))["content"][0]["text"] == big

    got: list[mcpgw.ToolChunk] = []
    last = await client.call_tool("ts", "slow", {"seconds": 0.3, "steps": 3}, on_progress=got.append)
    assert last["is_last"] and len(got) == 3

    # A cancelled call ends upstream too: the test server writes its marker.
    got = []
    call = await _started(client, got, {"seconds": 30, "steps": 300, "cancel_marker": "/tmp/cancelled"})
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_for(lambda: box.docker_exec("cat", "/tmp/cancelled").stdout == "cancelled", "the cancel marker", 30)

    # The channel's process killed in the sandbox mid-call: the driver opens another through the
    # SDK and the call resumes on it, every progress chunk once.
    if hello.get("retention_ms"):
        got = []
        call = await _started(client, got, {"seconds": 2, "steps": 4})
        assert box.kill_attach()
        last = await call
        assert last["is_last"]
        steps = {p["progress"] for p in map(mcpgw.progress_of, got) if p}
        assert len(got) == 4 and len(steps) == 4, got

    # The sandbox killed under a call: the SDK's failure, read by the library's rules.
    got = []
    call = await _started(client, got, {"seconds": 30, "steps": 30})
    box.kill()
    with pytest.raises((mcpgw.BackendError, mcpgw.SessionLostError)):
        await call
    with pytest.raises(mcpgw.BackendError) as e:
        await client.call_tool("ts", "echo", {"text": "anyone?"})
    assert e.value.backend == backend and e.value.state == killed, e.value


# ---- E2B ----


@pytest.fixture
def envd() -> Iterator[Envd]:
    skip_unless_here("E2B", daemon_reason(E2B_ENVD, "E2B's envd", "MCPGW_E2B_ENVD"), "e2b")
    yield from start_envd()


async def test_e2b_a_session_carries_calls_progress_cancel_and_a_resume(envd: Envd) -> None:
    async with mcpgw.AsyncClient(mcpgw.e2b(e2b_sandbox(envd)), gateway_path=GATEWAY_IN_SANDBOX) as client:
        # Killed, the sandbox is one E2B's SDK cannot reach (E2B's edge would say not running).
        await a_session_through(client, envd, "e2b", "unreachable")


async def test_e2b_one_shot_and_a_blocking_sandbox(envd: Envd) -> None:
    async with mcpgw.AsyncClient(mcpgw.e2b(e2b_sandbox(envd, blocking=True))) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        assert (await client.call_tool("ts", "echo", {"text": "one-shot"}))["content"][0]["text"] == "one-shot"
        # The blocking SDK's channel too.
        await client.open_session()
        got: list[mcpgw.ToolChunk] = []
        last = await client.call_tool("ts", "slow", {"seconds": 0.2, "steps": 2}, on_progress=got.append)
        assert last["is_last"] and len(got) == 2
        await client.close_session()
        await client.stop_gateway()


def test_e2b_refuses_what_is_not_a_sandbox() -> None:
    with pytest.raises(TypeError, match="E2B Sandbox"):
        mcpgw.e2b(object())


# ---- OpenSandbox ----


@pytest.fixture(scope="module")
def opensandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpenSandboxServer]:
    skip_unless_here("OpenSandbox", opensandbox_reason(), "opensandbox")
    pytest.importorskip("websockets", reason="websockets is not installed (make deps)")
    yield from start_opensandbox_server(Path(tmp_path_factory.mktemp("opensandbox")))


@pytest.fixture
async def opensandbox_sandbox(opensandbox_server: OpenSandboxServer) -> AsyncIterator[object]:
    sandbox = await opensandbox_server.sandbox()
    try:
        yield sandbox
    finally:
        # A test may have killed its container.
        with contextlib.suppress(Exception):
            await sandbox.kill()  # type: ignore[attr-defined]
        await sandbox.close()  # type: ignore[attr-defined]


async def test_opensandbox_a_session_carries_calls_progress_cancel_and_a_resume(opensandbox_sandbox: object) -> None:
    box = Box(f"sandbox-{opensandbox_sandbox.id}")  # type: ignore[attr-defined]
    backend = mcpgw.opensandbox(opensandbox_sandbox)
    async with mcpgw.AsyncClient(backend, gateway_path=GATEWAY_IN_SANDBOX) as client:
        # Killed, its container has exited: the server says so, and the sandbox is gone.
        await a_session_through(client, box, "opensandbox", "gone")


async def test_opensandbox_one_shot(opensandbox_sandbox: object) -> None:
    async with mcpgw.AsyncClient(mcpgw.opensandbox(opensandbox_sandbox)) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        assert (await client.call_tool("ts", "echo", {"text": "one-shot"}))["content"][0]["text"] == "one-shot"
        await client.stop_gateway()


# ---- Daytona ----


@pytest.fixture
def daytona_daemon() -> Iterator[DaytonaDaemon]:
    skip_unless_here("Daytona", daemon_reason(DAYTONA_DAEMON, "Daytona's daemon", "MCPGW_DAYTONA_DAEMON"), "daytona")
    yield from start_daytona()


async def test_daytona_a_session_carries_calls_progress_cancel_and_a_resume(daytona_daemon: DaytonaDaemon) -> None:
    async with (
        daytona_sandbox(daytona_daemon) as sandbox,
        mcpgw.AsyncClient(mcpgw.daytona(sandbox), gateway_path=GATEWAY_IN_SANDBOX) as client,
    ):
        # Killed, the sandbox is one Daytona's SDK cannot reach (Daytona's control plane, not
        # here, would say it is stopped).
        await a_session_through(client, Box(daytona_daemon.container), "daytona", "unreachable")


async def test_daytona_one_shot_keeps_stdout_and_stderr_apart(daytona_daemon: DaytonaDaemon) -> None:
    async with daytona_sandbox(daytona_daemon) as sandbox, mcpgw.AsyncClient(mcpgw.daytona(sandbox)) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        assert (await client.call_tool("ts", "echo", {"text": "one-shot"}))["content"][0]["text"] == "one-shot"
        with pytest.raises(mcpgw.NotFoundError):
            await client.call_tool("nope", "echo", {"text": "x"})
        await client.stop_gateway()


# ---- mcpgw mcp into a provider's sandbox ----


def _mcp_over_stdio(args: list[str], env: dict[str, str]) -> None:
    """`python -m mcpgw_client mcp ARGS`, as an MCP client's configuration starts it: the
    handshake, the tools listed, one called; then the client leaves and nothing is left."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpgw_client", "mcp", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO / "bindings" / "python" / "src"), **env},
    )
    assert proc.stdin is not None and proc.stdout is not None

    def ask(message: dict[str, object]) -> dict[str, object]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, f"mcpgw mcp ended: {proc.stderr.read().decode() if proc.stderr else ''}"
            answer = json.loads(line)
            if answer.get("id") == message["id"]:
                return dict(answer)

    try:
        hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        init = ask({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        assert "result" in init, init
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        tools = ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        assert "echo" in {t["name"] for t in tools["result"]["tools"]}, tools  # type: ignore[index]
        echo = ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "through mcpgw mcp"}}})  # fmt: skip
        assert echo["result"]["content"][0]["text"] == "through mcpgw mcp", echo  # type: ignore[index]
        proc.stdin.close()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_mcpgw_mcp_into_an_e2b_sandbox(envd: Envd) -> None:
    if not STATIC_HOST.is_file():
        skip(f"{STATIC_HOST} is missing: run `make static-host`")
    _mcp_over_stdio(
        ["--e2b", "mcpgw-test", "--", IMAGE_TESTSERVER, "stdio"],
        {"E2B_DEBUG": "true", "E2B_SANDBOX_URL": envd.url, "E2B_ENVD_ACCESS_TOKEN": envd.token},
    )


async def test_mcpgw_mcp_into_an_opensandbox_sandbox(opensandbox_server: OpenSandboxServer) -> None:
    if not STATIC_HOST.is_file():
        skip(f"{STATIC_HOST} is missing: run `make static-host`")
    sandbox: Any = await opensandbox_server.sandbox()
    try:
        token = sandbox.connection_config.headers["X-EXECD-ACCESS-TOKEN"]
        env = {
            "OPEN_SANDBOX_DOMAIN": opensandbox_server.domain,
            "OPEN_SANDBOX_API_KEY": opensandbox_server.api_key,
            "OPEN_SANDBOX_EXECD_ACCESS_TOKEN": token,
        }
        await asyncio.to_thread(_mcp_over_stdio, ["--opensandbox", sandbox.id, "--", IMAGE_TESTSERVER, "stdio"], env)
    finally:
        await sandbox.kill()
        await sandbox.close()
