"""mcpgw_client: the Python binding of libmcpgw, the host-side client of mcpgw-gateway.

The gateway runs inside a sandbox (Docker or podman container, Kubernetes pod, E2B sandbox,
bubblewrap, a namespace) and owns the MCP servers there; this package reaches it only through
the sandbox's own exec (a command per operation, or one long-lived session channel), so the
sandbox publishes no port::

    import mcpgw_client as mcpgw

    async with mcpgw.AsyncClient(mcpgw.docker("box1")) as client:
        await client.start_gateway()
        await client.add_mcp({"name": "fs", "mcp_config": {"type": "stdio_mcp", "command": "mcp-fs"}})
        chunk = await client.call_tool("fs", "read_file", {"path": "/etc/hostname"})

Results are the gateway's JSON (see :mod:`mcpgw_client.wire`); failures raise the typed exceptions of
:mod:`mcpgw_client.errors` (``mcpgw.NotFoundError``, ``mcpgw.DeadlineError``, ``mcpgw.BackendError``,
...), one per result code of the library. :mod:`mcpgw_client.agentscope` makes AgentScope 2.0
workspaces use it.

The library (``libmcpgw.so``) is loaded at import: the one bundled in the wheel, or the one
``MCPGW_LIB`` names. The wheel also carries the static gateway for the sandbox
(:func:`gateway_binary`), which ``ensure_gateway_binary()`` installs when given no path, and
the ``mcpgw`` command (:func:`host_binary`; ``python -m mcpgw_client mcp ...`` runs it).
"""

from __future__ import annotations

from . import errors
from ._native import ABI_VERSION, VERSION, gateway_binary, host_binary, lib
from .backends import Backend, Channel, ExecResult, argv, docker, exec, kubectl, local, podman
from .blocking import BlockingConnection, Client
from .client import AsyncClient, Options, Transport
from .connection import Connection
from .errors import ERROR_CLASSES, RESULT, BackendError, McpgwError, error_class
from .providers import daytona, e2b, opensandbox
from .wire import (
    BinaryInfo,
    Block,
    DataBlock,
    GatewayInfo,
    Health,
    McpSpec,
    Progress,
    TextBlock,
    Tool,
    ToolChunk,
    block_bytes,
    progress_of,
    text_of,
)

__version__ = VERSION
#: Where the loaded libmcpgw came from.
LIBRARY_PATH = str(lib.path)


def library_version() -> str:
    """The loaded library's version."""
    return str(lib.mcpgw_version().decode())


def __getattr__(name: str) -> type[McpgwError]:
    # The exception classes are built from the library's codes: mcpgw.NotFoundError, ...
    return errors.__getattr__(name)


def __dir__() -> list[str]:
    return sorted([*globals(), *ERROR_CLASSES])


__all__ = [
    "ABI_VERSION",
    "LIBRARY_PATH",
    "RESULT",
    "AsyncClient",
    "Backend",
    "BackendError",
    "BinaryInfo",
    "Block",
    "BlockingConnection",
    "Channel",
    "Client",
    "Connection",
    "DataBlock",
    "ExecResult",
    "GatewayInfo",
    "Health",
    "McpSpec",
    "McpgwError",
    "Options",
    "Progress",
    "TextBlock",
    "Tool",
    "ToolChunk",
    "Transport",
    "__version__",
    "argv",
    "block_bytes",
    "daytona",
    "docker",
    "e2b",
    "error_class",
    "exec",
    "gateway_binary",
    "host_binary",
    "kubectl",
    "library_version",
    "local",
    "opensandbox",
    "podman",
    "progress_of",
    "text_of",
]
