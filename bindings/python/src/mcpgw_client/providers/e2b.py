"""An E2B sandbox as a backend, through E2B's own SDK (PyPI ``e2b``): :func:`e2b`.

- One-shot commands: ``commands.run`` (started in the background and awaited, so that a
  cancelled call kills its process); a command's stdin is written first with ``files.write``
  (faster than sending it through stdin: 9 MiB in tens of milliseconds, not hundreds).
- The session channel: a background command with its stdin open and no time limit, its output
  streamed to callbacks, its input sent in order through ``commands.stream_input`` (or
  ``send_stdin`` where the SDK has no input stream), closed with ``close_stdin``.
- What the SDK raises (``SandboxUnreachableException``, ``AuthenticationException``, ...) is
  handed to the library as ``Class: message``, and the library's rules for E2B tell a sandbox
  that is gone, not running or unreachable from the command's own failure. A non-zero exit
  (``CommandExitException``) is the command's result.

The sandbox may be an ``AsyncSandbox`` or a (blocking) ``Sandbox``; the latter's calls run in
worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
from typing import Any

from ..backends import Backend, ExecResult
from ._channel import TIME_LIMIT_GRACE, SdkChannel, as_bytes, sh, stdin_path, with_stdin_from


def _result_of(e: Exception) -> ExecResult:
    """The result of a command whose ``run`` raised `e`: the one a non-zero exit carries, else
    `e` raised again."""
    result = _exit_of(e)
    if result is None:
        raise e
    return result


def _exit_of(e: BaseException) -> ExecResult | None:
    """The result a ``CommandExitException`` carries (E2B raises one for a non-zero exit), else
    None."""
    code = getattr(e, "exit_code", None)
    if type(e).__name__ != "CommandExitException" or not isinstance(code, int):
        return None
    # A command killed by a signal reports -1 ("signal: killed"): the shell's 137.
    if code < 0:
        code = 137
    return ExecResult(code, as_bytes(getattr(e, "stdout", None)), as_bytes(getattr(e, "stderr", None)))


class _Async:
    """The adapter over an ``AsyncSandbox``."""

    def __init__(self, sandbox: Any, user: str | None) -> None:
        self.sandbox = sandbox
        self.user = {"user": user} if user else {}

    async def run(self, command: str, timeout: float, stdin: bytes | None) -> ExecResult:
        if stdin is not None:
            path = stdin_path()
            await self.sandbox.files.write(path, stdin, **self.user)
            text = with_stdin_from(command, path)
        else:
            text = sh(command)
        handle = await self.sandbox.commands.run(text, background=True, timeout=timeout + TIME_LIMIT_GRACE, **self.user)
        try:
            r = await handle.wait()
        except asyncio.CancelledError:
            await asyncio.shield(self._kill(handle))
            raise
        except Exception as e:  # noqa: BLE001 - a non-zero exit is a result, anything else raised again
            return _result_of(e)
        return ExecResult(r.exit_code, as_bytes(r.stdout), as_bytes(r.stderr))

    @staticmethod
    async def _kill(handle: Any) -> None:
        # A sandbox that is gone killed it already.
        with contextlib.suppress(Exception):
            await handle.kill()

    async def open(self, command: str) -> SdkChannel:
        commands = self.sandbox.commands
        channel: SdkChannel | None = None
        pending: list[tuple[bool, Any]] = []

        def on(err: bool) -> Any:
            def take(data: Any) -> None:
                if channel is None:
                    pending.append((err, data))
                elif err:
                    channel.err(data)
                else:
                    channel.out(data)

            return take

        handle = await commands.run(
            sh(command),
            background=True,
            stdin=True,
            timeout=0,
            on_stdout=on(False),
            on_stderr=on(True),
            **self.user,
            **({"retain_output": False} if "retain_output" in inspect.signature(commands.run).parameters else {}),
        )
        pid = handle.pid
        stream = getattr(commands, "stream_input", None)
        if stream is not None:
            input_handle = stream(pid, timeout=0)

            async def send(data: bytes) -> None:
                await input_handle.send(data)

            async def close() -> None:
                await input_handle.close()
                await commands.close_stdin(pid)

        else:

            async def send(data: bytes) -> None:
                await commands.send_stdin(pid, data)

            async def close() -> None:
                await commands.close_stdin(pid)

        channel = SdkChannel(send, close, lambda: self._kill(handle))
        for err, data in pending:
            (channel.err if err else channel.out)(data)

        async def watch() -> None:
            assert channel is not None
            try:
                r = await handle.wait()
            except Exception as e:  # noqa: BLE001 - settled into the channel's end
                result = _exit_of(e)
                if result is None:
                    channel.failed(e)
                else:
                    channel.exited(result.exit_code)
                return
            channel.exited(r.exit_code)

        channel.watcher = asyncio.ensure_future(watch())
        return channel


class _Blocking:
    """The adapter over a blocking ``Sandbox``: each call in a worker thread; a channel's
    callbacks (which the SDK calls only inside ``wait``) on a thread of their own, handed to
    the event loop."""

    def __init__(self, sandbox: Any, user: str | None) -> None:
        self.sandbox = sandbox
        self.user = {"user": user} if user else {}

    def run(self, command: str, timeout: float, stdin: bytes | None) -> ExecResult:
        if stdin is not None:
            path = stdin_path()
            self.sandbox.files.write(path, stdin, **self.user)
            text = with_stdin_from(command, path)
        else:
            text = sh(command)
        try:
            r = self.sandbox.commands.run(text, timeout=timeout + TIME_LIMIT_GRACE, **self.user)
        except Exception as e:  # noqa: BLE001 - a non-zero exit is a result, anything else raised again
            return _result_of(e)
        return ExecResult(r.exit_code, as_bytes(r.stdout), as_bytes(r.stderr))

    async def open(self, command: str) -> SdkChannel:
        loop = asyncio.get_running_loop()
        commands = self.sandbox.commands
        handle = await asyncio.to_thread(commands.run, sh(command), background=True, stdin=True, timeout=0, **self.user)
        pid = handle.pid

        async def send(data: bytes) -> None:
            await asyncio.to_thread(commands.send_stdin, pid, data)

        async def close() -> None:
            await asyncio.to_thread(commands.close_stdin, pid)

        async def kill() -> None:
            # A sandbox that is gone killed it already.
            with contextlib.suppress(Exception):
                await asyncio.to_thread(handle.kill)

        channel = SdkChannel(send, close, kill)

        def watch() -> None:
            def out(data: Any) -> None:
                loop.call_soon_threadsafe(channel.out, data)

            def err(data: Any) -> None:
                loop.call_soon_threadsafe(channel.err, data)

            try:
                r = handle.wait(on_stdout=out, on_stderr=err)
            except Exception as e:  # noqa: BLE001 - settled into the channel's end
                result = _exit_of(e)
                if result is None:
                    loop.call_soon_threadsafe(channel.failed, e)
                else:
                    loop.call_soon_threadsafe(channel.exited, result.exit_code)
                return
            loop.call_soon_threadsafe(channel.exited, r.exit_code)

        threading.Thread(target=watch, name=f"mcpgw-e2b-{pid}", daemon=True).start()
        return channel


def e2b(sandbox: Any, *, user: str | None = None) -> Backend:
    """An E2B sandbox (an ``e2b.AsyncSandbox`` or ``e2b.Sandbox``) as a backend: commands run
    as `user` (the sandbox's default user when None), the session channel through a background
    command with stdin (see the module's documentation)."""
    commands = getattr(sandbox, "commands", None)
    if commands is None or not callable(getattr(commands, "run", None)):
        raise TypeError(f"e2b() takes an E2B Sandbox or AsyncSandbox, not {type(sandbox).__name__}")
    adapter: _Async | _Blocking = (
        _Async(sandbox, user) if inspect.iscoroutinefunction(commands.run) else _Blocking(sandbox, user)
    )
    sandbox_id = str(getattr(sandbox, "sandbox_id", None) or "e2b")
    return Backend({"kind": "e2b", "sandbox": sandbox_id}, run=adapter.run, open=adapter.open)
