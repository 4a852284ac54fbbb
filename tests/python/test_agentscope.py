"""The AgentScope adapter against AgentScope 2.0.11 itself: its LocalBackend, its stock host
client side by side, and its real BubblewrapWorkspace driven through its own Toolkit."""

from __future__ import annotations

import asyncio
import json
import shlex
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import GATEWAY, TESTSERVER, gateway_has_attach, processes_mentioning, skip, ts_spec, wait_for

pytest.importorskip("agentscope", reason="AgentScope is not installed (make deps)")

from agentscope.mcp import MCPClient, StdioMCPConfig
from agentscope.message import ToolCallBlock, ToolResultState
from agentscope.state import AgentState
from agentscope.tool import Toolkit
from agentscope.tool._builtin._backend import LocalBackend
from agentscope.workspace import BubblewrapWorkspace, LocalWorkspace
from agentscope.workspace._gateway_client import GatewayClient as StockGatewayClient
from agentscope.workspace._gateway_client import GatewayMCPTool as StockGatewayMCPTool

import mcpgw_client as mcpgw
import mcpgw_client.agentscope._swap
from agentscope_support import bwrap_reason, cmdline, descendants
from mcpgw_client.agentscope import GatewayClient, GatewayMCPClient, bootstrap_commands, has_channel, use_mcpgw


@pytest.fixture
async def launched(tmp_path: Path) -> AsyncIterator[GatewayClient]:
    gc = await GatewayClient.launch(LocalBackend(), gateway_path=str(GATEWAY), state_dir=str(tmp_path / "gw"))
    try:
        yield gc
    finally:
        await gc.aclose()


async def test_the_adapter_behaves_as_agentscopes_client(launched: GatewayClient) -> None:
    gc = launched
    # AgentScope's local backend is the library's own local shell.
    assert gc.sandbox.config["kind"] == "local" and has_channel(gc.sandbox)
    assert await gc.health()
    assert gc.gateway_port > 0 and gc.token_file and Path(gc.token_file).stat().st_mode & 0o777 == 0o600
    other = GatewayClient(LocalBackend(), gc.gateway_port, token_file=gc.token_file, instance_nonce="someone-else")
    assert not await other.health()
    await other.aclose()

    client = gc.make_client(ts_spec(), agent_id="agent", session_id="s1")
    assert isinstance(client, MCPClient) and isinstance(client, GatewayMCPClient)
    await client.connect()
    tools = await client.list_raw_tools()
    assert {"echo", "add", "media", "fail", "slow"} <= {t.name for t in tools}
    assert next(t for t in tools if t.name == "add").output_schema is not None

    echo = await client.get_tool("echo")
    assert isinstance(echo, StockGatewayMCPTool) and echo.name == "mcp__ts__echo"
    chunk = await echo(text="héllo 'quoted' $(not run)")
    assert chunk.state == ToolResultState.RUNNING and chunk.is_last
    assert chunk.content[0].text == "héllo 'quoted' $(not run)"
    chunk = await (await client.get_tool("add"))(a=2, b=40)
    assert chunk.metadata.get("structured_content") == {"sum": 42, "product": 80}
    chunk = await (await client.get_tool("media"))()
    assert [b.type for b in chunk.content] == ["data", "data", "text", "data", "data"]
    assert str(chunk.content[4].source.url) == "test://resource/link"
    chunk = await (await client.get_tool("fail"))(message="broken on purpose")
    assert chunk.state == ToolResultState.ERROR and chunk.content[0].text == "broken on purpose"
    with pytest.raises(ValueError, match="nope"):
        await client.get_tool("nope")

    listed = await gc.list_mcps(agent_id="agent", session_id="s1")
    assert [m.name for m in listed] == ["ts"] and listed[0].is_connected
    assert await gc.list_mcps() == []
    duplicate = gc.make_client(ts_spec(), agent_id="agent", session_id="s1")
    with pytest.raises(RuntimeError, match="HTTP 409"):
        await duplicate.connect()
    with pytest.raises(ValueError, match="runtime headers"):
        await client.set_runtime_headers({"X": "y"})
    # A deadline answered by the gateway comes back as an error chunk, as AgentScope's does.
    slow = gc.make_client(dict(ts_spec("slowpoke"), execution_timeout=0.5), agent_id="agent", session_id="s1")
    await slow.connect()
    chunk = await (await slow.get_tool("slow"))(seconds=30)
    assert chunk.state == ToolResultState.ERROR and chunk.content[0].text.startswith("HTTP 504")
    for c in (client, slow):
        await c.close(ignore_errors=False)
    assert await gc.list_mcps(agent_id="agent", session_id="s1") == []


async def test_same_chunks_as_the_stock_client_on_the_same_gateway(launched: GatewayClient) -> None:
    gc = launched
    assert gc.token_file is not None
    token = Path(gc.token_file).read_text().strip()
    stock = StockGatewayClient(LocalBackend(), gc.gateway_port, auth_token=token, instance_nonce=gc.instance_nonce)
    assert await stock.health()
    ours = gc.make_client(ts_spec("a"))
    await ours.connect()
    theirs = stock.make_client(ts_spec("b"))
    await theirs.connect()
    for tool, args in (("echo", {"text": "same"}), ("add", {"a": 1, "b": 2}), ("media", {}), ("fail", {})):
        mine = await (await ours.get_tool(tool))(**args)
        stocks = await (await theirs.get_tool(tool))(**args)
        strip = lambda c: json.loads(c.model_dump_json(exclude={"id"}))  # noqa: E731
        for block in (*mine.content, *stocks.content):
            block.id = ""
            if hasattr(block, "created_at"):
                block.created_at = ""
        assert strip(mine) == strip(stocks), tool
    # The adapter sees what the stock client registered, and the other way round.
    assert {m.name for m in await gc.list_mcps()} == {"a", "b"}
    assert {m.name for m in await stock.list_mcps()} == {"a", "b"}
    await ours.close()
    await theirs.close()


class ExecOnly:
    """A backend that offers nothing but AgentScope's ``exec_shell`` and ``write_file``, as E2B's
    and Daytona's do: here AgentScope's LocalBackend's."""

    def __init__(self) -> None:
        self._local = LocalBackend()

    async def exec_shell(self, command: list[str], *, cwd: str | None = None, timeout: float | None = None) -> Any:
        return await self._local.exec_shell(command, cwd=cwd, timeout=timeout)

    async def write_file(self, path: str, data: bytes) -> None:
        await self._local.write_file(path, data)


async def open_local(command: str) -> asyncio.subprocess.Process:
    """A channel opener: `command` in a local shell, its standard streams piped."""
    pipe = asyncio.subprocess.PIPE
    return await asyncio.create_subprocess_exec(
        "sh", "-c", command, stdin=pipe, stdout=pipe, stderr=pipe, start_new_session=True
    )


async def test_a_backend_with_only_exec_shell(tmp_path: Path) -> None:
    # The binding's generic backend over AgentScope's exec_shell: the launch and every request
    # run through it; a session channel only with an opener.
    gc = await GatewayClient.launch(ExecOnly(), gateway_path=str(GATEWAY), state_dir=str(tmp_path / "gw"))
    try:
        assert gc.sandbox.config["kind"] == "exec" and not has_channel(gc.sandbox)
        with pytest.raises(RuntimeError, match="no session channel is known for a ExecOnly"):
            await gc.attach()
        client = gc.make_client(ts_spec())
        await client.connect()
        chunk = await (await client.get_tool("echo"))(text="through exec_shell")
        assert chunk.content[0].text == "through exec_shell"

        over = GatewayClient(
            ExecOnly(),
            gc.gateway_port,
            token_file=gc.token_file,
            instance_nonce=gc.instance_nonce,
            gateway_path=str(GATEWAY),
            open_channel=open_local,
        )
        try:
            assert has_channel(over.sandbox)
            hello = await over.attach()
            assert hello["port"] == gc.gateway_port and (await over.client()).state["session"] == "open"
            [listed] = await over.list_mcps()
            chunk = await (await listed.get_tool("echo"))(text="over the channel")
            assert chunk.content[0].text == "over the channel"
        finally:
            await over.aclose()
        await client.close(ignore_errors=False)
    finally:
        await gc.aclose()


class KeptLocal(ExecOnly):
    """:class:`ExecOnly` with a ``start_process`` whose processes stay, as bubblewrap's (here
    local processes, each leading a process group of its own)."""

    async def start_process(self, command: list[str], **streams: Any) -> asyncio.subprocess.Process:
        streams.setdefault("stdin", asyncio.subprocess.DEVNULL)
        return await asyncio.create_subprocess_exec(*command, start_new_session=True, **streams)


async def test_a_kept_launch_that_never_finishes_ends_at_the_librarys_deadline(tmp_path: Path) -> None:
    # The launch runs in a kept process; the library's time limit for it is the only one, and
    # the kept process ends with it.
    hanging = tmp_path / "hanging-gateway"
    hanging.write_text("#!/bin/sh\nsleep 300\n")
    hanging.chmod(0o755)
    with pytest.raises(mcpgw.DeadlineError, match="did not finish within its time limit"):
        await GatewayClient.launch(KeptLocal(), gateway_path=str(hanging), state_dir=str(tmp_path / "gw"), timeout=0.5)
    await wait_for(lambda: not processes_mentioning(str(hanging)), "the kept launch to be ended")


class RecordingBackend:
    """Wraps a real backend's process primitives to see every argv it is given while `active`
    (the adapter's part: the gateway's set-up and the MCP operations, not AgentScope's own
    workspace layout steps, one of which runs python3 for its skills directory)."""

    def __init__(self, backend: Any) -> None:
        self.argvs: list[list[str]] = []
        self.active = False
        exec_shell, start_process = backend.exec_shell, backend.start_process

        async def recorded_exec_shell(command: list[str], **kwargs: Any) -> Any:
            if self.active:
                self.argvs.append(list(command))
            return await exec_shell(command, **kwargs)

        async def recorded_start_process(command: list[str], **kwargs: Any) -> Any:
            if self.active:
                self.argvs.append(list(command))
            return await start_process(command, **kwargs)

        backend.exec_shell = recorded_exec_shell
        backend.start_process = recorded_start_process


@pytest.mark.parametrize("session", [False, True], ids=["one-shot", "session"])
async def test_bubblewrap_workspace_through_agentscopes_toolkit(
    tmp_path: Path, gateway_to_install: Path, session: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = bwrap_reason()
    if reason:
        skip(reason)
    if session and not gateway_has_attach():
        skip(f"{GATEWAY} has no `attach` subcommand (the session channel's gateway side)")
    workdir = tmp_path / "work"
    workdir.mkdir()
    # The MCP server the agent uses lives in the workspace; the gateway binary is installed by
    # the adapter through the backend.
    shutil.copy2(TESTSERVER, workdir / "mcpgw-testserver")
    workspace = use_mcpgw(
        BubblewrapWorkspace(host_workdir=str(workdir), host_cache_dir=str(tmp_path / "cache")),
        gateway_binary=str(gateway_to_install),
        session=session,
    )
    recorded: RecordingBackend | None = None
    provision = workspace._provision_backend

    async def provision_and_record() -> None:
        nonlocal recorded
        await provision()
        recorded = RecordingBackend(workspace._backend)

    workspace._provision_backend = provision_and_record
    setup = workspace._setup_mcp_gateway

    async def recorded_setup() -> None:
        assert recorded is not None
        recorded.active = True
        try:
            await setup()
        finally:
            recorded.active = False

    workspace._setup_mcp_gateway = recorded_setup
    # AgentScope's own bootstrap steps (they probe the workspace's .venv interpreter, which the
    # agent's commands run) are not the gateway's: not recorded.
    bootstrap = mcpgw_client.agentscope._swap.bootstrap

    async def unrecorded_bootstrap(ws: Any, **kwargs: Any) -> None:
        assert recorded is not None
        recorded.active = False
        try:
            await bootstrap(ws, **kwargs)
        finally:
            recorded.active = True

    monkeypatch.setattr(mcpgw_client.agentscope._swap, "bootstrap", unrecorded_bootstrap)
    async with workspace:
        assert recorded is not None
        launch = list(recorded.argvs)
        assert any("--daemon" in " ".join(a) for a in launch), launch
        recorded.active = True
        assert isinstance(workspace._gateway, GatewayClient)
        # Bubblewrap's own exec_shell carries the requests, its start_process the channel.
        assert workspace._gateway.sandbox.config["kind"] == "exec" and has_channel(workspace._gateway.sandbox)
        assert await workspace._gateway.health()
        assert ((await workspace._gateway.client()).state["session"] == "open") == session
        await workspace.add_mcp(
            MCPClient(
                name="ts",
                is_stateful=True,
                mcp_config=StdioMCPConfig(command="/workspace/mcpgw-testserver", args=["stdio"]),
            ),
            agent_id="agent",
            session_id="s1",
        )
        mcps = await workspace.list_mcps(agent_id="agent", session_id="s1")
        assert [type(m) for m in mcps] == [GatewayMCPClient]
        toolkit = Toolkit(mcps=mcps)
        before_calls = len(recorded.argvs)
        state = AgentState(session_id="s1")
        results = []
        async for out in toolkit.call_tool(
            ToolCallBlock(id="call-1", name="mcp__ts__echo", input=json.dumps({"text": "through bubblewrap"})), state
        ):
            results.append(out)
        assert results[-1].content[0].text == "through bubblewrap", results
        results = []
        async for out in toolkit.call_tool(
            ToolCallBlock(id="call-2", name="mcp__ts__add", input='{"a": 20, "b": 22}'), state
        ):
            results.append(out)
        assert results[0].metadata["structured_content"]["sum"] == 42
        if session:
            # Over the session channel the tool calls ran no command through the backend.
            assert recorded.argvs[before_calls:] == []

        # No Python inside the sandbox for the gateway: not in any argv the backend was given,
        # nor in any process of the gateway's sandbox.
        assert recorded is not None and recorded.argvs
        assert not [a for a in recorded.argvs if any("python" in part for part in a)], recorded.argvs
        keeper = workspace._gateway.keeper
        assert keeper is not None and keeper.returncode is None
        tree = [cmdline(p) for p in descendants(keeper.pid)]
        assert any("mcpgw-gateway" in c for c in tree) and any("mcpgw-testserver" in c for c in tree), tree
        assert not [c for c in tree if "python" in c], tree
    assert keeper.returncode is not None, "the gateway's sandbox ended with the workspace"


async def test_local_workspace_with_a_gateway_backed_mcp(tmp_path: Path) -> None:
    # LocalWorkspace has no gateway of its own: it is handed a gateway-backed MCP client.
    gateway = await GatewayClient.launch(LocalBackend(), gateway_path=str(GATEWAY), state_dir=str(tmp_path / "gw"))
    try:
        async with LocalWorkspace(workdir=str(tmp_path / "ws")) as workspace:
            await workspace.add_mcp(
                gateway.make_client(ts_spec(), agent_id="agent", session_id="s1"), agent_id="agent", session_id="s1"
            )
            [client] = await workspace.list_mcps(agent_id="agent", session_id="s1")
            assert isinstance(client, GatewayMCPClient) and client.is_connected
            toolkit = Toolkit(mcps=[client])
            outs = [
                o
                async for o in toolkit.call_tool(
                    ToolCallBlock(id="c", name="mcp__ts__echo", input='{"text": "local"}'), AgentState()
                )
            ]
            assert outs[-1].content[0].text == "local"
            assert [m["name"] for m in await (await gateway.client()).list_mcps(agent_id="agent", session_id="s1")] == [
                "ts"
            ]
    finally:
        await gateway.aclose()


async def test_constructed_like_agentscopes_with_a_token(launched: GatewayClient) -> None:
    # As a workspace builds AgentScope's client for a gateway it launched with --auth-token.
    assert launched.token_file is not None
    token = Path(launched.token_file).read_text().strip()
    for transport in ("built_in", "curl"):
        gc = GatewayClient(
            LocalBackend(),
            launched.gateway_port,
            auth_token=token,
            instance_nonce=launched.instance_nonce,
            gateway_path=str(GATEWAY),
            transport=transport,  # type: ignore[arg-type]
        )
        try:
            assert await gc.health()
            client = gc.make_client(ts_spec(f"via-{transport}"))
            await client.connect()
            chunk = await (await client.get_tool("echo"))(text=transport)
            assert chunk.content[0].text == transport
            assert gc.token_file is not None and Path(gc.token_file).stat().st_mode & 0o777 == 0o600
            await client.close(ignore_errors=False)
        finally:
            await gc.aclose()
    wrong = GatewayClient(LocalBackend(), launched.gateway_port, auth_token="not-the-token")
    with pytest.raises(RuntimeError, match="HTTP 401"):
        await wrong.list_mcps()
    await wrong.aclose()


def workspace_of_kind(kind: str, extra_pip: list[str]) -> Any:
    """A workspace of AgentScope's `kind` as its bootstrap sees it after provisioning: paths are
    joined by its backend (POSIX here, as in every sandbox), Daytona's paths come from its SDK."""
    import agentscope.workspace

    ws = getattr(agentscope.workspace, kind)(extra_pip=extra_pip)
    ws._backend = LocalBackend()
    if kind == "DaytonaWorkspace":
        # What _derive_sdk_paths reads from Daytona's SDK for its default user.
        ws._user_home = "/home/daytona"
        ws._gateway_home = "/home/daytona/.agentscope"
        ws._uv_bin = "/home/daytona/.local/bin/uv"
    return ws


KINDS = [
    "BubblewrapWorkspace",
    "E2BWorkspace",
    "K8sWorkspace",
    "OpenSandboxWorkspace",
    "DaytonaWorkspace",
    "AppleContainerWorkspace",
]


@pytest.mark.parametrize("kind", KINDS)
def test_bootstrap_commands_are_agentscopes_without_the_gateways_part(kind: str) -> None:
    ws = workspace_of_kind(kind, ["mcp-server-time==2026.10.19"])
    stock = ws._bootstrap_commands()
    ours = bootstrap_commands(ws)
    installs = [c for c in stock if " pip install " in c]
    assert len(installs) == 2 and any("fastapi" in c for c in installs), stock
    # Every other step (system packages, uv and uvx, rg, `uv venv`) is AgentScope's, in order.
    assert [c for c in ours if " pip install " not in c] == [c for c in stock if " pip install " not in c]
    assert any("uv venv" in c for c in ours)
    # Into the .venv goes only extra_pip: none of the gateway's requirements, not agentscope.
    [pip] = [c for c in ours if " pip install " in c]
    words = shlex.split(pip)
    assert words[words.index("--python") :] == ["--python", ws._gateway_python, "mcp-server-time==2026.10.19"]
    # Without extra_pip nothing is installed into the .venv at all.
    assert [c for c in bootstrap_commands(workspace_of_kind(kind, [])) if " pip install " in c] == []


def test_an_unknown_package_install_is_refused() -> None:
    ws = workspace_of_kind("K8sWorkspace", [])
    ws._bootstrap_commands = lambda: ["uv pip install --python /root/.agentscope/.venv/bin/python fastapi"]
    with pytest.raises(RuntimeError, match="K8sWorkspace's bootstrap has a package install mcpgw does not know"):
        bootstrap_commands(ws)


def test_a_workspace_without_a_gateway_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="a LocalWorkspace has none"):
        use_mcpgw(LocalWorkspace(workdir=str(tmp_path)))
