"""What the provider adapters share: a session channel fed by an SDK's callbacks, the ``sh -c``
wrapping of the library's command text, and the stdin of a one-shot command carried by the
SDK's file API.

A provider's SDK streams a long-lived command's output to callbacks (text, or bytes) and takes
its input by calls; :class:`SdkChannel` turns that into the shape the binding's loop reads
(:class:`mcpgw_client.backends.Channel`): ``stdin.write`` queued and sent in order by one task,
``stdout.read`` and ``stderr.read`` from buffers the callbacks fill, ``wait`` for the exit
status, or raising what the SDK raised (the library reads the provider's words in it).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
from collections.abc import Awaitable, Callable
from typing import Any

#: Where a one-shot command's stdin is written before it runs (the SDKs' commands take none,
#: or only slowly): removed by the command itself.
STDIN_DIR = "/tmp"

#: What an SDK's command is given beyond the library's own time limit: the library kills the
#: command at its limit, and the SDK's deadline only backs that up.
TIME_LIMIT_GRACE = 5.0


def sh(command: str) -> str:
    """The library's command text as one ``sh -c`` command (the SDKs run a command line through
    a shell of their own: bash, a login shell for E2B)."""
    return "sh -c " + shlex.quote(command)


def stdin_path() -> str:
    """A fresh path in the sandbox for a command's stdin."""
    return f"{STDIN_DIR}/mcpgw-stdin-{secrets.token_hex(8)}"


def with_stdin_from(command: str, path: str) -> str:
    """`command` (the library's text) reading its stdin from `path`, which it removes."""
    p = shlex.quote(path)
    return f"{sh(command)} <{p}; s=$?; rm -f {p}; exit $s"


def as_bytes(data: str | bytes | bytearray | None) -> bytes:
    """An SDK's output chunk as bytes (text is UTF-8)."""
    if data is None:
        return b""
    if isinstance(data, str):
        return data.encode("utf-8", errors="replace")
    return bytes(data)


def describe(e: BaseException) -> str:
    """What an SDK raised, as the library reads it: ``Class: message`` (or what an adapter set
    as its ``mcpgw_reason``: that with the sandbox's state, say)."""
    reason = getattr(e, "mcpgw_reason", None)
    if isinstance(reason, str):
        return reason
    text = str(e)
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


class _Output:
    """A channel's stdout or stderr: bytes the SDK's callbacks delivered, read in order."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._ended = False
        self._ready = asyncio.Event()

    def feed(self, data: bytes) -> None:
        if data and not self._ended:
            self._buf += data
            self._ready.set()

    def end(self) -> None:
        self._ended = True
        self._ready.set()

    async def read(self, n: int = -1) -> bytes:
        while not self._buf and not self._ended:
            self._ready.clear()
            await self._ready.wait()
        if n < 0 or n >= len(self._buf):
            data, self._buf = bytes(self._buf), bytearray()
        else:
            data, self._buf = bytes(self._buf[:n]), self._buf[n:]
        return data


class _Input:
    """A channel's stdin: writes queued in order, sent one after the other by one task through
    the SDK (`send`), then `close`d."""

    def __init__(self, send: Callable[[bytes], Awaitable[Any]], close: Callable[[], Awaitable[Any]]) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._send, self._close = send, close
        self._closed = False
        self._task = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        while (data := await self._queue.get()) is not None:
            # Everything queued by now goes in one call: fewer round trips under load.
            while not self._queue.empty():
                more = self._queue.get_nowait()
                if more is None:
                    self._queue.put_nowait(None)
                    break
                data += more
            try:
                await self._send(data)
            except Exception:  # noqa: BLE001 - a channel that is gone ends by its output and exit
                return
        with contextlib.suppress(Exception):
            await self._close()

    def write(self, data: bytes) -> None:
        if not self._closed and data:
            self._queue.put_nowait(bytes(data))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._queue.put_nowait(None)

    def cancel(self) -> None:
        self._task.cancel()


class SdkChannel:
    """A long-lived command of a provider SDK, as the binding's loop reads a channel.

    The adapter feeds :attr:`stdout` and :attr:`stderr` from the SDK's callbacks, and settles the
    end with :meth:`exited` (the exit status) or :meth:`failed` (what the SDK raised); `send` and
    `close` carry stdin, `kill` ends the command.
    """

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[Any]],
        close: Callable[[], Awaitable[Any]],
        kill: Callable[[], Awaitable[Any]],
    ) -> None:
        self.stdin = _Input(send, close)
        self.stdout = _Output()
        self.stderr = _Output()
        self._kill = kill
        self._end: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._killing: asyncio.Future[Any] | None = None
        #: The adapter's task that settles the end (kept so that it is not collected).
        self.watcher: asyncio.Future[Any] | None = None

    def out(self, data: str | bytes) -> None:
        self.stdout.feed(as_bytes(data))

    def err(self, data: str | bytes) -> None:
        self.stderr.feed(as_bytes(data))

    def exited(self, code: int) -> None:
        """The command ended with exit status `code`."""
        self._settle(code, None)

    def failed(self, e: BaseException) -> None:
        """The SDK lost the command (the sandbox died, or could not be reached)."""
        self._settle(None, e)

    def _settle(self, code: int | None, e: BaseException | None) -> None:
        self.stdout.end()
        self.stderr.end()
        self.stdin.cancel()
        if self._end.done():
            return
        if e is not None:
            self._end.set_exception(e)
            self._end.exception()
        else:
            self._end.set_result(code if code is not None else 0)

    async def wait(self) -> int:
        """The exit status; raises what the SDK raised when it lost the command."""
        return await asyncio.shield(self._end)

    def kill(self) -> None:
        if self._killing is None and not self._end.done():
            self._killing = asyncio.ensure_future(self._kill())
