"""The workspace's bootstrap without the gateway's part: what AgentScope's bootstrap gives its
builtin tools and stdio MCP servers (``uv``, ``uvx``, ``rg``, the ``.venv`` interpreter), from its
own steps, repaired when AgentScope would repair it.

AgentScope 2.0.11's workspaces bootstrap in one method that also launches their gateway
(``_setup_mcp_gateway``); their steps come from a seam of their own, ``_bootstrap_commands()``,
which is called here and filtered. The loop that runs the steps and the readiness checks around
it are AgentScope's, replicated without what concerns the gateway (its script, its imports).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shlex
import sysconfig
from pathlib import Path
from typing import Any, cast

log = logging.getLogger("mcpgw_client.agentscope")

#: AgentScope's bubblewrap readiness probe (``_bootstrap_is_ready``) without the gateway's script
#: and imports: the ``.venv`` interpreter, ``uv`` and ``rg`` in the workspace's bin directory.
_BWRAP_READY = (
    'test -x "$1" && "$1" --version >/dev/null 2>&1 && "$2" --version >/dev/null 2>&1 && "$3" --version >/dev/null 2>&1'
)


def bootstrap_commands(workspace: Any) -> list[str]:
    """AgentScope's bootstrap commands of `workspace` (its ``_bootstrap_commands()``) without the
    gateway's part: the install of the gateway's requirements (AgentScope's
    ``_GATEWAY_BASE_REQUIREMENTS``: fastapi, uvicorn, mcp, httpx, ...) and of agentscope itself
    into the ``.venv``. The workspace's ``extra_pip`` are still installed there (on bubblewrap
    the ``.venv`` is first on every command's PATH). Every other step is AgentScope's as it is:
    system packages, ``uv`` (with ``uvx``), ``rg``, ``uv venv``. Raises RuntimeError for a
    package install it does not know, rather than run what it cannot tell apart."""
    from agentscope.workspace._utils import _GATEWAY_BASE_REQUIREMENTS

    base = " " + " ".join(shlex.quote(p) for p in _GATEWAY_BASE_REQUIREMENTS)
    kept: list[str] = []
    for command in cast(list[str], workspace._bootstrap_commands()):
        if " pip install " not in command:
            kept.append(command)
            continue
        if command.endswith(" --no-deps 'agentscope'"):
            continue
        head, found, extra = command.partition(base)
        if not found:
            raise RuntimeError(
                f"{type(workspace).__name__}'s bootstrap has a package install mcpgw does not know "
                f"(AgentScope newer than 2.0?): {command!r}"
            )
        if extra.strip():
            kept.append(head + extra)
    return kept


async def bootstrap(workspace: Any, *, host_tools: bool = True) -> None:
    """Provides what AgentScope's bootstrap of `workspace` provides besides its gateway, and
    repairs it when it is broken, when AgentScope would:

    - bubblewrap: when the ``.venv`` interpreter, ``uv`` or ``rg`` of the workspace does not
      answer ``--version`` (AgentScope's readiness probe without the gateway's script and
      imports), runs :func:`bootstrap_commands`. With `host_tools`, this host's ``uv``, ``uvx``
      and ``rg`` (:func:`find_host_tools`; a bubblewrap sandbox runs the host's own system, so its
      binaries run there) are first installed where missing, so AgentScope's steps, which
      download only what does not answer, fetch nothing. Then writes the Glob tool's helper,
      which AgentScope refreshes on every start.
    - every other kind (Docker, E2B, Kubernetes, OpenSandbox, Daytona): when the Glob tool's
      helper is missing, runs :func:`bootstrap_commands`, then writes the helper last, so an
      interrupted bootstrap runs again (AgentScope writes its gateway script last for this).
      Docker's steps are its image (:func:`gateway_free_image`); there are none here.
    """
    from agentscope.workspace import BubblewrapWorkspace
    from agentscope.workspace._utils import _read_glob_helper_bytes

    backend = workspace.get_backend()
    helper = cast(str, workspace._glob_helper_path)
    if isinstance(workspace, BubblewrapWorkspace):
        home = workspace._gateway_home
        probe = await backend.exec_shell(
            ["sh", "-c", _BWRAP_READY, "sh", workspace._gateway_python, f"{home}/bin/uv", f"{home}/bin/rg"],
            timeout=30.0,
        )
        if not probe.ok():
            log.info("mcpgw: bootstrapping or repairing %s %r", type(workspace).__name__, workspace.workspace_id)
            if host_tools:
                await _install_missing(workspace, f"{home}/bin", find_host_tools())
            await _run_bootstrap(workspace, bootstrap_commands(workspace))
    elif not await backend.file_exists(helper):
        log.info("mcpgw: bootstrapping %s %r", type(workspace).__name__, workspace.workspace_id)
        await _run_bootstrap(workspace, bootstrap_commands(workspace))
    else:
        return
    await backend.write_file(helper, _read_glob_helper_bytes())


async def _run_bootstrap(workspace: Any, commands: list[str]) -> None:
    """Runs bootstrap steps as AgentScope does: each through ``sh -c`` with the workspace's
    step timeout, stopping at the first that fails."""
    backend = workspace.get_backend()
    for command in commands:
        r = await backend.exec_shell(["sh", "-c", command], timeout=workspace._bootstrap_cmd_timeout)
        if not r.ok():
            raise RuntimeError(
                f"{type(workspace).__name__} bootstrap failed (exit {r.exit_code}) for: {command!r}\n"
                f"stderr: {r.stderr.decode(errors='replace')}\nstdout: {r.stdout.decode(errors='replace')}"
            )


#: The tools AgentScope's bootstrap installs for its builtin tools and stdio MCP servers.
HOST_TOOLS = ("uv", "uvx", "rg")


def find_host_tools() -> dict[str, str]:
    """This host's ``uv``, ``uvx`` and ``rg`` executables by name, those found: from the ``uv``
    Python package (``uv.find_uv_bin``), this interpreter's scripts directory (where
    ``pip install uv ripgrep`` puts them), then PATH. Only native (ELF) executables count: a
    wrapper such as a pyenv shim would not run in a sandbox."""
    dirs = [sysconfig.get_path("scripts"), *os.environ.get("PATH", "").split(os.pathsep)]
    with contextlib.suppress(ImportError, FileNotFoundError):
        import uv

        dirs.insert(0, os.path.dirname(uv.find_uv_bin()))
    found: dict[str, str] = {}
    for name in HOST_TOOLS:
        for d in dirs:
            path = os.path.join(d, name) if d else ""
            if path and os.path.isfile(path) and os.access(path, os.X_OK) and _is_elf(path):
                found[name] = path
                break
    return found


def _is_elf(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


#: Names the tools of a bin directory that do not answer ``--version``.
_MISSING = 'd=$1; shift; for t; do "$d/$t" --version >/dev/null 2>&1 || echo "$t"; done'
#: Makes a written file executable and moves it in place, so a partial one never answers.
_PLACE = 'chmod 755 "$1" && mv -f "$1" "$2"'


async def _install_missing(workspace: Any, bin_dir: str, tools: dict[str, str]) -> None:
    """Installs the host executables `tools` (name: host path) into `bin_dir` of the workspace
    where the one there does not answer ``--version``."""
    if not tools:
        return
    backend = workspace.get_backend()
    r = await backend.exec_shell(["sh", "-c", _MISSING, "sh", bin_dir, *tools], timeout=30.0)
    for name in r.stdout.decode(errors="replace").split():
        if name not in tools:
            continue
        data = await asyncio.to_thread(Path(tools[name]).read_bytes)
        partial = f"{bin_dir}/.{name}.{secrets.token_hex(6)}"
        await backend.write_file(partial, data)
        r = await backend.exec_shell(["sh", "-c", _PLACE, "sh", partial, f"{bin_dir}/{name}"], timeout=30.0)
        if not r.ok():
            raise RuntimeError(f"cannot install {name} at {bin_dir}/{name}: {r.stderr.decode(errors='replace')}")
        log.info("mcpgw: installed this host's %s (%s) at %s/%s", name, tools[name], bin_dir, name)
