"""langchain-mcp-adapters on a server through `mcpgw mcp`: `load_mcp_tools` on the official
SDK's ClientSession turns its tools into LangChain tools, and one is run as an agent would run
it (no model needed).

    python langchain_example.py COMMAND [ARG...]    e.g. mcpgw mcp --docker box -- npx -y @modelcontextprotocol/server-everything
"""

import asyncio
import json
import os
import sys

from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def main(command: str, args: list[str]) -> None:
    server = StdioServerParameters(command=command, args=args, env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await load_mcp_tools(session)
        echo = next(t for t in tools if t.name == "echo")
        result = await echo.ainvoke({"message": "from LangChain"})
        print(json.dumps({"tools": sorted(t.name for t in tools), "echo": result}, default=str))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: langchain_example.py COMMAND [ARG...]")
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
