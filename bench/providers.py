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
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))

import mcpgw_client as mcpgw
from conftest import IMAGE_TESTSERVER, ts_spec
from providers import (
    DAYTONA_DAEMON,
    E2B_ENVD,
    GATEWAY_IN_SANDBOX,
    STATIC_GATEWAY,
    daemon_reason,
    daytona_sandbox,
    e2b_sandbox,
    opensandbox_reason,
    start_daytona,
    start_envd,
    start_opensandbox_server,
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


def report(label: str, session: float, one_shot: float, echo: float) -> None:
    """Prints ``label`` (the provider's "PROVIDER session call p50 ms:") and the figures."""
    print(
        f"{label} {session:.2f} (one-shot: {one_shot:.2f}, channel echo: {echo:.2f}); "
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
    report("e2b session call p50 ms:", session, one_shot, echo)


async def prepared(backend: mcpgw.Backend) -> mcpgw.AsyncClient:
    client = mcpgw.AsyncClient(backend, gateway_path=GATEWAY_IN_SANDBOX)
    await client.ensure_gateway_binary(str(STATIC_GATEWAY))
    await client.start_gateway()
    await client.add_mcp(ts_spec(command=IMAGE_TESTSERVER))
    return client


async def opensandbox_echo_floor(sandbox: Any, n: int) -> float:
    """One line through a ``cat`` on execd's pipe session (its WebSocket), as the adapter's
    channel uses it."""
    import httpx
    from websockets.asyncio.client import connect

    endpoint = await sandbox.get_endpoint(44772)
    headers = {
        **dict(endpoint.headers or {}),
        **dict(sandbox.connection_config.headers or {}),
    }
    async with httpx.AsyncClient(headers=headers) as http:
        session = (
            await http.post(f"http://{endpoint.endpoint}/pty", json={"command": "cat"})
        ).json()["session_id"]
    async with connect(
        f"ws://{endpoint.endpoint}/pty/{session}/ws?pty=0",
        additional_headers=headers,
        compression=None,
    ) as ws:
        await ws.recv()

        async def echo() -> None:
            await ws.send(b"\x00ping\n")
            got = b""
            while not got.endswith(b"\n"):
                frame = await ws.recv()
                if isinstance(frame, bytes) and frame[:1] == b"\x01":
                    got += frame[1:]

        return await p50_ms(echo, n)


async def bench_opensandbox(n: int) -> None:
    reason = opensandbox_reason()
    if reason:
        print(f"opensandbox: SKIPPED: {reason}")
        return
    with tempfile.TemporaryDirectory(prefix="mcpgw-bench-osbx-") as workdir:
        servers = start_opensandbox_server(Path(workdir))
        server = next(servers)
        try:
            sandbox: Any = await server.sandbox()
            client = await prepared(mcpgw.opensandbox(sandbox))
            try:
                session, one_shot = await calls(client, n)
                echo = await opensandbox_echo_floor(sandbox, n)
                await client.stop_gateway()
            finally:
                await client.aclose()
                await sandbox.kill()
                await sandbox.close()
        finally:
            servers.close()
    report("opensandbox session call p50 ms:", session, one_shot, echo)


async def daytona_echo_floor(sandbox: Any, n: int) -> float:
    """One line through a ``cat`` of a session command (its input, its streamed logs), as the
    adapter's channel uses it."""
    from daytona import SessionExecuteRequest

    process = sandbox.process
    await process.create_session("bench-echo")
    started = await process.execute_session_command(
        "bench-echo",
        SessionExecuteRequest(command="cat", run_async=True, suppress_input_echo=True),
    )
    lines: asyncio.Queue[str] = asyncio.Queue()
    logs = asyncio.ensure_future(
        process.get_session_command_logs_async(
            "bench-echo", started.cmd_id, lines.put_nowait, lambda _: None
        )
    )

    async def echo() -> None:
        await process.send_session_command_input("bench-echo", started.cmd_id, "ping\n")
        got = ""
        while not got.endswith("\n"):
            got += await lines.get()

    try:
        await asyncio.sleep(0.1)  # the input pipe is made just after the command starts
        return await p50_ms(echo, max(n // 4, 20), warm=5)
    finally:
        await process.delete_session("bench-echo")
        await asyncio.wait_for(logs, 10)


async def bench_daytona(n: int) -> None:
    reason = daemon_reason(DAYTONA_DAEMON, "Daytona's daemon", "MCPGW_DAYTONA_DAEMON")
    if reason:
        print(f"daytona: SKIPPED: {reason}")
        return
    daemons = start_daytona()
    daemon = next(daemons)
    try:
        async with daytona_sandbox(daemon) as sandbox:
            client = await prepared(mcpgw.daytona(sandbox))
            try:
                session, one_shot = await calls(client, max(n // 4, 40))
                echo = await daytona_echo_floor(sandbox, n)
                await client.stop_gateway()
            finally:
                await client.aclose()
    finally:
        daemons.close()
    report("daytona session call p50 ms:", session, one_shot, echo)


async def main(n: int) -> None:
    await bench_e2b(n)
    await bench_opensandbox(n)
    await bench_daytona(n)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    asyncio.run(main(parser.parse_args().calls))
