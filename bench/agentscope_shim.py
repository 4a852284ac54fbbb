"""Times AgentScope 2.0's host-side transport: its GatewayClient.exec_request, which runs its
python3 shim through LocalBackend.exec_shell, for N tool calls against a running gateway.
Prints one JSON line: the per-call times in milliseconds."""

import asyncio
import json
import sys
import time

from agentscope.tool._builtin._backend import LocalBackend
from agentscope.workspace._gateway_client import GatewayClient


async def main(port, token, calls):
    gc = GatewayClient(LocalBackend(), port, auth_token=token)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        status, body = await gc.exec_request(
            "POST", "/mcps/ts/tools/echo", body={"arguments": {"text": "hello"}}
        )
        times.append((time.perf_counter() - t) * 1000)
        assert status == 200 and b"hello" in body, (status, body[:200])
    print(json.dumps({"ms": times}))


asyncio.run(main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3])))
