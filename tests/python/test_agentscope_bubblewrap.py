"""AgentScope 2.0.11's BubblewrapWorkspace with every workspace swapped by use_mcpgw, through
AgentScope's own API.

AgentScope's repository tests this workspace in tests/workspace_bubblewrap_test.py; its sdist on
PyPI (all CI can reach) does not ship that file, so this one checks the same behaviours of a live
workspace in its own words: the gateway and the builtin tools after initialize, the bootstrap's
uv, uvx, rg and .venv on PATH and repaired when damaged, offload, skills, reset, close, a
persistent workdir across restarts, two workspaces at once, an ephemeral one initialized again, an
MCP server started by uvx. Then AgentScope's Grep and Glob tools on files that are there."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import TESTSERVER, processes_mentioning, skip, wait_for

pytest.importorskip("agentscope", reason="AgentScope is not installed (make deps)")

from agentscope.mcp import MCPClient, StdioMCPConfig
from agentscope.message import Base64Source, DataBlock, UserMsg
from agentscope.workspace import BubblewrapBackend, BubblewrapWorkspace
from agentscope.workspace._gateway_client import GatewayClient as StockGatewayClient

from agentscope_support import bwrap_reason, run_swapped
from mcpgw_client.agentscope import GatewayClient, use_mcpgw

#: The MCP server AgentScope's own suite starts through uvx, from PyPI, pinned.
TIME_SERVER = ["--from", "mcp-server-time==2026.10.19", "mcp-server-time", "--local-timezone", "UTC"]


@pytest.fixture(scope="module", autouse=True)
def bwrap_ok() -> None:
    reason = bwrap_reason()
    if reason:
        skip(reason)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """One persistent workdir and cache for the tests below, so the bootstrap runs once."""
    return tmp_path_factory.mktemp("workdir"), tmp_path_factory.mktemp("cache")


#: How this host trusts its network (a bubblewrap sandbox starts with an empty environment): uv
#: inside reaches PyPI through it.
TRUST = {k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "SSL_CERT_DIR")}


def swapped(gateway: Path, **kwargs: Any) -> BubblewrapWorkspace:
    """A BubblewrapWorkspace swapped by use_mcpgw, as the two-line swap makes one."""
    workspace = BubblewrapWorkspace(workspace_id=f"test-{uuid.uuid4().hex[:8]}", env=TRUST, **kwargs)
    return use_mcpgw(workspace, gateway_binary=str(gateway))


def clear_user_state(workdir: Path) -> None:
    """Removes what the tests leave in the shared workdir, keeping the bootstrap."""
    for name in ("data", "sessions", "skills", ".mcp", "notes"):
        path = workdir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


@pytest.fixture
async def workspace(shared: tuple[Path, Path], gateway_to_install: Path) -> AsyncIterator[BubblewrapWorkspace]:
    workdir, cache = shared
    ws = swapped(gateway_to_install, host_workdir=str(workdir), host_cache_dir=str(cache))
    await ws.initialize()
    await ws.reset()
    try:
        yield ws
    finally:
        try:
            if ws.is_alive:
                await ws.reset()
            await ws.close()
        finally:
            clear_user_state(workdir)


async def run(ws: BubblewrapWorkspace, *argv: str, timeout: float = 60.0) -> str:
    """stdout of `argv` run in the workspace; fails with its stderr when it exits non-zero."""
    r = await ws.get_backend().exec_shell(list(argv), timeout=timeout)
    assert r.exit_code == 0, (argv, r.exit_code, r.stderr.decode(errors="replace"))
    return str(r.stdout.decode())


def ts_mcp(name: str = "ts") -> MCPClient:
    """The project's test MCP server, copied into the workspace by `with_testserver`."""
    return MCPClient(
        name=name,
        is_stateful=True,
        mcp_config=StdioMCPConfig(command="/workspace/.bin/mcpgw-testserver", args=["stdio"]),
    )


def with_testserver(workdir: Path) -> None:
    (workdir / ".bin").mkdir(exist_ok=True)
    shutil.copy2(TESTSERVER, workdir / ".bin" / "mcpgw-testserver")


# ── what AgentScope's own tests of the workspace check ─────────────


async def test_initialize_starts_the_gateway_and_the_builtin_tools(workspace: BubblewrapWorkspace) -> None:
    assert workspace.is_alive
    assert isinstance(workspace._gateway, GatewayClient) and await workspace._gateway.health()
    assert await workspace.list_mcps() == []
    tools = await workspace.list_tools()
    assert {t.name for t in tools} == {"Bash", "Edit", "Glob", "Grep", "Read", "Write"}
    assert all(isinstance(t._backend, BubblewrapBackend) for t in tools)


async def test_the_bootstrap_puts_uv_uvx_rg_and_the_venv_on_path(workspace: BubblewrapWorkspace) -> None:
    assert (await run(workspace, "uv", "--version")).startswith("uv ")
    assert (await run(workspace, "uvx", "--version")).startswith("uvx ")
    assert (await run(workspace, "rg", "--version")).startswith("ripgrep ")
    assert (await run(workspace, "python", "--version")).startswith("Python 3")
    found = await run(workspace, "sh", "-c", "for t in uv uvx rg python python3; do command -v $t; done")
    assert found.split() == [
        "/workspace/.agentscope/bin/uv",
        "/workspace/.agentscope/bin/uvx",
        "/workspace/.agentscope/bin/rg",
        "/workspace/.agentscope/.venv/bin/python",
        "/workspace/.agentscope/.venv/bin/python3",
    ]
    # The gateway's part of AgentScope's bootstrap was not paid: none of it is in the .venv.
    for module in ("fastapi", "uvicorn", "agentscope", "mcp"):
        r = await workspace.get_backend().exec_shell(["python", "-c", f"import {module}"])
        assert r.exit_code != 0 and f"No module named '{module}'".encode() in r.stderr


@pytest.mark.parametrize(
    ("damaged", "host_tools"),
    [(".venv/bin/python", False), ("bin/uv", True), ("bin/rg", True)],
    ids=["venv-by-agentscopes-steps", "uv-from-the-host", "rg-from-the-host"],
)
async def test_a_damaged_bootstrap_is_repaired_on_the_next_initialize(
    tmp_path: Path, gateway_to_install: Path, damaged: str, host_tools: bool
) -> None:
    dirs = {"host_workdir": str(tmp_path / "work"), "host_cache_dir": str(tmp_path / "cache")}
    first = swapped(gateway_to_install, **dirs)
    await first.initialize()
    await first.close()
    (tmp_path / "work" / ".agentscope" / damaged).unlink()
    second = use_mcpgw(BubblewrapWorkspace(**dirs), gateway_binary=str(gateway_to_install), host_tools=host_tools)
    try:
        await second.initialize()
        assert second.is_alive
        assert (await run(second, "python", "--version")).startswith("Python 3")
        assert (await run(second, "uv", "--version")).startswith("uv ")
        assert (await run(second, "rg", "--version")).startswith("ripgrep ")
    finally:
        await second.close()


async def test_offload_writes_the_session_and_its_data(
    workspace: BubblewrapWorkspace, shared: tuple[Path, Path]
) -> None:
    block = DataBlock(source=Base64Source(data=base64.b64encode(b"hello-data").decode(), media_type="text/plain"))
    path = await workspace.offload_context("s1", [UserMsg(name="user", content=[block])])
    assert path == "/workspace/sessions/s1/context.jsonl"
    [saved] = [json.loads(line) for line in (shared[0] / "sessions" / "s1" / "context.jsonl").read_text().splitlines()]
    # The block now refers to its bytes, decoded into data/ (a workspace-relative URL in 2.0.11).
    url = saved["content"][0]["source"]["url"]
    assert url.startswith("workspace:///data/"), url
    assert (shared[0] / url.removeprefix("workspace:///")).read_bytes() == b"hello-data"


async def test_skills_are_added_listed_and_removed(workspace: BubblewrapWorkspace, tmp_path: Path) -> None:
    skill = tmp_path / "greeter"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: greeter\ndescription: Says hi.\n---\n\n# greeter\n")
    assert await workspace.list_skills() == []
    await workspace.add_skill(str(skill))
    [listed] = await workspace.list_skills()
    assert (listed.name, listed.dir) == ("greeter", "/workspace/skills/default/greeter")
    await workspace.remove_skill("greeter")
    assert await workspace.list_skills() == []


async def test_reset_clears_the_state_and_keeps_the_gateway(
    workspace: BubblewrapWorkspace, shared: tuple[Path, Path]
) -> None:
    with_testserver(shared[0])
    await workspace.add_mcp(ts_mcp())
    await workspace.offload_context("reset", [UserMsg(name="user", content="hi")])
    assert (shared[0] / "sessions").exists()
    await workspace.reset()
    assert not (shared[0] / "sessions").exists()
    assert await workspace.list_mcps() == []
    # The same gateway serves on: an MCP registers and answers after the reset.
    await workspace.add_mcp(ts_mcp())
    [ts] = await workspace.list_mcps()
    chunk = await (await ts.get_tool("echo"))(text="after reset")
    assert chunk.content[0].text == "after reset"


async def test_close_twice(workspace: BubblewrapWorkspace) -> None:
    await workspace.close()
    await workspace.close()
    assert not workspace.is_alive


async def test_close_ends_the_gateways_process(workspace: BubblewrapWorkspace) -> None:
    process = workspace._gateway_process
    assert process is not None and process.returncode is None
    nonce = workspace._gateway_nonce
    assert processes_mentioning(nonce), "the gateway runs with this launch's nonce"
    await workspace.close()
    await asyncio.wait_for(process.wait(), 10.0)
    await wait_for(lambda: not processes_mentioning(nonce), "the gateway to be gone")


async def test_a_persistent_workdir_survives_a_restart(
    workspace: BubblewrapWorkspace, shared: tuple[Path, Path], gateway_to_install: Path
) -> None:
    msg = UserMsg(name="user", content="durable")
    await workspace.offload_context("persist", [msg])
    await workspace.close()
    again = swapped(gateway_to_install, host_workdir=str(shared[0]), host_cache_dir=str(shared[1]))
    try:
        await again.initialize()
        saved = (shared[0] / "sessions" / "persist" / "context.jsonl").read_text()
        assert saved.strip() == msg.model_dump_json()
    finally:
        await again.close()


async def test_an_mcp_server_started_by_uvx(workspace: BubblewrapWorkspace) -> None:
    # The first uvx resolves mcp-server-time from PyPI into the workspace's cache; done once here
    # with a long deadline, so the registration below is bounded by its own.
    await run(workspace, "uvx", *TIME_SERVER[:3], "--help", timeout=600.0)
    await workspace.add_mcp(
        MCPClient(name="time", is_stateful=True, mcp_config=StdioMCPConfig(command="uvx", args=TIME_SERVER))
    )
    [time_mcp] = await workspace.list_mcps()
    assert "get_current_time" in {t.name for t in await time_mcp.list_raw_tools()}
    chunk = await (await time_mcp.get_tool("get_current_time"))(timezone="Asia/Tokyo")
    assert chunk.state.value != "error", chunk
    assert json.loads(chunk.content[0].text)["timezone"] == "Asia/Tokyo"


async def test_two_workspaces_start_at_once(tmp_path: Path, gateway_to_install: Path) -> None:
    cache = str(tmp_path / "cache")
    one = swapped(gateway_to_install, host_workdir=str(tmp_path / "one"), host_cache_dir=cache)
    two = swapped(gateway_to_install, host_workdir=str(tmp_path / "two"), host_cache_dir=cache)
    try:
        await asyncio.gather(one.initialize(), two.initialize())
        assert isinstance(one.gateway_port, int) and isinstance(two.gateway_port, int)
        assert one.gateway_port != two.gateway_port
        # AgentScope's own client with one workspace's nonce does not take the other's gateway.
        rogue = StockGatewayClient(one.get_backend(), two.gateway_port, timeout=5.0, instance_nonce=one._gateway_nonce)
        assert not await rogue.health()
        right = StockGatewayClient(one.get_backend(), two.gateway_port, timeout=5.0, instance_nonce=two._gateway_nonce)
        assert await right.health()
        assert two._gateway is not None and await two._gateway.health()
    finally:
        await asyncio.gather(one.close(), two.close(), return_exceptions=True)


async def test_an_ephemeral_workspace_initializes_again(tmp_path: Path, gateway_to_install: Path) -> None:
    ws = swapped(gateway_to_install, host_cache_dir=str(tmp_path / "cache"))
    try:
        await ws.initialize()
        first = ws.host_workdir
        await ws.close()
        assert not Path(first).exists()
        await ws.initialize()
        second = ws.host_workdir
        assert second != first
        assert (await run(ws, "rg", "--version")).startswith("ripgrep ")
        await ws.close()
        assert not Path(second).exists()
    finally:
        await ws.close()


async def test_agentscopes_own_bubblewrap_tests_pass_swapped(tmp_path: Path) -> None:
    # Its file itself, where a checkout of AgentScope's repository is at hand (CI has only PyPI,
    # whose sdist lacks it): every workspace it builds swapped, its integration and network
    # tests on, every test in it passing.
    import agentscope

    tests = os.environ.get("AGENTSCOPE_TESTS")
    if not tests:
        skip(
            "AgentScope's tests/workspace_bubblewrap_test.py is not in its sdist on PyPI (the tests above "
            "check what it checks): set AGENTSCOPE_TESTS to the tests directory of a checkout of AgentScope "
            f"{agentscope.__version__} to run it swapped"
        )
    env = {"AGENTSCOPE_BWRAP_INTEGRATION_TEST": "1", "AGENTSCOPE_BWRAP_NETWORK_TEST": "1"}
    run_swapped(Path(tests) / "workspace_bubblewrap_test.py", tmp_path / "report.xml", env)


# ── the workspace's fields and AgentScope's tools ──────────────────


async def test_the_workspace_fields_describe_the_running_gateway(workspace: BubblewrapWorkspace) -> None:
    gateway = workspace._gateway
    assert isinstance(gateway, GatewayClient) and gateway.token_file
    assert workspace.gateway_port == gateway.gateway_port
    assert workspace._gateway_nonce == gateway.instance_nonce
    # The gateway minted its token into its own file in the sandbox; the host never held it.
    assert workspace._gateway_token == ""
    token = (await workspace.get_backend().read_file(gateway.token_file)).decode().strip()
    stock = StockGatewayClient(
        workspace.get_backend(),
        workspace.gateway_port,
        timeout=10.0,
        auth_token=token,
        instance_nonce=workspace._gateway_nonce,
    )
    assert await stock.health()
    assert await stock.list_mcps() == []


@pytest.fixture(params=[False, True], ids=["one-shot", "session"])
def session(request: pytest.FixtureRequest) -> Iterator[bool]:
    yield bool(request.param)


async def test_grep_and_glob_find_what_is_there(tmp_path: Path, gateway_to_install: Path, session: bool) -> None:
    # Without rg, bubblewrap exits 1 for the missing program, which Grep reads as ripgrep's "no
    # match": a pattern that is in the file came back "No matches found".
    ws = use_mcpgw(
        BubblewrapWorkspace(host_cache_dir=str(tmp_path / "cache")),
        gateway_binary=str(gateway_to_install),
        session=session,
    )
    await ws.initialize()
    try:
        await ws.get_backend().write_file("/workspace/notes/a.txt", b"hello world\n")
        tools = {t.name: t for t in await ws.list_tools()}
        grep = await tools["Grep"](pattern="hello", path="/workspace")
        assert grep.content[0].text == "/workspace/notes/a.txt", grep
        grep = await tools["Grep"](pattern="absent", path="/workspace")
        assert grep.content[0].text.startswith("No matches found"), grep
        glob = await tools["Glob"](pattern="**/*.txt", path="/workspace")
        assert glob.content[0].text == "/workspace/notes/a.txt", glob
        assert (await run(ws, "sh", "-c", "command -v rg")).strip() == "/workspace/.agentscope/bin/rg"
    finally:
        await ws.close()


async def test_an_explicit_gateway_port_is_the_one_listened_on(tmp_path: Path, gateway_to_install: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = swapped(gateway_to_install, host_cache_dir=str(tmp_path / "cache"), gateway_port=port)
    try:
        await ws.initialize()
        assert ws.gateway_port == port and ws._gateway is not None and ws._gateway.gateway_port == port
        assert await ws._gateway.health()
    finally:
        await ws.close()
