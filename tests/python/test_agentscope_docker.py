"""AgentScope 2.0.11's DockerWorkspace swapped by use_mcpgw, on images built offline and tagged as
the workspace expects (agentscope_support.docker_image): AgentScope's own Docker test file from
its sdist, then its builtin tools and an MCP tool call through the swapped workspace."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conftest import STATIC_GATEWAY, skip

pytest.importorskip("agentscope", reason="AgentScope is not installed (make deps)")
pytest.importorskip("aiodocker", reason="aiodocker is not installed (make deps)")

from agentscope.mcp import MCPClient, StdioMCPConfig
from agentscope.workspace import DockerWorkspace
from agentscope.workspace._docker._make_dockerfile import prepare_build_context
from agentscope.workspace._gateway_client import GatewayClient as StockGatewayClient

import mcpgw_client as mcpgw
from agentscope_support import TIME_SERVER_PIP, agentscope_test_file, docker_image, docker_image_reason, run_swapped
from mcpgw_client.agentscope import GatewayClient, gateway_free_image, use_mcpgw

#: The swapped workspaces' extra_pip: a real MCP server, in the .venv (first on PATH).
EXTRA_PIP = [TIME_SERVER_PIP]
#: That server, as the workspaces register it.
TIME = MCPClient(
    name="time",
    is_stateful=True,
    mcp_config=StdioMCPConfig(command="mcp-server-time", args=["--local-timezone", "UTC"]),
)


@pytest.fixture(scope="module")
def docker_ok() -> None:
    reason = docker_image_reason()
    if reason:
        skip(f"no AgentScope Docker workspace here: {reason}")


def test_the_swapped_image_is_agentscopes_without_the_gateway() -> None:
    # AgentScope's own template and tag scheme; only the gateway's requirements and agentscope
    # itself are left out, extra_pip stays.
    workspace = DockerWorkspace(extra_pip=["mcp-server-time==2026.10.19"])
    tag, files = gateway_free_image(workspace)
    ctx, stock_tag, stock_files = prepare_build_context(base_image=workspace.base_image, extra_pip=workspace.extra_pip)
    stock_dockerfile = (ctx / "Dockerfile").read_text()
    dockerfile = files["Dockerfile"].decode()
    assert tag.startswith("agentscope-workspace-mcpgw:") and tag.rpartition(":")[2] != stock_tag.rpartition(":")[2]
    assert 'uv pip install --no-deps "agentscope"' in stock_dockerfile
    assert dockerfile == stock_dockerfile.replace('RUN uv pip install --no-deps "agentscope"\n', "\n")
    assert b"fastapi" in stock_files["requirements.txt"]
    assert files["requirements.txt"] == b"mcp-server-time==2026.10.19\n"
    assert files["_glob_helper.py"] == stock_files["_glob_helper.py"]
    assert "ripgrep" in dockerfile and "astral.sh/uv/" in dockerfile and "uv venv" in dockerfile
    assert gateway_free_image(DockerWorkspace())[1]["requirements.txt"] == b"\n"


async def test_agentscopes_own_docker_tests_pass_swapped(docker_ok: None, tmp_path: Path) -> None:
    # Its tests/test_e2e_docker_mcp.py from its sdist, every DockerWorkspace it builds swapped;
    # every test it has must pass (none skipped), so also every one that passes unswapped.
    docker_image(stock=False, extra_pip=[])
    run_swapped(agentscope_test_file("test_e2e_docker_mcp.py"), tmp_path / "report.xml")


@pytest.fixture(params=[False, True], ids=["one-shot", "session"])
async def swapped(request: pytest.FixtureRequest, docker_ok: None, tmp_path: Path) -> AsyncIterator[DockerWorkspace]:
    docker_image(stock=False, extra_pip=EXTRA_PIP)
    workspace = use_mcpgw(
        DockerWorkspace(host_workdir=str(tmp_path / "ws"), extra_pip=EXTRA_PIP),
        gateway_binary=str(STATIC_GATEWAY),
        session=request.param,
    )
    await workspace.initialize()
    try:
        yield workspace
    finally:
        await workspace.close()


async def exec_ok(workspace: Any, *argv: str) -> str:
    r = await workspace.get_backend().exec_shell(list(argv), timeout=60.0)
    assert r.exit_code == 0, (argv, r.stderr.decode(errors="replace"))
    return str(r.stdout.decode())


async def test_docker_workspace_tools_and_an_mcp_call_swapped(swapped: DockerWorkspace) -> None:
    workspace = swapped
    backend = workspace.get_backend()
    gateway = workspace._gateway
    assert isinstance(gateway, GatewayClient) and workspace.gateway_port == gateway.gateway_port
    # Requests and the channel go through the library's Docker backend, into this container.
    assert gateway.sandbox.config["kind"] == "docker"
    assert gateway.sandbox.config["container"] == workspace._container.id
    # What the image's bootstrap gives AgentScope's tools is there; the gateway's part is not.
    assert (await exec_ok(workspace, "uv", "--version")).startswith("uv 0.13.4")
    assert (await exec_ok(workspace, "uvx", "--version")).startswith("uvx 0.13.4")
    assert (await exec_ok(workspace, "rg", "--version")).startswith("ripgrep 14.1.0")
    assert (await exec_ok(workspace, "sh", "-c", "command -v python3")).strip() == "/root/.agentscope/.venv/bin/python3"
    r = await backend.exec_shell(["python3", "-c", "import fastapi"])
    assert r.exit_code != 0 and b"No module named 'fastapi'" in r.stderr

    await backend.write_file("/workspace/notes/a.txt", b"hello world\n")
    tools = {t.name: t for t in await workspace.list_tools()}
    grep = await tools["Grep"](pattern="hello", path="/workspace")
    assert "/workspace/notes/a.txt" in grep.content[0].text, grep
    glob = await tools["Glob"](pattern="**/*.txt", path="/workspace")
    assert "/workspace/notes/a.txt" in glob.content[0].text, glob

    await workspace.add_mcp(TIME, agent_id="agent", session_id="s1")
    [time_mcp] = await workspace.list_mcps(agent_id="agent", session_id="s1")
    chunk = await (await time_mcp.get_tool("get_current_time"))(timezone="Asia/Tokyo")
    assert '"timezone": "Asia/Tokyo"' in chunk.content[0].text, chunk
    # The gateway in the container is mcpgw's: no Python gateway runs there.
    ps = await exec_ok(workspace, "ps", "-o", "args")
    assert "mcpgw-gateway" in ps and "_mcp_gateway_app" not in ps, ps


async def test_a_container_removed_under_the_workspace_is_the_backends_failure(docker_ok: None, tmp_path: Path) -> None:
    # The library's Docker backend tells the container being gone from the command's failure.
    docker_image(stock=False, extra_pip=EXTRA_PIP)
    workspace = use_mcpgw(
        DockerWorkspace(host_workdir=str(tmp_path / "ws"), extra_pip=EXTRA_PIP), gateway_binary=str(STATIC_GATEWAY)
    )
    await workspace.initialize()
    try:
        await workspace.add_mcp(TIME)
        [time_mcp] = await workspace.list_mcps()
        tool = await time_mcp.get_tool("get_current_time")
        subprocess.run(["docker", "rm", "-f", workspace._container.id], check=True, capture_output=True)
        with pytest.raises(RuntimeError, match="failed") as raised:
            await tool(timezone="UTC")
        cause = raised.value.__cause__
        assert isinstance(cause, mcpgw.BackendError) and cause.state == "gone", repr(cause)
    finally:
        with contextlib.suppress(Exception):
            await workspace.close()


async def test_the_stock_host_client_reaches_the_swapped_gateway(swapped: DockerWorkspace) -> None:
    # The workspace's fields describe the running gateway: AgentScope's own client, given them
    # and the token from the gateway's own file, finds it.
    workspace = swapped
    gateway = workspace._gateway
    assert isinstance(gateway, GatewayClient) and gateway.token_file
    token = (await workspace.get_backend().read_file(gateway.token_file)).decode().strip()
    stock = StockGatewayClient(
        workspace.get_backend(), workspace.gateway_port, auth_token=token, instance_nonce=gateway.instance_nonce
    )
    assert await stock.health()
    assert await stock.list_mcps() == []
