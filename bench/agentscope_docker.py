"""make bench, AgentScope's DockerWorkspace: one MCP tool call (mcp-server-time's
``get_current_time``, in the workspace's .venv through ``extra_pip``) through AgentScope 2.0.11's
own workspace (its Python gateway in the container, given through ``extra_pip`` what it lacks to
call tools, and its host client: a ``python3 -c`` shim per request through its aiodocker exec)
against the same workspace swapped by ``use_mcpgw`` (mcpgw-gateway, one ``docker exec`` of the
library's Docker backend per request, and over a session channel), both on images built offline
(tests/python/agentscope_support.py), running side by side, interleaved rounds, medians. Beside
them, the floors: a bare ``true`` through each one's exec.

    python bench/agentscope_docker.py GATEWAY TESTSERVER [--calls N] [--rounds R]

(GATEWAY, the static gateway installed into the container; TESTSERVER for the test helpers'
checks, which want both binaries.)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "bench"), str(REPO / "tests" / "python"), str(REPO / "bindings" / "python" / "src")]
# The image builder lives with the tests, whose helpers check for these binaries at import.
os.environ.setdefault("MCPGW_GATEWAY", sys.argv[1] if len(sys.argv) > 1 else "")
os.environ.setdefault("MCPGW_TESTSERVER", sys.argv[2] if len(sys.argv) > 2 else "")

from agentscope.mcp import MCPClient, StdioMCPConfig  # noqa: E402
from agentscope.workspace import DockerWorkspace  # noqa: E402
from agentscope_support import (  # noqa: E402
    STOCK_GATEWAY_MISSING,
    TIME_SERVER_PIP,
    docker_image,
    docker_image_reason,
)
from python_adapter import arguments, per_call_ms  # noqa: E402

from mcpgw_client.agentscope import use_mcpgw  # noqa: E402

STOCK_PIP = [TIME_SERVER_PIP, *STOCK_GATEWAY_MISSING]
SWAPPED_PIP = [TIME_SERVER_PIP]
TIME = MCPClient(
    name="time",
    is_stateful=True,
    mcp_config=StdioMCPConfig(command="mcp-server-time", args=["--local-timezone", "UTC"]),
)


async def started(
    workspace: DockerWorkspace,
) -> tuple[DockerWorkspace, float, Callable[[], Awaitable[Any]]]:
    """`workspace` initialized with the time MCP registered; its initialize's seconds; a call."""
    t = time.perf_counter()
    await workspace.initialize()
    init_s = time.perf_counter() - t
    await workspace.add_mcp(TIME)
    [mcp] = await workspace.list_mcps()
    tool = await mcp.get_tool("get_current_time")

    async def call() -> Any:
        chunk = await tool(timezone="Asia/Tokyo")
        assert '"timezone": "Asia/Tokyo"' in chunk.content[0].text, chunk
        return chunk

    return workspace, init_s, call


async def main(gateway: str, calls: int, rounds: int) -> None:
    docker_image(stock=True, extra_pip=STOCK_PIP)
    docker_image(stock=False, extra_pip=SWAPPED_PIP)
    (
        (stock, stock_init, stock_call),
        (ours, ours_init, ours_call),
    ) = await asyncio.gather(
        started(DockerWorkspace(extra_pip=STOCK_PIP)),
        started(use_mcpgw(DockerWorkspace(extra_pip=SWAPPED_PIP), gateway_binary=gateway)),
    )
    try:
        backend = ours.get_backend()

        async def floor() -> Any:
            return await backend.exec_shell(["true"])

        async def cli_floor() -> Any:
            # What the library's Docker backend runs per request, with nothing in it.
            proc = await asyncio.create_subprocess_exec("docker", "exec", ours._container.id, "true")
            assert await proc.wait() == 0

        calls_of = (stock_call, ours_call, floor, cli_floor)
        for call in calls_of:
            await per_call_ms(call, 3)
        ms: list[list[float]] = [[] for _ in calls_of]
        for _ in range(rounds):
            for call, times in zip(calls_of, ms, strict=True):
                times.extend(await per_call_ms(call, calls // rounds))
        x, y, f, c = (statistics.median(v) for v in ms)
        print(f"agentscope workspace per call ms: {x:.1f}, swapped per call ms: {y:.1f} ({x / y:.1f}x)")
        print(f"floors, a bare `true` ms: aiodocker exec {f:.1f}, docker exec {c:.1f}; {len(ms[0])} calls each")
        assert ours._gateway is not None
        await ours._gateway.attach()
        await per_call_ms(ours_call, 3)
        s = statistics.median(await per_call_ms(ours_call, calls))
        print(f"swapped per call over a session channel (docker exec -i) ms: {s:.2f} ({x / s:.0f}x)")
        print(f"initialize s: agentscope {stock_init:.1f}, swapped {ours_init:.1f} (image present, container new)")
    finally:
        await asyncio.gather(stock.close(), ours.close(), return_exceptions=True)


if __name__ == "__main__":
    args = arguments(__doc__, 30)
    reason = docker_image_reason()
    if reason:
        print(f"SKIPPED: no AgentScope Docker workspace here: {reason}")
        sys.exit(0)
    asyncio.run(main(args.gateway, args.calls, args.rounds))
