"""make bench, Python side: one tool call through AgentScope 2.0.11's stock host client
(``GatewayClient`` + ``GatewayMCPTool``: a body file written, a ``python3 -c`` shim run and the
file deleted, per call, through its ``LocalBackend``) against the same call through mcpgw's
AgentScope adapter (``mcpgw_client.agentscope.GatewayClient`` on the same ``LocalBackend``: one
``sh -c`` of the library's local backend running the gateway's built-in client), against the
same ``mcpgw-gateway``, in one run, interleaved. When the adapter holds a session channel
(``attach``), its calls are measured over it too.

    python bench/python_adapter.py GATEWAY TESTSERVER [--calls N]

Prints ``agentscope host per call ms: X, adapter per call ms: Y`` (medians) and the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentscope.tool._builtin._backend import LocalBackend
from agentscope.workspace._gateway_client import GatewayClient as StockGatewayClient
from mcpgw_client.agentscope import GatewayClient


async def per_call_ms(call: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    """The milliseconds of `n` sequential awaits of `call` (which checks its own result)."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t) * 1000)
    return times


def arguments(doc: str, calls: int) -> argparse.Namespace:
    """The command line of a Python bench: GATEWAY TESTSERVER [--calls N] [--rounds R]."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("gateway")
    parser.add_argument("testserver")
    parser.add_argument("--calls", type=int, default=calls)
    parser.add_argument("--rounds", type=int, default=3)
    return parser.parse_args()


def checked(chunk: Any) -> Any:
    assert chunk.content[0].text == "hello", chunk
    return chunk


async def main(gateway: str, testserver: str, calls: int, rounds: int) -> None:
    backend = LocalBackend()
    with tempfile.TemporaryDirectory(prefix="mcpgw-bench-py-") as state:
        gc = await GatewayClient.launch(
            backend, gateway_path=gateway, state_dir=f"{state}/gw"
        )
        try:
            spec = {
                "name": "ts",
                "is_stateful": True,
                "mcp_config": {
                    "type": "stdio_mcp",
                    "command": testserver,
                    "args": ["stdio"],
                },
            }
            ours = gc.make_client(spec)
            await ours.connect()
            adapter_echo = await ours.get_tool("echo")
            assert gc.token_file is not None
            token = Path(gc.token_file).read_text().strip()
            stock = StockGatewayClient(
                backend,
                gc.gateway_port,
                auth_token=token,
                instance_nonce=gc.instance_nonce,
            )
            [theirs] = await stock.list_mcps()
            stock_echo = await theirs.get_tool("echo")

            async def adapter_call() -> Any:
                return checked(await adapter_echo(text="hello"))

            async def stock_call() -> Any:
                return checked(await stock_echo(text="hello"))

            # Warm-up: first processes, page cache, the gateway's first connections.
            await per_call_ms(stock_call, 3)
            await per_call_ms(adapter_call, 3)
            stock_ms: list[float] = []
            adapter_ms: list[float] = []
            for _ in range(rounds):
                stock_ms += await per_call_ms(stock_call, calls // rounds)
                adapter_ms += await per_call_ms(adapter_call, calls // rounds)
            x = statistics.median(stock_ms)
            y = statistics.median(adapter_ms)
            print(f"agentscope host per call ms: {x:.2f}, adapter per call ms: {y:.2f}")
            verdict = "meets target" if x / y >= 20 else "MISSES target"
            print(
                f"adapter speed-up: {x / y:.1f}x (target >= 20x: {verdict}); {len(stock_ms)} calls each"
            )
            session_ms = await over_session(gc, adapter_call, calls)
            if session_ms is not None:
                print(
                    f"adapter per call over a session channel ms: {session_ms:.3f} ({x / session_ms:.0f}x)"
                )
            await ours.close()
        finally:
            await gc.aclose()


async def over_session(
    gc: GatewayClient, call: Callable[[], Awaitable[Any]], calls: int
) -> float | None:
    attach = getattr(gc, "attach", None)
    if attach is None:
        return None
    try:
        await attach()
    except Exception as e:  # noqa: BLE001 - a gateway without `attach` still benches one-shot
        print(f"(no session channel: {str(e).splitlines()[0][:160]})")
        return None
    try:
        await per_call_ms(call, 3)
        return statistics.median(await per_call_ms(call, calls))
    finally:
        await gc.detach()


if __name__ == "__main__":
    args = arguments(__doc__, 60)
    asyncio.run(main(args.gateway, args.testserver, args.calls, args.rounds))
    sys.stdout.flush()
