"""The official MCP Python SDK through the binding's transport into a Docker container:
tests/clients/python/everything.py runs every feature of server-everything inside the container
(`binding docker`, the SDK's ClientSession over `mcpgw_client.sdk.client_streams`) and straight to
a server-everything on this machine (`stdio`), and the two answers must be the same but for ids
and times, compared as cli/tests/clients.rs compares (testkit's `mcpgw-same-answers`). Then the README's
example, as written, into a container. Skipped, saying why, only where Docker cannot run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import DOCKER_SH, REPO, SAME_ANSWERS, skip

EVERYTHING_PY = REPO / "tests/clients/python/everything.py"
EVERYTHING_JS = REPO / "tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
#: server-everything's entry point inside the node image (testkit's EVERYTHING_IN_IMAGE).
EVERYTHING_IN_IMAGE = "/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
#: How long one run of the script may take (testkit's RUN_LIMIT).
RUN_LIMIT_S = 180


def assert_same_answers(got: dict[str, Any], want: dict[str, Any], tmp: Path) -> None:
    """Two runs of the script got the same answers, but for ids and times, each step that differs
    named: testkit's `mcpgw-same-answers` judges, by the rules of the endpoint's tests."""
    files = [tmp / "got.json", tmp / "want.json"]
    for path, run in zip(files, (got, want), strict=True):
        path.write_text(json.dumps(run))
    r = subprocess.run([str(SAME_ANSWERS), "python", *map(str, files)], capture_output=True, text=True)
    # Exit 1: they differ, each step said; anything else is a failure of the comparison.
    assert r.returncode != 1, r.stdout
    assert r.returncode == 0, f"mcpgw-same-answers failed ({r.returncode}): {r.stderr}"


def run_script(*args: str) -> dict[str, Any]:
    """What everything.py printed, run with this interpreter and the library of the tests."""
    r = subprocess.run(
        [sys.executable, "-W", "ignore", str(EVERYTHING_PY), *args],
        capture_output=True,
        text=True,
        timeout=RUN_LIMIT_S,
        env=os.environ,
    )
    assert r.returncode == 0, f"everything.py {' '.join(args)} failed ({r.returncode}):\n{r.stderr}"
    try:
        out: dict[str, Any] = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(f"everything.py printed no JSON ({e}): {r.stdout}\n{r.stderr}") from None
    return out


def sandbox_sh(*args: str) -> str:
    r = subprocess.run(["sh", str(DOCKER_SH), *args], capture_output=True, text=True)
    assert r.returncode == 0, f"sandbox.sh {' '.join(args)} failed: {r.stdout}{r.stderr}"
    return r.stdout.strip()


@pytest.fixture(scope="module")
def node_image() -> str:
    """The test image with node and the npm servers inside, or a skip when Docker cannot run."""
    check = subprocess.run(["sh", str(DOCKER_SH), "check"], capture_output=True, text=True)
    if check.returncode != 0:
        skip(f"no docker sandbox: {check.stdout.strip() or check.stderr.strip()}")
    return sandbox_sh("image", "--node")


@pytest.fixture
def container(node_image: str) -> Iterator[str]:
    """A container of the node image (no network, docker's init); removed after the test."""
    name = sandbox_sh("start", node_image)
    try:
        yield name
    finally:
        subprocess.run(["sh", str(DOCKER_SH), "stop", name], check=False)


def processes(container: str) -> list[str]:
    """The container's processes but for its init, its `sleep` and the `ps` itself."""
    r = subprocess.run(["docker", "exec", container, "ps", "-o", "pid,args"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    left = []
    for line in r.stdout.splitlines()[1:]:
        args = line.strip().partition(" ")[2].strip()
        if not args.startswith(("/sbin/docker-init", "sleep ", "ps ")):
            left.append(line.strip())
    return left


def test_every_feature_through_the_transport_as_directly(container: str, tmp_path: Path) -> None:
    assert EVERYTHING_JS.is_file(), f"{EVERYTHING_JS} is missing: run `make deps` (make test does)"
    through = run_script("binding", "docker", container, "node", EVERYTHING_IN_IMAGE, "stdio")
    direct = run_script("stdio", "node", str(EVERYTHING_JS), "stdio")
    assert_same_answers(through, direct, tmp_path)
    assert not processes(container), "left running in the container"


def readme_example() -> str:
    """The README's example of the SDK on the transport: the first Python block of its section."""
    readme = (REPO / "bindings/python/README.md").read_text()
    section = readme[readme.index("### The official MCP SDK") :]
    start = section.index("```python\n") + len("```python\n")
    return section[start : section.index("\n```", start) + 1]


def test_the_readme_example_runs_as_written(container: str, tmp_path: Path) -> None:
    code = readme_example()
    assert code.count('"box1"') == 1, "the example names its container box1"
    script = tmp_path / "example.py"
    script.write_text(code.replace('"box1"', json.dumps(container)))
    env = {**os.environ, "PYTHONPATH": str(REPO / "bindings/python/src")}
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=RUN_LIMIT_S, env=env)
    assert r.returncode == 0, r.stderr
    tools, echoed = r.stdout.splitlines()
    assert "'echo'" in tools and "'slow'" in tools
    assert echoed == "hello"
    assert not processes(container), "left running in the container"
