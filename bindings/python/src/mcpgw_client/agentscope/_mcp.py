"""AgentScope's own ``GatewayMCPClient`` and ``GatewayMCPTool``, subclassed so that their
requests go through mcpgw: a workspace, its toolkit and its agents cannot tell the difference."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import mcp.types
from agentscope.message import TextBlock, ToolResultState
from agentscope.tool import ToolChunk as AsToolChunk
from agentscope.workspace._gateway_client import GatewayMCPClient as _AsGatewayMCPClient
from agentscope.workspace._gateway_client import GatewayMCPTool as _AsGatewayMCPTool

from ..client import AsyncClient
from ..errors import McpgwError

if TYPE_CHECKING:
    from ._client import GatewayClient


def detail(e: McpgwError) -> str:
    """AgentScope's ``HTTP <status>: <detail>``, or the error's message when the gateway did
    not answer."""
    if e.status:
        return f"HTTP {e.status}: {e.detail if e.detail is not None else e.message}"
    return e.message


class GatewayMCPTool(_AsGatewayMCPTool):
    """AgentScope's ``GatewayMCPTool`` whose call goes through mcpgw."""

    async def __call__(self, **kwargs: Any) -> AsToolChunk:
        """Calls the upstream tool. A failure the gateway answered (4xx/5xx) comes back as an
        error chunk, as AgentScope's does, so the agent loop can reason about it; a failure to
        reach the gateway raises RuntimeError."""
        client = await cast("GatewayClient", self._gateway).client()
        try:
            chunk = await client.call_tool(
                str(self.mcp_name),
                self._tool.name,
                kwargs,
                agent_id=self._agent_id,
                session_id=self._session_id,
            )
        except McpgwError as e:
            if e.status:
                return AsToolChunk(content=[TextBlock(text=detail(e))], state=ToolResultState.ERROR)
            raise RuntimeError(f"gateway call of {self.name!r} failed: {e}") from e
        return AsToolChunk.model_validate(chunk)


class GatewayMCPClient(_AsGatewayMCPClient):
    """AgentScope's ``GatewayMCPClient`` whose requests go through mcpgw."""

    def _scope(self) -> dict[str, Any]:
        return {"agent_id": self._agent_id, "session_id": self._session_id}

    async def _mcpgw_client(self) -> AsyncClient:
        assert self._gateway is not None
        return await cast("GatewayClient", self._gateway).client()

    async def connect(self) -> None:
        """Registers this MCP on the gateway (``POST /mcps``)."""
        if self._is_connected:
            raise RuntimeError(f"MCP {self.name!r} is already connected. Call close() before reconnecting.")
        body = self.model_dump(mode="json")
        if self._runtime_headers:
            body["runtime_headers"] = self._runtime_headers
        client = await self._mcpgw_client()
        try:
            await client.add_mcp(body, **self._scope())
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to add MCP {self.name!r}: {detail(e)}") from e
        self._is_connected = True

    async def close(self, ignore_errors: bool = True) -> None:
        """Removes this MCP from the gateway (``DELETE /mcps/{name}``)."""
        if not self._is_connected:
            if ignore_errors:
                return
            raise RuntimeError(f"MCP {self.name!r} is not connected. Call connect() first.")
        try:
            client = await self._mcpgw_client()
            await client.remove_mcp(self.name, **self._scope())
        except McpgwError as e:
            if not ignore_errors:
                raise RuntimeError(f"gateway failed to remove MCP {self.name!r}: {detail(e)}") from e
        except Exception:
            if not ignore_errors:
                raise
        self._is_connected = False

    async def set_runtime_headers(self, headers: dict[str, str]) -> None:
        """Replaces the runtime headers of the registered MCP, without reconnecting it."""
        if not self._is_connected:
            raise RuntimeError(f"MCP {self.name!r} is not connected. Call connect() first.")
        client = await self._mcpgw_client()
        try:
            await client.set_runtime_headers(self.name, headers, **self._scope())
        except McpgwError as e:
            if e.code == "INVALID_ARGUMENT":
                raise ValueError(f"gateway rejected runtime headers for MCP {self.name!r}: {detail(e)}") from e
            if e.status == 404:
                raise RuntimeError(
                    f"gateway has no runtime-headers route, or no live client for MCP {self.name!r}: {detail(e)}"
                ) from e
            raise RuntimeError(f"gateway failed to update runtime headers for MCP {self.name!r}: {detail(e)}") from e
        self._runtime_headers = dict(headers)

    async def list_raw_tools(self) -> list[mcp.types.Tool]:
        """The upstream tools (``GET /mcps/{name}/tools``), filtered as AgentScope filters them."""
        client = await self._mcpgw_client()
        try:
            data = await client.list_tools(self.name, **self._scope())
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to list tools for MCP {self.name!r}: {detail(e)}") from e
        raw_tools = [mcp.types.Tool.model_validate(d) for d in data]
        self._cached_tools = raw_tools
        if self.enable_tools is not None:
            raw_tools = [t for t in raw_tools if t.name in self.enable_tools]
        if self.disable_tools is not None:
            raw_tools = [t for t in raw_tools if t.name not in self.disable_tools]
        return raw_tools

    def _wrap_tool(self, tool: mcp.types.Tool) -> GatewayMCPTool:
        assert self._gateway is not None
        return GatewayMCPTool(
            mcp_name=self.name,
            tool=tool,
            gateway=self._gateway,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )
