"""The launch kept alive: on a backend whose every command is a sandbox of its own that ends
with it (bubblewrap), the gateway is launched in a process of the backend that stays, and lives
as long as that process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Awaitable, Callable
from typing import Any, cast

from ..backends import ExecResult
from ..client import AsyncClient
from ..wire import GatewayInfo
from ._backend import BackendExec

# The launch command runs in a process of the backend that outlives it: `sh -c CMD`, then a
# marker line with its exit status, its stderr, a second marker, and (on success) a sleep that
# keeps the sandbox, so the daemonized gateway in it, alive until the process is ended.
_KEEPER = (
    'm=$1; e=$(mktemp) || exit 125; sh -c "$2" 2>"$e"; s=$?; '
    'printf "\\n%s %s\\n" "$m" "$s"; cat "$e"; printf "\\n%s\\n" "$m"; rm -f "$e"; '
    '[ "$s" = 0 ] || exit "$s"; exec sleep 2147483647 </dev/null >/dev/null 2>&1'
)

#: How long the kept process may take to end after SIGTERM before it is killed.
_END_GRACE = 5.0


async def end_process_group(proc: asyncio.subprocess.Process) -> None:
    """Ends the process group `proc` leads: SIGTERM, then SIGKILL after a grace."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), _END_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def start_kept(
    backend: Any, client: AsyncClient, exec_fn: BackendExec
) -> tuple[asyncio.subprocess.Process, GatewayInfo]:
    """Runs the library's start_gateway with its launch command in a kept process of `backend`
    (``start_process``), then a health check with the launch's nonce through ``exec_shell``."""
    keeper: asyncio.subprocess.Process | None = None

    async def launch(command: str, _limit: float) -> ExecResult:
        nonlocal keeper
        marker = f"mcpgw-launch-{secrets.token_hex(8)}"
        start = cast(Callable[..., Awaitable[asyncio.subprocess.Process]], backend.start_process)
        keeper = await start(
            ["sh", "-c", _KEEPER, "sh", marker, command],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert keeper.stdout is not None
        out = bytearray()
        head = f"\n{marker} ".encode()
        # No timer of its own: past the command's limit the library cancels this (then the
        # kept process is ended below).
        while head not in out or not out.endswith(f"\n{marker}\n".encode()):
            data = await keeper.stdout.read(1 << 16)
            if not data:
                break
            out += data
        if head not in out:
            status = await keeper.wait()
            raise RuntimeError(f"the launch process ended (exit status {status}) before the launch finished")
        stdout, _, rest = bytes(out).partition(head)
        status_text, _, rest = rest.partition(b"\n")
        stderr = rest[: -len(marker) - 2] if rest.endswith(f"\n{marker}\n".encode()) else rest
        return ExecResult(int(status_text), stdout, stderr)

    # start_gateway is one command, the launch (whose --daemon confirms the nonce itself).
    exec_fn.run_next = launch
    try:
        info = await client.start_gateway()
        # The daemon confirmed its nonce from inside the kept process's own sandbox; every later
        # request comes from a command of its own (on bubblewrap, a sandbox of its own): confirm
        # the gateway answers there, with this launch's nonce, before handing it out.
        await client.health()
    except BaseException:
        if keeper is not None:
            await end_process_group(keeper)
        raise
    finally:
        exec_fn.run_next = None
    assert keeper is not None
    return keeper, info
