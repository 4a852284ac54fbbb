"""The official MCP Python SDK's ClientSession over a virtual MCP connection
(`mcpgw_client.sdk.client_streams`), through a real gateway in a local sandbox: the project's
test server (handshake, tools, progress, list changes, a server that dies), server-everything
for the server's own requests (sampling, elicitation and roots answered by the SDK's
callbacks), closing, and bad input."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

import mcpgw_client as mcpgw
from conftest import GATEWAY, REPO, gateway_has_attach, skip, ts_spec, wait_file, wait_for
from mcpgw_client.sdk import client_streams
from test_session import channel_pids

EVERYTHING_JS = REPO / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
ANSWERS = {
    "sampling": {"role": "assistant", "model": "m", "content": {"type": "text", "text": "sampled by the host"}},
    "elicitation": {"action": "decline"},
    "roots": {"roots": [{"uri": "file:///work", "name": "work"}]},
}


def answering(asked: list[str], elicited: dict[str, Any]) -> dict[str, Any]:
    """ClientSession's callbacks for the server's requests: sampling and roots answered from
    ANSWERS, elicitation with `elicited`; each question noted in `asked` ("sampling: TEXT",
    "elicitation: MESSAGE", "roots")."""

    async def sampling(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(f"sampling: {params.messages[0].content.text}")  # type: ignore[union-attr]
        return types.CreateMessageResult.model_validate(ANSWERS["sampling"])

    async def elicitation(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"elicitation: {params.message}")
        return types.ElicitResult.model_validate(elicited)

    async def roots(_ctx: Any) -> types.ListRootsResult:
        asked.append("roots")
        return types.ListRootsResult.model_validate(ANSWERS["roots"])

    return {"sampling_callback": sampling, "elicitation_callback": elicitation, "list_roots_callback": roots}


@pytest.fixture
async def client(sandbox_dir: Path) -> AsyncIterator[mcpgw.AsyncClient]:
    """A client whose session launched its gateway in a local sandbox, the test server
    registered as `ts`; every task the test started must be gone by its end."""
    if not gateway_has_attach():
        skip(f"{GATEWAY} has no `attach` subcommand (the session channel's gateway side)")
    client = mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "state")
    )
    try:
        await client.open_session()
        await client.add_mcp(ts_spec())
        yield client
    finally:
        await client.stop_gateway()
        await client.aclose()
    left = [t for t in asyncio.all_tasks() if t.get_name().startswith("mcpgw_client.sdk")]
    assert not left, f"tasks of the transport outlived it: {left}"


async def test_the_sdk_session_over_a_connection(client: mcpgw.AsyncClient) -> None:
    notes: list[Any] = []

    async def note(message: Any) -> None:
        notes.append(message)

    async with client_streams(client, "ts") as (read, write), ClientSession(read, write, message_handler=note) as s:
        init = await s.initialize()
        assert init.server_info.name == "mcpgw-testserver"
        assert init.capabilities.tools is not None and init.capabilities.tools.list_changed
        names = {t.name for t in (await s.list_tools()).tools}
        assert {"echo", "add", "slow", "change_tools"} <= names and "extra" not in names
        echoed = await s.call_tool("echo", {"text": "through the SDK"})
        assert echoed.content == [types.TextContent(type="text", text="through the SDK")]
        assert (await s.call_tool("add", {"a": 2, "b": 3})).structured_content == {"sum": 5, "product": 6}
        big = await s.call_tool("big", {"bytes": 3 << 20})
        assert big.content == [types.TextContent(type="text", text=("0123456789abcdef" * (3 << 16)))]
        assert (await s.call_tool("garbage", {})).content == [types.TextContent(type="text", text="ok after garbage")]
        failed = await s.call_tool("fail", {"message": "on purpose"})
        assert failed.is_error and failed.content == [types.TextContent(type="text", text="on purpose")]

        progress: list[float] = []

        async def on_progress(done: float, _total: float | None, _message: str | None) -> None:
            progress.append(done)

        slow = await s.call_tool("slow", {"seconds": 0.3, "steps": 3}, progress_callback=on_progress)
        assert slow.content == [types.TextContent(type="text", text="done after 3 steps")]
        # The last step's progress comes back to back with the answer (see tests/clients).
        assert progress[:2] == [1.0, 2.0]

        await s.call_tool("change_tools", {})
        await wait_for(lambda: any(isinstance(n, types.ToolListChangedNotification) for n in notes), "list_changed")
        assert "extra" in {t.name for t in (await s.list_tools()).tools}
        assert (await s.call_tool("extra", {})).content == [types.TextContent(type="text", text="extra")]
        assert await s.send_ping() is not None
    # The connection is closed, not the session: it carries the next operation and connection.
    assert client.state["session"] == "open"
    assert mcpgw.text_of(await client.call_tool("ts", "echo", {"text": "still open"})) == "still open"
    async with client_streams(client, "ts") as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        assert (await s.call_tool("echo", {"text": "again"})).content[0] == types.TextContent(type="text", text="again")
    assert not [n for n in notes if isinstance(n, Exception)], notes


async def test_closing_the_write_stream_closes_the_connection(client: mcpgw.AsyncClient, sandbox_dir: Path) -> None:
    marker = sandbox_dir / "cancelled"

    def message(**fields: Any) -> SessionMessage:
        return SessionMessage(types.jsonrpc_message_adapter.validate_python({"jsonrpc": "2.0", **fields}))

    async with client_streams(client, "ts") as (read, write):
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        await write.send(message(id=1, method="initialize", params=init))
        answer = (await read.receive()).message  # type: ignore[union-attr]
        assert isinstance(answer, types.JSONRPCResponse) and answer.id == 1
        await write.send(message(method="notifications/initialized"))
        arguments = {"seconds": 30, "steps": 30, "cancel_marker": str(marker)}
        call = {"name": "slow", "arguments": arguments, "_meta": {"progressToken": "p"}}
        await write.send(message(id=2, method="tools/call", params=call))
        first = (await read.receive()).message  # type: ignore[union-attr]
        assert isinstance(first, types.JSONRPCNotification) and first.method == "notifications/progress"
        # What ClientSession does when it ends: the connection ends, and with it the call upstream.
        await write.aclose()
        assert await wait_file(marker) == "cancelled"
        with pytest.raises(anyio.EndOfStream):
            while True:
                await read.receive()
    # After the context, both streams are closed: a send fails at once.
    with pytest.raises(anyio.ClosedResourceError):
        await write.send(message(method="notifications/initialized"))
    with pytest.raises(anyio.ClosedResourceError):
        await read.receive()


async def test_a_connection_lost_under_the_session(client: mcpgw.AsyncClient) -> None:
    notes: list[Any] = []

    async def note(message: Any) -> None:
        notes.append(message)

    async with client_streams(client, "ts") as (read, write), ClientSession(read, write, message_handler=note) as s:
        await s.initialize()
        # The server exits under a call: the call fails, then the connection ends, saying why.
        with pytest.raises(MCPError, match="ended"):
            await s.call_tool("crash", {"message": "gone"})
        lost = await wait_for(lambda: [n for n in notes if isinstance(n, Exception)], "the reason")
        assert isinstance(lost[0], mcpgw.UpstreamError) and "the connection to ts ended" in str(lost[0])
        # The SDK's own error for what is sent after, not a hang.
        with pytest.raises(MCPError, match="Connection closed") as e:
            await s.call_tool("echo", {"text": "after"})
        assert e.value.error.code == types.CONNECTION_CLOSED


async def test_a_lost_channel_ends_the_connection(client: mcpgw.AsyncClient, sandbox_dir: Path) -> None:
    notes: list[Any] = []

    async def note(message: Any) -> None:
        notes.append(message)

    async with client_streams(client, "ts") as (read, write), ClientSession(read, write, message_handler=note) as s:
        await s.initialize()
        reported = asyncio.Event()

        async def on_progress(_done: float, _total: float | None, _message: str | None) -> None:
            reported.set()

        call = asyncio.ensure_future(s.call_tool("slow", {"seconds": 30, "steps": 300}, progress_callback=on_progress))
        await asyncio.wait_for(reported.wait(), 10)
        [attach] = channel_pids(sandbox_dir)
        os.kill(attach, signal.SIGKILL)
        with pytest.raises(MCPError, match="Connection closed"):
            await call
        lost = await wait_for(lambda: [n for n in notes if isinstance(n, Exception)], "the reason")
        assert isinstance(lost[0], mcpgw.SessionLostError), lost
        assert str(lost[0]).startswith("the connection to ts ended: "), lost
    # The client opens its channel again; a new connection works on it.
    async with client_streams(client, "ts") as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        assert (await s.call_tool("echo", {"text": "back"})).content[0] == types.TextContent(type="text", text="back")


async def test_the_servers_requests_answered_by_the_sdk(client: mcpgw.AsyncClient) -> None:
    if not EVERYTHING_JS.is_file() or not shutil.which("node"):
        pytest.fail(f"{EVERYTHING_JS} or node is missing: run `make deps` (make test does)")
    everything = {"type": "stdio_mcp", "command": "node", "args": [str(EVERYTHING_JS), "stdio"]}
    await client.add_mcp({"name": "ev", "is_stateful": True, "mcp_config": everything})
    asked: list[str] = []
    async with (
        client_streams(client, "ev") as (read, write),
        ClientSession(read, write, **answering(asked, ANSWERS["elicitation"])) as s,
    ):
        init = await s.initialize()
        assert init.server_info.name == "mcp-servers/everything"

        async def conditional_tools() -> bool:
            return "trigger-sampling-request" in {t.name for t in (await s.list_tools()).tools}

        await wait_for(conditional_tools, "the tools a client with sampling gets")
        sampled = await s.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 10})
        assert "sampled by the host" in str(sampled.content), sampled
        rooted = await s.call_tool("get-roots-list", {})
        assert "file:///work" in str(rooted.content), rooted
        elicited = await s.call_tool("trigger-elicitation-request", {})
        assert "decline" in str(elicited.content).lower(), elicited
    elicited, *others = sorted(asked)
    assert elicited.startswith("elicitation: ") and others == [
        "roots",
        "sampling: Resource trigger-sampling-request context: hello",
    ], asked


async def test_a_multi_round_trip_tool_answered_by_the_sdks_callbacks(client: mcpgw.AsyncClient) -> None:
    """The test server's `confirm`, a 2026-07-28 multi round-trip request, for an SDK session of
    an older revision on a server of 2026-07-28 alone: the gateway asks the SDK each input
    request as a 2025 server would. (A server of both revisions answers such a session itself,
    as it would straight.)"""
    modern = ts_spec("ts26")
    modern["mcp_config"]["env"] = {"MCPGW_TEST_PROTOCOLS": "2026-07-28"}
    await client.add_mcp(modern)
    asked: list[str] = []
    async with (
        client_streams(client, "ts26") as (read, write),
        ClientSession(read, write, **answering(asked, {"action": "accept", "content": {"ok": True}})) as s,
    ):
        await s.initialize()
        result = await s.call_tool("confirm", {"action": "deploy"})
    assert not result.is_error, result
    assert result.structured_content == {
        "action": "deploy",
        "confirmed": True,
        "answer": {"ok": True},
        "summary": "sampled by the host",
        "roots": ["file:///work"],
    }
    assert asked == ["elicitation: Run deploy?", "sampling: Say in a few words what deploy does.", "roots"]


async def test_bad_input_fails_with_the_bindings_errors(client: mcpgw.AsyncClient, sandbox_dir: Path) -> None:
    with pytest.raises(mcpgw.NotFoundError, match="cannot connect to nope") as e:
        async with client_streams(client, "nope"):
            pass
    assert e.value.status == 404
    with pytest.raises(mcpgw.InvalidArgumentError, match="NUL"):
        async with client_streams(client, "t\0s"):
            pass
    with pytest.raises(mcpgw.InvalidArgumentError, match="AsyncClient"):
        async with client_streams(object(), "ts"):  # type: ignore[arg-type]
            pass
    # The client's session carries connections: none without it, none once it is closed.
    without = mcpgw.AsyncClient(mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY))
    with pytest.raises(mcpgw.InvalidStateError, match="open a session first"):
        async with client_streams(without, "ts"):
            pass
    await without.aclose()
    with pytest.raises(mcpgw.InvalidStateError, match="the client is closed"):
        async with client_streams(without, "ts"):
            pass
    # The session still works after each.
    async with client_streams(client, "ts") as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        assert (await s.call_tool("echo", {"text": "fine"})).content[0] == types.TextContent(type="text", text="fine")


def test_the_binding_imports_without_the_sdk() -> None:
    # `mcp` made unimportable in a fresh interpreter: the core loads, the transport says what it needs.
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "import mcpgw_client\n"
        "try:\n    import mcpgw_client.sdk\nexcept ImportError as e:\n    print(e)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "bindings/python/src")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "mcpgw_client.sdk needs the official MCP SDK, mcp 2.x" in r.stdout, r.stdout


async def test_the_hosts_policy_and_secrets_hold_on_the_sdk_transport(sandbox_dir: Path) -> None:
    """The official SDK's session over the binding's transport meets the host's rules: what
    the policy denies is not listed and its call is a JSON-RPC error naming the rule; a secret
    the client's function resolves comes back as its name."""
    if not gateway_has_attach():
        skip(f"{GATEWAY} has no `attach` subcommand (the session channel's gateway side)")
    value = "sdk-secret-" + os.urandom(8).hex()
    records: list[dict[str, Any]] = []
    client = mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)),
        gateway_path=str(GATEWAY),
        state_dir=str(sandbox_dir / "state"),
        policy={"servers": {"ts": {"tools": {"deny": ["crash", "fail"]}}}},
        audit=records.append,
        secrets={"MCPGW_SDK_KEY": value}.get,  # type: ignore[typeddict-item]
    )
    try:
        await client.open_session()
        spec = ts_spec()
        spec["mcp_config"]["env"] = {"MCPGW_TEST_KEY": {"secret": "MCPGW_OTHER_KEY"}}
        with pytest.raises(mcpgw.InvalidArgumentError, match="no text for secret 'MCPGW_OTHER_KEY'"):
            await client.add_mcp(spec)
        spec["mcp_config"]["env"] = {"MCPGW_TEST_KEY": {"secret": "MCPGW_SDK_KEY"}}
        await client.add_mcp(spec)
        async with client_streams(client, "ts") as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = {t.name for t in (await s.list_tools()).tools}
            assert "echo" in names and not names & {"crash", "fail"}, names
            with pytest.raises(MCPError) as e:
                await s.call_tool("fail", {"message": "x"})
            assert e.value.error.code == -32003
            assert 'servers."ts".tools.deny: "fail"' in e.value.error.message
            info = await s.call_tool("info", {})
            shown = info.model_dump_json()
            assert value not in shown and "[secret:MCPGW_SDK_KEY]" in shown, shown
        assert [(r["name"], r["outcome"], r["via"]) for r in records] == [
            ("fail", "denied", "connection"),
            ("info", "ok", "connection"),
        ], records
    finally:
        await client.stop_gateway()
        await client.aclose()
