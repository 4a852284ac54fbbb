"""Every feature of @modelcontextprotocol/server-everything through the official Python SDK's
ClientSession (`mcp` 2.x), its results printed as one JSON object on stdout, so that two runs
(straight to the server, and through `mcpgw mcp`) can be compared.

    python everything.py stdio COMMAND [ARG...]
    python everything.py http URL [TOKEN_FILE]
    python everything.py binding docker CONTAINER COMMAND [ARG...]

The third runs COMMAND inside the container under mcpgw-gateway and connects the SDK's client
through the Python binding's transport (`mcpgw_client.sdk.client_streams`) over a session
channel (`docker exec -i`); the gateway is the one on the container's PATH, or the static
binary `$MCPGW_GATEWAY_BINARY` names on this machine, installed first. The SDK's own callbacks
answer the server's sampling, elicitation and roots requests.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[3]
SCRIPT = json.loads((REPO / "tests/clients/everything.json").read_text())
LIMIT_S = 30
USAGE = (
    "usage: everything.py stdio COMMAND [ARG...] | http URL [TOKEN_FILE] | binding docker CONTAINER COMMAND [ARG...]"
)


def dump(model: Any) -> Any:
    """A result as JSON (what the SDK parsed, in the wire's names)."""
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, mode="json", exclude_none=True)
    return model


class Notes:
    """Notifications, in order, with a way to wait for one."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.changed = anyio.Event()

    def add(self, kind: str, params: dict[str, Any]) -> None:
        self.seen.append((kind, params))
        self.changed.set()
        self.changed = anyio.Event()

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.seen if k == kind)

    async def wait(self, what: str, pred: Any) -> dict[str, Any]:
        with anyio.fail_after(LIMIT_S):
            while True:
                for kind, params in self.seen:
                    if pred(kind, params):
                        return params
                await self.changed.wait()


async def run(argv: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    notes = Notes()
    asked: list[str] = []

    async def sampling(_ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(f"sampling/createMessage: {params.messages[0].content.text}")  # type: ignore[union-attr]
        return types.CreateMessageResult.model_validate(SCRIPT["answers"]["sampling"])

    async def elicitation(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"elicitation/create: {params.message}")
        return types.ElicitResult.model_validate(SCRIPT["answers"]["elicitation"])

    async def roots(_ctx: Any) -> types.ListRootsResult:
        asked.append("roots/list")
        return types.ListRootsResult.model_validate(SCRIPT["answers"]["roots"])

    async def logging(params: types.LoggingMessageNotificationParams) -> None:
        notes.add("log", dump(params))

    async def messages(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            notes.add("tools", {})
        elif isinstance(message, types.ResourceUpdatedNotification):
            notes.add("updated", dump(message.params))

    async with AsyncExitStack() as stack:
        mode, target, *rest = argv
        if mode == "stdio":
            params = StdioServerParameters(command=target, args=rest, env=dict(os.environ))
            read, write = await stack.enter_async_context(stdio_client(params))
        elif mode == "binding":
            read, write = await binding_streams(stack, rest[0], rest[1:])
        else:
            headers = {"Authorization": f"Bearer {Path(rest[0]).read_text().strip()}"} if rest else None
            http = await stack.enter_async_context(create_mcp_http_client(headers=headers))
            read, write = await stack.enter_async_context(streamable_http_client(target, http_client=http))
        session = await stack.enter_async_context(
            ClientSession(
                read,
                write,
                sampling_callback=sampling,
                elicitation_callback=elicitation,
                list_roots_callback=roots,
                logging_callback=logging,
                message_handler=messages,
                client_info=types.Implementation(name="mcpgw-test-python", version="1.0.0"),
            )
        )
        init = await session.initialize()
        out["server"] = {
            "version": dump(init.server_info),
            "capabilities": dump(init.capabilities),
            "instructions": init.instructions,
        }
        # The tools that depend on the client's capabilities come with list changes.
        while True:
            before = notes.count("tools")
            tools = await session.list_tools()
            names = {t.name for t in tools.tools}
            if all(t in names for t in SCRIPT["conditional_tools"]):
                out["tools"] = dump(tools)
                break
            await notes.wait("tools/list_changed", lambda k, _p, n=before: k == "tools" and notes.count("tools") > n)
        out["prompts"] = dump(await session.list_prompts())
        out["resources"] = dump(await session.list_resources())
        out["templates"] = dump(await session.list_resource_templates())
        for label, name, args in SCRIPT["calls"]:
            out[f"call {label}"] = await outcome(session.call_tool(name, args))
        for uri in [out["resources"]["resources"][0]["uri"], *SCRIPT["reads"]]:
            out[f"read {uri}"] = await outcome(session.read_resource(uri))
        for label, name, args in SCRIPT["prompts"]:
            out[label] = dump(await session.get_prompt(name, args))
        complete = SCRIPT["complete"]
        out["complete"] = dump(
            await session.complete(types.PromptReference.model_validate(complete["ref"]), complete["argument"])
        )
        out["ping"] = dump(await session.send_ping())

        out["setLevel"] = dump(await session.set_logging_level("debug"))
        uri = SCRIPT["subscribe"]
        out["subscribe"] = dump(await session.subscribe_resource(uri))
        out["log of subscribe"] = await notes.wait("a log message", lambda k, p: k == "log" and uri in str(p["data"]))
        out["toggle updates"] = dump(await session.call_tool("toggle-subscriber-updates", {}))
        out["updated"] = await notes.wait("resources/updated", lambda k, p: k == "updated" and p["uri"] == uri)
        out["toggle updates off"] = dump(await session.call_tool("toggle-subscriber-updates", {}))
        out["unsubscribe"] = dump(await session.unsubscribe_resource(uri))

        progress: list[dict[str, Any]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": done, "total": total, "message": message})

        out["long"] = dump(
            await session.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress
            )
        )
        # The last step's progress comes back to back with the answer: whether the SDK's
        # callback sees it before the answer depends on the transport's timing.
        out["progress"] = [p for p in progress if p["total"] is None or p["progress"] < p["total"]]

        # Cancel: a long call cancelled once it reported progress; the session goes on.
        reported = anyio.Event()
        cancelled: dict[str, Any] = {"cancelled": False}

        async def first(_d: float, _t: float | None, _m: str | None) -> None:
            reported.set()

        async with anyio.create_task_group() as tg:

            async def long_call(scope: anyio.CancelScope) -> None:
                with scope:
                    await session.call_tool(
                        "trigger-long-running-operation", {"duration": 30, "steps": 30}, progress_callback=first
                    )
                cancelled["cancelled"] = scope.cancelled_caught

            scope = anyio.CancelScope()
            tg.start_soon(long_call, scope)
            with anyio.fail_after(LIMIT_S):
                await reported.wait()
            scope.cancel()
        out["cancelled"] = cancelled
        out["after cancel"] = dump(await session.call_tool("echo", {"message": "still here"}))
        # The server asks for roots on its own 350 ms after initialized, and again from
        # `get-roots-list` when that answer has not come yet: how many times it asks is its own
        # timing, so roots/list counts once; every other request exactly as often as it came.
        others = [a for a in asked if a != "roots/list"]
        out["asked"] = sorted(others + ["roots/list"] * (len(others) < len(asked)))
    return out


async def binding_streams(stack: AsyncExitStack, container: str, command: list[str]) -> Any:
    """The SDK's streams to `command` run by mcpgw-gateway in the Docker `container`, through
    the Python binding; the gateway and the server are gone once `stack` unwinds."""
    try:
        import mcpgw_client as mcpgw
    except ImportError:  # the repository's own binding, on its debug build
        sys.path.insert(0, str(REPO / "bindings/python/src"))
        os.environ.setdefault("MCPGW_LIB", str(REPO / "target/debug/libmcpgw.so"))
        import mcpgw_client as mcpgw
    from mcpgw_client.sdk import client_streams

    installed = os.environ.get("MCPGW_GATEWAY_BINARY")
    tag = os.urandom(6).hex()
    client = await stack.enter_async_context(
        mcpgw.AsyncClient(
            mcpgw.docker(container),
            gateway_path="/tmp/mcpgw-bin/mcpgw-gateway" if installed else None,
            state_dir=f"/tmp/mcpgw-py-{tag}",
        )
    )
    if installed:
        await client.ensure_gateway_binary(installed)
    hello = await client.open_session()
    if hello.get("launched"):
        stack.push_async_callback(client.stop_gateway)
    spec = {
        "name": "everything",
        "is_stateful": True,
        "mcp_config": {"type": "stdio_mcp", "command": command[0], "args": command[1:]},
    }
    await client.add_mcp(spec)
    stack.push_async_callback(client.remove_mcp, "everything")
    return await stack.enter_async_context(client_streams(client, "everything"))


async def outcome(awaitable: Any) -> dict[str, Any]:
    """A request's result, or the error the SDK raised."""
    try:
        return {"result": dump(await awaitable)}
    except Exception as e:  # noqa: BLE001 - the error is the outcome compared
        return {"error": {"code": getattr(getattr(e, "error", None), "code", None), "message": str(e)}}


def main() -> None:
    argv = sys.argv[1:]
    if (
        len(argv) < 2
        or argv[0] not in ("stdio", "http", "binding")
        or (argv[0] == "http" and len(argv) > 3)
        or (argv[0] == "binding" and (argv[1] != "docker" or len(argv) < 4))
    ):
        sys.exit(USAGE)
    print(json.dumps(anyio.run(run, argv)))


if __name__ == "__main__":
    main()
