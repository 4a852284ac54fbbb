"""The official MCP Python SDK (``mcp``, the ``sdk`` extra) over a virtual MCP connection:
:func:`client_streams` gives the pair of streams ``mcp.ClientSession`` takes, as
``mcp.client.stdio.stdio_client`` does, carried by the client's session channel::

    async with client_streams(client, "ev") as (read, write), ClientSession(read, write) as session:
        await session.initialize()

The gateway is the MCP server of the connection, with the sandboxed server's own handshake;
the server's sampling, elicitation and roots requests arrive on the read stream, so the
session's own callbacks answer them. Leaving the context (or the session closing its write
stream) closes the connection, not the client's session channel. A connection that ends under
the session ends the read stream, after one exception item saying why (the session hands it to
its ``message_handler``); the session then fails what is in flight with its own
``CONNECTION_CLOSED`` error. asyncio only, as the binding is.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

try:
    import anyio
    import mcp_types as types
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.shared.message import SessionMessage
except ImportError as e:
    raise ImportError(
        f"mcpgw_client.sdk needs the official MCP SDK, mcp 2.x: install this package's `sdk` extra "
        f"or `pip install 'mcp>=2.3,<3'` ({e})"
    ) from e

from .client import AsyncClient
from .connection import Connection
from .errors import RESULT, McpgwError, error_for, invalid

#: The streams :func:`client_streams` gives: what the server sends (or an exception saying
#: why a message could not be read), and what the client sends.
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


def _ended_error(conn: Connection) -> McpgwError:
    """The typed error of a connection that ended without this side closing it, of the kind the
    library gave its end (a refused open's by its HTTP status, UPSTREAM_ERROR when the gateway
    ended it, SESSION_LOST when the channel was lost)."""
    reason = conn.reason or "no reason given"
    if conn.status is not None:
        message = f"cannot connect to {conn.mcp}: {reason}"
    else:
        message = f"the connection to {conn.mcp} ended: {reason}"
    return error_for(conn.result or RESULT["UPSTREAM_ERROR"], message, status=conn.status)


@asynccontextmanager
async def client_streams(
    client: AsyncClient, mcp: str, *, agent_id: str = "", session_id: str = ""
) -> AsyncIterator[Streams]:
    """Opens a virtual MCP connection to `mcp` (registered in the scope `agent_id`,
    `session_id`) over `client`'s session channel and yields ``(read, write)`` for
    ``mcp.ClientSession``. The session channel must be open (:meth:`AsyncClient.open_session`).

    Raises the binding's typed errors: ``NotFoundError`` for an MCP the gateway does not
    have, ``InvalidStateError`` for a client that is closed or has no session open,
    ``InvalidArgumentError`` for a name that is not text.
    """
    if not isinstance(client, AsyncClient):
        raise invalid(f"client_streams takes an mcpgw_client.AsyncClient, not {type(client).__name__}")
    conn = await client.connect(mcp, agent_id=agent_id, session_id=session_id)
    if conn.closed:
        raise _ended_error(conn)

    # Unbuffered both ways, as the SDK's stdio transport: the connection's own queue holds what
    # the gateway sent until the session reads it.
    to_session, read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def relay_in() -> None:
        async with to_session:
            try:
                async for msg in conn:
                    try:
                        item: SessionMessage | Exception = SessionMessage(
                            types.jsonrpc_message_adapter.validate_python(msg, by_name=False)
                        )
                    except ValueError as e:
                        item = e
                    await to_session.send(item)
                if conn.reason is not None:
                    await to_session.send(_ended_error(conn))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass  # the session stopped reading

    async def relay_out() -> None:
        async with from_session:
            async for sent in from_session:
                text = sent.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    await conn.send(text)
                except McpgwError as e:
                    if conn.closed:
                        return  # the read stream's end tells the session
                    if isinstance(sent.message, types.JSONRPCRequest):
                        # Not sent: its answer would never come, so it is this error.
                        error = types.ErrorData(code=types.INTERNAL_ERROR, message=f"not sent to {mcp}: {e}")
                        answer = types.JSONRPCError(jsonrpc="2.0", id=sent.message.id, error=error)
                        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                            await to_session.send(SessionMessage(answer))
        # The session closed its write stream: it is done with the connection.
        await conn.close()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(relay_in, name=f"mcpgw_client.sdk: from {mcp}")
            tg.start_soon(relay_out, name=f"mcpgw_client.sdk: to {mcp}")
            try:
                yield read, write
            finally:
                tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await conn.close()
        read.close()
        write.close()


__all__ = ["Streams", "client_streams"]
