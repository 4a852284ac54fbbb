"""The session channel: one long-lived `mcpgw-gateway attach` per sandbox carrying every REST
operation, with live progress and cancel frames, through a local sandbox and Docker."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import mcpgw_client as mcpgw
from conftest import (
    GATEWAY,
    STATIC_GATEWAY,
    RecordingExec,
    docker,
    gateway_has_attach,
    skip,
    ts_spec,
    wait_file,
    wait_for,
)


def attach_reason() -> str | None:
    if not gateway_has_attach():
        return f"{GATEWAY} has no `attach` subcommand (the session channel's gateway side)"
    return None


@pytest.fixture
async def attached(sandbox_dir: Path) -> AsyncIterator[tuple[mcpgw.AsyncClient, RecordingExec]]:
    reason = attach_reason()
    if reason:
        skip(reason)
    exec = RecordingExec(str(sandbox_dir))
    client = mcpgw.AsyncClient(exec, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state"))
    try:
        # No gateway is known: `attach --launch` starts one, in the same exec.
        hello = await client.attach()
        assert hello["launched"] is True and hello["port"] == client.port > 0
        yield client, exec
    finally:
        await client.detach()
        await client.stop_gateway()
        await client.aclose()


async def test_every_method_goes_over_the_session(attached: tuple[mcpgw.AsyncClient, RecordingExec]) -> None:
    client, exec = attached
    before = len(exec.commands)
    await client.add_mcp(ts_spec())
    assert (await client.health())["status"] == "ok"
    assert [m["name"] for m in await client.list_mcps()] == ["ts"]
    assert "echo" in {t["name"] for t in await client.list_tools("ts")}
    chunk = await client.call_tool("ts", "echo", {"text": "over the channel"})
    assert chunk["content"][0]["text"] == "over the channel" and chunk["is_last"]
    with pytest.raises(mcpgw.NotFoundError) as e:
        await client.call_tool("ts", "nope")
    assert e.value.status == 404
    with pytest.raises(mcpgw.DeadlineError):
        await client.call_tool("ts", "slow", {"seconds": 30}, timeout=0.5)
    answers = await asyncio.gather(*(client.call_tool("ts", "add", {"a": i, "b": 1}) for i in range(32)))
    assert [a["metadata"]["structured_content"]["sum"] for a in answers] == [i + 1 for i in range(32)]
    await client.remove_mcp("ts")
    assert len(exec.commands) == before, "no one-shot command ran while attached"


async def test_progress_streams_as_it_arrives(attached: tuple[mcpgw.AsyncClient, RecordingExec]) -> None:
    client, _ = attached
    await client.add_mcp(ts_spec())
    seen: list[tuple[float, mcpgw.ToolChunk]] = []
    started = time.monotonic()
    async for chunk in client.call_tool_stream("ts", "slow", {"seconds": 1, "steps": 4}):
        seen.append((time.monotonic() - started, chunk))
    progress = [c for _, c in seen if not c["is_last"]]
    assert len(progress) == 4 and seen[-1][1]["is_last"]
    steps = [mcpgw.progress_of(c) for c in progress]
    assert all(steps) and [p["progress"] for p in steps if p] == sorted(p["progress"] for p in steps if p)
    # The first progress came well before the result: it was not buffered to the end.
    assert seen[0][0] < seen[-1][0] - 0.5
    # The same through on_progress.
    got: list[mcpgw.ToolChunk] = []
    last = await client.call_tool("ts", "slow", {"seconds": 0.2, "steps": 2}, on_progress=got.append)
    assert len(got) == 2 and last["is_last"]


async def test_cancel_sends_a_cancel_frame(
    attached: tuple[mcpgw.AsyncClient, RecordingExec], sandbox_dir: Path
) -> None:
    client, _ = attached
    await client.add_mcp(ts_spec())
    marker = sandbox_dir / "cancelled"
    first_progress = asyncio.Event()
    task = asyncio.ensure_future(
        client.call_tool(
            "ts",
            "slow",
            {"seconds": 30, "steps": 300, "cancel_marker": str(marker)},
            on_progress=lambda _: first_progress.set(),
        )
    )
    await asyncio.wait_for(first_progress.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_file(marker) == "cancelled"
    # Leaving a stream early cancels too.
    marker2 = sandbox_dir / "cancelled-stream"
    async for chunk in client.call_tool_stream(
        "ts", "slow", {"seconds": 30, "steps": 300, "cancel_marker": str(marker2)}
    ):
        assert not chunk["is_last"]
        break
    assert await wait_file(marker2) == "cancelled"
    assert (await client.call_tool("ts", "echo", {"text": "after"}))["content"][0]["text"] == "after"


async def test_a_lost_channel_fails_what_it_carried_and_one_shot_goes_on(
    attached: tuple[mcpgw.AsyncClient, RecordingExec],
) -> None:
    client, _ = attached
    await client.add_mcp(ts_spec())
    session = client.session
    assert session is not None
    call = asyncio.ensure_future(client.call_tool("ts", "slow", {"seconds": 30}))
    await wait_for(lambda: session._waiters, "the call to be written to the channel")
    channel = session._proc
    os.killpg(channel.pid, 9)
    with pytest.raises(mcpgw.SessionLostError):
        await call
    assert session.lost and client.session is None
    # The gateway lives on: the client falls back to one command per call.
    assert (await client.call_tool("ts", "echo", {"text": "one-shot again"}))["content"][0]["text"] == "one-shot again"


async def test_session_over_docker_exec(container: str) -> None:
    if not gateway_has_attach(STATIC_GATEWAY):
        skip(f"the image's gateway ({STATIC_GATEWAY}) has no `attach` subcommand")
    async with mcpgw.AsyncClient(mcpgw.DockerExec(container)) as client:
        hello = await client.attach()
        assert hello["launched"] is True
        await client.add_mcp(ts_spec(command="/usr/local/bin/mcpgw-testserver"))
        got: list[mcpgw.ToolChunk] = []
        last = await client.call_tool("ts", "slow", {"seconds": 0.3, "steps": 3}, on_progress=got.append)
        assert len(got) == 3 and last["is_last"]
        answers = await asyncio.gather(*(client.call_tool("ts", "echo", {"text": f"n{i}"}) for i in range(16)))
        assert [a["content"][0]["text"] for a in answers] == [f"n{i}" for i in range(16)]
        # The container gone: what the channel carried fails, and so does the next one-shot call.
        call = asyncio.ensure_future(client.call_tool("ts", "slow", {"seconds": 30}))
        session = client.session
        assert session is not None
        await wait_for(lambda: session._waiters, "the call to be written to the channel")
        assert docker("rm", "-f", container).returncode == 0
        with pytest.raises(mcpgw.SessionLostError):
            await call
        with pytest.raises(mcpgw.ExecFailedError):
            await client.health()


async def test_attach_to_a_launched_gateway(sandbox_dir: Path) -> None:
    reason = attach_reason()
    if reason:
        skip(reason)
    exec = RecordingExec(str(sandbox_dir))
    async with mcpgw.AsyncClient(exec, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "st")) as client:
        info = await client.start_gateway()
        await client.add_mcp(ts_spec())
        hello = await client.attach()
        assert hello["launched"] is False and hello["port"] == info["port"]
        assert hello["instance_nonce"] == info["instance_nonce"]
        assert (await client.call_tool("ts", "echo", {"text": "relayed"}))["content"][0]["text"] == "relayed"
        with pytest.raises(mcpgw.InvalidStateError):
            await client.attach()
        await client.detach()
        await client.stop_gateway()
