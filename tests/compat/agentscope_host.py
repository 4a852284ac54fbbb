"""AgentScope 2.0's own host client driving mcpgw-gateway.

Run by gateway/tests/agentscope.rs against a gateway started with AgentScope's launch flags
(--port P --auth-token T --instance-nonce N). It uses AgentScope's GatewayClient with its
LocalBackend exactly as AgentScope's sandboxed workspaces do, and fails (non-zero exit) on the
first difference from what AgentScope expects of its own gateway.
"""

import asyncio
import os
import sys

from agentscope.message import ToolResultState
from agentscope.tool._builtin._backend import LocalBackend
from agentscope.workspace._gateway_client import GatewayClient


def check(condition, what):
    if not condition:
        raise AssertionError(what)


async def expect_error(coro, needle):
    try:
        await coro
    except Exception as e:  # noqa: BLE001
        check(needle in str(e), f"expected {needle!r} in {e!r}")
        return
    raise AssertionError(f"expected an error containing {needle!r}")


async def main():
    port = int(os.environ["GW_PORT"])
    token = os.environ["GW_TOKEN"]
    nonce = os.environ["GW_NONCE"]
    testserver = os.environ["TESTSERVER"]
    http_url = os.environ["TESTSERVER_HTTP_URL"]

    gc = GatewayClient(LocalBackend(), port, auth_token=token, instance_nonce=nonce, timeout=60)
    check(await gc.health(), "health with the launch nonce")
    other = GatewayClient(LocalBackend(), port, auth_token=token, instance_nonce="someone-else")
    check(not await other.health(), "health must fail for another nonce")

    stdio = {
        "name": "ts",
        "is_stateful": True,
        "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]},
        "execution_timeout": 30,
    }
    client = gc.make_client(stdio, agent_id="agent", session_id="s1")
    await client.connect()

    tools = await client.list_raw_tools()
    names = {t.name for t in tools}
    check({"echo", "add", "media", "fail", "slow"} <= names, f"tools: {names}")
    add_tool = next(t for t in tools if t.name == "add")
    check(add_tool.output_schema is not None, "outputSchema survives")

    echo = await client.get_tool("echo")
    check(echo.name == "mcp__ts__echo", echo.name)
    chunk = await echo(text="héllo 'quoted' $(not run)")
    check(chunk.state == ToolResultState.RUNNING and chunk.is_last, f"echo chunk {chunk}")
    check(chunk.content[0].text == "héllo 'quoted' $(not run)", f"echo text {chunk.content}")

    chunk = await (await client.get_tool("add"))(a=2, b=40)
    check(chunk.metadata.get("structured_content") == {"sum": 42, "product": 80}, f"add {chunk}")

    chunk = await (await client.get_tool("media"))()
    kinds = [(b.type, getattr(b, "source", None) and b.source.type) for b in chunk.content]
    check(kinds == [("data", "base64"), ("data", "base64"), ("text", None), ("data", "base64"), ("data", "url")], f"media {kinds}")
    check(chunk.content[0].source.media_type == "image/png", "png")
    check(chunk.content[1].source.media_type == "audio/wav", "wav")
    check("hello resource" in chunk.content[2].text, "embedded text resource")
    check(str(chunk.content[4].source.url) == "test://resource/link", "resource link")

    chunk = await (await client.get_tool("fail"))(message="broken on purpose")
    check(chunk.state == ToolResultState.ERROR, f"fail state {chunk.state}")
    check(chunk.content[0].text == "broken on purpose", "fail text")

    # Unknown tools: 404 through the gateway comes back as an error chunk.
    status, body = await gc.exec_request(
        "POST", "/mcps/ts/tools/nope", params={"agent_id": "agent", "session_id": "s1"}, body={"arguments": {}}
    )
    check(status == 404, f"unknown tool status {status} {body!r}")
    await expect_error(client.get_tool("nope"), "nope")

    # Scopes.
    listed = await gc.list_mcps(agent_id="agent", session_id="s1")
    check([m.name for m in listed] == ["ts"], f"scoped list {listed}")
    check(listed[0].is_connected, "listed clients are connected")
    check(await gc.list_mcps() == [], "default scope is empty")
    elsewhere = gc.make_client(stdio, agent_id="agent", session_id="s2")
    await elsewhere.connect()
    chunk = await (await elsewhere.get_tool("echo"))(text="other scope")
    check(chunk.content[0].text == "other scope", "second scope works")
    await elsewhere.close(ignore_errors=False)

    # Duplicate name in the same scope: 409.
    duplicate = gc.make_client(stdio, agent_id="agent", session_id="s1")
    await expect_error(duplicate.connect(), "HTTP 409")

    # Wrong token: 401.
    intruder = GatewayClient(LocalBackend(), port, auth_token="not-the-token")
    await expect_error(intruder.list_mcps(), "HTTP 401")

    # Streamable HTTP with runtime headers, replaced without reconnecting.
    http = {
        "name": "web",
        "is_stateful": True,
        "mcp_config": {"type": "http_mcp", "url": http_url, "headers": {"X-Static": "s"}},
    }
    web = gc.make_client(http, agent_id="agent", session_id="s1")
    await web.connect()
    await web.set_runtime_headers({"X-Runtime": "r1"})
    seen = (await (await web.get_tool("headers"))()).metadata["structured_content"]
    check(seen.get("x-runtime") == "r1" and seen.get("x-static") == "s", f"headers {seen}")
    await web.set_runtime_headers({"X-Runtime": "r2"})
    seen = (await (await web.get_tool("headers"))()).metadata["structured_content"]
    check(seen.get("x-runtime") == "r2", f"headers after update {seen}")
    await expect_error(web.set_runtime_headers({"Host": "x"}), "rejected")
    await expect_error(client.set_runtime_headers({"X": "y"}), "rejected")
    chunk = await (await web.get_tool("echo"))(text="over http")
    check(chunk.content[0].text == "over http", "http echo")

    # Stateless HTTP: a session per operation.
    stateless = gc.make_client(dict(http, name="web2", is_stateful=False), agent_id="agent", session_id="s1")
    await stateless.connect()
    chunk = await (await stateless.get_tool("echo"))(text="stateless")
    check(chunk.content[0].text == "stateless", "stateless echo")

    # Delete.
    for c in (web, stateless, client):
        await c.close(ignore_errors=False)
    check(await gc.list_mcps(agent_id="agent", session_id="s1") == [], "all removed")
    status, _ = await gc.exec_request("DELETE", "/mcps/ts", params={"agent_id": "agent", "session_id": "s1"})
    check(status == 404, f"second delete {status}")
    print("agentscope host client: all checks passed")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
