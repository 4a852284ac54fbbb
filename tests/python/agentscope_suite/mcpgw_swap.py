"""A pytest plugin (``-p mcpgw_swap``) that runs AgentScope's own test files with the swap: every
sandboxed AgentScope workspace they initialize (bubblewrap, Docker, E2B, ...: each goes through
``SandboxedWorkspaceBase.initialize``) is first handed to ``mcpgw_client.agentscope.use_mcpgw``, with
the gateway binary named by ``MCPGW_GATEWAY_BINARY``. Set ``MCPGW_AGENTSCOPE_SWAP=0`` to run them
unswapped."""

from __future__ import annotations

import os
from typing import Any
from unittest import mock

import pytest


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("MCPGW_AGENTSCOPE_SWAP", "1") != "1":
        return
    from agentscope.workspace._sandboxed_base import SandboxedWorkspaceBase

    from mcpgw_client.agentscope import use_mcpgw

    gateway = os.environ["MCPGW_GATEWAY_BINARY"]
    initialize = SandboxedWorkspaceBase.initialize

    async def swapped_initialize(workspace: Any) -> None:
        use_mcpgw(workspace, gateway_binary=gateway)
        await initialize(workspace)

    swap = mock.patch.object(SandboxedWorkspaceBase, "initialize", swapped_initialize)
    swap.start()
    config.add_cleanup(swap.stop)
