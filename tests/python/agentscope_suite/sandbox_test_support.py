"""The ``sandbox_test_support`` module AgentScope's sandbox tests import: its repository has one,
its sdist on PyPI does not ship it. It provides ``CheckoutWheelTestCase``, the async test case
those tests derive from, naming their workspace class in ``workspace_type``. The swap itself is
the ``mcpgw_swap`` pytest plugin beside this file."""

from __future__ import annotations

from typing import ClassVar
from unittest import IsolatedAsyncioTestCase


class CheckoutWheelTestCase(IsolatedAsyncioTestCase):
    """An ``IsolatedAsyncioTestCase`` for the workspace class ``workspace_type``."""

    workspace_type: ClassVar[type]
