"""The wheel: built with pip from bindings/python, installed with `pip install mcpgw-*.whl` and
nothing else into a fresh virtualenv outside the repository, and used there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

from conftest import GATEWAY, REPO, TARGET, TESTSERVER

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import mcpgw_client as mcpgw

    async def main(gateway, testserver, state):
        async with mcpgw.AsyncClient(mcpgw.LocalExec(), gateway_path=gateway, state_dir=state) as client:
            await client.start_gateway()
            spec = {"name": "ts", "is_stateful": True,
                    "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}}
            await client.add_mcp(spec)
            chunk = await client.call_tool("ts", "echo", {"text": "from the wheel"})
            try:
                await client.call_tool("ts", "nope")
            except mcpgw.NotFoundError as e:
                missing = e.status
            await client.stop_gateway()
        print(json.dumps({"file": mcpgw.__file__, "lib": mcpgw.LIBRARY_PATH, "version": mcpgw.__version__,
                          "text": chunk["content"][0]["text"], "missing": missing}))

    asyncio.run(main(*sys.argv[1:]))
    """
)


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def test_wheel_installs_and_works_outside_the_repository(tmp_path: Path) -> None:
    assert not tmp_path.resolve().is_relative_to(REPO)
    release = TARGET / "release" / "libmcpgw.so"
    lib = release if release.is_file() else TARGET / "debug" / "libmcpgw.so"
    dist = tmp_path / "dist"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-w",
        dist,
        "--config-settings",
        f"lib={lib}",
        REPO / "bindings" / "python",
    )
    wheels = list(dist.glob("mcpgw-*.whl"))
    assert len(wheels) == 1, wheels
    wheel = wheels[0]
    assert re.fullmatch(r"mcpgw-0\.2\.0-py3-none-manylinux_2_\d+_x86_64\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    package = {"mcpgw_client/__init__.py", "mcpgw_client/py.typed", "mcpgw_client/_lib/libmcpgw.so"}
    assert {*package, "mcpgw-0.2.0.dist-info/RECORD"} <= names

    # A fresh virtualenv (made without its own copy of pip, which only costs time: the pip of
    # this one installs into it), then only the wheel file: no index, no build step, no
    # environment variable.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCPGW_", "PYTHON", "VIRTUAL_ENV"))}
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "--disable-pip-version-check"]
    run(*pip, "install", "--no-index", wheel, env=env, cwd=tmp_path)
    out = run(
        venv / "bin" / "python", "-c", SCRIPT, GATEWAY, TESTSERVER, tmp_path / "state", env=env, cwd=tmp_path
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    site = venv / "lib"
    assert Path(result["file"]).is_relative_to(site), result
    assert Path(result["lib"]).is_relative_to(site) and result["lib"].endswith("mcpgw_client/_lib/libmcpgw.so"), result
    assert result == {**result, "version": "0.2.0", "text": "from the wheel", "missing": 404}

    # MCPGW_LIB overrides the bundled library; one that is not there is a clear ImportError.
    env["MCPGW_LIB"] = str(tmp_path / "nowhere" / "libmcpgw.so")
    r = subprocess.run(
        [venv / "bin" / "python", "-c", "import mcpgw_client"], capture_output=True, text=True, env=env, check=False
    )
    assert r.returncode != 0 and "libmcpgw was not found" in r.stderr and "MCPGW_LIB" in r.stderr
