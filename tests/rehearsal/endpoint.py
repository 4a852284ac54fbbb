"""An MCP client of the host endpoint a package carries, as an MCP client application runs it:

    python3 endpoint.py COMMAND... -- SERVER...

starts `COMMAND... mcp --docker $REHEARSAL_CONTAINER -- SERVER...` with its stdin and stdout as
the MCP stdio transport, sends `initialize`, `notifications/initialized` and a `tools/call` of
`echo`, prints the answer's text, then ends its input and waits for the endpoint to exit (it
removes the server and stops its gateway then). Standard library only: the user's project has
no MCP SDK. Messages the server sends besides the answers (list_changed, logging) are skipped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

# A bound on the whole exchange, so a hung endpoint fails the rehearsal instead of holding it.
signal.alarm(180)

split = sys.argv.index("--")
command, server = sys.argv[1:split], sys.argv[split + 1 :]
argv = [*command, "mcp", "--docker", os.environ["REHEARSAL_CONTAINER"], "--", *server]
proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
assert proc.stdin and proc.stdout


def send(message: dict[str, Any]) -> None:
    assert proc.stdin
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    proc.stdin.flush()


def answer(request_id: int) -> dict[str, Any]:
    assert proc.stdout
    for line in proc.stdout:
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            if "error" in message:
                sys.exit(f"endpoint.py: request {request_id} failed: {message['error']}")
            return dict(message["result"])
    sys.exit(f"endpoint.py: {' '.join(argv)} ended before answering request {request_id} (exit {proc.wait()})")


client = {"name": "mcpgw-rehearsal", "version": "1"}
send(
    {
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
    }
)
server_info = answer(1)["serverInfo"]
send({"method": "notifications/initialized"})
send({"id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "hello"}}})
result = answer(2)
proc.stdin.close()
status = proc.wait()
print(f"{server_info['name']}: {result['content'][0]['text']}")
sys.exit(status)
