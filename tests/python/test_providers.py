"""The cloud sandboxes' providers through their own software and official SDKs (see
providers.py): the gateway installed through the SDK's file API, a session opened on the SDK's
streaming process API, a stdio server registered, its tools listed and called with progress and
cancel, the channel killed mid-call and the call resumed, the sandbox killed and the error that
names it; and the same one-shot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

import mcpgw_client as mcpgw
from conftest import IMAGE_TESTSERVER, skip, ts_spec, wait_for
from providers import E2B_ENVD, GATEWAY_IN_SANDBOX, STATIC_GATEWAY, Envd, daemon_reason, e2b_sandbox, start_envd

pytest.importorskip("e2b", reason="E2B's SDK is not installed (make deps)")


@pytest.fixture
def envd() -> Iterator[Envd]:
    reason = daemon_reason(E2B_ENVD, "E2B's envd", "MCPGW_E2B_ENVD")
    if reason:
        skip(f"no E2B sandbox here: {reason}")
    yield from start_envd()


@pytest.fixture
async def e2b_client(envd: Envd) -> AsyncIterator[mcpgw.AsyncClient]:
    client = mcpgw.AsyncClient(mcpgw.e2b(e2b_sandbox(envd)), gateway_path=GATEWAY_IN_SANDBOX)
    try:
        yield client
    finally:
        await client.aclose()


async def _started(
    client: mcpgw.AsyncClient, got: list[mcpgw.ToolChunk], arguments: dict[str, object]
) -> asyncio.Future[mcpgw.ToolChunk]:
    call = asyncio.ensure_future(client.call_tool("ts", "slow", arguments, on_progress=got.append))
    await wait_for(lambda: got or call.done(), "the call's first progress chunk", timeout=30)
    return call


async def test_e2b_a_session_carries_calls_progress_cancel_and_a_resume(
    envd: Envd, e2b_client: mcpgw.AsyncClient
) -> None:
    client = e2b_client
    installed = await client.ensure_gateway_binary(str(STATIC_GATEWAY))
    assert installed["uploaded"] and installed["path"] == GATEWAY_IN_SANDBOX
    hello = await client.open_session()
    assert hello["launched"]
    await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
    names = {t["name"] for t in await client.list_tools("ts")}
    assert {"echo", "slow"} <= names
    big = "e2b " * 50_000
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
    await wait_for(lambda: envd.docker_exec("cat", "/tmp/cancelled").stdout == "cancelled", "the cancel marker", 30)

    # The channel's process killed in the sandbox mid-call: the driver opens another through the
    # SDK and the call resumes on it, every progress chunk once.
    if hello.get("retention_ms"):
        got = []
        call = await _started(client, got, {"seconds": 2, "steps": 4})
        assert envd.kill_attach()
        last = await call
        assert last["is_last"]
        steps = {p["progress"] for p in map(mcpgw.progress_of, got) if p}
        assert len(got) == 4 and len(steps) == 4, got

    # The sandbox killed under a call: the SDK's failure, read by the library's rules for E2B.
    got = []
    call = await _started(client, got, {"seconds": 30, "steps": 30})
    envd.kill()
    with pytest.raises((mcpgw.BackendError, mcpgw.SessionLostError)) as e:
        await call
    with pytest.raises(mcpgw.BackendError) as e:
        await client.call_tool("ts", "echo", {"text": "anyone?"})
    assert e.value.backend == "e2b" and e.value.state == "unreachable", e.value
    assert "SandboxUnreachableException" in e.value.reason, e.value


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
