"""Clients of one mcpgw gateway in one sandbox: :class:`AsyncClient` (asyncio) and
:class:`Client` (blocking).

Both drive libmcpgw's sans-IO operations from Python, as the Node binding does: a method
prepares an operation (a short call into the library), then loops: ask the operation for its
next command, run it through the exec function, hand the output back. No Python callback crosses
into C; the library does no I/O. The operation is freed in ``finally`` whatever happens
(success, failure, cancellation, timeout). Once :meth:`AsyncClient.attach` opened a session
channel, every REST method goes over it instead (see :mod:`mcpgw_client.session`).
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import json
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from ctypes import c_size_t, c_uint32, c_void_p
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from . import _native
from .errors import OK, RESULT, McpgwError, check, error_for, read_error, result_message, take_error
from .exec import ArgvExec, ExecFn, ExecResultLike, SyncExecFn
from .wire import BinaryInfo, GatewayInfo, Health, McpSpec, Tool, ToolChunk

if TYPE_CHECKING:
    from .session import AsyncSession, Spawn

lib = _native.lib
T = TypeVar("T")

Transport = Literal["auto", "curl", "builtin"]
_TRANSPORTS: dict[str, int] = {"auto": 0, "curl": 1, "builtin": 2}
_MAX_U32 = 2**32 - 1
#: The operations a session can carry.
SESSION_OPS = frozenset(
    {"health", "list_mcps", "add_mcp", "remove_mcp", "list_tools", "call_tool", "set_runtime_headers"}
)


def _invalid(message: str) -> McpgwError:
    return error_for(RESULT["INVALID_ARGUMENT"], message)


def c_text(value: object, what: str) -> bytes:
    """`value` as C string bytes: a str without NUL, UTF-8 encoded."""
    if not isinstance(value, str):
        raise _invalid(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise _invalid(f"{what} must not contain a NUL character")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise _invalid(f"{what} is not valid Unicode text: {e}") from None


def _json_object(value: object, what: str) -> bytes:
    if not isinstance(value, Mapping):
        raise _invalid(f"{what} must be a mapping (a JSON object), not {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as e:
        raise _invalid(f"{what} cannot be written as JSON: {e}") from None


def _millis(seconds: float | None, what: str, *, allow_zero: bool) -> int:
    if seconds is None:
        return 0
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise _invalid(f"{what} must be a number of seconds")
    ms = round(seconds * 1000)
    if ms < (0 if allow_zero else 1) or ms > _MAX_U32:
        raise _invalid(f"{what} must be between 0.001 and {_MAX_U32 // 1000} seconds, not {seconds}")
    return ms


def _as_bytes(value: object, what: str) -> bytes:
    if value is None:
        return b""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"the exec function's {what} must be bytes or str, not {type(value).__name__}")


def exec_output(result: object) -> tuple[int, bytes, bytes]:
    """The exit status and output of what an exec function returned (or raised, for SDKs such
    as E2B's that raise an exception carrying the result for a non-zero exit)."""
    if callable(result) and not hasattr(result, "exit_code"):
        raise TypeError("the exec function returned a function; pass LocalExec(), not LocalExec")
    code = getattr(result, "exit_code", None)
    if isinstance(code, bool) or not isinstance(code, int) or not -(2**31) <= code < 2**31:
        raise TypeError(f"the exec function's result has no integer exit_code (got {result!r:.200})")
    return (
        code,
        _as_bytes(getattr(result, "stdout", None), "stdout"),
        _as_bytes(getattr(result, "stderr", None), "stderr"),
    )


def _carries_result(error: BaseException) -> bool:
    return isinstance(getattr(error, "exit_code", None), int) and hasattr(error, "stdout")


class Op:
    """One prepared operation (owned; freed exactly once with :meth:`free`)."""

    __slots__ = ("name", "ptr")

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr
        self.name = _native.text(lib.mcpgw_op_name(ptr)) or "operation"

    def command(self, *, with_stdin: bool = True) -> tuple[str, float, bytes | None] | None:
        """The next command (text, timeout in seconds, stdin), or None once finished."""
        text = c_void_p()
        timeout = c_uint32()
        if lib.mcpgw_op_command(self.ptr, ctypes.byref(text), ctypes.byref(timeout)) != OK:
            return None
        # Copied now: the text is borrowed and dies with the next complete/fail_exec.
        command = ctypes.string_at(text.value).decode("utf-8") if text.value else ""
        buf = c_void_p()
        size = c_size_t()
        stdin: bytes | None = None
        if not with_stdin:
            return command, timeout.value / 1000.0, None
        if lib.mcpgw_op_command_stdin(self.ptr, ctypes.byref(buf), ctypes.byref(size)) == OK and buf.value:
            stdin = ctypes.string_at(buf.value, size.value)
        return command, timeout.value / 1000.0, stdin

    def complete(self, exit_code: int, stdout: bytes, stderr: bytes) -> None:
        check(
            lib.mcpgw_op_complete(self.ptr, exit_code, stdout, len(stdout), stderr, len(stderr)),
            f"{self.name}: handing back the output",
        )

    def fail_exec(self, reason: str) -> None:
        check(
            lib.mcpgw_op_fail_exec(self.ptr, reason.encode("utf-8", errors="replace").replace(b"\0", b" ")),
            f"{self.name}: reporting the exec failure",
        )

    def result(self) -> int:
        return int(lib.mcpgw_op_result(self.ptr))

    def raise_failure(self, cause: BaseException | None = None) -> None:
        """Raises the typed error of a failed operation; returns when it succeeded."""
        code = self.result()
        if code == OK:
            return
        err = read_error(lib.mcpgw_op_error(self.ptr) or 0, code)
        if cause is not None:
            raise err from cause
        raise err

    def result_json(self) -> Any:
        out = c_void_p()
        check(lib.mcpgw_op_result_json(self.ptr, ctypes.byref(out)), f"{self.name}: reading the result")
        return json.loads(_native.take_string(out.value))

    def free(self) -> None:
        if self.ptr:
            lib.mcpgw_op_free(self.ptr)
            self.ptr = 0


def _new_options(agent_id: bytes, session_id: bytes, timeout_ms: int) -> int:
    out = c_void_p()
    check(lib.mcpgw_call_options_new(ctypes.byref(out)), "creating call options")
    ptr = out.value or 0
    try:
        check(lib.mcpgw_call_options_set_agent_id(ptr, agent_id), "agent_id")
        check(lib.mcpgw_call_options_set_session_id(ptr, session_id), "session_id")
        check(lib.mcpgw_call_options_set_timeout_ms(ptr, timeout_ms), "timeout")
    except BaseException:
        lib.mcpgw_call_options_free(ptr)
        raise
    return ptr


Prepare = Callable[[int, int, Any], int]


class _Core:
    """The native client and its defaults, shared by both client kinds."""

    def __init__(
        self,
        *,
        passes_stdin: bool,
        gateway_path: str | None,
        host: str | None,
        port: int | None,
        token_file: str | None,
        state_dir: str | None,
        instance_nonce: str | None,
        staging_dir: str | None,
        transport: Transport | None,
        timeout: float | None,
        max_command_bytes: int | None,
        agent_id: str,
        session_id: str,
    ) -> None:
        # Checked before anything native is allocated, so a bad option leaks nothing.
        settings: list[tuple[str, Any]] = []
        for setter, value, what in (
            ("gateway_path", gateway_path, "gateway_path"),
            ("host", host, "host"),
            ("token_file", token_file, "token_file"),
            ("state_dir", state_dir, "state_dir"),
            ("instance_nonce", instance_nonce, "instance_nonce"),
            ("staging_dir", staging_dir, "staging_dir"),
        ):
            if value is not None:
                settings.append((setter, c_text(value, what)))
        if port is not None:
            if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
                raise _invalid(f"port must be an integer from 0 to 65535, not {port!r}")
            settings.append(("port", port))
        if transport is not None:
            if transport not in _TRANSPORTS:
                raise _invalid(f'transport must be "auto", "curl" or "builtin", not {transport!r}')
            settings.append(("transport", _TRANSPORTS[transport]))
        if timeout is not None:
            settings.append(("timeout_ms", _millis(timeout, "timeout", allow_zero=False)))
        if max_command_bytes is not None:
            if isinstance(max_command_bytes, bool) or not isinstance(max_command_bytes, int) or max_command_bytes < 0:
                raise _invalid("max_command_bytes must be a non-negative integer")
            settings.append(("max_command_bytes", max_command_bytes))
        settings.append(("exec_stdin", bool(passes_stdin)))
        self.agent_id = c_text(agent_id, "agent_id")
        self.session_id = c_text(session_id, "session_id")

        cfg_out = c_void_p()
        check(lib.mcpgw_client_config_new(ctypes.byref(cfg_out)), "creating a client configuration")
        cfg = cfg_out.value or 0
        try:
            for setter, value in settings:
                rc = getattr(lib, f"mcpgw_client_config_set_{setter}")(cfg, value)
                if rc != OK:
                    raise error_for(rc, f"option {setter}: {result_message(rc)}")
            client_out = c_void_p()
            err_out = c_void_p()
            rc = lib.mcpgw_client_new(cfg, None, None, None, ctypes.byref(client_out), ctypes.byref(err_out))
            if rc != OK:
                raise take_error(err_out.value, rc)
        finally:
            lib.mcpgw_client_config_free(cfg)
        self.ptr: int = client_out.value or 0
        self._default_options = _new_options(self.agent_id, self.session_id, 0)
        # A backstop for clients that were never closed; close() runs it at once.
        self._finalizer = weakref.finalize(self, _free_client, self.ptr, self._default_options)

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        self._finalizer()

    def port(self) -> int:
        return 0 if self.closed else int(lib.mcpgw_client_port(self.ptr))

    def prepare(
        self,
        prepare: Prepare,
        *,
        agent_id: str | None,
        session_id: str | None,
        timeout: float | None,
    ) -> Op:
        """Prepares an operation with the call's options (the client's when none are given)."""
        if self.closed:
            raise error_for(RESULT["INVALID_STATE"], "the client is closed")
        timeout_ms = _millis(timeout, "timeout", allow_zero=False)
        custom = agent_id is not None or session_id is not None or timeout_ms
        opts = (
            _new_options(
                c_text(agent_id, "agent_id") if agent_id is not None else self.agent_id,
                c_text(session_id, "session_id") if session_id is not None else self.session_id,
                timeout_ms,
            )
            if custom
            else self._default_options
        )
        try:
            out = c_void_p()
            rc = prepare(self.ptr, opts, ctypes.byref(out))
            if rc != OK:
                raise error_for(rc, f"preparing the operation: {result_message(rc)}")
            return Op(out.value or 0)
        finally:
            if custom:
                lib.mcpgw_call_options_free(opts)


def _free_client(client: int, options: int) -> None:
    lib.mcpgw_call_options_free(options)
    lib.mcpgw_client_free(client)


def _prepare_start(c: int, o: int, out: Any) -> int:
    return int(lib.mcpgw_client_prepare_start_gateway(c, o, out))


def _prepare_stop(c: int, o: int, out: Any) -> int:
    return int(lib.mcpgw_client_prepare_stop_gateway(c, o, out))


def _prepare_health(c: int, o: int, out: Any) -> int:
    return int(lib.mcpgw_client_prepare_health(c, o, out))


def _prepare_list_mcps(c: int, o: int, out: Any) -> int:
    return int(lib.mcpgw_client_prepare_list_mcps(c, o, out))


class _Requests:
    """The preparation of each operation from Python arguments, shared by both clients."""

    @staticmethod
    def ensure(host_path: str) -> Prepare:
        path = c_text(host_path, "host_path")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_ensure_gateway_binary(c, o, path, out))

    @staticmethod
    def add_mcp(spec: Mapping[str, Any]) -> Prepare:
        body = _json_object(spec, "the MCP spec")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_add_mcp(c, o, body, out))

    @staticmethod
    def remove_mcp(name: str) -> Prepare:
        mcp = c_text(name, "the MCP name")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_remove_mcp(c, o, mcp, out))

    @staticmethod
    def list_tools(name: str) -> Prepare:
        mcp = c_text(name, "the MCP name")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_list_tools(c, o, mcp, out))

    @staticmethod
    def call_tool(mcp: str, tool: str, arguments: Mapping[str, Any] | None) -> Prepare:
        m = c_text(mcp, "the MCP name")
        t = c_text(tool, "the tool name")
        body = b"" if arguments is None else _json_object(arguments, "the tool arguments")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_call_tool(c, o, m, t, body, out))

    @staticmethod
    def set_runtime_headers(mcp: str, headers: Mapping[str, str]) -> Prepare:
        m = c_text(mcp, "the MCP name")
        body = _json_object(headers, "the runtime headers")
        return lambda c, o, out: int(lib.mcpgw_client_prepare_set_runtime_headers(c, o, m, body, out))


def _deadline(op: Op, timeout: float) -> McpgwError:
    return error_for(RESULT["DEADLINE"], f"{op.name}: the exec function did not finish a command within {timeout:g} s")


class AsyncClient:
    """An asyncio client of one gateway in one sandbox.

    Args:
        exec: how commands reach the sandbox: an async function ``(command, timeout, stdin) ->
            result`` (see :mod:`mcpgw_client.exec`), a plain function (run in a worker thread, so the
            loop never blocks), or a ready-made :class:`~mcpgw_client.exec.LocalExec`,
            :class:`~mcpgw_client.exec.DockerExec`, :class:`~mcpgw_client.exec.KubectlExec`.
        exec_stdin: whether `exec` passes a command's stdin; by default its ``passes_stdin``
            attribute (True for the ready-made ones), else False. Declared, it lets the gateway
            binary and large bodies travel in one command instead of staged pieces.
        gateway_path: the gateway binary in the sandbox (``mcpgw-gateway`` on PATH by default).
        host, port, token_file, instance_nonce: a gateway that already runs (port and token
            file); by default the client knows none until :meth:`start_gateway` or
            :meth:`attach` launches one.
        state_dir, staging_dir: where the launch keeps its token file and log, and where large
            bodies are staged, inside the sandbox.
        transport: ``"auto"`` (curl when the sandbox has it, else the gateway's built-in
            client), ``"curl"`` or ``"builtin"``.
        timeout: seconds each call may take unless it says otherwise (60 by default).
        max_command_bytes: the longest command text handed to `exec`.
        agent_id, session_id: the default scope of the MCPs (both "").

    Every method takes the keyword arguments ``agent_id``, ``session_id`` and ``timeout`` to
    override the defaults for one call. Cancelling the task that awaits a call (or
    ``asyncio.timeout``) stops it: the operation is freed, the command's process is killed (its
    connection closing makes the gateway cancel the call upstream), or over a session a cancel
    frame is sent. Use ``async with`` or :meth:`aclose`.
    """

    def __init__(
        self,
        exec: ExecFn,
        *,
        exec_stdin: bool | None = None,
        gateway_path: str | None = None,
        host: str | None = None,
        port: int | None = None,
        token_file: str | None = None,
        state_dir: str | None = None,
        instance_nonce: str | None = None,
        staging_dir: str | None = None,
        transport: Transport | None = None,
        timeout: float | None = None,
        max_command_bytes: int | None = None,
        agent_id: str = "",
        session_id: str = "",
    ) -> None:
        if not callable(exec):
            raise _invalid("exec must be a function (command, timeout, stdin) -> result, e.g. LocalExec()")
        self._exec = exec
        # An async def function, or an object whose __call__ is one (the ready-made execs).
        method = None if inspect.isroutine(exec) else type(exec).__call__
        self._exec_is_async = inspect.iscoroutinefunction(exec) or inspect.iscoroutinefunction(method)
        passes = bool(getattr(exec, "passes_stdin", False)) if exec_stdin is None else exec_stdin
        self._core = _Core(
            passes_stdin=passes,
            gateway_path=gateway_path,
            host=host,
            port=port,
            token_file=token_file,
            state_dir=state_dir,
            instance_nonce=instance_nonce,
            staging_dir=staging_dir,
            transport=transport,
            timeout=timeout,
            max_command_bytes=max_command_bytes,
            agent_id=agent_id,
            session_id=session_id,
        )
        self._session: AsyncSession | None = None

    # ── lifecycle ─────────────────────────────────────────────────

    @property
    def port(self) -> int:
        """The gateway's port once known (configured, launched or learned from a session), else 0."""
        return self._core.port()

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._core.closed

    @property
    def session(self) -> AsyncSession | None:
        """The session channel the REST methods use, when attached and not lost."""
        s = self._session
        return s if s is not None and not s.lost else None

    async def aclose(self) -> None:
        """Closes the session channel, if any, and frees the native client. Idempotent. Does
        not stop the gateway: call :meth:`stop_gateway` first for that."""
        await self.detach()
        self._core.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # ── sessions ──────────────────────────────────────────────────

    async def attach(self, spawn: Spawn | None = None, *, open_timeout: float = 30.0) -> dict[str, Any]:
        """Opens the session channel: one long-lived exec running ``mcpgw-gateway attach`` (which
        launches the gateway first when this client knows none), over which every REST method
        then travels, multiplexed, with live progress and cancellation. Returns the channel's
        hello (``{"version", "port", "pid", "launched", ...}``).

        Args:
            spawn: ``async (command) -> asyncio.subprocess.Process`` starting `command` in the
                sandbox with stdin and stdout piped; by default the exec's own ``spawn``
                (``docker exec -i``, ``kubectl exec -i``, a local ``sh -c``).
            open_timeout: seconds to wait for the channel's hello.
        """
        from .session import AsyncSession

        if self._session is not None and not self._session.lost:
            raise error_for(RESULT["INVALID_STATE"], "the client is already attached; detach() first")
        if spawn is None:
            if not isinstance(self._exec, ArgvExec):
                raise _invalid("attach() needs a spawn function for an exec that is not a ready-made one")
            spawn = self._exec.spawn
        if self._core.closed:
            raise error_for(RESULT["INVALID_STATE"], "the client is closed")
        session = await AsyncSession.open(self._core.ptr, spawn, open_timeout=open_timeout)
        self._session = session
        return session.hello

    async def detach(self) -> None:
        """Closes the session channel (calls in flight over it fail with ``SessionLostError``);
        the REST methods go back to one command each. Idempotent."""
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()

    # ── operations ────────────────────────────────────────────────

    async def start_gateway(self, *, timeout: float | None = None) -> GatewayInfo:
        """Launches the gateway in the sandbox (it mints its token into its 0600 token file
        there: the host never holds it) and confirms it answers with its instance nonce."""
        return cast(GatewayInfo, await self._run(_prepare_start, None, None, timeout))

    async def stop_gateway(self, *, timeout: float | None = None) -> None:
        """Stops the gateway this client launched and removes its state directory."""
        await self._run(_prepare_stop, None, None, timeout)

    async def ensure_gateway_binary(self, host_path: str | None = None, *, timeout: float | None = None) -> BinaryInfo:
        """Installs the gateway binary read from `host_path` (by default the one this package
        bundles, :func:`~mcpgw_client.gateway_binary`) at ``gateway_path`` in the sandbox, unless
        an identical file is there (SHA-256)."""
        prepare = _Requests.ensure(host_path or _native.gateway_binary())
        core = self._core
        # This prepare reads and hashes the whole binary: a worker thread does it.
        op = await asyncio.to_thread(core.prepare, prepare, agent_id=None, session_id=None, timeout=timeout)
        return cast(BinaryInfo, await self._drive(op))

    async def health(self, *, timeout: float | None = None) -> Health:
        """``GET /health``: the gateway's status and instance nonce; with a known nonce, another
        gateway on the port is ``GatewayNotRunningError``."""
        return cast(Health, await self._run(_prepare_health, None, None, timeout))

    async def list_mcps(
        self, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[McpSpec]:
        """The specs of the MCP servers in the scope, each with its ``status``."""
        return cast(list[McpSpec], await self._run(_prepare_list_mcps, agent_id, session_id, timeout))

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
        await self._run(_Requests.add_mcp(spec), agent_id, session_id, timeout)

    async def remove_mcp(
        self, name: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> None:
        """Removes an MCP server from the scope; returns once its processes are gone."""
        await self._run(_Requests.remove_mcp(name), agent_id, session_id, timeout)

    async def list_tools(
        self, mcp: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[Tool]:
        """The MCP ``Tool`` objects of an MCP server (camelCase, as the upstream sent them)."""
        return cast(list[Tool], await self._run(_Requests.list_tools(mcp), agent_id, session_id, timeout))

    async def call_tool(
        self,
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
        on_progress: Callable[[ToolChunk], object] | None = None,
    ) -> ToolChunk:
        """Calls a tool and returns its ToolChunk. `timeout` is also the gateway's deadline
        for the call (then ``DeadlineError``, and the upstream is told to cancel). Over a
        session, `on_progress` receives each progress chunk as it arrives."""
        prepare = _Requests.call_tool(mcp, tool, arguments)
        return cast(ToolChunk, await self._run(prepare, agent_id, session_id, timeout, on_progress=on_progress))

    async def call_tool_stream(
        self,
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> AsyncIterator[ToolChunk]:
        """Calls a tool and yields its chunks: over a session each progress chunk as it arrives
        (``is_last`` false, ``metadata.mcp_progress``), then the final chunk; without one, only
        the final chunk. Leaving the loop early cancels the call once the iterator is closed
        (at once with ``contextlib.aclosing``, else when it is collected)."""
        prepare = _Requests.call_tool(mcp, tool, arguments)
        session = self.session
        if session is None:
            yield cast(ToolChunk, await self._run(prepare, agent_id, session_id, timeout))
            return
        op = self._core.prepare(prepare, agent_id=agent_id, session_id=session_id, timeout=timeout)
        try:
            async for chunk in session.stream(op, timeout or 0.0):
                yield chunk
        finally:
            op.free()

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
        await self._run(_Requests.set_runtime_headers(mcp, headers), agent_id, session_id, timeout)

    # ── the drive loop ────────────────────────────────────────────

    async def _run(
        self,
        prepare: Prepare,
        agent_id: str | None,
        session_id: str | None,
        timeout: float | None,
        *,
        on_progress: Callable[[ToolChunk], object] | None = None,
    ) -> Any:
        op = self._core.prepare(prepare, agent_id=agent_id, session_id=session_id, timeout=timeout)
        session = self.session
        if session is not None and op.name in SESSION_OPS:
            try:
                return await session.run(op, on_progress, fallback=self._drive)
            finally:
                op.free()
        return await self._drive(op)

    async def _drive(self, op: Op) -> Any:
        """Runs `op` to its end through the exec function, one command after the other."""
        try:
            exec_error: BaseException | None = None
            while (cmd := op.command()) is not None:
                command, timeout, stdin = cmd
                try:
                    async with asyncio.timeout(timeout):
                        result = await self._call_exec(command, timeout, stdin)
                    code, out, err = exec_output(result)
                except TimeoutError as e:
                    raise _deadline(op, timeout) from e
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # noqa: BLE001 - any failure of the exec is the sandbox's
                    if _carries_result(e):
                        code, out, err = exec_output(e)
                    else:
                        exec_error = e
                        op.fail_exec(str(e) or type(e).__name__)
                        continue
                op.complete(code, out, err)
            op.raise_failure(exec_error)
            return op.result_json()
        finally:
            op.free()

    async def _call_exec(self, command: str, timeout: float, stdin: bytes | None) -> object:
        if self._exec_is_async:
            return await cast(Any, self._exec(command, timeout, stdin))
        # A plain function runs in a worker thread; one that returns an awaitable (a lambda
        # around an SDK's coroutine) has it awaited here, on the loop.
        result = await asyncio.to_thread(self._exec, command, timeout, stdin)
        if inspect.isawaitable(result):
            return await result
        return result


class Client:
    """A blocking client of one gateway in one sandbox: the same methods as
    :class:`AsyncClient`, run on the calling thread.

    `exec` is a plain function ``(command, timeout, stdin) -> result``, or a ready-made exec
    (its :meth:`~mcpgw_client.exec.ArgvExec.run_sync` is used). Safe to share between threads: each
    call drives its own operation. Use ``with`` or :meth:`close`. Session channels are
    :class:`AsyncClient`'s (they need an event loop to read the channel).
    """

    def __init__(
        self,
        exec: SyncExecFn | ArgvExec,
        *,
        exec_stdin: bool | None = None,
        gateway_path: str | None = None,
        host: str | None = None,
        port: int | None = None,
        token_file: str | None = None,
        state_dir: str | None = None,
        instance_nonce: str | None = None,
        staging_dir: str | None = None,
        transport: Transport | None = None,
        timeout: float | None = None,
        max_command_bytes: int | None = None,
        agent_id: str = "",
        session_id: str = "",
    ) -> None:
        if not callable(exec):
            raise _invalid("exec must be a function (command, timeout, stdin) -> result, e.g. LocalExec()")
        self._exec: SyncExecFn = exec.run_sync if isinstance(exec, ArgvExec) else exec
        passes = bool(getattr(exec, "passes_stdin", False)) if exec_stdin is None else exec_stdin
        self._core = _Core(
            passes_stdin=passes,
            gateway_path=gateway_path,
            host=host,
            port=port,
            token_file=token_file,
            state_dir=state_dir,
            instance_nonce=instance_nonce,
            staging_dir=staging_dir,
            transport=transport,
            timeout=timeout,
            max_command_bytes=max_command_bytes,
            agent_id=agent_id,
            session_id=session_id,
        )

    @property
    def port(self) -> int:
        """The gateway's port once known, else 0."""
        return self._core.port()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._core.closed

    def close(self) -> None:
        """Frees the native client. Idempotent. Does not stop the gateway."""
        self._core.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def start_gateway(self, *, timeout: float | None = None) -> GatewayInfo:
        """See :meth:`AsyncClient.start_gateway`."""
        return cast(GatewayInfo, self._run(_prepare_start, None, None, timeout))

    def stop_gateway(self, *, timeout: float | None = None) -> None:
        """See :meth:`AsyncClient.stop_gateway`."""
        self._run(_prepare_stop, None, None, timeout)

    def ensure_gateway_binary(self, host_path: str | None = None, *, timeout: float | None = None) -> BinaryInfo:
        """See :meth:`AsyncClient.ensure_gateway_binary`."""
        return cast(BinaryInfo, self._run(_Requests.ensure(host_path or _native.gateway_binary()), None, None, timeout))

    def health(self, *, timeout: float | None = None) -> Health:
        """See :meth:`AsyncClient.health`."""
        return cast(Health, self._run(_prepare_health, None, None, timeout))

    def list_mcps(
        self, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[McpSpec]:
        """See :meth:`AsyncClient.list_mcps`."""
        return cast(list[McpSpec], self._run(_prepare_list_mcps, agent_id, session_id, timeout))

    def add_mcp(
        self,
        spec: Mapping[str, Any],
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """See :meth:`AsyncClient.add_mcp`."""
        self._run(_Requests.add_mcp(spec), agent_id, session_id, timeout)

    def remove_mcp(
        self, name: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> None:
        """See :meth:`AsyncClient.remove_mcp`."""
        self._run(_Requests.remove_mcp(name), agent_id, session_id, timeout)

    def list_tools(
        self, mcp: str, *, agent_id: str | None = None, session_id: str | None = None, timeout: float | None = None
    ) -> list[Tool]:
        """See :meth:`AsyncClient.list_tools`."""
        return cast(list[Tool], self._run(_Requests.list_tools(mcp), agent_id, session_id, timeout))

    def call_tool(
        self,
        mcp: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> ToolChunk:
        """See :meth:`AsyncClient.call_tool`."""
        return cast(ToolChunk, self._run(_Requests.call_tool(mcp, tool, arguments), agent_id, session_id, timeout))

    def set_runtime_headers(
        self,
        mcp: str,
        headers: Mapping[str, str],
        *,
        agent_id: str | None = None,
        session_id: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """See :meth:`AsyncClient.set_runtime_headers`."""
        self._run(_Requests.set_runtime_headers(mcp, headers), agent_id, session_id, timeout)

    def _run(self, prepare: Prepare, agent_id: str | None, session_id: str | None, timeout: float | None) -> Any:
        op = self._core.prepare(prepare, agent_id=agent_id, session_id=session_id, timeout=timeout)
        try:
            exec_error: BaseException | None = None
            while (cmd := op.command()) is not None:
                command, limit, stdin = cmd
                try:
                    result = self._exec(command, limit, stdin)
                    if inspect.isawaitable(result):
                        if inspect.iscoroutine(result):
                            result.close()
                        raise TypeError(
                            "the blocking Client needs a blocking exec function; use AsyncClient for an async one"
                        )
                    code, out, err = exec_output(result)
                except TimeoutError as e:
                    raise _deadline(op, limit) from e
                except Exception as e:  # noqa: BLE001 - any failure of the exec is the sandbox's
                    if _carries_result(e):
                        code, out, err = exec_output(e)
                    else:
                        exec_error = e
                        op.fail_exec(str(e) or type(e).__name__)
                        continue
                op.complete(code, out, err)
            op.raise_failure(exec_error)
            return op.result_json()
        finally:
            op.free()


__all__ = ["AsyncClient", "Client", "ExecResultLike", "Transport"]
