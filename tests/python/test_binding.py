"""The binding end to end through a local sandbox: a real gateway, the real test server; and
what it takes from the library and the header (error classes, declarations, the vocabulary)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import mcpgw_client as mcpgw
from conftest import (
    GATEWAY,
    REPO,
    VERSION,
    Gateway,
    RecordingShell,
    processes_mentioning,
    ts_spec,
    wait_file,
    wait_for,
)
from mcpgw_client import _native, errors

HEADER = REPO / "include" / "mcpgw.h"


def test_library_and_error_classes_come_from_the_library() -> None:
    header = HEADER.read_text()
    assert mcpgw.__version__ == VERSION
    assert mcpgw.library_version().split(".")[:2] == VERSION.split(".")[:2]
    abi = re.search(r"#define MCPGW_ABI_VERSION (\d+)", header)
    assert abi and mcpgw.lib.mcpgw_abi_version() == mcpgw.ABI_VERSION == int(abi.group(1))
    # Every MCPGW_RESULT_ code of the header has its class, named by the rule, with its value.
    codes = dict(re.findall(r"MCPGW_RESULT_([A-Z_]+) = (\d+)", header))
    assert codes["OK"] == "7000" and len(codes) >= 18
    for name, value in codes.items():
        assert mcpgw.RESULT[name] == int(value)
        if name == "OK":
            continue
        cls = getattr(mcpgw, errors.class_name(name))
        assert issubclass(cls, mcpgw.McpgwError) and not cls.__name__.endswith("ErrorError")
        assert cls.code == name and cls.result == int(value)
        assert mcpgw.error_class(name) is cls is mcpgw.error_class(int(value))
    assert mcpgw.UpstreamError.code == "UPSTREAM_ERROR" and mcpgw.ProtocolError.code == "PROTOCOL_ERROR"
    assert issubclass(mcpgw.DeadlineError, TimeoutError)
    assert issubclass(mcpgw.InvalidArgumentError, ValueError)
    assert issubclass(mcpgw.BackendError, mcpgw.ExecFailedError)
    assert mcpgw.SessionLostError.__doc__ and "SESSION_LOST" in mcpgw.SessionLostError.__doc__
    with pytest.raises(AttributeError):
        _ = mcpgw.NoSuchThingError


def _header_text() -> str:
    # The header without comments and preprocessor lines: its declarations.
    text = re.sub(r"/\*.*?\*/|//[^\n]*", "", HEADER.read_text(), flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def test_ctypes_declarations_are_the_headers_declaration_by_declaration() -> None:
    header_text = _header_text()
    header = _native.parse_declarations(header_text)
    ours = _native.parse_declarations(_native.DECLARATIONS)
    # Each parse finds every declaration: none is skipped unseen.
    assert len(ours) == _native.DECLARATIONS.count(";")
    assert len(header) == len(re.findall(r"\bmcpgw_\w+\(", header_text)) > len(ours)
    for name, declaration in ours.items():
        assert name in header, f"{name} is not in the header"
        assert declaration == header[name], name
        fn = getattr(mcpgw.lib, name)
        assert fn.restype == _native.c_type(declaration[0], argument=False), name
        assert fn.argtypes == [_native.c_type(t, argument=True) for t in declaration[1]], name
    # The host driver's whole C ABI is declared, but for what a binding has no use of.
    driver = {n for n in header if n.startswith(("mcpgw_host_", "mcpgw_action_"))}
    assert driver <= set(ours), driver - set(ours)
    # The enum values the binding uses are the header's.
    text = HEADER.read_text()
    for enum, values in (("ACTION_KIND", _native.ACTION_KINDS), ("STDIN_KIND", _native.STDIN_KINDS)):
        assert dict(re.findall(rf"MCPGW_{enum}_([A-Z_]+) = (\d+)", text)) == {k: str(v) for k, v in values.items()}


def vocabulary(readme: Path, column: str = "Python") -> dict[str, str]:
    """The `column` of the vocabulary table in `readme`: vocabulary name -> exported name."""
    lines = readme.read_text().splitlines()
    start = next((i for i, r in enumerate(lines) if re.match(r"\|\s*operation\s*\|", r) and column in r), None)
    if start is None:
        return {}
    names = [c.strip() for c in lines[start].strip("|").split("|")]
    at = names.index(column)
    table: dict[str, str] = {}
    # The table's rows: the lines after its header and separator, up to the first that is not one.
    for row in lines[start + 2 :]:
        cells = [c.strip().strip("`") for c in row.strip("|").split("|")]
        if not row.startswith("|") or len(cells) != len(names):
            break
        table[cells[0]] = cells[at]
    return table


def test_the_vocabulary_tables_name_what_the_binding_exports() -> None:
    ops = re.search(r"pub const OP_NAMES: &\[&str\] = &\[(.*?)\];", (REPO / "src/driver/config.rs").read_text(), re.S)
    assert ops is not None
    op_names = re.findall(r'"(\w+)"', ops[1])
    ours = vocabulary(REPO / "bindings" / "python" / "README.md")
    assert set(op_names) <= set(ours), set(op_names) - set(ours)
    top = vocabulary(REPO / "docs" / "host-library.md")
    assert top, "docs/host-library.md has no vocabulary table (| operation | Go | Node | Python |)"
    for table in (ours, top):
        for name, export in table.items():
            target: Any = mcpgw
            for part in export.removeprefix("mcpgw.").split("."):
                target = getattr(target, part)
            if export.startswith("AsyncClient."):
                # The blocking client has the same method.
                assert callable(getattr(mcpgw.Client, export.split(".")[1])), name
            assert callable(target), name


async def test_tool_calls_round_trip_the_wire_json(gateway: Gateway) -> None:
    client = gateway.client
    health = await client.health()
    assert health["status"] == "ok" and len(health["instance_nonce"]) > 0
    assert client.port == gateway.info["port"] > 0 and client.state["session"] == "off"

    text = "héllo 'quoted' $(not run) `nor this` \"and\" \\ \n new line"
    chunk = await client.call_tool("ts", "echo", {"text": text})
    assert chunk["state"] == "running" and chunk["is_last"] is True
    assert chunk["content"][0]["type"] == "text" and chunk["content"][0]["text"] == text
    assert re.fullmatch(r"[0-9a-f]{32}", chunk["id"])
    assert mcpgw.text_of(chunk) == text

    chunk = await client.call_tool("ts", "add", {"a": 2, "b": 40})
    assert chunk["metadata"]["structured_content"] == {"sum": 42, "product": 80}

    chunk = await client.call_tool("ts", "media")
    kinds = [(b["type"], b["source"]["type"] if b["type"] == "data" else None) for b in chunk["content"]]
    assert kinds == [("data", "base64"), ("data", "base64"), ("text", None), ("data", "base64"), ("data", "url")]
    png = mcpgw.block_bytes(chunk["content"][0])
    assert png.startswith(b"\x89PNG") and chunk["content"][0]["source"]["media_type"] == "image/png"
    assert mcpgw.block_bytes(chunk["content"][3]) == bytes(range(256))
    link = chunk["content"][4]
    assert link["type"] == "data" and link["source"]["type"] == "url"
    assert link["source"]["url"] == "test://resource/link"
    # The chunk is the wire JSON: it survives a JSON round trip unchanged.
    assert json.loads(json.dumps(chunk)) == chunk
    assert base64.b64decode(chunk["content"][1]["source"]["data"])[:4] == b"RIFF"

    chunk = await client.call_tool("ts", "fail", {"message": "broken on purpose"})
    assert chunk["state"] == "error" and chunk["content"][0]["text"] == "broken on purpose"

    tools = await client.list_tools("ts")
    assert {"echo", "add", "media", "fail", "slow"} <= {t["name"] for t in tools}
    add = next(t for t in tools if t["name"] == "add")
    assert "inputSchema" in add and "outputSchema" in add

    listed = await client.list_mcps()
    assert [m["name"] for m in listed] == ["ts"]
    assert listed[0]["status"]["state"] == "connected" and listed[0]["status"]["calls"] >= 4
    # One-shot, the progress of a streamed call is not seen: only the final chunk comes.
    streamed = [c async for c in client.call_tool_stream("ts", "slow", {"seconds": 0.1, "steps": 2})]
    assert len(streamed) == 1 and streamed[0]["is_last"]


async def test_failures_raise_typed_errors(gateway: Gateway) -> None:
    client = gateway.client
    with pytest.raises(mcpgw.NotFoundError) as e:
        await client.call_tool("ts", "nope", {})
    assert e.value.status == 404 and e.value.code == "NOT_FOUND" and "nope" in (e.value.detail or "")
    with pytest.raises(mcpgw.NotFoundError):
        await client.list_tools("missing")
    # A tool the spec disables is refused on call, as well as not listed.
    await client.add_mcp({**ts_spec("off"), "disable_tools": ["echo"]})
    with pytest.raises(mcpgw.PolicyDeniedError) as d:
        await client.call_tool("off", "echo", {"text": "x"})
    assert d.value.status == 403 and d.value.code == "POLICY_DENIED" and "disable_tools" in (d.value.detail or "")
    assert "echo" not in [t["name"] for t in await client.list_tools("off")]
    await client.remove_mcp("off")
    with pytest.raises(mcpgw.ConflictError) as c:
        await client.add_mcp(ts_spec())
    assert c.value.status == 409
    # Only HTTP upstreams take runtime headers: the gateway says 400.
    with pytest.raises(mcpgw.InvalidArgumentError) as i:
        await client.set_runtime_headers("ts", {"a": "b"})
    assert i.value.status == 400
    # A deadline: the gateway stops the call (504) and it is a TimeoutError too.
    with pytest.raises(TimeoutError) as d:
        await client.call_tool("ts", "slow", {"seconds": 30}, timeout=0.5)
    assert isinstance(d.value, mcpgw.DeadlineError) and d.value.status == 504
    # The client still works.
    assert (await client.call_tool("ts", "echo", {"text": "ok"}))["content"][0]["text"] == "ok"


async def test_the_hosts_policy_audit_and_secrets(sandbox_dir: Path) -> None:
    records: list[dict[str, Any]] = []
    value = "py-secret-" + os.urandom(8).hex()
    client = mcpgw.AsyncClient(
        mcpgw.local(cwd=str(sandbox_dir)),
        gateway_path=str(GATEWAY),
        state_dir=str(sandbox_dir / "state"),
        policy={"servers": {"ts": {"tools": {"deny": ["crash"]}}}},
        audit=records.append,
        secrets={"MCPGW_PY_KEY": value},
    )
    try:
        await client.open_session()
        spec = ts_spec()
        spec["mcp_config"]["env"] = {"MCPGW_TEST_KEY": {"secret": "MCPGW_PY_KEY"}}
        await client.add_mcp(spec)
        # The server got the value (its info tool prints MCPGW_TEST_* variables); the answer
        # names the secret instead.
        shown = json.dumps(await client.call_tool("ts", "info", {}))
        assert value not in shown and "[secret:MCPGW_PY_KEY]" in shown, shown
        assert value not in json.dumps(await client.list_mcps())
        with pytest.raises(mcpgw.PolicyDeniedError) as d:
            await client.call_tool("ts", "crash", {})
        assert d.value.code == "POLICY_DENIED" and 'servers."ts".tools.deny: "crash"' in str(d.value)
        assert "crash" not in [t["name"] for t in await client.list_tools("ts")]
        assert [(r["name"], r["outcome"]) for r in records] == [("info", "ok"), ("crash", "denied")], records
        assert value not in json.dumps(records)
    finally:
        try:
            await client.stop_gateway()
        finally:
            await client.aclose()
    with pytest.raises(mcpgw.InvalidArgumentError, match="shorter than 8 bytes"):
        mcpgw.AsyncClient(mcpgw.local(), secrets={"K": "short"})
    with pytest.raises(mcpgw.InvalidArgumentError, match="audit must be a function"):
        mcpgw.AsyncClient(mcpgw.local(), audit="yes")  # type: ignore[typeddict-item]


async def test_bad_arguments_of_any_kind_are_invalid_argument(gateway: Gateway) -> None:
    client = gateway.client
    circular: dict[str, Any] = {}
    circular["self"] = circular
    for call, says in (
        (client.call_tool("bad name!", "echo", {}), "name"),
        (client.call_tool("ts", "echo\0", {}), "NUL"),
        (client.call_tool("ts", "echo", circular), "JSON"),
        (client.call_tool("ts", "echo", {"x": object()}), "JSON"),
        (client.call_tool("ts", "echo", {"x": float("nan")}), "JSON"),
        (client.call_tool("ts", "echo", {"x": "\ud800"}), "JSON"),
        (client.call_tool("ts", "echo", ["not", "an", "object"]), "mapping"),  # type: ignore[arg-type]
        (client.call_tool(42, "echo"), "str"),  # type: ignore[arg-type]
        (client.call_tool("ts", "echo", timeout=-1), "seconds"),
        (client.add_mcp({"name": "x", "mcp_config": {"type": "stdio_mcp", "command": 5}}), "spec is invalid"),
    ):
        with pytest.raises(mcpgw.InvalidArgumentError, match=says):
            await call
    for make, says in (
        (lambda: mcpgw.docker(""), "must not be empty"),
        (lambda: mcpgw.docker("-rm"), "starts with '-'"),
        (lambda: mcpgw.podman("box;rm -rf /"), "holds ';'"),
        (lambda: mcpgw.kubectl("web-0$(id)"), "holds '$'"),
        (lambda: mcpgw.kubectl("web-0", namespace="a b"), "holds ' '"),
        (lambda: mcpgw.argv([]), "must name a program"),
        (lambda: mcpgw.argv("nsenter -t 1"), "list of str"),
        (lambda: mcpgw.docker("box", exec_options=["--user", 7]), "str"),  # type: ignore[list-item]
    ):
        with pytest.raises(mcpgw.InvalidArgumentError, match=re.escape(says)):
            mcpgw.AsyncClient(make())
    with pytest.raises(mcpgw.InvalidArgumentError, match="timeout_ms"):
        mcpgw.AsyncClient(mcpgw.local(), timeout=10**30)
    with pytest.raises(mcpgw.InvalidArgumentError, match="unknown option 'timeuot'"):
        mcpgw.AsyncClient(mcpgw.local(), timeuot=3)  # type: ignore[call-arg]
    with pytest.raises(mcpgw.InvalidArgumentError, match="backend must be"):
        mcpgw.AsyncClient("docker")  # type: ignore[arg-type]
    assert (await client.call_tool("ts", "echo", {"text": "a\0b"}))["content"][0]["text"] == "a\0b"


async def calls_of(client: mcpgw.AsyncClient, mcp: str = "ts") -> int:
    return int(next(m for m in await client.list_mcps() if m["name"] == mcp)["status"]["calls"])


@pytest.mark.parametrize("how", ["task.cancel", "asyncio.timeout"])
async def test_cancellation_kills_the_command_and_cancels_upstream(gateway: Gateway, how: str) -> None:
    client = gateway.client
    marker = gateway.dir / f"cancelled-{how}"
    before = await calls_of(client)
    call = client.call_tool("ts", "slow", {"seconds": 30, "steps": 300, "cancel_marker": str(marker)})
    if how == "task.cancel":
        task = asyncio.ensure_future(call)
        # The call is under way in the gateway once its call counter moved.
        await wait_for(lambda: _moved(client, before), "the gateway to start the call")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:

        async def call_within_a_timeout() -> None:
            async with asyncio.timeout(None) as limit:
                waiter = asyncio.ensure_future(wait_for(lambda: _moved(client, before), "the call to start"))
                # Once the gateway runs the call, the timeout expires at once.
                waiter.add_done_callback(lambda _: limit.reschedule(asyncio.get_running_loop().time()))
                try:
                    await call
                finally:
                    waiter.cancel()

        with pytest.raises(TimeoutError):
            await call_within_a_timeout()
    # Killing the request's process closed its connection: the gateway cancelled upstream.
    assert await wait_file(marker) == "cancelled"
    assert not processes_mentioning(str(marker)), "no process of the cancelled call is left"
    assert (await client.call_tool("ts", "echo", {"text": "still here"}))["content"][0]["text"] == "still here"


async def _moved(client: mcpgw.AsyncClient, before: int) -> bool:
    return await calls_of(client) > before


async def test_concurrent_calls_each_get_their_answer(gateway: Gateway) -> None:
    client = gateway.client
    answers = await asyncio.gather(
        *(
            client.call_tool("ts", "add", {"a": i, "b": 1000})
            if i % 2
            else client.call_tool("ts", "echo", {"text": f"request {i}"})
            for i in range(24)
        )
    )
    for i, chunk in enumerate(answers):
        if i % 2:
            assert chunk["metadata"]["structured_content"]["sum"] == i + 1000
        else:
            assert chunk["content"][0]["text"] == f"request {i}"


async def test_scopes_are_separate(gateway: Gateway) -> None:
    client = gateway.client
    await client.add_mcp(ts_spec("ts"), agent_id="a1", session_id="s1")
    assert [m["name"] for m in await client.list_mcps(agent_id="a1", session_id="s1")] == ["ts"]
    chunk = await client.call_tool("ts", "echo", {"text": "scoped"}, agent_id="a1", session_id="s1")
    assert chunk["content"][0]["text"] == "scoped"
    await client.remove_mcp("ts", agent_id="a1", session_id="s1")
    assert await client.list_mcps(agent_id="a1", session_id="s1") == []
    assert [m["name"] for m in await client.list_mcps()] == ["ts"]


async def test_large_bodies_travel_on_stdin_in_one_command(gateway: Gateway) -> None:
    text = "x" * (300 * 1024)
    token = {"port": gateway.info["port"], "token_file": gateway.info["token_file"]}
    shell = RecordingShell(str(gateway.dir))
    async with mcpgw.AsyncClient(shell.backend(), gateway_path=str(GATEWAY), transport="built_in", **token) as client:  # type: ignore[arg-type]
        chunk = await client.call_tool("ts", "echo", {"text": text})
        assert chunk["content"][0]["text"] == text
        assert len(shell.commands) == 1, "the body went on stdin, not in staged pieces"
    # The same through an exec that does not pass stdin: staged in pieces under 128 KiB each.
    staged = RecordingShell(str(gateway.dir))
    async with mcpgw.AsyncClient(staged.backend(passes_stdin=False), **token) as other:  # type: ignore[arg-type]
        chunk = await other.call_tool("ts", "echo", {"text": text})
        assert chunk["content"][0]["text"] == text
        assert len(staged.commands) > 2
        assert max(len(c) for c in staged.commands) < 128 * 1024


async def test_exec_backends_plain_functions_and_their_failures(sandbox_dir: Path) -> None:
    shell = RecordingShell(str(sandbox_dir))
    seen: list[str] = []

    def blocking_run(command: str, timeout: float, stdin: bytes | None) -> mcpgw.ExecResult:
        seen.append(command)
        return asyncio.run(shell.run(command, timeout, stdin))

    backend = mcpgw.exec(blocking_run, passes_stdin=True)
    async with mcpgw.AsyncClient(backend, gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "st")) as client:
        await client.start_gateway()
        await client.add_mcp(ts_spec())
        chunk = await client.call_tool("ts", "echo", {"text": "from a thread"})
        assert chunk["content"][0]["text"] == "from a thread" and seen
        # No channel opener was given: a session cannot open, and says why.
        with pytest.raises(mcpgw.McpgwError, match="no channel opener"):
            await client.open_session()
        await client.stop_gateway()

    async def gone(command: str, timeout: float, stdin: bytes | None) -> mcpgw.ExecResult:
        raise RuntimeError("the sandbox is gone")

    async with mcpgw.AsyncClient(mcpgw.exec(gone), port=1, token_file="/nonexistent/token") as c:
        with pytest.raises(mcpgw.ExecFailedError, match="the sandbox is gone"):
            await c.health()

    async def garbage(command: str, timeout: float, stdin: bytes | None) -> object:
        return {"exit": 0}

    async with mcpgw.AsyncClient(mcpgw.exec(garbage), port=1, token_file="/t") as c:  # type: ignore[arg-type]
        with pytest.raises(mcpgw.ExecFailedError, match="exit_code"):
            await c.health()

    closed = mcpgw.AsyncClient(mcpgw.local(), port=1, token_file="/t")
    await closed.aclose()
    await closed.aclose()
    assert closed.closed
    with pytest.raises(mcpgw.InvalidStateError):
        await closed.health()


def test_blocking_client(sandbox_dir: Path) -> None:
    with mcpgw.Client(
        mcpgw.local(cwd=str(sandbox_dir)), gateway_path=str(GATEWAY), state_dir=str(sandbox_dir / "b")
    ) as client:
        info = client.start_gateway()
        assert info["port"] == client.port > 0 and Path(info["token_file"]).stat().st_mode & 0o777 == 0o600
        client.add_mcp(ts_spec())
        assert client.call_tool("ts", "echo", {"text": "blocking"})["content"][0]["text"] == "blocking"
        with pytest.raises(mcpgw.NotFoundError):
            client.call_tool("ts", "nope")
        with pytest.raises(mcpgw.DeadlineError):
            client.call_tool("ts", "slow", {"seconds": 30}, timeout=0.3)
        client.stop_gateway()
        with pytest.raises(mcpgw.GatewayNotRunningError):
            client.health(timeout=5)
    assert client.closed
    with pytest.raises(mcpgw.InvalidStateError):
        client.health()


async def test_ensure_gateway_binary_uploads_once(sandbox_dir: Path, gateway_to_install: Path) -> None:
    target = sandbox_dir / "bin" / "mcpgw-gateway"
    shell = RecordingShell(str(sandbox_dir))
    async with mcpgw.AsyncClient(
        shell.backend(), gateway_path=str(target), state_dir=str(sandbox_dir / "st")
    ) as client:
        first = await client.ensure_gateway_binary(str(gateway_to_install))
        assert first["uploaded"] is True and first["path"] == str(target)
        assert target.read_bytes() == gateway_to_install.read_bytes()
        assert len(shell.commands) <= 3, "the binary travelled on stdin in one command"
        second = await client.ensure_gateway_binary(str(gateway_to_install))
        assert second["uploaded"] is False and second["sha256"] == first["sha256"]
        with pytest.raises(mcpgw.HostIoError):
            await client.ensure_gateway_binary(str(sandbox_dir / "no-such-binary"))
        # The installed binary runs the gateway.
        await client.start_gateway()
        await client.add_mcp(ts_spec())
        assert (await client.call_tool("ts", "echo", {"text": "installed"}))["content"][0]["text"] == "installed"
        await client.stop_gateway()


def test_a_client_belongs_to_the_event_loop_it_started_on() -> None:
    client = mcpgw.AsyncClient(mcpgw.local(), port=1, token_file="/nonexistent/token", transport="curl")
    with pytest.raises(mcpgw.McpgwError) as first:
        asyncio.run(client.health(timeout=5))
    assert not isinstance(first.value, mcpgw.InvalidStateError)
    with pytest.raises(mcpgw.InvalidStateError, match="another event loop"):
        asyncio.run(client.health(timeout=5))
