"""The ``sandbox_test_support`` module AgentScope's sandbox tests import: its repository has one,
its sdist on PyPI does not ship it. It provides ``CheckoutWheelTestCase``, the async test case
those tests derive from, naming their workspace class in ``workspace_type``.

Here it also applies the swap: with ``MCPGW_AGENTSCOPE_SWAP=1`` every workspace of that class the
tests initialize is first handed to ``mcpgw.agentscope.use_mcpgw`` (the gateway binary from
``MCPGW_GATEWAY_BINARY``), so AgentScope's own tests run against ``mcpgw-gateway``."""

from __future__ import annotations

import os
from typing import Any, ClassVar
from unittest import IsolatedAsyncioTestCase, mock

from mcpgw.agentscope import use_mcpgw


class CheckoutWheelTestCase(IsolatedAsyncioTestCase):
    """An ``IsolatedAsyncioTestCase`` whose ``workspace_type``'s workspaces run on mcpgw when
    ``MCPGW_AGENTSCOPE_SWAP=1``."""

    workspace_type: ClassVar[type]
    _swap: ClassVar[Any] = None

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        if os.environ.get("MCPGW_AGENTSCOPE_SWAP") != "1":
            return
        gateway = os.environ["MCPGW_GATEWAY_BINARY"]
        initialize = cls.workspace_type.initialize

        async def swapped_initialize(workspace: Any) -> None:
            use_mcpgw(workspace, gateway_binary=gateway)
            await initialize(workspace)

        cls._swap = mock.patch.object(cls.workspace_type, "initialize", swapped_initialize)
        cls._swap.start()

    @classmethod
    def tearDownClass(cls) -> None:
        if cls._swap is not None:
            cls._swap.stop()
            cls._swap = None
        super().tearDownClass()
