"""make bench, the cloud sandboxes: one tool call through each provider's own SDK and daemon
(tests/providers/README.md), over the session channel, against the same call one-shot (one SDK
command each), and the floor of the provider's streaming API measured beside them: one line
written to a ``cat`` started with that API and read back.

    python bench/providers.py [--calls N]

Prints, per provider whose daemon is here, ``PROVIDER session call p50 ms: X (one-shot: Y,
channel echo: Z)`` and the ratios Y/X and X/Z; a provider without its daemon says SKIPPED.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import mcpgw_client as mcpgw
from conftest import IMAGE_TESTSERVER, ts_spec
from providers import (
    E2B_ENVD,
    GATEWAY_IN_SANDBOX,
    STATIC_GATEWAY,
    daemon_reason,
    e2b_sandbox,
    start_envd,
)


async def p50_ms(call: Callable[[], Awaitable[Any]], n: int, warm: int = 20) -> float:
    """The median milliseconds of `n` sequential awaits of `call`, after `warm` unmeasured."""
    for _ in range(warm):
        await call()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def report(provider: str, session: float, one_shot: float, echo: float) -> None:
    print(
        f"{provider} session call p50 ms: {session:.2f} (one-shot: {one_shot:.2f}, channel echo: {echo:.2f}); "
        f"one-shot / session: {one_shot / session:.1f}x, session / echo: {session / echo:.2f}x"
    )


async def calls(client: mcpgw.AsyncClient, n: int) -> tuple[float, float]:
    """The p50 of an echo call over the session, then one-shot."""

    async def echo() -> None:
        chunk = await client.call_tool("ts", "echo", {"text": "hello"})
        assert chunk["content"][0]["text"] == "hello", chunk

    await client.open_session()
    session = await p50_ms(echo, n)
    await client.close_session()
    one_shot = await p50_ms(echo, max(n // 4, 20), warm=5)
    return session, one_shot


@asynccontextmanager
async def e2b_client() -> AsyncIterator[tuple[mcpgw.AsyncClient, Any]]:
    envd_gen = start_envd()
    envd = next(envd_gen)
    try:
        sandbox = e2b_sandbox(envd)
        async with mcpgw.AsyncClient(
            mcpgw.e2b(sandbox), gateway_path=GATEWAY_IN_SANDBOX
        ) as client:
            await client.ensure_gateway_binary(str(STATIC_GATEWAY))
            await client.start_gateway()
            await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
            yield client, sandbox
            await client.stop_gateway()
    finally:
        envd_gen.close()


async def e2b_echo_floor(sandbox: Any, n: int) -> float:
    """One line through a ``cat`` of E2B's streaming process API (a background command with
    stdin, its input stream, its stdout callback), as the adapter's channel uses it."""
    lines: asyncio.Queue[str] = asyncio.Queue()
    handle = await sandbox.commands.run(
        "cat", background=True, stdin=True, timeout=0, on_stdout=lines.put_nowait
    )
    sender = sandbox.commands.stream_input(handle.pid, timeout=0)

    async def echo() -> None:
        await sender.send("ping\n")
        got = ""
        while not got.endswith("\n"):
            got += await lines.get()

    try:
        return await p50_ms(echo, n)
    finally:
        await sender.close()
        await handle.kill()


async def bench_e2b(n: int) -> None:
    reason = daemon_reason(E2B_ENVD, "E2B's envd", "MCPGW_E2B_ENVD")
    if reason:
        print(f"e2b: SKIPPED: {reason}")
        return
    async with e2b_client() as (client, sandbox):
        session, one_shot = await calls(client, n)
        echo = await e2b_echo_floor(sandbox, n)
    report("e2b", session, one_shot, echo)


async def main(n: int) -> None:
    await bench_e2b(n)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
