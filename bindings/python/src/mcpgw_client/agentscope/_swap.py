"""The swap: a sandboxed AgentScope workspace that launches ``mcpgw-gateway`` instead of its
stock gateway, with only the gateway and its host client replaced."""

from __future__ import annotations

import logging
from typing import Any, TypeVar, cast

from ..client import Transport
from ._backend import has_channel
from ._bootstrap import bootstrap
from ._client import GatewayClient
from ._image import build_or_reuse_image

log = logging.getLogger("mcpgw_client.agentscope")

_W = TypeVar("_W")


def use_mcpgw(
    workspace: _W,
    *,
    gateway_binary: str | None = None,
    gateway_path: str | None = None,
    timeout: float | None = 30.0,
    transport: Transport | None = None,
    session: bool = False,
    host_tools: bool = True,
) -> _W:
    """Makes a sandboxed AgentScope workspace (``BubblewrapWorkspace``, ``DockerWorkspace``,
    ``E2BWorkspace``, ``K8sWorkspace``, ``OpenSandboxWorkspace``, ``DaytonaWorkspace``) run
    ``mcpgw-gateway`` instead of its stock gateway, and returns it. Only the gateway and its
    host client are replaced.

    Its gateway set-up step is replaced by one that first provides what the workspace's own
    bootstrap provides besides the gateway (``uv``, ``uvx``, ``rg``, the ``.venv`` interpreter:
    :func:`bootstrap`), then installs `gateway_binary` (a host path; by default the binary is
    expected on the sandbox's PATH, or at `gateway_path`), launches it with a token the gateway
    mints into its own 0600 token file, binds the workspace's gateway facade to
    :class:`GatewayClient` and sets the workspace's gateway fields to the running gateway's
    (:func:`describe_gateway`). A ``DockerWorkspace`` builds its image without the gateway's
    part (:func:`gateway_free_image`). Nothing of the Python gateway (fastapi, uvicorn,
    agentscope) is installed in the sandbox, and no Python runs there for it. With `session`,
    requests then go over one long-lived session channel (:meth:`GatewayClient.attach`) where
    the backend has one (:func:`sandbox_backend`), else one command each as without. `host_tools` is passed to
    :func:`bootstrap`.
    """
    ws = cast(Any, workspace)
    from agentscope.workspace import DockerWorkspace
    from agentscope.workspace._sandboxed_base import SandboxedWorkspaceBase

    if not isinstance(ws, SandboxedWorkspaceBase):
        raise TypeError(
            f"use_mcpgw swaps the gateway of a sandboxed workspace; a {type(ws).__name__} has none "
            "(a LocalWorkspace takes gateway-backed MCP clients: GatewayClient.launch(...).make_client(spec))"
        )
    if isinstance(ws, DockerWorkspace):

        async def build_or_reuse() -> None:
            await build_or_reuse_image(ws)

        setattr(ws, "_build_or_reuse_image", build_or_reuse)  # noqa: B010 - an instance attribute

    async def setup_mcp_gateway() -> None:
        backend = ws.get_backend()
        await bootstrap(ws, host_tools=host_tools)
        path = gateway_path
        if path is None:
            home = getattr(ws, "_gateway_home", None)
            path = f"{home}/bin/mcpgw-gateway" if gateway_binary is not None and home else "mcpgw-gateway"
        # The token file and log go to the library's default, a fresh 0700 directory under
        # /tmp: not into a persistent workspace directory.
        gc = await GatewayClient.launch(
            backend,
            gateway_path=path,
            gateway_binary=gateway_binary,
            timeout=timeout,
            transport=transport,
            # Bubblewrap's explicit port (None there means a free one); the other kinds' port is
            # a default (5600) a gateway left running by an earlier stock start may hold.
            port=getattr(ws, "_gateway_port_input", None) or 0,
        )
        if session and has_channel(gc.sandbox):
            try:
                await gc.attach()
            except Exception as e:  # noqa: BLE001 - one command per request still works
                log.warning("mcpgw: no session channel (%s); requests go one command each", e)
        describe_gateway(ws, gc)

    setattr(ws, "_setup_mcp_gateway", setup_mcp_gateway)  # noqa: B010 - an instance attribute
    return workspace


def describe_gateway(workspace: Any, gateway: GatewayClient) -> None:
    """Points `workspace`'s gateway fields at the running `gateway`: ``_gateway`` (the facade),
    ``gateway_port``, ``_gateway_nonce`` (bubblewrap; what a health check of this gateway
    expects), ``_gateway_process`` (bubblewrap: the kept process the gateway lives in, ended on
    close). ``_gateway_token`` (bubblewrap) is cleared: the gateway minted its token into its
    0600 file inside the sandbox, and the host never holds it."""
    workspace._gateway = gateway
    workspace.gateway_port = gateway.gateway_port
    if hasattr(workspace, "_gateway_nonce"):
        workspace._gateway_nonce = gateway.instance_nonce or ""
    if hasattr(workspace, "_gateway_token"):
        workspace._gateway_token = ""
    if gateway.keeper is not None and hasattr(workspace, "_gateway_process"):
        workspace._gateway_process = gateway.keeper
