"""The session channel, driven by asyncio: one long-lived exec per sandbox runs
``mcpgw-gateway attach``, and every REST operation of a client travels over its stdin and stdout
as frames, many at once, with live progress and real cancellation.

libmcpgw's session is sans-IO: it gives the bytes to write and takes the bytes read. Here a
reader task feeds it what the channel prints and routes its events to the calls waiting on them;
every call into the session happens on the event loop's thread. A call whose task is cancelled
sends a cancel frame (the gateway then tells the upstream ``notifications/cancelled``). An
operation the channel never carried before it died goes over one-shot commands instead; one it
carried fails with ``SessionLostError`` and is never replayed (a tool call may have had effects).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from ctypes import c_size_t, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any

from . import _native
from .errors import OK, RESULT, McpgwError, error_for, take_error
from .wire import ToolChunk

lib = _native.lib
log = logging.getLogger(__name__)

#: Starts a command in the sandbox with stdin, stdout and stderr piped, and leaves it running.
Spawn = Callable[[str], Awaitable[asyncio.subprocess.Process]]

# mcpgw_session_event_kind
_OPENED, _PROGRESS, _FINISHED, _UNSENT, _NOTICE, _LOST = 1, 2, 3, 4, 5, 6
#: How long an answer may take beyond the operation's own limit before the host gives up.
ANSWER_GRACE = 5.0
#: How much of the channel's stderr is kept for the message when it dies.
STDERR_TAIL = 2048


@dataclass
class _Waiter:
    """A call in flight: its outcome (``"finished"`` or ``"unsent"``) and its progress."""

    done: asyncio.Future[str]
    on_progress: Callable[[ToolChunk], object] | None = None
    queue: asyncio.Queue[ToolChunk] | None = None
    failures: list[BaseException] = field(default_factory=list)


class AsyncSession:
    """A session channel over a process the host spawned (``docker exec -i C sh -c CMD``, ...).
    Made by :meth:`mcpgw_client.AsyncClient.attach`."""

    def __init__(self, ptr: int, proc: asyncio.subprocess.Process) -> None:
        self._ptr = ptr
        self._proc = proc
        self._waiters: dict[int, _Waiter] = {}
        loop = asyncio.get_running_loop()
        self._opened: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._stderr = bytearray()
        self.lost_reason: str | None = None
        self.hello: dict[str, Any] = {}
        self._reader = loop.create_task(self._read(), name="mcpgw-session-reader")
        self._stderr_reader = loop.create_task(self._read_stderr(), name="mcpgw-session-stderr")

    @classmethod
    async def open(cls, client: int, spawn: Spawn, *, open_timeout: float) -> AsyncSession:
        """Opens a session of the native client `client` over a process started with `spawn`,
        and waits for the channel's hello."""
        out = c_void_p()
        err = c_void_p()
        rc = lib.mcpgw_session_open(client, ctypes.byref(out), ctypes.byref(err))
        if rc != OK:
            raise take_error(err.value, rc)
        ptr = out.value or 0
        try:
            command = _native.text(lib.mcpgw_session_command(ptr)) or ""
            proc = await spawn(command)
        except BaseException:
            lib.mcpgw_session_free(ptr)
            raise
        session = cls(ptr, proc)
        try:
            session._flush()
            async with asyncio.timeout(open_timeout):
                session.hello = await asyncio.shield(session._opened)
        except TimeoutError:
            await session.aclose()
            raise error_for(
                RESULT["DEADLINE"],
                f"the session channel did not answer within {open_timeout:g} s; is "
                "`mcpgw-gateway attach` running at the other end?",
            ) from None
        except BaseException:
            await session.aclose()
            raise
        return session

    @property
    def lost(self) -> bool:
        """Whether the channel is gone."""
        return self.lost_reason is not None or not self._ptr

    # ── calls ─────────────────────────────────────────────────────

    async def run(
        self,
        op: Any,
        on_progress: Callable[[ToolChunk], object] | None = None,
        fallback: Callable[[Any], Awaitable[Any]] | None = None,
    ) -> Any:
        """Runs the prepared operation `op` (a :class:`mcpgw_client.client.Op`) over the channel and
        returns its result JSON; `on_progress` receives each progress chunk of a tool call. An
        operation the channel lost before writing it runs through `fallback` (one-shot)."""
        waiter = self._waiter(on_progress=on_progress)
        outcome = await self._carry(op, waiter, stream=on_progress is not None)
        if outcome == "unsent" and fallback is not None:
            return await fallback(op)
        for failure in waiter.failures:
            raise failure
        op.raise_failure()
        return op.result_json()

    async def stream(self, op: Any, timeout: float) -> AsyncIterator[ToolChunk]:
        """Runs a prepared call_tool `op` over the channel and yields its progress chunks as
        they arrive, then its last chunk. Leaving early cancels the call."""
        waiter = self._waiter(queue=asyncio.Queue())
        assert waiter.queue is not None
        carry = asyncio.ensure_future(self._carry(op, waiter, stream=True))
        try:
            while True:
                get = asyncio.ensure_future(waiter.queue.get())
                await asyncio.wait({get, carry}, return_when=asyncio.FIRST_COMPLETED)
                if get.done():
                    yield get.result()
                    continue
                get.cancel()
                break
            while not waiter.queue.empty():
                yield waiter.queue.get_nowait()
            if carry.result() == "unsent":
                raise error_for(RESULT["SESSION_LOST"], "call_tool: the session was lost before the call was sent")
            op.raise_failure()
            chunk: ToolChunk = op.result_json()
            yield chunk
        finally:
            if not carry.done():
                carry.cancel()
                with contextlib.suppress(BaseException):
                    await carry

    def _waiter(self, **kwargs: Any) -> _Waiter:
        return _Waiter(done=asyncio.get_running_loop().create_future(), **kwargs)

    async def _carry(self, op: Any, waiter: _Waiter, *, stream: bool) -> str:
        if self.lost:
            raise error_for(RESULT["SESSION_LOST"], f"{op.name}: the session channel is lost ({self.lost_reason})")
        first = op.command(with_stdin=False)
        limit = (first[1] if first else 60.0) + ANSWER_GRACE
        ident = c_uint64()
        rc = lib.mcpgw_session_submit(self._ptr, op.ptr, stream, ctypes.byref(ident))
        if rc != OK:
            op.raise_failure()
            raise error_for(
                rc, f"{op.name}: the session did not take it ({_native.text(lib.mcpgw_result_message(rc))})"
            )
        op_id = ident.value
        self._waiters[op_id] = waiter
        self._flush()
        try:
            async with asyncio.timeout(limit):
                return await asyncio.shield(waiter.done)
        except TimeoutError:
            self._cancel(op_id)
            raise error_for(
                RESULT["DEADLINE"], f"{op.name}: no answer over the session within {limit:g} s; it was cancelled"
            ) from None
        except asyncio.CancelledError:
            self._cancel(op_id)
            raise
        finally:
            self._waiters.pop(op_id, None)

    def _cancel(self, op_id: int) -> None:
        if self._ptr and lib.mcpgw_session_cancel(self._ptr, op_id):
            self._flush()
        self._drain_events()

    # ── the channel ───────────────────────────────────────────────

    def _flush(self) -> None:
        """Writes what the session has for the channel's stdin."""
        if not self._ptr:
            return
        buf = c_void_p()
        size = c_size_t()
        if lib.mcpgw_session_output(self._ptr, ctypes.byref(buf), ctypes.byref(size)) != OK or not size.value:
            return
        data = ctypes.string_at(buf.value, size.value) if buf.value else b""
        lib.mcpgw_session_consume(self._ptr, size.value)
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            # Buffered by the transport: nothing waits here, and the order of frames is kept.
            stdin.write(data)
        except (ConnectionError, RuntimeError) as e:
            log.debug("writing to the session channel failed: %s", e)

    async def _read(self) -> None:
        stdout = self._proc.stdout
        assert stdout is not None
        try:
            while data := await stdout.read(1 << 16):
                if not self._ptr:
                    return
                lib.mcpgw_session_feed(self._ptr, data, len(data))
                self._drain_events()
                self._flush()
        except (ConnectionError, OSError) as e:
            log.debug("reading the session channel failed: %s", e)
        if not self._ptr:
            return
        status = await self._proc.wait()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(self._stderr_reader), 1.0)
        said = self._stderr.decode("utf-8", errors="replace").strip()
        reason = f"exit status {status}" + (f"; stderr: {said}" if said else "")
        if self._ptr:
            lib.mcpgw_session_feed_eof(self._ptr, reason.encode("utf-8", errors="replace").replace(b"\0", b" "))
            self._drain_events()

    async def _read_stderr(self) -> None:
        stderr = self._proc.stderr
        if stderr is None:
            return
        with contextlib.suppress(ConnectionError, OSError):
            while data := await stderr.read(1 << 14):
                self._stderr += data
                del self._stderr[:-STDERR_TAIL]

    def _drain_events(self) -> None:
        """Routes every pending event of the session."""
        while self._ptr:
            ev = c_void_p()
            if lib.mcpgw_session_next_event(self._ptr, ctypes.byref(ev)) != OK:
                return
            try:
                self._route(ev.value or 0)
            finally:
                lib.mcpgw_session_event_free(ev.value)

    def _route(self, ev: int) -> None:
        kind = int(lib.mcpgw_session_event_get_kind(ev))
        op_id = int(lib.mcpgw_session_event_id(ev))
        if kind == _OPENED:
            hello = json.loads(_native.text(lib.mcpgw_session_event_text(ev)) or "{}")
            if not self._opened.done():
                self._opened.set_result(hello)
        elif kind == _PROGRESS:
            waiter = self._waiters.get(op_id)
            chunk_ptr = lib.mcpgw_session_event_chunk(ev)
            if waiter is None or not chunk_ptr:
                return
            out = c_void_p()
            if lib.mcpgw_tool_chunk_to_json(chunk_ptr, ctypes.byref(out)) != OK:
                return
            chunk: ToolChunk = json.loads(_native.take_string(out.value))
            if waiter.queue is not None:
                waiter.queue.put_nowait(chunk)
            if waiter.on_progress is not None:
                try:
                    waiter.on_progress(chunk)
                except Exception as e:  # noqa: BLE001 - reported to the caller, not the reader
                    waiter.failures.append(e)
        elif kind in (_FINISHED, _UNSENT):
            waiter = self._waiters.get(op_id)
            if waiter is not None and not waiter.done.done():
                waiter.done.set_result("finished" if kind == _FINISHED else "unsent")
        elif kind == _NOTICE:
            log.info("session: %s", _native.text(lib.mcpgw_session_event_text(ev)))
        elif kind == _LOST:
            self.lost_reason = _native.text(lib.mcpgw_session_event_text(ev)) or "the channel is gone"
            if not self._opened.done():
                self._opened.set_exception(error_for(RESULT["SESSION_LOST"], self.lost_reason))
                # Retrieved here too, so an unawaited failure is not reported as never retrieved.
                self._opened.exception()

    async def aclose(self) -> None:
        """Ends the session: calls in flight fail with ``SessionLostError``; closing the
        channel's stdin makes ``attach`` cancel them in the gateway and exit."""
        if not self._ptr:
            return
        lib.mcpgw_session_close(self._ptr)
        self._drain_events()
        stdin = self._proc.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()
        try:
            async with asyncio.timeout(5.0):
                await self._proc.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            await self._proc.wait()
        for task in (self._reader, self._stderr_reader):
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task
        ptr, self._ptr = self._ptr, 0
        lib.mcpgw_session_free(ptr)


__all__ = ["AsyncSession", "McpgwError", "Spawn"]
