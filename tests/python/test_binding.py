"""The binding end to end through a local sandbox: a real gateway, the real test server."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from pathlib import Path

import pytest

import mcpgw_client as mcpgw
from conftest import GATEWAY, REPO, VERSION, Gateway, RecordingExec, processes_mentioning, ts_spec, wait_file, wait_for
from mcpgw_client import errors


def test_library_and_error_classes_come_from_the_library() -> None:
    header = (REPO / "include" / "mcpgw.h").read_text()
    assert mcpgw.__version__ == VERSION
    assert mcpgw.library_version().split(".")[:2] == VERSION.split(".")[:2]
    abi = re.search(r"#define MCPGW_ABI_VERSION (\d+)", header)
    assert abi and mcpgw.lib.mcpgw_abi_version() == mcpgw.ABI_VERSION == int(abi.group(1))
    # Every MCPGW_RESULT_ code of the header has its class, named by the rule, with its value.
    codes = dict(re.findall(r"MCPGW_RESULT_([A-Z_]+) = (\d+)", header))
    assert codes["OK"] == "7000" and len(codes) >= 18
    for name, value in codes.items():
        assert mcpgw.RESULT[name] == int(value)
        if name == "OK":
            continue
        cls = getattr(mcpgw, errors.class_name(name))
        assert issubclass(cls, mcpgw.McpgwError)
        assert cls.code == name and cls.result == int(value)
        assert mcpgw.error_class(name) is cls is mcpgw.error_class(int(value))
    assert issubclass(mcpgw.DeadlineError, TimeoutError)
    assert issubclass(mcpgw.InvalidArgumentError, ValueError)
    assert mcpgw.SessionLostError.__doc__ and "SESSION_LOST" in mcpgw.SessionLostError.__doc__
    with pytest.raises(AttributeError):
        _ = mcpgw.NoSuchThingError


async def test_tool_calls_round_trip_the_wire_json(gateway: Gateway) -> None:
    client = gateway.client
    health = await client.health()
    assert health["status"] == "ok" and len(health["instance_nonce"]) > 0
    assert client.port > 0

    text = "héllo 'quoted' $(not run) `nor this` \"and\" \\ \n new line"
    chunk = await client.call_tool("ts", "echo", {"text": text})
    assert chunk["state"] == "running" and chunk["is_last"] is True
    assert chunk["content"][0]["type"] == "text" and chunk["content"][0]["text"] == text
    assert re.fullmatch(r"[0-9a-f]{32}", chunk["id"])
    assert mcpgw.text_of(chunk) == text

    chunk = await client.call_tool("ts", "add", {"a": 2, "b": 40})
    assert chunk["metadata"]["structured_content"] == {"sum": 42, "product": 80}

    chunk = await client.call_tool("ts", "media")
    kinds = [(b["type"], b["source"]["type"] if b["type"] == "data" else None) for b in chunk["content"]]
    assert kinds == [("data", "base64"), ("data", "base64"), ("text", None), ("data", "base64"), ("data", "url")]
    png = mcpgw.block_bytes(chunk["content"][0])
    assert png.startswith(b"\x89PNG") and chunk["content"][0]["source"]["media_type"] == "image/png"
    assert mcpgw.block_bytes(chunk["content"][3]) == bytes(range(256))
    link = chunk["content"][4]
    assert (
        link["type"] == "data" and link["source"]["type"] == "url" and link["source"]["url"] == "test://resource/link"
    )
    # The chunk is the wire JSON: it survives a JSON round trip unchanged.
    assert json.loads(json.dumps(chunk)) == chunk
    assert base64.b64decode(chunk["content"][1]["source"]["data"])[:4] == b"RIFF"

    chunk = await client.call_tool("ts", "fail", {"message": "broken on purpose"})
    assert chunk["state"] == "error" and chunk["content"][0]["text"] == "broken on purpose"

    tools = await client.list_tools("ts")
    names = {t["name"] for t in tools}
    assert {"echo", "add", "media", "fail", "slow"} <= names
    add = next(t for t in tools if t["name"] == "add")
    assert "inputSchema" in add and "outputSchema" in add

    listed = await client.list_mcps()
    assert [m["name"] for m in listed] == ["ts"]
    assert listed[0]["status"]["state"] == "connected" and listed[0]["status"]["calls"] >= 4


async def test_failures_raise_typed_errors(gateway: Gateway) -> None:
    client = gateway.client
    with pytest.raises(mcpgw.NotFoundError) as e:
        await client.call_tool("ts", "nope", {})
    assert e.value.status == 404 and e.value.code == "NOT_FOUND" and "nope" in (e.value.detail or "")
    with pytest.raises(mcpgw.NotFoundError):
        await client.list_tools("missing")
    with pytest.raises(mcpgw.ConflictError) as c:
        await client.add_mcp(ts_spec())
    assert c.value.status == 409
    # Only HTTP upstreams take runtime headers: the gateway says 400.
    with pytest.raises(mcpgw.InvalidArgumentError) as i:
        await client.set_runtime_headers("ts", {"a": "b"})
    assert i.value.status == 400
    # Checked by the library before any command.
    with pytest.raises(mcpgw.InvalidArgumentError):
        await client.call_tool("bad name!", "echo", {})
    with pytest.raises(mcpgw.InvalidArgumentError):
        await client.call_tool("ts", "echo\0", {})
    # A deadline: the gateway stops the call (504) and it is a TimeoutError too.
    with pytest.raises(TimeoutError) as d:
        await client.call_tool("ts", "slow", {"seconds": 30}, timeout=0.5)
    assert isinstance(d.value, mcpgw.DeadlineError) and d.value.status == 504
    # The client still works.
    assert (await client.call_tool("ts", "echo", {"text": "ok"}))["content"][0]["text"] == "ok"


async def calls_of(client: mcpgw.AsyncClient, mcp: str = "ts") -> int:
    return int(next(m for m in await client.list_mcps() if m["name"] == mcp)["status"]["calls"])


@pytest.mark.parametrize("how", ["task.cancel", "asyncio.timeout"])
async def test_cancellation_frees_the_op_and_cancels_upstream(gateway: Gateway, sandbox_dir: Path, how: str) -> None:
    client = gateway.client
    marker = sandbox_dir / f"cancelled-{how}"
    before = await calls_of(client)
    call = client.call_tool("ts", "slow", {"seconds": 30, "steps": 300, "cancel_marker": str(marker)})
    if how == "task.cancel":
        task = asyncio.ensure_future(call)
        # The call is under way in the gateway once its call counter moved.
        await wait_for(lambda: _moved(client, before), "the gateway to start the call")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:

        async def call_within_a_timeout() -> None:
            async with asyncio.timeout(None) as limit:
                waiter = asyncio.ensure_future(wait_for(lambda: _moved(client, before), "the call to start"))
                # Once the gateway runs the call, the timeout expires at once.
                waiter.add_done_callback(lambda _: limit.reschedule(asyncio.get_running_loop().time()))
                try:
                    await call
                finally:
                    waiter.cancel()

        with pytest.raises(TimeoutError):
            await call_within_a_timeout()
    # Killing the request's process closed its connection: the gateway cancelled upstream.
    assert await wait_file(marker) == "cancelled"
    assert not processes_mentioning(str(marker)), "no process of the cancelled call is left"
    assert (await client.call_tool("ts", "echo", {"text": "still here"}))["content"][0]["text"] == "still here"


async def _moved(client: mcpgw.AsyncClient, before: int) -> bool:
    return await calls_of(client) > before


async def test_concurrent_calls_each_get_their_answer(gateway: Gateway) -> None:
    client = gateway.client
    answers = await asyncio.gather(
        *(
            client.call_tool("ts", "add", {"a": i, "b": 1000})
            if i % 2
            else client.call_tool("ts", "echo", {"text": f"request {i}"})
            for i in range(24)
        )
    )
    for i, chunk in enumerate(answers):
        if i % 2:
            assert chunk["metadata"]["structured_content"]["sum"] == i + 1000
        else:
            assert chunk["content"][0]["text"] == f"request {i}"


async def test_scopes_are_separate(gateway: Gateway) -> None:
    client = gateway.client
    await client.add_mcp(ts_spec("ts"), agent_id="a1", session_id="s1")
    assert [m["name"] for m in await client.list_mcps(agent_id="a1", session_id="s1")] == ["ts"]
    chunk = await client.call_tool("ts", "echo", {"text": "scoped"}, agent_id="a1", session_id="s1")
    assert chunk["content"][0]["text"] == "scoped"
    await client.remove_mcp("ts", agent_id="a1", session_id="s1")
    assert await client.list_mcps(agent_id="a1", session_id="s1") == []
    assert [m["name"] for m in await client.list_mcps()] == ["ts"]


async def test_large_bodies_travel_on_stdin_in_one_command(gateway: Gateway) -> None:
    client, exec = gateway.client, gateway.exec
    text = "x" * (300 * 1024)
    before = len(exec.commands)
    chunk = await client.call_tool("ts", "echo", {"text": text})
    assert chunk["content"][0]["text"] == text
    assert len(exec.commands) - before == 1, "the body went on stdin, not in staged pieces"
    # The same through an exec that does not declare stdin: staged in pieces under 128 KiB each.
    staged = RecordingExec(exec.cwd or ".")
    other = mcpgw.AsyncClient(staged, exec_stdin=False, port=client.port, token_file=gateway.info["token_file"])
    try:
        chunk = await other.call_tool("ts", "echo", {"text": text})
        assert chunk["content"][0]["text"] == text
        assert len(staged.commands) > 2
        assert max(len(c) for c in staged.commands) < 128 * 1024
    finally:
        await other.aclose()


async def test_plain_function_execs_and_exec_failures(sandbox_dir: Path) -> None:
    local = mcpgw.LocalExec(cwd=str(sandbox_dir))
    seen: list[str] = []

    def blocking_exec(command: str, timeout: float, stdin: bytes | None) -> mcpgw.ExecResult:
        seen.append(command)
        return local.run_sync(command, timeout, stdin)

    client = mcpgw.AsyncClient(
        blocking_exec, exec_stdin=True, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "st")
    )
    try:
        await client.start_gateway()
        await client.add_mcp(ts_spec())
        assert (await client.call_tool("ts", "echo", {"text": "from a thread"}))["content"][0][
            "text"
        ] == "from a thread"
        assert seen
        await client.stop_gateway()
    finally:
        await client.aclose()

    async def gone(command: str, timeout: float, stdin: bytes | None) -> mcpgw.ExecResult:
        raise mcpgw.ExecFailure("the sandbox is gone")

    async with mcpgw.AsyncClient(gone, port=1, token_file="/nonexistent/token") as c:
        with pytest.raises(mcpgw.ExecFailedError) as e:
            await c.health()
        assert "the sandbox is gone" in str(e.value)
        assert isinstance(e.value.__cause__, mcpgw.ExecFailure)

    async def garbage(command: str, timeout: float, stdin: bytes | None) -> object:
        return {"exit": 0}

    async with mcpgw.AsyncClient(garbage, port=1, token_file="/t") as c:  # type: ignore[arg-type]
        with pytest.raises(mcpgw.ExecFailedError) as e:
            await c.health()
        assert isinstance(e.value.__cause__, TypeError)

    closed = mcpgw.AsyncClient(local, port=1, token_file="/t")
    await closed.aclose()
    await closed.aclose()
    with pytest.raises(mcpgw.InvalidStateError):
        await closed.health()


def test_blocking_client(sandbox_dir: Path) -> None:
    with mcpgw.Client(
        mcpgw.LocalExec(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "b")
    ) as client:
        info = client.start_gateway()
        assert info["port"] == client.port > 0 and Path(info["token_file"]).stat().st_mode & 0o777 == 0o600
        client.add_mcp(ts_spec())
        assert client.call_tool("ts", "echo", {"text": "blocking"})["content"][0]["text"] == "blocking"
        with pytest.raises(mcpgw.NotFoundError):
            client.call_tool("ts", "nope")
        with pytest.raises(mcpgw.DeadlineError):
            client.call_tool("ts", "slow", {"seconds": 30}, timeout=0.3)
        client.stop_gateway()
        with pytest.raises(mcpgw.GatewayNotRunningError):
            client.health(timeout=5)


async def test_ensure_gateway_binary_uploads_once(sandbox_dir: Path, gateway_to_install: Path) -> None:
    target = sandbox_dir / "bin" / "mcpgw-gateway"
    exec = RecordingExec(str(sandbox_dir))
    async with mcpgw.AsyncClient(exec, gateway_path=str(target), state_dir=str(sandbox_dir / "st")) as client:
        first = await client.ensure_gateway_binary(str(gateway_to_install))
        assert first["uploaded"] is True and first["path"] == str(target)
        assert target.read_bytes() == gateway_to_install.read_bytes()
        uploads = len(exec.commands)
        assert uploads <= 3, "the binary travelled on stdin in one command"
        second = await client.ensure_gateway_binary(str(gateway_to_install))
        assert second["uploaded"] is False and second["sha256"] == first["sha256"]
        # The installed binary runs the gateway.
        await client.start_gateway()
        await client.add_mcp(ts_spec())
        assert (await client.call_tool("ts", "echo", {"text": "installed"}))["content"][0]["text"] == "installed"
        await client.stop_gateway()
