"""Processes on the event loop, for the host driver's RUN and OPEN actions: spawned without a
host shell in a process group of their own, their pipes read and written without blocking from
the loop's selector, their exit seen through a pidfd, so that no thread waits for any of them
(one host process holds many sessions). The exec backend's functions are driven the same way,
as tasks.

Each kind reports to a :class:`Sink`: output as it comes, the end of stdout, the exit status
(128 + N for signal N), or that it could not be run.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import subprocess
from collections.abc import Callable
from typing import IO, Any, Protocol, cast

from .backends import Channel, OpenFn, RunFn
from .providers._channel import describe

_READ = 1 << 16


class Sink(Protocol):
    """Where a process's events go."""

    def out(self, data: bytes) -> None: ...
    def err(self, data: bytes) -> None: ...
    def out_end(self) -> None: ...
    def exited(self, code: int) -> None: ...
    def failed(self, reason: str) -> None: ...


class Handle(Protocol):
    """What the driver does to a process."""

    def write(self, data: bytes) -> None: ...
    def close_input(self) -> None: ...
    def kill(self) -> None: ...


def exit_status(returncode: int) -> int:
    """A Popen return code as a shell reports it: signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Child:
    """A child process whose stdout and stderr are piped to `sink`, and whose stdin is
    /dev/null (`stdin` false) or a pipe written with :meth:`write`."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, argv: list[str], cwd: str | None, stdin: bool, sink: Sink
    ) -> None:
        self._loop = loop
        self._sink = sink
        self._pending = bytearray()
        self._close_after = False
        self._readers: dict[int, tuple[IO[bytes], Callable[[bytes], None]]] = {}
        self._p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
            bufsize=0,
        )
        self._stdin = self._p.stdin
        if self._stdin is not None:
            os.set_blocking(self._stdin.fileno(), False)
        for pipe, on_data in ((self._p.stdout, sink.out), (self._p.stderr, sink.err)):
            assert pipe is not None
            fd = pipe.fileno()
            os.set_blocking(fd, False)
            self._readers[fd] = (pipe, on_data)
            loop.add_reader(fd, self._readable, fd)
        try:
            self._pidfd: int | None = os.pidfd_open(self._p.pid)
        except (AttributeError, OSError):
            # A kernel without pidfds: a worker thread waits instead.
            self._pidfd = None
            asyncio.ensure_future(loop.run_in_executor(None, self._p.wait)).add_done_callback(lambda _: self._exited())
        else:
            loop.add_reader(self._pidfd, self._exited)

    @property
    def pid(self) -> int:
        """The process id (also its process group)."""
        return self._p.pid

    def _readable(self, fd: int) -> bool:
        """Reads what `fd` has; returns whether it may have more."""
        on_data = self._readers[fd][1]
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if not data:
            self._end(fd)
            return False
        on_data(data)
        return True

    def _end(self, fd: int) -> None:
        pipe = self._readers.pop(fd)[0]
        self._loop.remove_reader(fd)
        pipe.close()
        if pipe is self._p.stdout:
            self._sink.out_end()

    def _exited(self) -> None:
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        code = exit_status(self._p.wait())
        # What the process wrote before it ended is in its pipes: read it all, then close them
        # (whatever else still holds them is not this process).
        for fd in list(self._readers):
            while fd in self._readers and self._readable(fd):
                pass
            if fd in self._readers:
                self._end(fd)
        self._close_stdin()
        self._sink.exited(code)

    def write(self, data: bytes) -> None:
        """Writes `data` to stdin after what is already waiting, without blocking."""
        if self._stdin is None or self._stdin.closed:
            return
        if not self._pending:
            try:
                n = os.write(self._stdin.fileno(), data)
            except BlockingIOError:
                n = 0
            except OSError:
                # The process no longer reads (it exited, or closed its stdin): its exit says why.
                self._close_stdin()
                return
            if n == len(data):
                return
            self._loop.add_writer(self._stdin.fileno(), self._writable)
            data = data[n:]
        self._pending += data

    def _writable(self) -> None:
        assert self._stdin is not None
        try:
            n = os.write(self._stdin.fileno(), self._pending)
        except BlockingIOError:
            return
        except OSError:
            self._close_stdin()
            return
        del self._pending[:n]
        if not self._pending:
            self._loop.remove_writer(self._stdin.fileno())
            if self._close_after:
                self._close_stdin()

    def close_input(self) -> None:
        """Closes stdin once what waits to be written is written."""
        if self._pending:
            self._close_after = True
        else:
            self._close_stdin()

    def _close_stdin(self) -> None:
        if self._stdin is not None and not self._stdin.closed:
            if self._pending:
                self._loop.remove_writer(self._stdin.fileno())
                self._pending.clear()
            self._stdin.close()

    def kill(self) -> None:
        """SIGKILL to the process group, unless the process was already reaped."""
        if self._p.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._p.pid, signal.SIGKILL)


def _as_bytes(value: object, what: str) -> bytes:
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"the exec function's {what} must be bytes or str, not {type(value).__name__}")


def exec_output(result: object) -> tuple[int, bytes, bytes]:
    """The exit status and output of what an exec function returned (or raised, for SDKs such
    as E2B's that raise an exception carrying the result of a non-zero exit)."""
    code = getattr(result, "exit_code", None)
    if isinstance(code, bool) or not isinstance(code, int) or not -(2**31) <= code < 2**31:
        raise TypeError(f"the exec function's result has no integer exit_code (got {result!r:.200})")
    out, err = getattr(result, "stdout", None), getattr(result, "stderr", None)
    return code, _as_bytes(out, "stdout"), _as_bytes(err, "stderr")


def _is_async(fn: object) -> bool:
    # An async def function, or an object whose __call__ is one.
    call = inspect.getattr_static(type(fn), "__call__", None)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


class ExecRun:
    """One command through the exec backend's function, as a task; killing cancels it."""

    def __init__(self, run: RunFn, command: str, timeout: float, stdin: bytes | None, sink: Sink) -> None:
        self._sink = sink
        self._task = asyncio.ensure_future(self._run(run, command, timeout, stdin))

    async def _run(self, run: RunFn, command: str, timeout: float, stdin: bytes | None) -> None:
        try:
            if _is_async(run):
                result: Any = await cast(Any, run(command, timeout, stdin))
            else:
                result = await asyncio.to_thread(run, command, timeout, stdin)
                if inspect.isawaitable(result):
                    result = await result
            code, out, err = exec_output(result)
        except asyncio.CancelledError:
            self._sink.failed("killed: the command was cancelled or outlived its time limit")
            return
        except Exception as e:  # noqa: BLE001 - any failure of the exec is the sandbox's
            try:
                code, out, err = exec_output(e)
            except TypeError:
                self._sink.failed(describe(e))
                return
        self._sink.out(out)
        self._sink.err(err)
        self._sink.exited(code)

    def write(self, data: bytes) -> None:
        """Commands of the exec backend take their stdin with the call."""

    def close_input(self) -> None:
        """See :meth:`write`."""

    def kill(self) -> None:
        """Cancels the exec function's call."""
        self._task.cancel()


class ExecChannel:
    """A channel opened with the exec backend's opener: its streams read by tasks."""

    def __init__(self, open_fn: OpenFn, command: str, sink: Sink) -> None:
        self._sink = sink
        self._channel: Channel | None = None
        self._killed = False
        self._task = asyncio.ensure_future(self._run(open_fn, command))

    async def _run(self, open_fn: OpenFn, command: str) -> None:
        try:
            self._channel = channel = await open_fn(command)
        except Exception as e:  # noqa: BLE001 - the opener's failure is the channel's
            self._sink.failed(f"the channel opener failed: {describe(e)}")
            self._sink.out_end()
            return
        if self._killed:
            self.kill()

        async def pump(stream: Any, on_data: Callable[[bytes], None]) -> None:
            with contextlib.suppress(ConnectionError, OSError):
                while stream is not None and (data := await stream.read(_READ)):
                    on_data(data)

        await asyncio.gather(pump(channel.stdout, self._sink.out), pump(channel.stderr, self._sink.err))
        self._sink.out_end()
        try:
            code = await channel.wait()
        except Exception as e:  # noqa: BLE001 - an SDK that lost the channel says why
            self._sink.failed(describe(e))
            return
        self._sink.exited(exit_status(code))

    def write(self, data: bytes) -> None:
        """Writes to the channel's stdin (buffered by its transport, in order)."""
        stdin = self._channel.stdin if self._channel is not None else None
        if stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError, OSError):
                stdin.write(data)

    def close_input(self) -> None:
        """Closes the channel's stdin."""
        stdin = self._channel.stdin if self._channel is not None else None
        if stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError, OSError):
                stdin.close()

    def kill(self) -> None:
        """Kills the channel's process group when it leads one, else the process."""
        self._killed = True
        channel = self._channel
        if channel is None:
            return
        pid = getattr(channel, "pid", None)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if isinstance(pid, int) and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
            else:
                channel.kill()
