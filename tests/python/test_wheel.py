"""The wheel and the sdist: built with pip from bindings/python, installed with `pip install
mcpgw_client-*.whl` and nothing else into a fresh virtualenv outside the repository, and used
there, the bundled gateway installed into a local sandbox by `ensure_gateway_binary()`. (The
release rehearsal, tests/rehearsal, installs the same wheel from a package index.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

from conftest import REPO, STATIC_GATEWAY, STATIC_HOST, TARGET, TESTSERVER, VERSION

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import mcpgw_client as mcpgw

    async def main(sandbox, testserver):
        gateway = sandbox + "/bin/mcpgw-gateway"
        async with mcpgw.AsyncClient(mcpgw.local(), gateway_path=gateway, state_dir=sandbox + "/state") as client:
            installed = await client.ensure_gateway_binary()
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
                          "bundled": mcpgw.gateway_binary(), "installed": installed,
                          "text": chunk["content"][0]["text"], "missing": missing}))

    asyncio.run(main(*sys.argv[1:]))
    """
)


def run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    assert r.returncode == 0, f"{args} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


@pytest.fixture(scope="module")
def native() -> dict[str, Path]:
    """The library and the static binaries to bundle: the release builds `make artifacts` uses."""
    release = TARGET / "release" / "libmcpgw.so"
    lib = release if release.is_file() else TARGET / "debug" / "libmcpgw.so"
    for path, builder in ((STATIC_GATEWAY, "make static"), (STATIC_HOST, "make static-host")):
        if not path.is_file():
            pytest.fail(f"{path} is missing: run `{builder}`")
    return {"lib": lib, "gateway": STATIC_GATEWAY, "host": STATIC_HOST}


def build_wheel(source: Path, dist: Path, native: dict[str, Path]) -> Path:
    settings = [a for key, path in native.items() for a in ("--config-settings", f"{key}={path}")]
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, *settings, source)
    wheels = list(dist.glob("mcpgw_client-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("MCPGW_", "PYTHON", "VIRTUAL_ENV"))}


def test_wheel_installs_and_works_outside_the_repository(tmp_path: Path, native: dict[str, Path]) -> None:
    assert not tmp_path.resolve().is_relative_to(REPO)
    wheel = build_wheel(REPO / "bindings" / "python", tmp_path / "dist", native)
    assert re.fullmatch(rf"mcpgw_client-{re.escape(VERSION)}-py3-none-manylinux_2_\d+_x86_64\.whl", wheel.name)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        metadata = z.read(f"mcpgw_client-{VERSION}.dist-info/METADATA").decode()
        assert z.read("mcpgw_client/_bin/mcpgw-gateway") == STATIC_GATEWAY.read_bytes()
        assert z.read("mcpgw_client/_bin/mcpgw") == STATIC_HOST.read_bytes()
    package = {"mcpgw_client/__init__.py", "mcpgw_client/py.typed", "mcpgw_client/_lib/libmcpgw.so"}
    assert {*package, f"mcpgw_client-{VERSION}.dist-info/RECORD"} <= names
    assert f"\nName: mcpgw-client\nVersion: {VERSION}\n" in metadata

    # A fresh virtualenv (made without its own copy of pip, which only costs time: the pip of
    # this one installs into it), then only the wheel file: no index, no build step, no
    # environment variable.
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    env = clean_env()
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "--disable-pip-version-check"]
    run(*pip, "install", "--no-index", wheel, env=env, cwd=tmp_path)
    sandbox = tmp_path / "sandbox"
    out = run(venv / "bin" / "python", "-c", SCRIPT, sandbox, TESTSERVER, env=env, cwd=tmp_path).stdout
    result = json.loads(out.strip().splitlines()[-1])
    site = venv / "lib"
    assert Path(result["file"]).is_relative_to(site), result
    assert Path(result["lib"]).is_relative_to(site) and result["lib"].endswith("mcpgw_client/_lib/libmcpgw.so"), result
    assert Path(result["bundled"]).is_relative_to(site) and result["bundled"].endswith("_bin/mcpgw-gateway"), result
    assert result == {**result, "version": VERSION, "text": "from the wheel", "missing": 404}
    # The bundled gateway was installed into the sandbox and launched from there.
    assert result["installed"]["uploaded"] is True, result
    assert (sandbox / "bin" / "mcpgw-gateway").read_bytes() == STATIC_GATEWAY.read_bytes()
    # `python -m mcpgw_client` is the bundled mcpgw command, next to the bundled gateway.
    said = run(venv / "bin" / "python", "-m", "mcpgw_client", "--version", env=env, cwd=tmp_path).stdout
    assert said.strip() == f"mcpgw {VERSION}"

    # MCPGW_LIB overrides the bundled library; one that is not there is a clear ImportError.
    env["MCPGW_LIB"] = str(tmp_path / "nowhere" / "libmcpgw.so")
    r = subprocess.run(
        [venv / "bin" / "python", "-c", "import mcpgw_client"], capture_output=True, text=True, env=env, check=False
    )
    assert r.returncode != 0 and "libmcpgw was not found" in r.stderr and "MCPGW_LIB" in r.stderr


def test_sdist_says_what_it_needs_and_builds_with_it(tmp_path: Path, native: dict[str, Path]) -> None:
    source = REPO / "bindings" / "python"
    code = "import sys; sys.path.insert(0, '_build'); import mcpgw_build; print(mcpgw_build.build_sdist(sys.argv[1]))"
    name = run(sys.executable, "-c", code, tmp_path, cwd=source).stdout.strip()
    assert name == f"mcpgw_client-{VERSION}.tar.gz"
    with tarfile.open(tmp_path / name) as tar:
        members = set(tar.getnames())
        tar.extractall(tmp_path / "unpacked", filter="data")
    base = f"mcpgw_client-{VERSION}"
    assert {f"{base}/PKG-INFO", f"{base}/pyproject.toml", f"{base}/_build/mcpgw_build.py"} <= members
    assert not [m for m in members if m.endswith((".so", "/mcpgw-gateway", "/mcpgw"))], members

    # Without the native files: a clear error naming them and where they come from.
    unpacked = tmp_path / "unpacked" / base
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", tmp_path / "nothing", unpacked],
        capture_output=True,
        text=True,
        env=clean_env(),
        check=False,
    )
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode != 0
    assert "This source distribution holds no native code" in said, said
    assert f"mcpgw-{VERSION}-x86_64-linux-gnu.tar.gz" in said and "--config-settings lib=PATH" in said, said

    # With them (the release tarball's files would do as well): the same wheel as from the checkout.
    wheel = build_wheel(unpacked, tmp_path / "dist", native)
    checkout = build_wheel(source, tmp_path / "checkout", native)
    assert wheel.name == checkout.name and wheel.read_bytes() == checkout.read_bytes()
