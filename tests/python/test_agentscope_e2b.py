"""AgentScope 2.0.11's own E2B workspace test (``tests/test_e2e_e2b_mcp.py`` of its sdist) against
E2B's own envd (providers.py): its ``E2BWorkspace`` reaches the sandbox through E2B's SDK in debug
mode (no E2B account; the sandbox an envd of ours, on an image AgentScope's workspace finds
bootstrapped), run stock and swapped by ``use_mcpgw``: every test passes both ways. E2B's cloud
gives each of its tests a sandbox of its own; here each runs against an envd of its own, all at
once."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import skip
from providers import E2B_ENVD, daemon_reason, published_container

pytest.importorskip("agentscope", reason="AgentScope is not installed (make deps)")
pytest.importorskip("e2b", reason="E2B's SDK is not installed (make deps)")

from agentscope_support import agentscope_test_file, docker_image_reason, e2b_image, run_swapped


@contextmanager
def envd_from(image: str) -> Iterator[str]:
    """envd in a container of `image`, its port published on this machine's loopback only (the
    workspace's sandbox has no access token: an E2B sandbox gets it from the control plane,
    which debug mode has not); its URL."""
    with published_container("envd", 49983, [image, "envd", "-isnotfc", "-no-cgroups"]) as (_, url):
        yield url


@pytest.mark.parametrize("stock", [True, False], ids=["stock", "swapped"])
def test_agentscopes_own_e2b_tests_pass_stock_and_swapped(stock: bool, tmp_path: Path) -> None:
    reason = daemon_reason(E2B_ENVD, "E2B's envd", "MCPGW_E2B_ENVD") or docker_image_reason()
    if reason:
        skip(f"no E2B sandbox for AgentScope here: {reason}")
    image = e2b_image(stock, E2B_ENVD)
    test_file = agentscope_test_file("test_e2e_e2b_mcp.py")
    names = re.findall(r"^\s*(?:async )?def (test_\w+)", test_file.read_text(), re.MULTILINE)
    assert names

    def one(name: str) -> None:
        with envd_from(image) as url:
            env = {
                # The test runs only with a key; debug mode never sends it anywhere.
                "E2B_API_KEY": "local-envd",
                "E2B_DEBUG": "true",
                "E2B_SANDBOX_URL": url,
                "MCPGW_AGENTSCOPE_SWAP": "0" if stock else "1",
            }
            run_swapped(test_file, tmp_path / f"{name}.xml", env, only=name)

    with ThreadPoolExecutor(len(names)) as pool:
        for done in [pool.submit(one, name) for name in names]:
            done.result()
