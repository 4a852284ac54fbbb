"""AgentScope 2.0 workspaces on mcpgw: a drop-in for AgentScope's host-side ``GatewayClient``.

:class:`GatewayClient` has the interface of ``agentscope.workspace._gateway_client.GatewayClient``
(2.0.11): the same constructor, ``health``, ``list_mcps``, ``make_client``, ``aclose``, and the
MCP clients and tools it hands out are AgentScope's own ``GatewayMCPClient`` and
``GatewayMCPTool`` classes (subclassed), so a workspace, its toolkit and its agents cannot tell
the difference. Every request runs as a command through the workspace backend's
``exec_shell``, like AgentScope's, but the gateway's built-in client (or curl) makes the request
inside the sandbox instead of a ``python3 -c`` shim: no Python runs in the sandbox for it, and a
call costs one ``sh -c`` instead of a Python start-up plus a body file written and deleted.

:func:`use_mcpgw` makes a sandboxed workspace (Bubblewrap, Docker, E2B, Kubernetes, OpenSandbox,
Daytona) launch ``mcpgw-gateway`` instead of its stock Python gateway, always with a token the
gateway mints into its own 0600 token file, also where the stock launch uses none (Docker, E2B,
Kubernetes). What the workspace's bootstrap gives AgentScope's other tools (``uv``, ``uvx``,
``rg``, the ``.venv`` interpreter) it still gets, from AgentScope's own bootstrap steps; what it
installs for the Python gateway (fastapi, uvicorn, agentscope, ...) it does not::

    from mcpgw_client.agentscope import use_mcpgw
    workspace = use_mcpgw(DockerWorkspace(...), gateway_binary="/usr/local/lib/mcpgw-gateway")
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import os
import secrets
import shlex
import shutil
import signal
import sysconfig
import tarfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import mcp.types
from agentscope.message import TextBlock, ToolResultState
from agentscope.tool import ToolChunk as AsToolChunk
from agentscope.workspace._gateway_client import GatewayMCPClient as _AsGatewayMCPClient
from agentscope.workspace._gateway_client import GatewayMCPTool as _AsGatewayMCPTool

from .backends import ExecResult, OpenFn
from .backends import exec as exec_backend
from .client import AsyncClient, Transport
from .errors import McpgwError
from .wire import GatewayInfo

#: Starts a command in the sandbox with stdin, stdout and stderr piped, and leaves it running.
Spawn = OpenFn

log = logging.getLogger(__name__)

#: Where request bodies travel through the sandbox when a command needs its stdin.
SANDBOX_TMP_DIR = "/tmp"


class Backend(Protocol):
    """What the adapter uses of an AgentScope ``BackendBase``."""

    async def exec_shell(self, command: list[str], *, cwd: str | None = None, timeout: float | None = None) -> Any: ...
    async def write_file(self, path: str, data: bytes) -> None: ...


class BackendExec:
    """An exec function over an AgentScope backend: ``backend.exec_shell(["sh", "-c", cmd])``.

    AgentScope's backends pass no stdin to ``exec_shell``; a command that wants some (a large
    body, the gateway binary) gets it from a file written first with the backend's own
    ``write_file`` (Docker's archive API, E2B's files API, a ``cat`` in bubblewrap), in a 0700
    directory, removed by the command itself: two round trips instead of one per 120 KiB.
    AgentScope's exit status -1 ("timed out" or a transport failure) means the command could
    not run.
    """

    passes_stdin = True

    def __init__(self, backend: Backend, *, tmp_dir: str = SANDBOX_TMP_DIR) -> None:
        self.backend = backend
        self.tmp_dir = tmp_dir
        self._stdin_dir: str | None = None
        #: Every argv handed to ``exec_shell``, when recording (see :attr:`record`).
        self.seen: list[list[str]] | None = None
        #: Runs the next command instead of ``exec_shell`` (the launch in a kept process).
        self.run_next: Callable[[str, float], Awaitable[ExecResult]] | None = None

    async def _stdin_file(self, data: bytes) -> str:
        if self._stdin_dir is None:
            d = f"{self.tmp_dir}/mcpgw-stdin-{secrets.token_hex(8)}"
            r = await self._exec(["sh", "-c", f"umask 077 && mkdir -p {shlex.quote(d)}"], 30.0)
            if r.exit_code != 0:
                raise RuntimeError(f"cannot make {d} in the sandbox: {r.stderr.decode(errors='replace')}")
            self._stdin_dir = d
        path = f"{self._stdin_dir}/{secrets.token_hex(8)}"
        await self.backend.write_file(path, data)
        return path

    async def _exec(self, argv: list[str], timeout: float) -> Any:
        if self.seen is not None:
            self.seen.append(list(argv))
        return await self.backend.exec_shell(argv, timeout=timeout)

    async def __call__(self, command: str, timeout: float, stdin: bytes | None = None) -> Any:
        run_next, self.run_next = self.run_next, None
        if run_next is not None:
            return await run_next(command, timeout)
        if stdin is not None:
            path = shlex.quote(await self._stdin_file(stdin))
            command = f"{{ {command}\n}} <{path}; s=$?; rm -f {path}; exit $s"
        result = await self._exec(["sh", "-c", command], timeout)
        if getattr(result, "exit_code", None) == -1:
            said = bytes(getattr(result, "stderr", b"") or b"").decode(errors="replace").strip()
            if said == "timed out":
                raise TimeoutError(f"the backend's exec_shell timed out after {timeout:g} s")
            raise RuntimeError(f"the backend's exec_shell failed: {said or 'exit status -1'}")
        return result


def _detail(e: McpgwError) -> str:
    """AgentScope's ``HTTP <status>: <detail>``, or the error's message when the gateway did
    not answer."""
    if e.status:
        return f"HTTP {e.status}: {e.detail if e.detail is not None else e.message}"
    return e.message


class GatewayMCPTool(_AsGatewayMCPTool):
    """AgentScope's ``GatewayMCPTool`` whose call goes through mcpgw."""

    async def __call__(self, **kwargs: Any) -> AsToolChunk:
        """Calls the upstream tool. A failure the gateway answered (4xx/5xx) comes back as an
        error chunk, as AgentScope's does, so the agent loop can reason about it; a failure to
        reach the gateway raises RuntimeError."""
        gateway = cast(GatewayClient, self._gateway)
        client = await gateway.client()
        try:
            chunk = await client.call_tool(
                str(self.mcp_name),
                self._tool.name,
                kwargs,
                agent_id=self._agent_id,
                session_id=self._session_id,
                timeout=gateway.timeout,
            )
        except McpgwError as e:
            if e.status:
                return AsToolChunk(content=[TextBlock(text=_detail(e))], state=ToolResultState.ERROR)
            raise RuntimeError(f"gateway call of {self.name!r} failed: {e}") from e
        return AsToolChunk.model_validate(chunk)


class GatewayMCPClient(_AsGatewayMCPClient):
    """AgentScope's ``GatewayMCPClient`` whose requests go through mcpgw."""

    def _scope(self) -> dict[str, Any]:
        return {"agent_id": self._agent_id, "session_id": self._session_id}

    async def _mcpgw_client(self) -> AsyncClient:
        assert self._gateway is not None
        return await cast(GatewayClient, self._gateway).client()

    async def connect(self) -> None:
        """Registers this MCP on the gateway (``POST /mcps``)."""
        if self._is_connected:
            raise RuntimeError(f"MCP {self.name!r} is already connected. Call close() before reconnecting.")
        body = self.model_dump(mode="json")
        if self._runtime_headers:
            body["runtime_headers"] = self._runtime_headers
        client = await self._mcpgw_client()
        try:
            await client.add_mcp(body, **self._scope())
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to add MCP {self.name!r}: {_detail(e)}") from e
        self._is_connected = True

    async def close(self, ignore_errors: bool = True) -> None:
        """Removes this MCP from the gateway (``DELETE /mcps/{name}``)."""
        if not self._is_connected:
            if ignore_errors:
                return
            raise RuntimeError(f"MCP {self.name!r} is not connected. Call connect() first.")
        try:
            client = await self._mcpgw_client()
            await client.remove_mcp(self.name, **self._scope())
        except McpgwError as e:
            if not ignore_errors:
                raise RuntimeError(f"gateway failed to remove MCP {self.name!r}: {_detail(e)}") from e
        except Exception:
            if not ignore_errors:
                raise
        self._is_connected = False

    async def set_runtime_headers(self, headers: dict[str, str]) -> None:
        """Replaces the runtime headers of the registered MCP, without reconnecting it."""
        if not self._is_connected:
            raise RuntimeError(f"MCP {self.name!r} is not connected. Call connect() first.")
        client = await self._mcpgw_client()
        try:
            await client.set_runtime_headers(self.name, headers, **self._scope())
        except McpgwError as e:
            if e.code == "INVALID_ARGUMENT":
                raise ValueError(f"gateway rejected runtime headers for MCP {self.name!r}: {_detail(e)}") from e
            if e.status == 404:
                raise RuntimeError(
                    f"gateway has no runtime-headers route, or no live client for MCP {self.name!r}: {_detail(e)}"
                ) from e
            raise RuntimeError(f"gateway failed to update runtime headers for MCP {self.name!r}: {_detail(e)}") from e
        self._runtime_headers = dict(headers)

    async def list_raw_tools(self) -> list[mcp.types.Tool]:
        """The upstream tools (``GET /mcps/{name}/tools``), filtered as AgentScope filters them."""
        client = await self._mcpgw_client()
        try:
            data = await client.list_tools(self.name, **self._scope())
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to list tools for MCP {self.name!r}: {_detail(e)}") from e
        raw_tools = [mcp.types.Tool.model_validate(d) for d in data]
        self._cached_tools = raw_tools
        if self.enable_tools is not None:
            raw_tools = [t for t in raw_tools if t.name in self.enable_tools]
        if self.disable_tools is not None:
            raw_tools = [t for t in raw_tools if t.name not in self.disable_tools]
        return raw_tools

    def _wrap_tool(self, tool: mcp.types.Tool) -> GatewayMCPTool:
        assert self._gateway is not None
        return GatewayMCPTool(
            mcp_name=self.name,
            tool=tool,
            gateway=self._gateway,
            agent_id=self._agent_id,
            session_id=self._session_id,
        )


class GatewayClient:
    """A drop-in for AgentScope 2.0.11's ``GatewayClient``, over libmcpgw.

    Constructed like AgentScope's, for a gateway that already runs on `gateway_port`: with the
    `auth_token` it was launched with (written once into a 0600 token file in the sandbox, since
    the library reads the token from there) or with `token_file`, the gateway's own. Or
    launched: :meth:`launch` starts ``mcpgw-gateway`` through the backend, with a token the
    gateway mints itself.

    `timeout` bounds each request (seconds; the library's 60 s by default); `inline_limit` is
    accepted for compatibility (responses of any size come back through stdout); `tmp_dir` is
    where the token file and stdin files go.
    """

    def __init__(
        self,
        backend: Any,
        gateway_port: int,
        *,
        timeout: float | None = None,
        inline_limit: int | None = None,
        tmp_dir: str = SANDBOX_TMP_DIR,
        gateway_log_path: str | None = None,
        auth_token: str | None = None,
        instance_nonce: str | None = None,
        token_file: str | None = None,
        gateway_path: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.backend = backend
        self.gateway_port = gateway_port
        self.timeout = timeout
        self.inline_limit = inline_limit
        self.tmp_dir = tmp_dir
        self.gateway_log_path = gateway_log_path
        self.auth_token = auth_token
        self.instance_nonce = instance_nonce
        self.token_file = token_file
        self.gateway_path = gateway_path
        self.transport = transport
        self.exec = BackendExec(backend, tmp_dir=tmp_dir)
        #: What starts the session channel's process (see :meth:`attach`).
        self._spawn: Spawn | None = None
        self._client: AsyncClient | None = None
        self._client_lock = asyncio.Lock()
        #: Set when this client launched the gateway: it stops it on aclose.
        self._launched = False
        #: The process that keeps a bubblewrap launch alive (see :meth:`launch`).
        self.keeper: asyncio.subprocess.Process | None = None

    def _new_client(self, **config: Any) -> AsyncClient:
        return AsyncClient(
            exec_backend(self.exec, self._open_channel, passes_stdin=True),
            gateway_path=self.gateway_path,
            transport=self.transport,
            timeout=self.timeout,
            staging_dir=self.tmp_dir,
            **config,
        )

    async def client(self) -> AsyncClient:
        """The mcpgw client behind this facade (made on first use)."""
        if self._client is not None:
            return self._client
        async with self._client_lock:
            if self._client is None:
                token_file = self.token_file
                if token_file is None and self.auth_token is not None:
                    token_file = await self._write_token_file(self.auth_token)
                    self.token_file = token_file
                # Without a token only health works (the library then says the token file is
                # unknown): mcpgw-gateway always runs with a token.
                self._client = self._new_client(
                    port=self.gateway_port, token_file=token_file, instance_nonce=self.instance_nonce
                )
        return self._client

    async def _write_token_file(self, token: str) -> str:
        d = f"{self.tmp_dir}/mcpgw-token-{secrets.token_hex(8)}"
        r = await self.exec(f"umask 077 && mkdir -p {shlex.quote(d)}", 30.0)
        if r.exit_code != 0:
            raise RuntimeError(f"cannot make {d} in the sandbox: {r.stderr.decode(errors='replace')}")
        path = f"{d}/token"
        # Private from the start (nobody else may enter the directory), then 0600 as the
        # gateway's client requires of a token file.
        await self.backend.write_file(path, token.encode())
        r = await self.exec(f"chmod 600 {shlex.quote(path)}", 30.0)
        if r.exit_code != 0:
            raise RuntimeError(f"cannot make {path} private: {r.stderr.decode(errors='replace')}")
        return path

    # ── launch ────────────────────────────────────────────────────

    @classmethod
    async def launch(
        cls,
        backend: Any,
        *,
        gateway_path: str = "mcpgw-gateway",
        gateway_binary: str | None = None,
        state_dir: str | None = None,
        timeout: float | None = None,
        tmp_dir: str = SANDBOX_TMP_DIR,
        transport: Transport | None = None,
        keep_alive: bool | None = None,
        port: int = 0,
    ) -> GatewayClient:
        """Launches ``mcpgw-gateway`` through `backend` and returns the client of it.

        Args:
            gateway_path: the binary inside the sandbox (an absolute path when
                `gateway_binary` is given).
            gateway_binary: a host path of the binary to install at `gateway_path` first
                (skipped when an identical file is there).
            state_dir: where the gateway keeps its token file and log in the sandbox.
            port: the port to listen on in the sandbox; 0, a free one the gateway picks.
            keep_alive: run the launch in a process of the backend kept for the gateway's
                lifetime, for backends whose every command is a sandbox of its own that dies
                with it (bubblewrap: ``start_process``). Default: when the backend has
                ``start_process``.
        """
        # The gateway binary is there (it is launched from it), and its built-in client starts
        # faster than curl: the requests use it unless told otherwise.
        gc = cls(
            backend, 0, timeout=timeout, tmp_dir=tmp_dir, gateway_path=gateway_path, transport=transport or "built_in"
        )
        client = gc._new_client(state_dir=state_dir, port=port or None)
        try:
            if gateway_binary is not None:
                await client.ensure_gateway_binary(gateway_binary)
            if keep_alive is None:
                keep_alive = callable(getattr(backend, "start_process", None))
            if keep_alive:
                gc.keeper, info = await _start_kept(backend, client, gc.exec)
            else:
                info = await client.start_gateway()
        except BaseException:
            await client.aclose()
            raise
        gc._client = client
        gc._launched = True
        gc.gateway_port = info["port"]
        gc.token_file = info["token_file"]
        gc.instance_nonce = info["instance_nonce"]
        gc.gateway_log_path = f"{info['state_dir']}/gateway.log"
        return gc

    async def stop(self) -> None:
        """Stops the gateway this client launched."""
        client = self._client
        if client is None or not self._launched:
            return
        self._launched = False
        keeper, self.keeper = self.keeper, None
        if keeper is not None:
            await _end_process_group(keeper)
            return
        with contextlib.suppress(McpgwError):
            await client.stop_gateway(timeout=10.0)

    # ── the session channel ───────────────────────────────────────

    async def _open_channel(self, command: str) -> Any:
        if self._spawn is None:
            raise RuntimeError("the session channel is opened with attach()")
        return await self._spawn(command)

    async def attach(self, spawn: Spawn | None = None, *, open_timeout: float = 30.0) -> dict[str, Any]:
        """Opens a session channel (``mcpgw-gateway attach``, one long-lived process of the
        backend) that every request then goes over, instead of one ``exec_shell`` each. `spawn`
        starts it; by default it is found from the backend (see :func:`channel_spawn`).
        Returns the channel's hello."""
        spawn = spawn or channel_spawn(self.backend)
        if spawn is None:
            raise RuntimeError(
                f"no session channel is known for a {type(self.backend).__name__}: pass spawn, an async "
                "function starting a command in the sandbox with stdin and stdout piped"
            )
        self._spawn = spawn
        client = await self.client()
        async with asyncio.timeout(open_timeout):
            return await client.open_session()

    async def detach(self) -> None:
        """Closes the session channel; requests go back to one ``exec_shell`` each."""
        if self._client is not None:
            await self._client.close_session()

    # ── AgentScope's interface ────────────────────────────────────

    async def health(self) -> bool:
        """Whether the gateway answers (with the expected instance nonce, when one is known)."""
        try:
            client = await self.client()
            await client.health(timeout=self.timeout)
        except Exception:  # noqa: BLE001 - AgentScope's health never raises
            return False
        return True

    async def list_mcps(self, agent_id: str = "", session_id: str = "") -> list[GatewayMCPClient]:
        """The MCPs the gateway serves for one agent and session, as connected clients."""
        client = await self.client()
        try:
            specs = await client.list_mcps(agent_id=agent_id, session_id=session_id)
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to list MCPs: {_detail(e)}") from e
        return [self.make_client(spec, agent_id=agent_id, session_id=session_id, connected=True) for spec in specs]

    def make_client(
        self,
        spec: dict[str, Any],
        *,
        agent_id: str = "",
        session_id: str = "",
        connected: bool = False,
    ) -> GatewayMCPClient:
        """A :class:`GatewayMCPClient` for `spec` (``MCPClient.model_dump(mode="json")``)."""
        spec = {k: v for k, v in spec.items() if k != "status"}
        client = GatewayMCPClient.model_validate(spec)
        client.attach(cast(Any, self), agent_id=agent_id, session_id=session_id, connected=connected)
        return client

    async def aclose(self) -> None:
        """Closes the session channel, stops the gateway when this client launched it, and
        frees the native client."""
        with contextlib.suppress(Exception):
            await self.detach()
        with contextlib.suppress(Exception):
            await self.stop()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


_W = TypeVar("_W")


def use_mcpgw(
    workspace: _W,
    *,
    gateway_binary: str | None = None,
    gateway_path: str | None = None,
    timeout: float | None = 30.0,
    transport: Transport | None = None,
    session: bool = False,
    host_tools: bool = True,
) -> _W:
    """Makes a sandboxed AgentScope workspace (``BubblewrapWorkspace``, ``DockerWorkspace``,
    ``E2BWorkspace``, ``K8sWorkspace``, ``OpenSandboxWorkspace``, ``DaytonaWorkspace``) run
    ``mcpgw-gateway`` instead of its stock gateway, and returns it. Only the gateway and its
    host client are replaced.

    Its gateway set-up step is replaced by one that first provides what the workspace's own
    bootstrap provides besides the gateway (``uv``, ``uvx``, ``rg``, the ``.venv`` interpreter:
    :func:`bootstrap`), then installs `gateway_binary` (a host path; by default the binary is
    expected on the sandbox's PATH, or at `gateway_path`), launches it with a token the gateway
    mints into its own 0600 token file, binds the workspace's gateway facade to
    :class:`GatewayClient` and sets the workspace's gateway fields to the running gateway's
    (:func:`describe_gateway`). A ``DockerWorkspace`` builds its image without the gateway's
    part (:func:`gateway_free_image`). Nothing of the Python gateway (fastapi, uvicorn,
    agentscope) is installed in the sandbox, and no Python runs there for it. With `session`,
    requests then go over one long-lived session channel (:meth:`GatewayClient.attach`) where
    the backend has one, else one command each as without. `host_tools` is passed to
    :func:`bootstrap`.
    """
    ws = cast(Any, workspace)
    from agentscope.workspace import DockerWorkspace
    from agentscope.workspace._sandboxed_base import SandboxedWorkspaceBase

    if not isinstance(ws, SandboxedWorkspaceBase):
        raise TypeError(
            f"use_mcpgw swaps the gateway of a sandboxed workspace; a {type(ws).__name__} has none "
            "(a LocalWorkspace takes gateway-backed MCP clients: GatewayClient.launch(...).make_client(spec))"
        )
    if isinstance(ws, DockerWorkspace):

        async def build_or_reuse_image() -> None:
            await _build_or_reuse_image(ws)

        setattr(ws, "_build_or_reuse_image", build_or_reuse_image)  # noqa: B010 - an instance attribute

    async def setup_mcp_gateway() -> None:
        backend = ws.get_backend()
        await bootstrap(ws, host_tools=host_tools)
        path = gateway_path
        if path is None:
            home = getattr(ws, "_gateway_home", None)
            path = f"{home}/bin/mcpgw-gateway" if gateway_binary is not None and home else "mcpgw-gateway"
        # The token file and log go to the library's default, a fresh 0700 directory under
        # /tmp: not into a persistent workspace directory.
        gc = await GatewayClient.launch(
            backend,
            gateway_path=path,
            gateway_binary=gateway_binary,
            timeout=timeout,
            transport=transport,
            # Bubblewrap's explicit port (None there means a free one); the other kinds' port is
            # a default (5600) a gateway left running by an earlier stock start may hold.
            port=getattr(ws, "_gateway_port_input", None) or 0,
        )
        if session and channel_spawn(backend) is not None:
            try:
                await gc.attach()
            except Exception as e:  # noqa: BLE001 - one command per request still works
                log.warning("mcpgw: no session channel (%s); requests go one command each", e)
        describe_gateway(ws, gc)

    setattr(ws, "_setup_mcp_gateway", setup_mcp_gateway)  # noqa: B010 - an instance attribute
    return workspace


def describe_gateway(workspace: Any, gateway: GatewayClient) -> None:
    """Points `workspace`'s gateway fields at the running `gateway`: ``_gateway`` (the facade),
    ``gateway_port``, ``_gateway_nonce`` (bubblewrap; what a health check of this gateway
    expects), ``_gateway_process`` (bubblewrap: the kept process the gateway lives in, ended on
    close). ``_gateway_token`` (bubblewrap) is cleared: the gateway minted its token into its
    0600 file inside the sandbox, and the host never holds it."""
    workspace._gateway = gateway
    workspace.gateway_port = gateway.gateway_port
    if hasattr(workspace, "_gateway_nonce"):
        workspace._gateway_nonce = gateway.instance_nonce or ""
    if hasattr(workspace, "_gateway_token"):
        workspace._gateway_token = ""
    if gateway.keeper is not None and hasattr(workspace, "_gateway_process"):
        workspace._gateway_process = gateway.keeper


# ── the workspace's bootstrap without the gateway's part ──────────
#
# AgentScope 2.0.11's workspaces bootstrap in one method that also launches their gateway
# (``_setup_mcp_gateway``); their steps come from a seam of their own, ``_bootstrap_commands()``,
# which is called here and filtered. The loop that runs the steps and the readiness checks around
# it are AgentScope's, replicated without what concerns the gateway (its script, its imports).

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


# ── Docker: the image is the bootstrap ────────────────────────────


def gateway_free_image(workspace: Any) -> tuple[str, dict[str, bytes]]:
    """The image a swapped ``DockerWorkspace`` runs, as ``(tag, build context files)``:
    AgentScope's own Dockerfile template rendered as AgentScope renders it (``uv`` and ``uvx``,
    ``ripgrep``, the ``.venv`` on PATH, the Glob tool's helper, the workspace's base image, Node
    and ``extra_pip``) without the gateway's part: its ``requirements.txt`` holds only
    ``extra_pip`` (not fastapi, uvicorn, mcp, ...) and agentscope is not installed. Tagged by
    content like AgentScope's images, under ``agentscope-workspace-mcpgw``."""
    from agentscope.workspace._docker._make_dockerfile import (
        CONTAINER_WORKDIR,
        GATEWAY_HOME,
        IMAGE_REPO,
        compute_image_tag,
        render_dockerfile,
    )
    from agentscope.workspace._utils import _read_gateway_script_bytes, _read_glob_helper_bytes

    dockerfile = render_dockerfile(
        base_image=workspace.base_image,
        gateway_home=GATEWAY_HOME,
        container_workdir=CONTAINER_WORKDIR,
        node_version=workspace.node_version,
        install_agentscope_block="",
    )
    # The template copies these three in; the gateway script is never run.
    files = {
        "requirements.txt": "".join(f"{p}\n" for p in workspace.extra_pip).encode() or b"\n",
        "_mcp_gateway_app.py": _read_gateway_script_bytes(),
        "_glob_helper.py": _read_glob_helper_bytes(),
    }
    digest = compute_image_tag(dockerfile, files).rpartition(":")[2]
    return f"{IMAGE_REPO}-mcpgw:{digest}", {"Dockerfile": dockerfile.encode(), **files}


async def _build_or_reuse_image(workspace: Any) -> None:
    """``DockerWorkspace._build_or_reuse_image`` for :func:`gateway_free_image`: reuses the
    tag when the daemon has it, else builds it through the workspace's aiodocker client as
    AgentScope builds its own."""
    from aiodocker.exceptions import DockerError

    tag, files = gateway_free_image(workspace)
    workspace._image_tag = tag
    docker = workspace._client
    try:
        await docker.images.inspect(tag)
        return
    except DockerError as e:
        if e.status != 404:
            raise
    log.info("mcpgw: building %s for %s %r", tag, type(workspace).__name__, workspace.workspace_id)
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    context.seek(0)
    said: list[str] = []
    async for chunk in docker.images.build(fileobj=context, encoding="identity", tag=tag, stream=True, rm=True):
        if not isinstance(chunk, dict):
            continue
        if chunk.get("stream"):
            said = [*said[-199:], str(chunk["stream"]).rstrip()]
        if "error" in chunk:
            raise RuntimeError(f"docker build of {tag} failed: {chunk['error']}\n" + "\n".join(said))


def channel_spawn(backend: Any) -> Spawn | None:
    """How to start a session channel's long-lived process through `backend`, when it is one
    whose processes can stay: bubblewrap (``start_process``), the local backend (a local
    process), Docker (``docker exec -i`` on its container), Kubernetes (``kubectl exec -i`` on
    its pod); else None."""
    start_process = getattr(backend, "start_process", None)
    if callable(start_process):
        start = cast(Callable[..., Awaitable[asyncio.subprocess.Process]], start_process)

        async def spawn(command: str) -> asyncio.subprocess.Process:
            return await start(
                ["sh", "-c", command],
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )

        return spawn
    if type(backend).__name__ == "LocalBackend":
        return _spawner([])
    container = getattr(getattr(backend, "_container", None), "id", None)
    if isinstance(container, str) and shutil.which("docker"):
        return _spawner(["docker", "exec", "-i", container])
    pod = getattr(backend, "_pod_name", None)
    if isinstance(pod, str) and shutil.which("kubectl"):
        namespace, name = getattr(backend, "_namespace", None), getattr(backend, "_container_name", None)
        return _spawner(
            [
                "kubectl",
                "exec",
                "-i",
                *(["--namespace", namespace] if namespace else []),
                *(["--container", name] if name else []),
                pod,
                "--",
            ]
        )
    return None


def _spawner(prefix: list[str]) -> Spawn:
    async def spawn(command: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            *prefix,
            "sh",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )

    return spawn


async def _end_process_group(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 5.0)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


# The launch command runs in a process of the backend that outlives it: `sh -c CMD`, then a
# marker line with its exit status, its stderr, a second marker, and (on success) a sleep that
# keeps the sandbox, so the daemonized gateway in it, alive until the process is ended.
_KEEPER = (
    'm=$1; e=$(mktemp) || exit 125; sh -c "$2" 2>"$e"; s=$?; '
    'printf "\\n%s %s\\n" "$m" "$s"; cat "$e"; printf "\\n%s\\n" "$m"; rm -f "$e"; '
    '[ "$s" = 0 ] || exit "$s"; exec sleep 2147483647 </dev/null >/dev/null 2>&1'
)


async def _start_kept(
    backend: Any, client: AsyncClient, exec_fn: BackendExec
) -> tuple[asyncio.subprocess.Process, GatewayInfo]:
    """Runs the library's start_gateway with its launch command in a kept process of `backend`
    (``start_process``), then a health check with the launch's nonce through ``exec_shell``."""
    keeper: asyncio.subprocess.Process | None = None

    async def launch(command: str, limit: float) -> ExecResult:
        nonlocal keeper
        marker = f"mcpgw-launch-{secrets.token_hex(8)}"
        start = cast(Callable[..., Awaitable[asyncio.subprocess.Process]], backend.start_process)
        keeper = await start(
            ["sh", "-c", _KEEPER, "sh", marker, command],
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert keeper.stdout is not None
        out = bytearray()
        head = f"\n{marker} ".encode()
        async with asyncio.timeout(limit):
            while head not in out or not out.endswith(f"\n{marker}\n".encode()):
                data = await keeper.stdout.read(1 << 16)
                if not data:
                    break
                out += data
        if head not in out:
            status = await keeper.wait()
            raise RuntimeError(f"the launch process ended (exit status {status}) before the launch finished")
        stdout, _, rest = bytes(out).partition(head)
        status_text, _, rest = rest.partition(b"\n")
        stderr = rest[: -len(marker) - 2] if rest.endswith(f"\n{marker}\n".encode()) else rest
        return ExecResult(int(status_text), stdout, stderr)

    # The launch is start_gateway's first command; what follows (the health check with the
    # nonce) runs through exec_shell as usual.
    exec_fn.run_next = launch
    try:
        info = await client.start_gateway()
        # The daemon confirmed its nonce from inside the kept process's own sandbox; every later
        # request comes from a command of its own (on bubblewrap, a sandbox of its own): confirm
        # the gateway answers there, with this launch's nonce, before handing it out.
        await client.health()
    except BaseException:
        if keeper is not None:
            await _end_process_group(keeper)
        raise
    finally:
        exec_fn.run_next = None
    assert keeper is not None
    return keeper, info


__all__ = [
    "HOST_TOOLS",
    "BackendExec",
    "GatewayClient",
    "GatewayMCPClient",
    "GatewayMCPTool",
    "bootstrap",
    "bootstrap_commands",
    "describe_gateway",
    "gateway_free_image",
    "find_host_tools",
    "use_mcpgw",
]
