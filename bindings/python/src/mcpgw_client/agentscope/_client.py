"""The drop-in for AgentScope's host-side ``GatewayClient``: one mcpgw client of one gateway in a
workspace's sandbox."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shlex
from typing import Any, cast

from ..backends import OpenFn
from ..client import AsyncClient, Transport
from ..errors import McpgwError
from ._backend import SANDBOX_TMP_DIR, BackendExec, has_channel, keeps_processes, sandbox_backend
from ._keeper import end_process_group, start_kept
from ._mcp import GatewayMCPClient, detail


class GatewayClient:
    """A drop-in for AgentScope 2.0.11's ``GatewayClient``, over libmcpgw.

    Constructed like AgentScope's, for a gateway that already runs on `gateway_port`: with the
    `auth_token` it was launched with (written once into a 0600 token file in the sandbox, since
    the library reads the token from there) or with `token_file`, the gateway's own. Or
    launched: :meth:`launch` starts ``mcpgw-gateway`` through the backend, with a token the
    gateway mints itself.

    `timeout` bounds each request (seconds; the library's 60 s by default), and is a tool
    call's deadline in the gateway too; `inline_limit` is accepted for compatibility
    (responses of any size come back through stdout); `tmp_dir` is where the token file and
    stdin files go. Requests reach the sandbox through :attr:`sandbox` (see
    :func:`~mcpgw_client.agentscope.sandbox_backend`, which `open_channel` is handed to).
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
        open_channel: OpenFn | None = None,
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
        #: The binding's backend every request and the session channel go through.
        self.sandbox = sandbox_backend(backend, self.exec, open_channel)
        self._client: AsyncClient | None = None
        self._client_lock = asyncio.Lock()
        #: Set when this client launched the gateway: it stops it on aclose.
        self._launched = False
        #: The process that keeps a bubblewrap launch alive (see :meth:`launch`).
        self.keeper: asyncio.subprocess.Process | None = None

    def _new_client(self, **config: Any) -> AsyncClient:
        return AsyncClient(
            self.sandbox,
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
        await self.exec.checked(f"umask 077 && mkdir -p {shlex.quote(d)}", f"cannot make {d} in the sandbox")
        path = f"{d}/token"
        # Private from the start (nobody else may enter the directory), then 0600 as the
        # gateway's client requires of a token file.
        await self.backend.write_file(path, token.encode())
        await self.exec.checked(f"chmod 600 {shlex.quote(path)}", f"cannot make {path} private")
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
        open_channel: OpenFn | None = None,
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
            open_channel: see :func:`~mcpgw_client.agentscope.sandbox_backend`.
        """
        if keep_alive is None:
            keep_alive = keeps_processes(backend)
        elif keep_alive and not keeps_processes(backend):
            raise ValueError(f"keep_alive needs a backend with start_process; a {type(backend).__name__} has none")
        # The gateway binary is there (it is launched from it), and its built-in client starts
        # faster than curl: the requests use it unless told otherwise.
        gc = cls(
            backend,
            0,
            timeout=timeout,
            tmp_dir=tmp_dir,
            gateway_path=gateway_path,
            transport=transport or "built_in",
            open_channel=open_channel,
        )
        client = gc._new_client(state_dir=state_dir, port=port or None)
        try:
            if gateway_binary is not None:
                await client.ensure_gateway_binary(gateway_binary)
            if keep_alive:
                gc.keeper, info = await start_kept(backend, client, gc.exec)
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
            await end_process_group(keeper)
            return
        with contextlib.suppress(McpgwError):
            await client.stop_gateway()

    # ── the session channel ───────────────────────────────────────

    async def attach(self) -> dict[str, Any]:
        """Opens a session channel (``mcpgw-gateway attach``, one long-lived process in the
        sandbox through :attr:`sandbox`) that every request then goes over, instead of one
        command each; the library waits for its hello, opens it again when it is lost, and
        sends what it cannot carry one command each. Returns the channel's hello."""
        if not has_channel(self.sandbox):
            raise RuntimeError(
                f"no session channel is known for a {type(self.backend).__name__}: construct the client with "
                "open_channel, an async function starting a command in the sandbox with its standard streams piped"
            )
        client = await self.client()
        return await client.open_session()

    async def detach(self) -> None:
        """Closes the session channel; requests go back to one command each."""
        if self._client is not None:
            await self._client.close_session()

    # ── AgentScope's interface ────────────────────────────────────

    async def health(self) -> bool:
        """Whether the gateway answers (with the expected instance nonce, when one is known)."""
        try:
            client = await self.client()
            await client.health()
        except Exception:  # noqa: BLE001 - AgentScope's health never raises
            return False
        return True

    async def list_mcps(self, agent_id: str = "", session_id: str = "") -> list[GatewayMCPClient]:
        """The MCPs the gateway serves for one agent and session, as connected clients."""
        client = await self.client()
        try:
            specs = await client.list_mcps(agent_id=agent_id, session_id=session_id)
        except McpgwError as e:
            raise RuntimeError(f"gateway failed to list MCPs: {detail(e)}") from e
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
        """Closes the session channel (first: a gateway stopped under it would have it opened
        again), stops the gateway when this client launched it, and frees the native client."""
        with contextlib.suppress(Exception):
            await self.detach()
        with contextlib.suppress(Exception):
            await self.stop()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
