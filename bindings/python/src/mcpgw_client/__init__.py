"""mcpgw_client: the Python binding of libmcpgw, the host-side client of mcpgw-gateway.

The gateway runs inside a sandbox (Docker container, Kubernetes pod, E2B sandbox, bubblewrap,
a namespace) and owns the MCP servers there; this package reaches it only by running commands
in the sandbox through an exec function you give it, so the sandbox publishes no port::

    import mcpgw_client as mcpgw

    async with mcpgw.AsyncClient(mcpgw.DockerExec("box1")) as client:
        await client.start_gateway()
        await client.add_mcp({"name": "fs", "mcp_config": {"type": "stdio_mcp", "command": "mcp-fs"}})
        chunk = await client.call_tool("fs", "read_file", {"path": "/etc/hostname"})

Results are the gateway's JSON (see :mod:`mcpgw_client.wire`); failures raise the typed
exceptions of :mod:`mcpgw_client.errors` (``mcpgw_client.NotFoundError``,
``mcpgw_client.DeadlineError``, ...), one per result code of the library.
:mod:`mcpgw_client.agentscope` makes AgentScope 2.0 workspaces use it.

The library (``libmcpgw.so``) is loaded at import: the one bundled in the wheel, or the one
``MCPGW_LIB`` names. The wheel also carries the static gateway for the sandbox
(:func:`gateway_binary`), which ``ensure_gateway_binary()`` installs when given no path.
"""

from __future__ import annotations

from . import errors
from ._native import ABI_VERSION, VERSION, gateway_binary, lib
from .client import AsyncClient, Client, Transport
from .errors import ERROR_CLASSES, RESULT, McpgwError, error_class
from .exec import ArgvExec, DockerExec, ExecFailure, ExecResult, ExecTimeout, KubectlExec, LocalExec
from .session import AsyncSession
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
    # The exception classes are built from the library's codes: mcpgw_client.NotFoundError, ...
    return errors.__getattr__(name)


def __dir__() -> list[str]:
    return sorted([*globals(), *ERROR_CLASSES])


__all__ = [
    "ABI_VERSION",
    "LIBRARY_PATH",
    "RESULT",
    "ArgvExec",
    "AsyncClient",
    "AsyncSession",
    "BinaryInfo",
    "Block",
    "Client",
    "DataBlock",
    "DockerExec",
    "ExecFailure",
    "ExecResult",
    "ExecTimeout",
    "GatewayInfo",
    "Health",
    "KubectlExec",
    "LocalExec",
    "McpSpec",
    "McpgwError",
    "Progress",
    "TextBlock",
    "Tool",
    "ToolChunk",
    "Transport",
    "__version__",
    "block_bytes",
    "error_class",
    "gateway_binary",
    "library_version",
    "progress_of",
    "text_of",
]
