"""The thin loop around one ``mcpgw_host``: it hands the library what happened and does what
the library says, on one asyncio event loop, and decides nothing itself.

The library (the host driver) owns every decision: session or one-shot, the fallback of an
operation the channel refused or never wrote, reopening, resumed calls, every timer and grace,
stderr tails, the sandbox backends and their failure rules. Here: RUN and OPEN actions spawn
processes (:mod:`mcpgw_client._proc`), WRITE, CLOSE_INPUT and KILL act on them, PROGRESS and DONE go to
the caller awaiting that operation, CONNECTION_* to its connection, NOTICE to the ``mcpgw``
logger at debug level; after every report the actions are drained and the one timer is set to
``mcpgw_host_timeout_ms``. The host is only ever touched from the loop's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import weakref
from collections.abc import AsyncGenerator, Callable
from ctypes import c_size_t, c_uint64, c_void_p
from typing import TYPE_CHECKING, Any

from . import _native
from ._native import ACTION_KINDS, STDIN_KINDS, lib
from ._proc import Child, ExecChannel, ExecRun, Handle
from .backends import Backend
from .errors import OK, RESULT, from_json, invalid, invalid_state, take_error

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("mcpgw_client")

_K = ACTION_KINDS
#: Progress callbacks take a chunk.
OnProgress = Callable[[Any], object]


def encode(value: object, what: str) -> bytes:
    """`value` as JSON text for the library; INVALID_ARGUMENT for what JSON cannot carry (a
    cycle, a non-serialisable value, NaN, text that is not Unicode)."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as e:
        raise invalid(f"{what} cannot be written as JSON: {e}") from None


def _c_reason(reason: str) -> bytes:
    return reason.encode("utf-8", errors="replace").replace(b"\0", b" ")


#: What ends a stream's queue.
_END = object()


class _Op:
    """An operation a caller awaits: its result, its progress (to a callback, a queue)."""

    __slots__ = ("failure", "future", "on_progress", "queue")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_progress: OnProgress | None, stream: bool) -> None:
        self.future: asyncio.Future[Any] = loop.create_future()
        self.on_progress = on_progress
        self.queue: asyncio.Queue[Any] | None = asyncio.Queue() if stream else None
        self.failure: BaseException | None = None

    def progress(self, chunk: Any) -> None:
        if self.queue is not None:
            self.queue.put_nowait(chunk)
        if self.on_progress is not None and self.failure is None:
            try:
                self.on_progress(chunk)
            except Exception as e:  # noqa: BLE001 - raised to the caller once the call ends
                self.failure = e

    def finish(self, value: Any, error: BaseException | None) -> None:
        error = error or self.failure
        if self.queue is not None:
            self.queue.put_nowait(_END)
        if not self.future.done():
            if error is not None:
                self.future.set_exception(error)
                # Retrieved here too: a caller that went away must not leave it unretrieved.
                self.future.exception()
            else:
                self.future.set_result(value)


class _Sink:
    """Reports one process's events to the host; for a RUN, its output is kept until it exits."""

    __slots__ = ("channel", "driver", "err_buf", "out_buf", "proc")

    def __init__(self, driver: Driver, proc: int, channel: bool) -> None:
        self.driver, self.proc, self.channel = driver, proc, channel
        self.out_buf = bytearray()
        self.err_buf = bytearray()

    def out(self, data: bytes) -> None:
        if not self.channel:
            self.out_buf += data
        elif ptr := self.driver.ptr:
            lib.mcpgw_host_on_data(ptr, self.proc, data, len(data))
            self.driver.pump()

    def err(self, data: bytes) -> None:
        if not self.channel:
            self.err_buf += data
        elif ptr := self.driver.ptr:
            lib.mcpgw_host_on_stderr(ptr, self.proc, data, len(data))

    def out_end(self) -> None:
        if self.channel and (ptr := self.driver.ptr):
            lib.mcpgw_host_on_eof(ptr, self.proc)
            self.driver.pump()

    def exited(self, code: int) -> None:
        out, err = bytes(self.out_buf), bytes(self.err_buf)
        self.driver.ended(self.proc)
        if ptr := self.driver.ptr:
            lib.mcpgw_host_on_exit(ptr, self.proc, code, out, len(out), err, len(err))
            self.driver.pump()

    def failed(self, reason: str) -> None:
        self.driver.ended(self.proc)
        if ptr := self.driver.ptr:
            lib.mcpgw_host_on_exec_failed(ptr, self.proc, _c_reason(reason))
            self.driver.pump()


def _free(ptr: int, pids: dict[int, int]) -> None:
    # A backstop for clients never closed: nothing they started may live on.
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    lib.mcpgw_host_free(ptr)


class Driver:
    """One ``mcpgw_host`` and the processes, operations and connections it drives."""

    def __init__(
        self,
        config: dict[str, Any],
        backend: Backend,
        on_audit: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        host, err = c_void_p(), c_void_p()
        rc = lib.mcpgw_host_new(encode(config, "the client's configuration"), ctypes.byref(host), ctypes.byref(err))
        if rc != OK:
            raise take_error(err.value, rc)
        self.ptr: int = host.value or 0
        self._backend = backend
        self._on_audit = on_audit
        self._pids: dict[int, int] = {}
        self._finalizer = weakref.finalize(self, _free, self.ptr, self._pids)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._procs: dict[int, Handle] = {}
        self._ops: dict[int, _Op] = {}
        self.conns: dict[int, Connection] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._pumping = False
        self._idle: asyncio.Future[None] | None = None
        self._closing = False

    # ── the caller's side ─────────────────────────────────────────

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, which must be the one this driver started on."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise invalid_state("the client is used from another event loop than the one it started on")
        if self._closing or not self.ptr:
            raise invalid_state("the client is closed")
        return loop

    def submit(
        self, op: dict[str, Any], on_progress: OnProgress | None = None, stream: bool = False
    ) -> tuple[int, _Op]:
        """Submits `op` (a ``Submit`` of the library); its DONE settles the returned waiter."""
        loop = self.loop()
        text = encode(op, f"the {op.get('op', 'operation')} operation")
        ident, err = c_uint64(), c_void_p()
        rc = lib.mcpgw_host_submit(self.ptr, text, ctypes.byref(ident), ctypes.byref(err))
        if rc != OK:
            raise take_error(err.value, rc)
        waiter = _Op(loop, on_progress, stream)
        self._ops[ident.value] = waiter
        self.pump()
        return ident.value, waiter

    async def call(self, op: dict[str, Any], on_progress: OnProgress | None = None) -> Any:
        """Runs `op` to its result; cancelling the caller cancels it."""
        ident, waiter = self.submit(op, on_progress)
        try:
            return await waiter.future
        except asyncio.CancelledError:
            self.cancel(ident)
            raise

    async def stream(self, op: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """Runs `op` and yields each progress chunk as it comes, then its result. Leaving early
        cancels it."""
        ident, waiter = self.submit(op, stream=True)
        assert waiter.queue is not None
        try:
            while (chunk := await waiter.queue.get()) is not _END:
                yield chunk
            yield await waiter.future
        finally:
            if not waiter.future.done():
                self.cancel(ident)

    def cancel(self, ident: int) -> None:
        """Cancels operation `ident` (its DONE then comes, and is ignored)."""
        if self.ptr and lib.mcpgw_host_cancel(self.ptr, ident):
            self.pump()

    def state(self) -> dict[str, Any]:
        """What the library knows: session state, gateway, hello."""
        if not self.ptr:
            return {"session": "off", "gateway": None, "hello": None}
        state: dict[str, Any] = json.loads(_native.take_string(lib.mcpgw_host_state_json(self.ptr)))
        return state

    def open_connection(self, conn: Connection, mcp: bytes, agent_id: bytes, session_id: bytes) -> int:
        """Opens a virtual MCP connection for `conn`; returns its id."""
        self.loop()
        ident, err = c_uint64(), c_void_p()
        rc = lib.mcpgw_host_open_connection(self.ptr, mcp, agent_id, session_id, ctypes.byref(ident), ctypes.byref(err))
        if rc != OK:
            raise take_error(err.value, rc)
        self.conns[ident.value] = conn
        self.pump()
        return ident.value

    def send(self, ident: int, message: bytes) -> None:
        """Sends one JSON-RPC message on connection `ident`."""
        self.loop()
        err = c_void_p()
        rc = lib.mcpgw_host_send(self.ptr, ident, message, len(message), ctypes.byref(err))
        if rc != OK:
            raise take_error(err.value, rc)
        self.pump()

    def close_connection(self, ident: int) -> None:
        """Closes connection `ident` (its CONNECTION_CLOSED follows)."""
        if self.ptr and lib.mcpgw_host_close_connection(self.ptr, ident):
            self.pump()

    async def aclose(self) -> None:
        """Ends everything: operations under way are cancelled, the session closed, and every
        process the library started has ended before the host is freed."""
        if self._closing or not self.ptr:
            return
        if self._loop is not None:
            self.loop()
            for ident in list(self._ops):
                self.cancel(ident)
            if self.state()["session"] != "off":
                ident, waiter = self.submit({"op": "close_session"})
                with contextlib.suppress(Exception):
                    await waiter.future
            self._closing = True
            while self._procs:
                self._idle = self._loop.create_future()
                await self._idle
            if self._timer is not None:
                self._timer.cancel()
        self._closing = True
        self._finalizer()
        self.ptr = 0
        for conn in self.conns.values():
            conn.ended("the client was closed", None, RESULT["INVALID_STATE"])
        self.conns.clear()

    # ── the library's side ────────────────────────────────────────

    def ended(self, proc: int) -> None:
        """Process `proc` ended: it is forgotten."""
        self._procs.pop(proc, None)
        self._pids.pop(proc, None)
        if not self._procs and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    def pump(self) -> None:
        """Does every action the library has, then sets the timer."""
        if self._pumping or not self.ptr:
            return
        self._pumping = True
        try:
            while self.ptr and (action := lib.mcpgw_host_next_action(self.ptr)):
                try:
                    self._handle(action)
                finally:
                    lib.mcpgw_action_free(action)
        finally:
            self._pumping = False
        self._arm()

    def _arm(self) -> None:
        if self._loop is None or not self.ptr:
            return
        ms = int(lib.mcpgw_host_timeout_ms(self.ptr))
        when = None if ms < 0 else self._loop.time() + ms / 1000
        if self._timer is not None:
            if when is not None and abs(self._timer.when() - when) < 0.001:
                return
            self._timer.cancel()
            self._timer = None
        if when is not None:
            self._timer = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        if self.ptr:
            lib.mcpgw_host_on_timeout(self.ptr)
            self.pump()

    @staticmethod
    def _bytes(action: int) -> bytes:
        size = c_size_t()
        ptr = lib.mcpgw_action_bytes(action, ctypes.byref(size))
        return ctypes.string_at(ptr, size.value) if ptr else b""

    def _handle(self, a: int) -> None:
        kind = int(lib.mcpgw_action_get_kind(a))
        if kind in (_K["RUN"], _K["OPEN"]):
            self._spawn(a, channel=kind == _K["OPEN"])
        elif kind in (_K["WRITE"], _K["CLOSE_INPUT"], _K["KILL"]):
            handle = self._procs.get(int(lib.mcpgw_action_proc(a)))
            if handle is None:
                return
            if kind == _K["WRITE"]:
                handle.write(self._bytes(a))
            elif kind == _K["CLOSE_INPUT"]:
                handle.close_input()
            else:
                handle.kill()
        elif kind in (_K["PROGRESS"], _K["DONE"]):
            ident = int(lib.mcpgw_action_id(a))
            op = self._ops.get(ident) if kind == _K["PROGRESS"] else self._ops.pop(ident, None)
            if op is None:
                return
            value = json.loads(self._bytes(a))
            if kind == _K["PROGRESS"]:
                op.progress(value)
            elif int(lib.mcpgw_action_result(a)) == OK:
                op.finish(value, None)
            else:
                op.finish(None, from_json(value))
        elif kind in (_K["CONNECTION_OPENED"], _K["CONNECTION_MESSAGE"], _K["CONNECTION_CLOSED"]):
            self._connection_event(kind, a)
        elif kind == _K["NOTICE"]:
            log.debug("%s", _native.text(lib.mcpgw_action_text(a)))
        elif kind == _K["AUDIT"] and self._on_audit is not None:
            record = json.loads(self._bytes(a))
            try:
                self._on_audit(record)
            except Exception:  # the caller's callback must not stop the driver
                log.exception("the audit callback raised")

    def _connection_event(self, kind: int, a: int) -> None:
        ident = int(lib.mcpgw_action_id(a))
        conn = self.conns.get(ident) if kind != _K["CONNECTION_CLOSED"] else self.conns.pop(ident, None)
        if conn is None:
            return
        if kind == _K["CONNECTION_OPENED"]:
            conn.opened()
        elif kind == _K["CONNECTION_MESSAGE"]:
            conn.message(json.loads(self._bytes(a)))
        else:
            status = int(lib.mcpgw_action_status(a)) or None
            conn.ended(_native.text(lib.mcpgw_action_text(a)), status, int(lib.mcpgw_action_result(a)))

    def _spawn(self, a: int, *, channel: bool) -> None:
        loop = self._loop
        assert loop is not None
        proc = int(lib.mcpgw_action_proc(a))
        sink = _Sink(self, proc, channel)
        stdin_kind = int(lib.mcpgw_action_stdin_kind(a))
        stdin = self._bytes(a) if not channel and stdin_kind == STDIN_KINDS["BYTES"] else None
        argc = int(lib.mcpgw_action_argc(a))
        handle: Handle
        if argc:
            argv = [lib.mcpgw_action_argv(a, i) for i in range(argc)]
            cwd = lib.mcpgw_action_cwd(a)
            try:
                child = Child(loop, argv, cwd.decode() if cwd else None, channel or stdin_kind != 0, sink)
            except OSError as e:
                return self._not_started(sink, f"cannot run {argv[0].decode(errors='replace')!r}: {e}")
            self._pids[proc] = child.pid
            handle = child
            if stdin is not None:
                child.write(stdin)
                child.close_input()
        else:
            shell = _native.text(lib.mcpgw_action_shell(a)) or ""
            if channel:
                if self._backend.open is None:
                    return self._not_started(sink, "the exec backend was given no channel opener (open=)")
                handle = ExecChannel(self._backend.open, shell, sink)
            else:
                assert self._backend.run is not None
                handle = ExecRun(self._backend.run, shell, int(lib.mcpgw_action_timeout_ms(a)) / 1000, stdin, sink)
        self._procs[proc] = handle

    @staticmethod
    def _not_started(sink: _Sink, reason: str) -> None:
        sink.failed(reason)
        sink.out_end()
