"""A Daytona sandbox as a backend, through Daytona's own SDK (PyPI ``daytona``):
:func:`daytona`.

- One-shot commands: ``process.exec``, which gives stdout and stderr as one text: the command
  writes its stderr to a file and prints it after a separator, and the two are told apart
  again here. A command's stdin is written first with ``fs.upload_file`` (``exec`` feeds the
  command itself to the shell's stdin).
- The session channel: a command of a session of its own, run asynchronously with its input
  not echoed, its output streamed by ``get_session_command_logs_async``, its input sent with
  ``send_session_command_input`` (whole lines: Daytona ends each input with a newline, and the
  channel's frames are lines). A session has no end of input: closing the channel and killing
  it both delete the session (its process group gets SIGTERM, then SIGKILL). Daytona's daemon
  reads a command's output from a file it polls every 20 ms: that is this channel's floor.
- What the SDK raises (``DaytonaNotFoundError``, ``DaytonaError: Failed to get session command
  logs``, ...) is handed to the library as ``Class: message``, and the library's rules for
  Daytona tell a sandbox that is gone or unreachable from the command's own failure.

The sandbox is an ``AsyncSandbox`` (``AsyncDaytona().get(...)``, ``.create(...)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import secrets
import shlex
from typing import Any

from ..backends import Backend, ExecResult
from ._channel import TIME_LIMIT_GRACE, SdkChannel, sh, stdin_path

#: Between a one-shot command's stdout and its stderr, in the one text ``exec`` gives.
STDERR_MARK = "\x1emcpgw-stderr\x1e"
#: How long input may wait for a new command's input pipe (the daemon makes it just after the
#: command started, not before the call that started it returns).
INPUT_READY = 2.0


def _split(command: str, stdin: str | None) -> str:
    """`command` (the library's text) run with ``sh -c``, reading `stdin` (a path it removes)
    when given, its stderr printed after its stdout and a separator."""
    err = shlex.quote(f"/tmp/mcpgw-stderr-{secrets.token_hex(8)}")
    text = sh(command)
    if stdin is not None:
        path = shlex.quote(stdin)
        text = f"{text} <{path} 2>{err}; s=$?; rm -f {path}"
    else:
        text = f"{text} 2>{err}; s=$?"
    return f"{text}; printf '{STDERR_MARK}'; cat {err} 2>/dev/null; rm -f {err}; exit $s"


class _Adapter:
    def __init__(self, sandbox: Any) -> None:
        self.sandbox = sandbox

    async def run(self, command: str, timeout: float, stdin: bytes | None) -> ExecResult:
        path = None
        if stdin is not None:
            path = stdin_path()
            await self.sandbox.fs.upload_file(stdin, path)
        text = _split(command, path)
        r = await self.sandbox.process.exec(text, timeout=math.ceil(timeout + TIME_LIMIT_GRACE))
        output = r.result or ""
        out, mark, err = output.rpartition(STDERR_MARK)
        if not mark:
            out, err = output, ""
        code = r.exit_code if isinstance(r.exit_code, int) else -1
        # The daemon could not start the shell (exit -1, its reason as the output).
        if code < 0:
            raise RuntimeError(f"Daytona could not run the command: {output.strip()}")
        return ExecResult(code, out.encode(), err.encode())

    async def open(self, command: str) -> SdkChannel:
        from daytona import SessionExecuteRequest

        process = self.sandbox.process
        session = f"mcpgw-{secrets.token_hex(8)}"
        await process.create_session(session)
        try:
            started = await process.execute_session_command(
                session, SessionExecuteRequest(command=sh(command), run_async=True, suppress_input_echo=True)
            )
        except BaseException:
            with contextlib.suppress(Exception):
                await process.delete_session(session)
            raise
        cmd = started.cmd_id
        ended = False

        async def send(data: bytes) -> None:
            text = data.decode("utf-8", errors="replace")
            deadline = asyncio.get_running_loop().time() + INPUT_READY
            while True:
                try:
                    await process.send_session_command_input(session, cmd, text)
                    return
                except Exception as e:
                    if "input pipe" not in str(e) or asyncio.get_running_loop().time() > deadline:
                        raise
                    await asyncio.sleep(0.01)

        async def end() -> None:
            nonlocal ended
            if not ended:
                ended = True
                with contextlib.suppress(Exception):
                    await process.delete_session(session)

        channel = SdkChannel(send, end, end)

        async def watch() -> None:
            try:
                await process.get_session_command_logs_async(session, cmd, channel.out, channel.err)
                finished = await process.get_session_command(session, cmd)
                code = finished.exit_code
                channel.exited(code if isinstance(code, int) else 137)
            except Exception as e:  # noqa: BLE001 - settled into the channel's end
                # A session deleted by the channel's own close or kill ended it.
                if ended:
                    channel.exited(143)
                else:
                    channel.failed(e)
            finally:
                await end()

        channel.watcher = asyncio.ensure_future(watch())
        return channel


def daytona(sandbox: Any) -> Backend:
    """A Daytona sandbox (a ``daytona.AsyncSandbox``) as a backend: commands through
    ``process.exec``, the session channel through a session command (see the module's
    documentation)."""
    process = getattr(sandbox, "process", None)
    if process is None or not asyncio.iscoroutinefunction(getattr(process, "exec", None)):
        raise TypeError(f"daytona() takes a Daytona AsyncSandbox (from AsyncDaytona), not {type(sandbox).__name__}")
    sandbox_id = str(getattr(sandbox, "id", None) or "daytona")
    adapter = _Adapter(sandbox)
    return Backend({"kind": "daytona", "sandbox": sandbox_id}, run=adapter.run, open=adapter.open)
