"""AgentScope 2.0 workspaces on mcpgw: a drop-in for AgentScope's host-side ``GatewayClient``.

:class:`GatewayClient` has the interface of ``agentscope.workspace._gateway_client.GatewayClient``
(2.0.11): the same constructor, ``health``, ``list_mcps``, ``make_client``, ``aclose``, and the
MCP clients and tools it hands out are AgentScope's own ``GatewayMCPClient`` and
``GatewayMCPTool`` classes (subclassed), so a workspace, its toolkit and its agents cannot tell
the difference. Every request runs as one command in the sandbox through the binding's backend
for the workspace's (:func:`sandbox_backend`: ``docker exec`` into a Docker workspace's
container, ``kubectl exec`` into a Kubernetes pod, a local shell for AgentScope's local backend,
else the backend's own ``exec_shell``), and the gateway's built-in client (or curl) makes the
request inside the sandbox instead of a ``python3 -c`` shim: no Python runs in the sandbox for
it, and a call costs one ``sh -c`` instead of a Python start-up plus a body file written and
deleted.

:func:`use_mcpgw` makes a sandboxed workspace (Bubblewrap, Docker, E2B, Kubernetes, OpenSandbox,
Daytona) launch ``mcpgw-gateway`` instead of its stock Python gateway, always with a token the
gateway mints into its own 0600 token file, also where the stock launch uses none (Docker, E2B,
Kubernetes). What the workspace's bootstrap gives AgentScope's other tools (``uv``, ``uvx``,
``rg``, the ``.venv`` interpreter) it still gets, from AgentScope's own bootstrap steps; what it
installs for the Python gateway (fastapi, uvicorn, agentscope, ...) it does not::

    from mcpgw_client.agentscope import use_mcpgw
    workspace = use_mcpgw(DockerWorkspace(...), gateway_binary="/usr/local/lib/mcpgw-gateway")

The parts: the sandbox's backend (``_backend``), the launch kept alive in a process of the
backend (``_keeper``), AgentScope's MCP client and tool classes (``_mcp``), the client
(``_client``), the bootstrap without the gateway's part (``_bootstrap``), the Docker image
without it (``_image``), and the swap itself (``_swap``).
"""

from ._backend import SANDBOX_TMP_DIR, BackendExec, has_channel, sandbox_backend
from ._bootstrap import HOST_TOOLS, bootstrap, bootstrap_commands, find_host_tools
from ._client import GatewayClient
from ._image import gateway_free_image
from ._mcp import GatewayMCPClient, GatewayMCPTool
from ._swap import describe_gateway, use_mcpgw

__all__ = [
    "HOST_TOOLS",
    "SANDBOX_TMP_DIR",
    "BackendExec",
    "GatewayClient",
    "GatewayMCPClient",
    "GatewayMCPTool",
    "bootstrap",
    "bootstrap_commands",
    "describe_gateway",
    "find_host_tools",
    "gateway_free_image",
    "has_channel",
    "sandbox_backend",
    "use_mcpgw",
]
