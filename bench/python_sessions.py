"""make bench, Python side: one Python process holding many open sessions (one ``mcpgw-gateway
attach`` child each, over the local backend, against a few gateways) and calling across all of
them at once, through the binding's AsyncClient on one event loop.

    python bench/python_sessions.py GATEWAY TESTSERVER [--sessions 1000] [--gateways 4] [--rounds 3]

Prints ``host sessions: N open, library KiB per session: X, threads: T, calls/s: Z``, then the
baselines the figures are read against: the process with a few sessions open (its threads, the
RSS the per-session figure starts from) and the calls/s of one session carrying as many calls.
X is the growth of this process's resident memory per session opened (the binding's objects,
the library's host and its buffers); the attach children are processes of their own and are not
in it. T is this process's thread count with every session open.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import sys
import tempfile
import time
from pathlib import Path

import mcpgw_client as mcpgw

WARM = 10


def status(field: str) -> int:
    """A number of /proc/self/status (VmRSS in KiB, Threads)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def rss_kib() -> int:
    gc.collect()
    return status("VmRSS")


async def calls_per_second(clients: list[mcpgw.AsyncClient], per_client: int, rounds: int) -> float:
    """Calls/s with `per_client` calls in flight on each client at once, best of `rounds`."""
    best = 0.0
    for _ in range(rounds):
        started = time.perf_counter()
        chunks = await asyncio.gather(
            *(c.call_tool("ts", "echo", {"text": "hi"}) for c in clients for _ in range(per_client))
        )
        elapsed = time.perf_counter() - started
        assert all(ch["content"][0]["text"] == "hi" for ch in chunks)
        best = max(best, len(chunks) / elapsed)
    return best


async def main(gateway: str, testserver: str, sessions: int, gateways: int, rounds: int) -> None:
    # Three descriptors a session (its pipes) and one for its exit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < 4 * sessions + 256:
        sys.exit(f"the open-file limit ({hard}) is too low for {sessions} sessions")
    spec = {
        "name": "ts",
        "is_stateful": True,
        "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]},
    }
    with tempfile.TemporaryDirectory(prefix="mcpgw-bench-sessions-") as tmp:
        launchers = [
            mcpgw.AsyncClient(mcpgw.local(), gateway_path=gateway, state_dir=f"{tmp}/gw{i}") for i in range(gateways)
        ]
        infos = [await c.start_gateway() for c in launchers]
        for c in launchers:
            await c.add_mcp(spec)
        clients = [
            mcpgw.AsyncClient(
                mcpgw.local(),
                gateway_path=gateway,
                transport="built_in",
                port=infos[i % gateways]["port"],
                token_file=infos[i % gateways]["token_file"],
                instance_nonce=infos[i % gateways]["instance_nonce"],
            )
            for i in range(sessions)
        ]
        try:
            # A few sessions first: what the process costs before the per-session growth.
            await asyncio.gather(*(c.open_session() for c in clients[:WARM]))
            await calls_per_second(clients[:WARM], 1, 1)
            base_rss, base_threads = rss_kib(), status("Threads")
            for at in range(WARM, sessions, 100):
                await asyncio.gather(*(c.open_session() for c in clients[at : at + 100]))
            assert all(c.state["session"] == "open" for c in clients)
            await calls_per_second(clients, 1, 1)
            per_session = (rss_kib() - base_rss) / (sessions - WARM)
            threads = status("Threads")
            rate = await calls_per_second(clients, 1, rounds)
            one = await calls_per_second(clients[:1], sessions, rounds)
            print(
                f"host sessions: {sessions} open, library KiB per session: {per_session:.1f}, "
                f"threads: {threads}, calls/s: {rate:.0f}"
            )
            print(
                f"baselines: {WARM} sessions open: {base_rss} KiB resident, threads: {base_threads}; "
                f"one session carrying {sessions} calls at once: {one:.0f} calls/s"
            )
            target = "meets target" if per_session <= 64 and threads == base_threads else "misses target"
            print(f"target: <= 64 KiB per session, threads independent of sessions: {target}")
        finally:
            await asyncio.gather(*(c.aclose() for c in clients))
            for c in launchers:
                await c.stop_gateway()
                await c.aclose()
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gateway")
    p.add_argument("testserver")
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--gateways", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    asyncio.run(main(a.gateway, a.testserver, a.sessions, a.gateways, a.rounds))
