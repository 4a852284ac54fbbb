#!/usr/bin/env python3
"""The client under test in the conformance suite's client scenarios: the gateway, as the client
of the suite's server. The suite runs `client.py URL` with MCP_CONFORMANCE_SCENARIO set; this
registers URL with a gateway through `mcpgw mcp --local --url URL` and drives it over stdio as an
MCP host would: initialize, list the tools, call the scenario's tool, answer what the server asks
(an elicitation is accepted with its schema's defaults, as a host's form would show them).

Everything the suite's server sees comes from the gateway's own HTTP client.
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target").resolve()
MCPGW = TARGET / "debug" / "mcpgw"
GATEWAY = TARGET / "x86_64-unknown-linux-gnu" / "release" / "mcpgw-gateway"
# What each scenario calls, with its arguments.
CALLS = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    "sse-retry": ("test_reconnection", {}),
}
LIMIT = 20


def defaults(schema):
    """The values a form of `schema` starts with: each property's default."""
    props = (schema or {}).get("properties") or {}
    return {k: p["default"] for k, p in props.items() if isinstance(p, dict) and "default" in p}


class Host:
    def __init__(self, url):
        argv = [str(MCPGW), "mcp", "--local", "--gateway-binary", str(GATEWAY), "--url", url]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.answers = {}
        self.ready = threading.Condition()
        threading.Thread(target=self.read, daemon=True).start()
        self.next = 0

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "method" in msg and "id" in msg:
                self.asked(msg)
            elif "id" in msg:
                with self.ready:
                    self.answers[msg["id"]] = msg
                    self.ready.notify_all()

    def asked(self, req):
        if req["method"] == "elicitation/create":
            content = defaults(req["params"].get("requestedSchema"))
            self.send({"jsonrpc": "2.0", "id": req["id"],
                       "result": {"action": "accept", "content": content}})
        elif req["method"] == "ping":
            self.send({"jsonrpc": "2.0", "id": req["id"], "result": {}})
        else:
            self.send({"jsonrpc": "2.0", "id": req["id"],
                       "error": {"code": -32601, "message": f"{req['method']}: not offered"}})

    def request(self, method, params):
        self.next += 1
        n = self.next
        self.send({"jsonrpc": "2.0", "id": n, "method": method, "params": params})
        with self.ready:
            if not self.ready.wait_for(lambda: n in self.answers, LIMIT):
                sys.exit(f"client.py: no answer to {method} within {LIMIT} s")
            return self.answers.pop(n)

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def main():
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    host = Host(url)
    try:
        init = host.request("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "mcpgw-conformance-host", "version": "1"},
        })
        if "result" not in init:
            sys.exit(f"client.py: initialize failed: {init}")
        host.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = host.request("tools/list", {})
        print(json.dumps(tools), flush=True)
        if scenario in CALLS:
            name, arguments = CALLS[scenario]
            called = host.request("tools/call", {"name": name, "arguments": arguments})
            print(json.dumps(called), flush=True)
            if "result" not in called:
                sys.exit(f"client.py: {name} failed: {called}")
    finally:
        host.close()


if __name__ == "__main__":
    main()
