"""Clients of one mcpgw gateway in one sandbox: :class:`AsyncClient` (asyncio) and
:class:`Client` (blocking, a thin wrapper running the same client on an event loop of its own).

Each client is one ``mcpgw_host`` of the library, the host driver: every operation is submitted
to it, and the library decides how it travels (one-shot commands, or the session channel once
:meth:`AsyncClient.open_session` opened one), what a failure means, when to reopen. The client
only runs the processes and timers it asks for (see :mod:`mcpgw_client._driver`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Literal, TypedDict, Unpack, cast

from . import _native
from ._driver import Driver, OnProgress
from .backends import Backend
from .connection import Connection
from .errors import invalid
from .wire import BinaryInfo, GatewayInfo, Health, McpSpec, Tool, ToolChunk

#: How requests are made inside the sandbox: curl, or the gateway binary's built-in client
#: (``None``: detected once).
Transport = Literal["curl", "built_in"]

#: Options given in seconds, and the configuration keys (milliseconds) they set.
_SECONDS = {
    "timeout": "timeout_ms",
    "open_timeout": "open_timeout_ms",
    "answer_grace": "answer_grace_ms",
    "close_grace": "close_grace_ms",
    "heartbeat": "heartbeat_ms",
    "heartbeat_timeout": "heartbeat_timeout_ms",
}


def _millis(seconds: object, what: str) -> int:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise invalid(f"{what} must be a number of seconds, not {seconds!r}")
    return max(1, round(seconds * 1000)) if seconds else 0


def _text(value: object, what: str) -> str:
    # Names, scopes and paths: text without NUL (JSON would carry one, nothing else would).
    if not isinstance(value, str):
        raise invalid(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise invalid(f"{what} must not contain a NUL character: {value!r}")
    return value


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise invalid(f"{what} must be a mapping (a JSON object), not {type(value).__name__}")
    return dict(value)


def _request(
    op: str,
    fields: dict[str, Any] | None = None,
    *,
    agent_id: str | None = None,
    session_id: str | None = None,
    timeout: float | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """An operation as the library's ``Submit`` JSON."""
    request: dict[str, Any] = {"op": op, **(fields or {})}
    if agent_id is not None:
        request["agent_id"] = _text(agent_id, "agent_id")
    if session_id is not None:
        request["session_id"] = _text(session_id, "session_id")
    if timeout is not None:
        if not _millis(timeout, "timeout"):
            raise invalid("timeout must be more than 0 seconds")
        request["timeout_ms"] = _millis(timeout, "timeout")
    if stream:
        request["stream"] = True
    return request


class Options(TypedDict, total=False):
    """The options of a client: the library's host configuration, in seconds where it counts
    milliseconds; every one has the library's default.

    Attributes:
        gateway_path: the gateway binary in the sandbox (``mcpgw-gateway`` on PATH by default).
        host, port, token_file, instance_nonce: a gateway that already runs (port and token
            file); by default the client knows none until ``start_gateway`` or
            ``open_session`` launches one.
        state_dir, staging_dir: where a launch keeps its token file and log, and where large
            bodies are staged, inside the sandbox.
        transport: ``"curl"`` or ``"built_in"`` (the gateway's own client); detected when absent.
        max_command_bytes: the longest command text handed to the backend.
        timeout: seconds an operation may take unless it says otherwise (60).
        open_timeout: seconds a session channel may take to say hello (60).
        answer_grace, close_grace: seconds an answer over a session may take beyond its
            operation's limit, and a closed channel's process may take to exit (5 each).
        reopen: whether a lost session channel is opened again (True), its resumable calls
            resumed; reopen_attempts: failed opens in a row before the session gives up (5).
        heartbeat, heartbeat_timeout: how often attach pings when idle, and how long the
            channel may stay silent before it counts as lost (seconds; 0: the defaults).
        policy: the host's rules (the ``mcpgw mcp --policy`` file's structure, as a mapping):
            what they refuse fails with :class:`PolicyDeniedError` and is not listed.
        audit: called with each call's audit record (a dict) when the call ends.
        audit_arguments: whether the records hold the arguments themselves (secrets shown by
            name), not only their digest and size.
        secrets: secret values by name, or a function from a name to its value (called when
            ``add_mcp`` is given a spec that names it), which a spec's ``{"secret": NAME}`` env
            or headers value resolves to (else the process's environment variable NAME);
            results show ``[secret:NAME]`` in their place.
    """

    gateway_path: str | None
    host: str | None
    port: int | None
    token_file: str | None
    state_dir: str | None
    instance_nonce: str | None
    transport: Transport | None
    staging_dir: str | None
    max_command_bytes: int | None
    timeout: float | None
    open_timeout: float | None
    answer_grace: float | None
    close_grace: float | None
    reopen: bool | None
    reopen_attempts: int | None
    heartbeat: float | None
    heartbeat_timeout: float | None
    policy: Mapping[str, Any] | None
    audit: Callable[[dict[str, Any]], None] | None
    audit_arguments: bool | None
    secrets: Mapping[str, str] | Callable[[str], str] | None


def host_config(backend: Backend, options: Options) -> dict[str, Any]:
    """The library's host configuration of `backend` and `options`."""
    if not isinstance(backend, Backend):
        raise invalid(
            "backend must be one of mcpgw.local(), docker(), podman(), kubectl(), argv() or exec(), "
            f"not {type(backend).__name__}"
        )
    config: dict[str, Any] = {"backend": backend.config}
    for key, value in options.items():
        if key not in Options.__annotations__:
            raise invalid(f"unknown option {key!r}; the options are {', '.join(Options.__annotations__)}")
        if value is None:
            continue
        if key == "audit":
            if not callable(value):
                raise invalid(f"audit must be a function taking a record, not {type(value).__name__}")
            config["audit"] = True
        elif key == "secrets" and callable(value):
            continue  # resolved by the client at add_mcp (see _with_secrets)
        elif key in ("policy", "secrets"):
            config[key] = _object(value, key)
        else:
            config[_SECONDS.get(key, key)] = _millis(value, key) if key in _SECONDS else value
    return config


def _with_secrets(spec: dict[str, Any], secret_of: Callable[[str], str] | None) -> dict[str, Any]:
    """`spec` with each ``{"secret": NAME}`` of its env and headers given the value `secret_of`
    returns for NAME (the library uses it, covers it, and sends it over the session only)."""
    config = spec.get("mcp_config")
    if secret_of is None or not isinstance(config, Mapping):
        return spec
    config = dict(config)
    for field in ("env", "headers"):
        values = config.get(field)
        if not isinstance(values, Mapping):
            continue
        resolved = dict(values)
        for key, value in values.items():
            if isinstance(value, Mapping) and isinstance(value.get("secret"), str) and "value" not in value:
                name = value["secret"]
                got = secret_of(name)
                if not isinstance(got, str):
                    raise invalid(f"mcp_config.{field}.{key}: the secrets function gave no text for secret {name!r}")
                resolved[key] = {"secret": name, "value": got}
        config[field] = resolved
    return {**spec, "mcp_config": config}


class AsyncClient:
    """An asyncio client of one gateway in one sandbox.

    Args:
        backend: how commands and the session channel reach the sandbox:
            :func:`mcpgw_client.local`, :func:`mcpgw_client.docker`, :func:`mcpgw_client.podman`,
            :func:`mcpgw_client.kubectl`, :func:`mcpgw_client.argv` or :func:`mcpgw_client.exec`.
        options: see :class:`Options` (``gateway_path``, ``port``, ``token_file``,
            ``timeout``, ``reopen``, ...).

    Every operation takes the keyword arguments ``agent_id`` and ``session_id`` (the scope
    the MCPs live in) and ``timeout`` (seconds; for a tool call also the gateway's deadline).
    Cancelling the task that awaits an operation cancels it: its command is killed (and the
    command in the sandbox ends with it), or over a session the gateway cancels the call
    upstream. Use ``async with`` or :meth:`aclose`; the client belongs to the event loop it
    is first used on.
    """

    def __init__(self, backend: Backend, **options: Unpack[Options]) -> None:
        # The library checks every value (and names the one that is wrong) before anything runs.
        self._driver = Driver(host_config(backend, options), backend, options.get("audit"))
        secrets = options.get("secrets")
        self._secret_of: Callable[[str], str] | None = secrets if callable(secrets) else None

    # ── lifecycle and state ───────────────────────────────────────

    @property
    def state(self) -> dict[str, Any]:
        """What the client knows: ``{"session": "off"|"opening"|"open", "gateway": {port, pid,
        token_file, instance_nonce, state_dir} or None, "hello": the channel's hello or None}``."""
        return self._driver.state()

    @property
    def port(self) -> int:
        """The gateway's port once known (configured, launched, or from a session), else 0."""
        state = self.state
        for source in (state.get("gateway"), state.get("hello")):
            if isinstance(source, dict) and source.get("port"):
                return int(source["port"])
        return 0

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return not self._driver.ptr

    async def aclose(self) -> None:
        """Cancels what is under way, closes the session, waits until every process the client
        started has ended, and frees the library's host. Idempotent. Does not stop the
        gateway: call :meth:`stop_gateway` first for that."""
        await self._driver.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ── operations ────────────────────────────────────────────────

    async def start_gateway(self, *, timeout: float | None = None) -> GatewayInfo:
        """Launches the gateway in the sandbox (it mints its token into its 0600 token file
        there: the host never holds it) and confirms it answers with its instance nonce."""
        return cast(GatewayInfo, await self._driver.call(_request("start_gateway", timeout=timeout)))

    async def stop_gateway(self, *, timeout: float | None = None) -> None:
        """Stops the gateway this client launched and removes its state directory."""
        await self._driver.call(_request("stop_gateway", timeout=timeout))

    async def ensure_gateway_binary(
        self, binary_path: str | None = None, *, timeout: float | None = None
    ) -> BinaryInfo:
        """Installs the gateway binary read from `binary_path` on the host (by default the one
        this package bundles, :func:`~mcpgw_client.gateway_binary`) at ``gateway_path`` in the
        sandbox, unless an identical file is there (SHA-256)."""
        path = _native.gateway_binary() if binary_path is None else binary_path
        fields = {"binary_path": _text(path, "binary_path")}
        return cast(BinaryInfo, await self._driver.call(_request("ensure_gateway_binary", fields, timeout=timeout)))

    async def health(self, *, timeout: float | None = None) -> Health:
        """``GET /health``: the gateway's status and instance nonce; with a known nonce, another
        gateway on the port is ``GatewayNotRunningError``."""
        return cast(Health, await self._driver.call(_request("health", timeout=timeout)))

    async def list_mcps(
        self, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[McpSpec]:
        """The specs of the MCP servers in the scope, each with its ``status``."""
        request = _request("list_mcps", agent_id=agent_id, session_id=session_id, timeout=timeout)
        return cast(list[McpSpec], await self._driver.call(request))

    async def add_mcp(
        self,
        spec: Mapping[str, Any],
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Registers an MCP server (AgentScope's ``MCPClient`` dump) in the scope; returns once
        it is connected and its tools listed."""
        fields = {"spec": _with_secrets(_object(spec, "the MCP spec"), self._secret_of)}
        await self._driver.call(_request("add_mcp", fields, agent_id=agent_id, session_id=session_id, timeout=timeout))

    async def remove_mcp(
        self, name: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> None:
        """Removes an MCP server from the scope; returns once its processes are gone."""
        fields = {"name": _text(name, "the MCP name")}
        request = _request("remove_mcp", fields, agent_id=agent_id, session_id=session_id, timeout=timeout)
        await self._driver.call(request)

    async def list_tools(
        self, mcp: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[Tool]:
        """The MCP ``Tool`` objects of an MCP server (camelCase, as the upstream sent them)."""
        fields = {"mcp": _text(mcp, "the MCP name")}
        request = _request("list_tools", fields, agent_id=agent_id, session_id=session_id, timeout=timeout)
        return cast(list[Tool], await self._driver.call(request))

    @staticmethod
    def _call_request(
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None,
        *,
        agent_id: str | None,
        session_id: str | None,
        timeout: float | None,
        stream: bool,
    ) -> dict[str, Any]:
        fields: dict[str, Any] = {"mcp": _text(mcp, "the MCP name"), "tool": _text(tool, "the tool name")}
        if arguments is not None:
            fields["arguments"] = _object(arguments, "the tool arguments")
        return _request("call_tool", fields, agent_id=agent_id, session_id=session_id, timeout=timeout, stream=stream)

    async def call_tool(
        self,
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
        on_progress: OnProgress | None = None,
    ) -> ToolChunk:
        """Calls a tool and returns its ToolChunk. `timeout` is also the gateway's deadline
        for the call (then ``DeadlineError``, and the upstream is told to cancel).
        `on_progress` receives each progress chunk as it arrives (over a session)."""
        request = self._call_request(
            mcp,
            tool,
            arguments,
            agent_id=agent_id,
            session_id=session_id,
            timeout=timeout,
            stream=on_progress is not None,
        )
        return cast(ToolChunk, await self._driver.call(request, on_progress))

    def call_tool_stream(
        self,
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AsyncGenerator[ToolChunk, None]:
        """Calls a tool and yields its chunks: each progress chunk as it arrives (over a
        session; ``is_last`` false, ``metadata.mcp_progress``), then the final chunk. Leaving
        the loop early cancels the call once the iterator is closed (at once with
        ``contextlib.aclosing``, else when it is collected)."""
        request = self._call_request(
            mcp, tool, arguments, agent_id=agent_id, session_id=session_id, timeout=timeout, stream=True
        )
        return cast(AsyncGenerator[ToolChunk, None], self._driver.stream(request))

    async def set_runtime_headers(
        self,
        mcp: str,
        headers: Mapping[str, str],
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Replaces the runtime headers of a streamable-HTTP MCP server without reconnecting."""
        fields = {"mcp": _text(mcp, "the MCP name"), "headers": _object(headers, "the runtime headers")}
        request = _request("set_runtime_headers", fields, agent_id=agent_id, session_id=session_id, timeout=timeout)
        await self._driver.call(request)

    # ── the session channel ───────────────────────────────────────

    async def open_session(self, *, timeout: float | None = None) -> dict[str, Any]:
        """Opens the session channel: one long-lived exec running ``mcpgw-gateway attach``
        (which launches the gateway first when the client knows none), over which every REST
        operation then travels, many at once, with live progress and cancellation. Returns the
        channel's hello (``{"version", "port", "pid", "launched", ...}``). A channel that is
        lost is opened again (unless ``reopen=False``), and tool calls it carried resume."""
        return cast(dict[str, Any], await self._driver.call(_request("open_session", timeout=timeout)))

    async def close_session(self, *, timeout: float | None = None) -> None:
        """Closes the session channel (calls in flight over it fail with ``SessionLostError``);
        operations go back to one command each. Idempotent."""
        await self._driver.call(_request("close_session", timeout=timeout))

    async def connect(
        self,
        mcp: str,
        *,
        agent_id: str = "",
        session_id: str = "",
        on_message: Callable[[dict[str, Any]], object] | None = None,
    ) -> Connection:
        """Opens a virtual MCP connection to `mcp` over the session channel (raw JSON-RPC both
        ways) and returns it once it is open, or has ended (then its ``reason`` says why)."""
        name = _text(mcp, "the MCP name")
        conn = Connection(self._driver, name, on_message)
        try:
            raw = [
                _text(v, w).encode("utf-8")
                for v, w in ((name, "mcp"), (agent_id, "agent_id"), (session_id, "session_id"))
            ]
        except UnicodeEncodeError as e:
            raise invalid(f"a name is not valid Unicode text: {e}") from None
        if any(b"\0" in v for v in raw):
            raise invalid("the MCP name and scope must not contain a NUL character")
        conn.id = self._driver.open_connection(conn, *raw)
        await conn.wait_open()
        return conn


__all__ = ["AsyncClient", "Options", "Transport"]
