"""``python -m mcpgw_client ARGS...`` runs the ``mcpgw`` command this wheel bundles (``mcpgw mcp
--docker box -- COMMAND...``: an MCP server on this machine for a server inside a sandbox), which
installs the gateway bundled next to it. It replaces this process, so an MCP client talks to it
directly over stdio. (The wheel declares no console script ``mcpgw``: the unrelated PyPI project
of that name installs one.)

A cloud sandbox is named by its provider and id, ``mcp --e2b SANDBOX_ID``, ``--opensandbox``,
``--daytona``: ``mcpgw`` then reaches it through this package's program ``python -m
mcpgw_client exec`` (:mod:`mcpgw_client.providers._exec`), which drives that provider's SDK
from its usual environment (``E2B_API_KEY``, ``OPEN_SANDBOX_API_KEY``, ``DAYTONA_API_KEY``,
...)."""

from __future__ import annotations

import os
import sys

from ._native import host_binary


def main() -> None:
    """Replaces this process with the bundled ``mcpgw``, given this process's arguments (or
    runs ``exec``, the provider SDKs' program)."""
    args = sys.argv[1:]
    if args[:1] == ["exec"]:
        from .providers._exec import main as exec_main

        raise SystemExit(exec_main(args[1:]))
    if args[:1] == ["mcp"]:
        from .providers._exec import mcp_arguments

        args = ["mcp", *mcp_arguments(args[1:], sys.executable)]
    path = host_binary()
    os.execv(path, [path, *args])


if __name__ == "__main__":
    main()
