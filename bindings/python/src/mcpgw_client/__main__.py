"""``python -m mcpgw_client ARGS...`` runs the ``mcpgw`` command this wheel bundles (``mcpgw mcp
--docker box -- COMMAND...``: an MCP server on this machine for a server inside a sandbox), which
installs the gateway bundled next to it. It replaces this process, so an MCP client talks to it
directly over stdio. (The wheel declares no console script ``mcpgw``: the unrelated PyPI project
of that name installs one.)"""

from __future__ import annotations

import os
import sys

from ._native import host_binary


def main() -> None:
    """Replaces this process with the bundled ``mcpgw``, given this process's arguments."""
    path = host_binary()
    os.execv(path, [path, *sys.argv[1:]])


if __name__ == "__main__":
    main()
