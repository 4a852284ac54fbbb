"""The blocking client: :class:`Client` runs an :class:`~mcpgw_client.AsyncClient` on an event loop of
its own, in one background thread per client (not per session or per call), and waits for each
operation from the calling thread. Sessions, progress and connections are the same as the
async client's; every thread may call it at once.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from .backends import Backend
from .client import AsyncClient, Options
from .connection import Connection
from .errors import invalid_state
from .wire import ToolChunk

P = ParamSpec("P")
T = TypeVar("T")


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    if loop.is_running():
        loop.call_soon_threadsafe(loop.stop)
    if thread is not threading.current_thread():
        thread.join()
    if not loop.is_running():
        loop.close()


def _blocking(
    method: Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[Client, P], T]:
    """The blocking form of an :class:`AsyncClient` method (same arguments and result)."""

    def run(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._wait(method(self._client, *args, **kwargs))

    run.__name__ = method.__name__
    run.__qualname__ = f"Client.{method.__name__}"
    run.__doc__ = f"The blocking :meth:`AsyncClient.{method.__name__}`."
    return run


class Client:
    """A blocking client of one gateway in one sandbox: the methods of :class:`AsyncClient`,
    with the same arguments, returning their results. :meth:`call_tool_stream` is a plain
    iterator, :meth:`connect` gives a :class:`BlockingConnection`. An interrupt
    (``KeyboardInterrupt``) while waiting cancels the operation. Use ``with`` or :meth:`close`."""

    def __init__(self, backend: Backend, **options: Unpack[Options]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcpgw-client", daemon=True)
        self._thread.start()
        try:
            self._client: AsyncClient = self._wait(self._make(backend, options))
        except BaseException:
            _stop(self._loop, self._thread)
            raise
        self._finalizer = weakref.finalize(self, _stop, self._loop, self._thread)

    @staticmethod
    async def _make(backend: Backend, options: Options) -> AsyncClient:
        return AsyncClient(backend, **options)

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        if not self._loop.is_running() or threading.current_thread() is self._thread:
            coro.close()
            raise invalid_state(
                "the client is closed"
                if not self._loop.is_running()
                else "a blocking call from the client's own callback (on_progress, on_message) would wait for itself"
            )
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted while waiting: the operation is cancelled (the library is told).
            future.cancel()
            raise

    @property
    def state(self) -> dict[str, Any]:
        """See :attr:`AsyncClient.state`."""
        return self._wait(self._read_state())

    async def _read_state(self) -> dict[str, Any]:
        return self._client.state

    @property
    def port(self) -> int:
        """See :attr:`AsyncClient.port`."""
        return self._wait(self._read_port())

    async def _read_port(self) -> int:
        return self._client.port

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return not self._finalizer.alive

    def close(self) -> None:
        """See :meth:`AsyncClient.aclose`; then the client's thread ends. Idempotent."""
        if self._finalizer.alive:
            try:
                self._wait(self._client.aclose())
                self._wait(self._loop.shutdown_default_executor())
            finally:
                self._finalizer()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    start_gateway = _blocking(AsyncClient.start_gateway)
    stop_gateway = _blocking(AsyncClient.stop_gateway)
    ensure_gateway_binary = _blocking(AsyncClient.ensure_gateway_binary)
    health = _blocking(AsyncClient.health)
    list_mcps = _blocking(AsyncClient.list_mcps)
    add_mcp = _blocking(AsyncClient.add_mcp)
    remove_mcp = _blocking(AsyncClient.remove_mcp)
    list_tools = _blocking(AsyncClient.list_tools)
    call_tool = _blocking(AsyncClient.call_tool)
    set_runtime_headers = _blocking(AsyncClient.set_runtime_headers)
    open_session = _blocking(AsyncClient.open_session)
    close_session = _blocking(AsyncClient.close_session)

    def call_tool_stream(self, *args: Any, **kwargs: Any) -> Iterator[ToolChunk]:
        """The blocking :meth:`AsyncClient.call_tool_stream`: progress chunks as they arrive,
        then the final chunk; leaving the loop early cancels the call."""
        return self._iterate(self._client.call_tool_stream(*args, **kwargs))

    def _iterate(self, stream: AsyncGenerator[T, None]) -> Iterator[T]:
        async def step() -> tuple[bool, T | None]:
            try:
                return True, await anext(stream)
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            await stream.aclose()

        try:
            while True:
                more, item = self._wait(step())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            if self._loop.is_running():
                self._wait(close())

    def connect(self, mcp: str, **kwargs: Any) -> BlockingConnection:
        """The blocking :meth:`AsyncClient.connect`."""
        return BlockingConnection(self, self._wait(self._client.connect(mcp, **kwargs)))


class BlockingConnection:
    """A :class:`~mcpgw_client.connection.Connection` of a blocking :class:`Client`: iterate it (or
    :meth:`receive`) for its messages."""

    def __init__(self, client: Client, conn: Connection) -> None:
        self._client = client
        self._conn = conn

    @property
    def reason(self) -> str | None:
        """See :attr:`Connection.reason`."""
        return self._conn.reason

    @property
    def status(self) -> int | None:
        """See :attr:`Connection.status`."""
        return self._conn.status

    @property
    def closed(self) -> bool:
        """See :attr:`Connection.closed`."""
        return self._conn.closed

    def send(self, message: dict[str, Any] | str) -> None:
        """See :meth:`Connection.send`."""
        self._client._wait(self._conn.send(message))

    def receive(self) -> dict[str, Any] | None:
        """See :meth:`Connection.receive`."""
        return self._client._wait(self._conn.receive())

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while (msg := self.receive()) is not None:
            yield msg

    def close(self) -> None:
        """See :meth:`Connection.close`."""
        self._client._wait(self._conn.close())


__all__ = ["BlockingConnection", "Client"]
