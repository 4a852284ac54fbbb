"""AgentScope 2.0 workspaces on mcpgw: a drop-in for AgentScope's host-side ``GatewayClient``.

:class:`GatewayClient` has the interface of ``agentscope.workspace._gateway_client.GatewayClient``
(2.0.11): the same constructor, ``health``, ``list_mcps``, ``make_client``, ``aclose``, and the
MCP clients and tools it hands out are AgentScope's own ``GatewayMCPClient`` and
``GatewayMCPTool`` classes (subclassed), so a workspace, its toolkit and its agents cannot tell
the difference. Every request runs as a command through the workspace backend's
``exec_shell``, like AgentScope's, but the gateway's built-in client (or curl) makes the request
inside the sandbox instead of a ``python3 -c`` shim: no Python runs in the sandbox for it, and a
call costs one ``sh -c`` instead of a Python start-up plus a body file written and deleted.

:func:`use_mcpgw` makes a sandboxed workspace (bubblewrap, Docker, E2B, Kubernetes) launch
``mcpgw-gateway`` instead of its stock Python gateway (no venv, no ``pip install`` in the
sandbox), always with a token the gateway mints into its own 0600 token file, also where the
stock launch uses none (Docker, E2B, Kubernetes)::

    from mcpgw_client.agentscope import use_mcpgw
    workspace = use_mcpgw(DockerWorkspace(...), gateway_binary="/usr/local/lib/mcpgw-gateway")
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shlex
import shutil
import signal
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar, cast

import mcp.types
from agentscope.message import TextBlock, ToolResultState
from agentscope.tool import ToolChunk as AsToolChunk
from agentscope.workspace._gateway_client import GatewayMCPClient as _AsGatewayMCPClient
from agentscope.workspace._gateway_client import GatewayMCPTool as _AsGatewayMCPTool

from .client import AsyncClient, Transport, _prepare_start
from .errors import McpgwError
from .exec import DockerExec, ExecFailure, ExecTimeout, KubectlExec, LocalExec
from .session import Spawn
from .wire import GatewayInfo

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

    async def _stdin_file(self, data: bytes) -> str:
        if self._stdin_dir is None:
            d = f"{self.tmp_dir}/mcpgw-stdin-{secrets.token_hex(8)}"
            r = await self._exec(["sh", "-c", f"umask 077 && mkdir -p {shlex.quote(d)}"], 30.0)
            if r.exit_code != 0:
                raise ExecFailure(f"cannot make {d} in the sandbox: {r.stderr.decode(errors='replace')}")
            self._stdin_dir = d
        path = f"{self._stdin_dir}/{secrets.token_hex(8)}"
        await self.backend.write_file(path, data)
        return path

    async def _exec(self, argv: list[str], timeout: float) -> Any:
        if self.seen is not None:
            self.seen.append(list(argv))
        return await self.backend.exec_shell(argv, timeout=timeout)

    async def __call__(self, command: str, timeout: float, stdin: bytes | None = None) -> Any:
        if stdin is not None:
            path = shlex.quote(await self._stdin_file(stdin))
            command = f"{{ {command}\n}} <{path}; s=$?; rm -f {path}; exit $s"
        result = await self._exec(["sh", "-c", command], timeout)
        if getattr(result, "exit_code", None) == -1:
            said = bytes(getattr(result, "stderr", b"") or b"").decode(errors="replace").strip()
            if said == "timed out":
                raise ExecTimeout(f"the backend's exec_shell timed out after {timeout:g} s")
            raise ExecFailure(f"the backend's exec_shell failed: {said or 'exit status -1'}")
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
        self._client: AsyncClient | None = None
        self._client_lock = asyncio.Lock()
        #: Set when this client launched the gateway: it stops it on aclose.
        self._launched = False
        #: The process that keeps a bubblewrap launch alive (see :meth:`launch`).
        self.keeper: asyncio.subprocess.Process | None = None

    def _new_client(self, **config: Any) -> AsyncClient:
        return AsyncClient(
            self.exec,
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
    ) -> GatewayClient:
        """Launches ``mcpgw-gateway`` through `backend` and returns the client of it.

        Args:
            gateway_path: the binary inside the sandbox (an absolute path when
                `gateway_binary` is given).
            gateway_binary: a host path of the binary to install at `gateway_path` first
                (skipped when an identical file is there).
            state_dir: where the gateway keeps its token file and log in the sandbox.
            keep_alive: run the launch in a process of the backend kept for the gateway's
                lifetime, for backends whose every command is a sandbox of its own that dies
                with it (bubblewrap: ``start_process``). Default: when the backend has
                ``start_process``.
        """
        # The gateway binary is there (it is launched from it), and its built-in client starts
        # faster than curl: the requests use it unless told otherwise.
        gc = cls(
            backend, 0, timeout=timeout, tmp_dir=tmp_dir, gateway_path=gateway_path, transport=transport or "builtin"
        )
        client = gc._new_client(state_dir=state_dir)
        try:
            if gateway_binary is not None:
                await client.ensure_gateway_binary(gateway_binary)
            if keep_alive is None:
                keep_alive = callable(getattr(backend, "start_process", None))
            if keep_alive:
                gc.keeper, info = await _start_kept(backend, client)
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
        client = await self.client()
        return await client.attach(spawn, open_timeout=open_timeout)

    async def detach(self) -> None:
        """Closes the session channel; requests go back to one ``exec_shell`` each."""
        if self._client is not None:
            await self._client.detach()

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
) -> _W:
    """Makes a sandboxed AgentScope workspace (``BubblewrapWorkspace``, ``DockerWorkspace``,
    ``E2BWorkspace``, ``K8sWorkspace``) run ``mcpgw-gateway`` instead of its stock gateway, and
    returns it. Everything else of the workspace stays as it is.

    Its gateway set-up step is replaced by one that installs `gateway_binary` (a host path;
    by default the binary is expected on the sandbox's PATH, or at `gateway_path`), launches it
    with a token the gateway mints into its own 0600 token file, and binds the workspace's
    gateway facade to :class:`GatewayClient`. No gateway venv is bootstrapped and no Python runs
    in the sandbox for the gateway. With `session`, requests then go over one long-lived
    session channel (:meth:`GatewayClient.attach`) where the backend has one, else one command
    each as without.
    """

    async def setup_mcp_gateway() -> None:
        ws = cast(Any, workspace)
        backend = ws.get_backend()
        # The stock set-up also installs the Glob tool's helper: kept, the Glob tool needs it.
        helper = getattr(ws, "_glob_helper_path", None)
        if helper is not None:
            from agentscope.workspace._utils import _read_glob_helper_bytes

            await backend.write_file(helper, _read_glob_helper_bytes())
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
        )
        if session and channel_spawn(backend) is not None:
            try:
                await gc.attach()
            except Exception as e:  # noqa: BLE001 - one command per request still works
                log.warning("mcpgw: no session channel (%s); requests go one command each", e)
        ws.gateway_port = gc.gateway_port
        ws._gateway = gc
        if gc.keeper is not None and hasattr(ws, "_gateway_process"):
            # BubblewrapWorkspace ends it on close, as it ends its stock gateway.
            ws._gateway_process = gc.keeper

    setattr(workspace, "_setup_mcp_gateway", setup_mcp_gateway)  # noqa: B010 - an instance attribute on any workspace type
    return workspace


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
        return LocalExec().spawn
    container = getattr(getattr(backend, "_container", None), "id", None)
    if isinstance(container, str) and shutil.which("docker"):
        return DockerExec(container).spawn
    pod = getattr(backend, "_pod_name", None)
    if isinstance(pod, str) and shutil.which("kubectl"):
        return KubectlExec(
            pod, namespace=getattr(backend, "_namespace", None), container=getattr(backend, "_container_name", None)
        ).spawn
    return None


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


async def _start_kept(backend: Any, client: AsyncClient) -> tuple[asyncio.subprocess.Process, GatewayInfo]:
    """Runs the library's start_gateway with its launch command in a kept process of `backend`
    (``start_process``); its later commands (the health check) go through ``exec_shell``."""
    core = client._core
    op = core.prepare(_prepare_start, agent_id=None, session_id=None, timeout=None)
    keeper: asyncio.subprocess.Process | None = None
    try:
        cmd = op.command()
        if cmd is None:
            op.raise_failure()
            raise RuntimeError("start_gateway prepared no command")
        command, limit, stdin = cmd
        if stdin is not None:
            raise RuntimeError("the launch command unexpectedly wants stdin")
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
            raise ExecFailure(f"the launch process ended (exit status {status}) before the launch finished")
        stdout, _, rest = bytes(out).partition(head)
        status_text, _, rest = rest.partition(b"\n")
        stderr = rest[: -len(marker) - 2] if rest.endswith(f"\n{marker}\n".encode()) else rest
        op.complete(int(status_text), stdout, stderr)
        # What follows (the health check with the nonce) runs through exec_shell as usual.
        info: GatewayInfo = await client._drive(op)
        return keeper, info
    except BaseException:
        if keeper is not None:
            await _end_process_group(keeper)
        raise
    finally:
        op.free()


__all__ = [
    "BackendExec",
    "GatewayClient",
    "GatewayMCPClient",
    "GatewayMCPTool",
    "use_mcpgw",
]
