"""An OpenSandbox sandbox as a backend, through OpenSandbox's own SDK (PyPI ``opensandbox``):
:func:`opensandbox`.

- One-shot commands: ``commands.run`` (its output comes as lines, which are joined again with
  their newlines: the library's commands end what they print with one); a command's stdin is
  written first with ``files.write_file`` (the command API has none); a cancelled call is
  ``interrupt``-ed (execd runs a command to its end when its client goes away).
- The session channel: execd's pipe session (``POST /pty``, then its WebSocket with ``?pty=0``:
  binary stdin, stdout and stderr frames, an ``exit`` frame), reached at the endpoint and with
  the headers the SDK gives (``get_endpoint``). The SDK does not wrap it; this needs the
  ``websockets`` package. Closing the channel's stdin is a SIGTERM frame (the pipe session has
  no end of input; ``attach`` ends on SIGTERM as at the end of its input), killing it ``DELETE
  /pty/{id}``. The command keeps its shell alive for 50 ms after it exits: execd sends the exit
  frame as soon as the process ends, before the last output it read.
- What the SDK raises is handed to the library as ``Class: message`` with the sandbox's state
  (``get_info``) appended, and the library's rules for OpenSandbox tell a sandbox that is gone
  (its container exited), paused or unreachable from the command's own failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

from ..backends import Backend, ExecResult
from ._channel import TIME_LIMIT_GRACE, SdkChannel, describe, sh, stdin_path, with_stdin_from

#: execd's port inside the sandbox.
EXECD_PORT = 44772
#: How long the sandbox's state may take to read when explaining a failure.
STATE_TIMEOUT = 5.0


def _lines(messages: Any) -> bytes:
    """OpenSandbox's output messages (one per line, the newline stripped) as bytes."""
    texts = [getattr(m, "text", "") for m in messages or []]
    return ("\n".join(texts) + "\n").encode() if texts else b""


def _status(code: int | None) -> int:
    # execd reports a process killed by a signal as -1: the shell's 137.
    if code is None or code < 0:
        return 137
    return code


class _Adapter:
    def __init__(self, sandbox: Any, headers: dict[str, str]) -> None:
        self.sandbox = sandbox
        self.headers = headers

    async def explained(self, e: BaseException) -> BaseException:
        """`e` with the sandbox's state in the reason the library reads (``mcpgw_reason``)."""
        try:
            info = await asyncio.wait_for(self.sandbox.get_info(), STATE_TIMEOUT)
            status = getattr(info, "status", None)
            state = f"state: {getattr(status, 'state', '?')}, {getattr(status, 'reason', '?')}"
        except Exception as failed:  # noqa: BLE001 - the state is what it could not read
            state = f"its state unreadable: {describe(failed)}"
        e.mcpgw_reason = f"{describe(e)} (sandbox {state})"  # type: ignore[attr-defined]
        return e

    async def run(self, command: str, timeout: float, stdin: bytes | None) -> ExecResult:
        from opensandbox.models.execd import ExecutionHandlers, RunCommandOpts

        text = sh(command)
        if stdin is not None:
            path = stdin_path()
            await self.sandbox.files.write_file(path, stdin, mode=600)
            text = with_stdin_from(command, path)
        started: list[str] = []

        async def on_init(init: Any) -> None:
            started.append(init.id)

        try:
            r = await self.sandbox.commands.run(
                text,
                opts=RunCommandOpts(timeout=timedelta(seconds=timeout + TIME_LIMIT_GRACE)),
                handlers=ExecutionHandlers(on_init=on_init),
            )
        except asyncio.CancelledError:
            if started:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.sandbox.commands.interrupt(started[0]))
            raise
        except Exception as e:  # noqa: BLE001 - explained, and raised again
            raise await self.explained(e) from None
        logs = r.logs
        return ExecResult(_status(r.exit_code), _lines(logs.stdout), _lines(logs.stderr))

    async def open(self, command: str) -> SdkChannel:
        import httpx
        from websockets.asyncio.client import connect

        try:
            endpoint = await self.sandbox.get_endpoint(EXECD_PORT)
        except Exception as e:  # noqa: BLE001 - explained, and raised again
            raise await self.explained(e) from None
        headers = {**dict(getattr(endpoint, "headers", None) or {}), **self.headers}
        base = endpoint.endpoint
        body = {"command": f"{sh(command)}; s=$?; sleep 0.05; exit $s"}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            r = await http.post(f"http://{base}/pty", json=body)
            r.raise_for_status()
            session = r.json()["session_id"]
        ws = await connect(
            f"ws://{base}/pty/{session}/ws?pty=0", additional_headers=headers, max_size=None, compression=None
        )
        hello = json.loads(await ws.recv())
        if hello.get("type") != "connected":
            await ws.close()
            raise RuntimeError(f"execd's pipe session did not connect: {hello}")

        async def send(data: bytes) -> None:
            await ws.send(b"\x00" + data)

        async def close() -> None:
            await ws.send(json.dumps({"type": "signal", "signal": "SIGTERM"}))

        async def kill() -> None:
            async with httpx.AsyncClient(headers=headers, timeout=30) as http:
                await http.delete(f"http://{base}/pty/{session}")

        channel = SdkChannel(send, close, kill)

        async def read() -> None:
            try:
                async for frame in ws:
                    if isinstance(frame, bytes):
                        if frame[:1] == b"\x01":
                            channel.out(frame[1:])
                        elif frame[:1] == b"\x02":
                            channel.err(frame[1:])
                        continue
                    message = json.loads(frame)
                    if message.get("type") == "exit":
                        channel.exited(_status(message.get("exit_code")))
                        return
                    if message.get("type") == "error":
                        raise RuntimeError(f"execd's pipe session failed: {message}")
                raise ConnectionError("execd's pipe session closed without an exit")
            except Exception as e:  # noqa: BLE001 - settled into the channel's end
                channel.failed(await self.explained(e))
            finally:
                await ws.close()

        channel.watcher = asyncio.ensure_future(read())
        return channel


def opensandbox(sandbox: Any, *, headers: dict[str, str] | None = None) -> Backend:
    """An OpenSandbox sandbox (an ``opensandbox.Sandbox``) as a backend: commands through its
    command API, the session channel through execd's pipe session (see the module's
    documentation). `headers` go to execd besides those of the sandbox's connection
    configuration (e.g. ``X-EXECD-ACCESS-TOKEN`` when the sandbox was made with an execd
    token)."""
    if not callable(getattr(sandbox, "get_endpoint", None)) or getattr(sandbox, "commands", None) is None:
        raise TypeError(f"opensandbox() takes an OpenSandbox Sandbox, not {type(sandbox).__name__}")
    config = getattr(sandbox, "connection_config", None)
    merged = {**dict(getattr(config, "headers", None) or {}), **(headers or {})}
    sandbox_id = str(getattr(sandbox, "id", None) or "opensandbox")
    adapter = _Adapter(sandbox, merged)
    return Backend({"kind": "opensandbox", "sandbox": sandbox_id}, run=adapter.run, open=adapter.open)
