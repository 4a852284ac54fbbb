"""Virtual MCP connections: raw JSON-RPC to one registered MCP, both ways, over the session
channel (the gateway is the MCP server of each connection, with the upstream's own
capabilities), from :meth:`mcpgw_client.AsyncClient.connect`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any

from ._driver import encode
from .errors import invalid, invalid_state

if TYPE_CHECKING:
    from ._driver import Driver

#: What ends a connection's queue.
_END = object()


class Connection:
    """One virtual MCP connection. Receive its messages with ``async for message in conn``,
    :meth:`receive`, or the `on_message` callback given to ``connect``; it ends with a
    :attr:`reason` (``None`` when this side closed it)."""

    def __init__(self, driver: Driver, mcp: str, on_message: Callable[[dict[str, Any]], object] | None) -> None:
        self._driver = driver
        self.mcp = mcp
        self._on_message = on_message
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        self._open: asyncio.Future[None] = loop.create_future()
        self._ended: asyncio.Future[None] = loop.create_future()
        self.id = 0
        #: Why the connection ended (``None`` while open, or when this side closed it).
        self.reason: str | None = None
        #: The HTTP status of a refused open (404: no such MCP), else ``None``.
        self.status: int | None = None
        #: The result code of the end's kind as the library judged it (NOT_FOUND for no such
        #: MCP, UPSTREAM_ERROR when the gateway ended it, SESSION_LOST, ...); 0 when this side
        #: closed it.
        self.result = 0

    @property
    def closed(self) -> bool:
        """Whether the connection has ended."""
        return self._ended.done()

    # ── from the driver ───────────────────────────────────────────

    def opened(self) -> None:
        if not self._open.done():
            self._open.set_result(None)

    def message(self, msg: dict[str, Any]) -> None:
        self._queue.put_nowait(msg)
        if self._on_message is not None:
            self._on_message(msg)

    def ended(self, reason: str | None, status: int | None, result: int) -> None:
        self.reason, self.status, self.result = reason, status, result
        for fut in (self._open, self._ended):
            if not fut.done():
                fut.set_result(None)
        self._queue.put_nowait(_END)

    # ── the caller's side ─────────────────────────────────────────

    async def wait_open(self) -> None:
        """Returns once the connection is open, or has ended (then :attr:`reason` says why)."""
        await asyncio.shield(self._open)

    async def send(self, message: Mapping[str, Any] | str) -> None:
        """Sends one JSON-RPC message: an object, or its JSON text."""
        if self.closed:
            raise invalid_state(f"the connection to {self.mcp} has ended: {self.reason or 'closed by this side'}")
        if isinstance(message, str):
            try:
                data = message.encode("utf-8")
            except UnicodeEncodeError as e:
                raise invalid(f"the JSON-RPC message is not valid Unicode text: {e}") from None
        elif isinstance(message, Mapping):
            data = encode(dict(message), "the JSON-RPC message")
        else:
            raise invalid(f"a message is a JSON-RPC object or its text, not {type(message).__name__}")
        self._driver.send(self.id, data)

    async def receive(self) -> dict[str, Any] | None:
        """The next message, or ``None`` once the connection has ended."""
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)
            return None
        msg: dict[str, Any] = item
        return msg

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while (msg := await self.receive()) is not None:
            yield msg

    async def close(self) -> None:
        """Closes the connection; returns once it has ended."""
        if not self.closed:
            self._driver.close_connection(self.id)
            await asyncio.shield(self._ended)
