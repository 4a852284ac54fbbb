"""The session channel: one long-lived `mcpgw-gateway attach` per sandbox carrying every REST
operation, with live progress and cancel frames, reopened when it is lost; through a local
sandbox, Docker and podman, with the async and the blocking client."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import mcpgw_client as mcpgw
from conftest import (
    GATEWAY,
    IMAGE_TESTSERVER,
    Container,
    RecordingShell,
    gateway_has_attach,
    processes_mentioning,
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
async def attached(sandbox_dir: Path) -> AsyncIterator[mcpgw.AsyncClient]:
    """A client whose session launched its gateway, with the test server registered."""
    reason = attach_reason()
    if reason:
        skip(reason)
    client = mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state")
    )
    try:
        # No gateway is known: `attach --launch` starts one, in the same exec.
        hello = await client.open_session()
        assert hello["launched"] is True and hello["port"] == client.port > 0
        assert client.state["session"] == "open"
        await client.add_mcp(ts_spec())
        yield client
    finally:
        await client.close_session()
        await client.stop_gateway()
        await client.aclose()


def channel_pids(sandbox_dir: Path) -> list[int]:
    """The attach processes of the session whose state directory is in `sandbox_dir`."""
    return [p for p in processes_mentioning(str(sandbox_dir / "state")) if b"attach" in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


async def call_under_way(
    client: mcpgw.AsyncClient, arguments: dict[str, object], timeout: float = 10
) -> asyncio.Future[mcpgw.ToolChunk]:
    """A call of the slow tool over the session, returned once its first progress came."""
    progress = asyncio.Event()
    call = asyncio.ensure_future(client.call_tool("ts", "slow", arguments, on_progress=lambda _: progress.set()))
    await asyncio.wait_for(progress.wait(), timeout)
    return call


async def test_every_operation_goes_over_the_session(sandbox_dir: Path) -> None:
    reason = attach_reason()
    if reason:
        skip(reason)
    shell = RecordingShell(str(sandbox_dir))
    async with mcpgw.AsyncClient(
        shell.backend(), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "st")
    ) as client:
        await client.open_session()
        assert shell.commands == [], "the channel launched the gateway: no one-shot command"
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
        assert shell.commands == [], "no one-shot command ran while the session was open"
        await client.close_session()
        assert client.state["session"] == "off"
        await client.stop_gateway()
        assert len(shell.commands) >= 1, "after the session, operations are one-shot again"


async def test_progress_streams_as_it_arrives(attached: mcpgw.AsyncClient) -> None:
    client = attached
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


async def test_cancel_sends_a_cancel_frame(attached: mcpgw.AsyncClient, sandbox_dir: Path) -> None:
    client = attached
    marker = sandbox_dir / "cancelled"
    task = await call_under_way(client, {"seconds": 30, "steps": 300, "cancel_marker": str(marker)})
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_file(marker) == "cancelled"
    # Leaving a stream early cancels too.
    marker2 = sandbox_dir / "cancelled-stream"
    stream = client.call_tool_stream("ts", "slow", {"seconds": 30, "steps": 300, "cancel_marker": str(marker2)})
    async for chunk in stream:
        assert not chunk["is_last"]
        break
    await stream.aclose()
    assert await wait_file(marker2) == "cancelled"
    assert (await client.call_tool("ts", "echo", {"text": "after"}))["content"][0]["text"] == "after"


async def test_a_lost_channel_fails_what_it_carried_and_is_opened_again(
    attached: mcpgw.AsyncClient, sandbox_dir: Path
) -> None:
    client = attached
    [first] = channel_pids(sandbox_dir)
    call = await call_under_way(client, {"seconds": 30, "steps": 300})
    os.kill(first, signal.SIGKILL)
    hello = client.state["hello"]
    assert hello is not None
    if hello["retention_ms"] == 0:
        # This attach keeps no call's outcome: the call cannot be resumed, and says so.
        with pytest.raises(mcpgw.SessionLostError):
            await call
    else:
        call.cancel()
    # The session was opened again (a new attach), and carries what follows.
    chunk = await client.call_tool("ts", "echo", {"text": "on the new channel"})
    assert chunk["content"][0]["text"] == "on the new channel"
    assert client.state["session"] == "open"
    assert first not in channel_pids(sandbox_dir) and len(channel_pids(sandbox_dir)) == 1


async def test_without_reopen_a_lost_session_goes_one_shot(sandbox_dir: Path) -> None:
    reason = attach_reason()
    if reason:
        skip(reason)
    async with mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state"), reopen=False
    ) as client:
        await client.open_session()
        await client.add_mcp(ts_spec())
        [pid] = channel_pids(sandbox_dir)
        call = await call_under_way(client, {"seconds": 30, "steps": 300})
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(mcpgw.SessionLostError):
            await call
        assert client.state["session"] == "off"
        # The gateway lives on: the client goes on with one command per call.
        chunk = await client.call_tool("ts", "echo", {"text": "one-shot again"})
        assert chunk["content"][0]["text"] == "one-shot again"
        await client.stop_gateway()


async def test_attach_to_a_launched_gateway(sandbox_dir: Path) -> None:
    reason = attach_reason()
    if reason:
        skip(reason)
    local = mcpgw.local(cwd=str(sandbox_dir))
    async with mcpgw.AsyncClient(local, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "st")) as client:
        info = await client.start_gateway()
        await client.add_mcp(ts_spec())
        hello = await client.open_session()
        assert hello["launched"] is False and hello["port"] == info["port"]
        assert hello["instance_nonce"] == info["instance_nonce"]
        assert (await client.call_tool("ts", "echo", {"text": "relayed"}))["content"][0]["text"] == "relayed"
        # Opening it again is the session already open.
        assert (await client.open_session())["pid"] == hello["pid"]
        # Until the gateway side carries virtual connections, attach refuses them: the
        # connection ends with its reason.
        conn = await client.connect("ts")
        if conn.closed:
            assert conn.reason and [m async for m in conn] == []
            with pytest.raises(mcpgw.InvalidStateError, match="ended"):
                await conn.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        else:
            await conn.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert (await conn.receive() or {}).get("id") == 1
            await conn.close()
        await client.close_session()
        with pytest.raises(mcpgw.InvalidStateError, match="session"):
            await client.connect("ts")
        await client.stop_gateway()


def blocking_session(sandbox_dir: Path) -> mcpgw.Client:
    """A blocking client whose session launched its gateway, with the test server registered."""
    reason = attach_reason()
    if reason:
        skip(reason)
    local = mcpgw.local(cwd=str(sandbox_dir))
    client = mcpgw.Client(local, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state"))
    assert client.open_session()["launched"] is True
    client.add_mcp(ts_spec())
    return client


def test_blocking_client_sessions(sandbox_dir: Path) -> None:
    with blocking_session(sandbox_dir) as client:
        chunks = list(client.call_tool_stream("ts", "slow", {"seconds": 0.3, "steps": 3}))
        assert [c["is_last"] for c in chunks] == [False, False, False, True]
        got: list[mcpgw.ToolChunk] = []
        assert client.call_tool("ts", "slow", {"seconds": 0.2, "steps": 2}, on_progress=got.append)["is_last"]
        assert len(got) == 2
        client.close_session()
        client.stop_gateway()
    assert not channel_pids(sandbox_dir), "no attach is left"


# ── Docker and podman ─────────────────────────────────────────────


def _image_has_attach(container: Container) -> None:
    r = container.engine.cli("exec", container.name, "mcpgw-gateway", "--help")
    if "mcpgw-gateway attach" not in r.stdout + r.stderr:
        skip("the image's gateway has no `attach` subcommand (make static builds a newer one)")


async def test_session_through_a_container(any_container: Container) -> None:
    _image_has_attach(any_container)
    async with mcpgw.AsyncClient(any_container.backend) as client:
        hello = await client.open_session()
        assert hello["launched"] is True
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        got: list[mcpgw.ToolChunk] = []
        last = await client.call_tool("ts", "slow", {"seconds": 0.3, "steps": 3}, on_progress=got.append)
        assert len(got) == 3 and last["is_last"]
        answers = await asyncio.gather(*(client.call_tool("ts", "echo", {"text": f"n{i}"}) for i in range(16)))
        assert [a["content"][0]["text"] for a in answers] == [f"n{i}" for i in range(16)]
        # The container gone: what the channel carried fails as lost, and the next operation
        # says the backend's failure (the container is gone), not a lost session.
        call = await call_under_way(client, {"seconds": 30, "steps": 300}, timeout=30)
        any_container.remove()
        with pytest.raises(mcpgw.SessionLostError):
            await call
        with pytest.raises(mcpgw.BackendError) as e:
            await client.health()
        assert e.value.state == "gone" and e.value.backend == any_container.engine.name
        assert e.value.target == any_container.name and e.value.code == "EXEC_FAILED"


async def test_a_session_into_a_container_that_does_not_exist(any_container: Container) -> None:
    backend = any_container.engine.backend(f"{any_container.name}-missing")
    async with mcpgw.AsyncClient(backend) as client:
        with pytest.raises(mcpgw.BackendError) as e:
            await client.open_session()
        assert e.value.state == "gone" and "is the gateway binary" not in str(e.value)
        assert client.state["session"] == "off"


def test_blocking_client_session_through_docker(container: Container) -> None:
    _image_has_attach(container)
    with mcpgw.Client(container.backend) as client:
        assert client.open_session()["launched"] is True
        client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        chunks = list(client.call_tool_stream("ts", "slow", {"seconds": 0.3, "steps": 3}))
        assert len(chunks) == 4 and chunks[-1]["is_last"]
        assert client.call_tool("ts", "echo", {"text": "blocking session"})["content"][0]["text"] == "blocking session"
        client.close_session()
        assert client.call_tool("ts", "echo", {"text": "one-shot"})["content"][0]["text"] == "one-shot"


async def test_a_call_resumes_after_its_channel_is_killed(container: Container) -> None:
    _image_has_attach(container)
    async with mcpgw.AsyncClient(container.backend) as client:
        hello = await client.open_session()
        if not hello.get("retention_ms"):
            skip("this attach keeps no call's outcome (its hello announces retention_ms 0): no resume")
        await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
        got: list[mcpgw.ToolChunk] = []
        call = asyncio.ensure_future(client.call_tool("ts", "slow", {"seconds": 2, "steps": 4}, on_progress=got.append))
        await wait_for(lambda: got, "the first progress chunk")
        # Kill the `docker exec -i` carrying the channel (the host's side of it).
        [cli] = [p for p in processes_mentioning(container.name) if b"attach" in _cmdline(p)]
        os.kill(cli, signal.SIGKILL)
        last = await call
        assert last["is_last"]
        steps = [mcpgw.progress_of(c) for c in got]
        assert len(got) == 4 and len({p["progress"] for p in steps if p}) == 4, "every progress chunk once"


def test_a_blocking_call_from_the_clients_own_callback_is_refused(sandbox_dir: Path) -> None:
    with blocking_session(sandbox_dir) as client:
        refused: list[BaseException] = []

        def on_progress(_: mcpgw.ToolChunk) -> None:
            try:
                client.health()
            except mcpgw.InvalidStateError as e:
                refused.append(e)

        client.call_tool("ts", "slow", {"seconds": 0.1, "steps": 1}, on_progress=on_progress)
        assert refused and "wait for itself" in str(refused[0])
        client.close_session()
        client.stop_gateway()
