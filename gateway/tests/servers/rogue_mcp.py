#!/usr/bin/env python3
"""An MCP server over stdio that misbehaves on request, for the gateway's fault tests.

Its tools (each takes the arguments named):
  junk {bytes}        writes one line of `bytes` junk bytes, then answers "after junk"
  huge {bytes}        answers with a valid result whose text is `bytes` long
  endless {}          writes one line that never ends
  flood {count}       sends `count` notifications/message and `count` stderr lines, then answers
  spawn {pidfile}     starts a sleeper that escapes: double fork plus setsid; writes its pid
Only the Python standard library; stdout is written in large blocks.
"""
import json
import os
import sys
import time

OUT = sys.stdout.buffer
BLOCK = b"x" * (1 << 20)


def send(message):
    OUT.write(json.dumps(message).encode() + b"\n")
    OUT.flush()


def write_bytes(n, fill=BLOCK):
    while n > 0:
        part = fill[: min(n, len(fill))]
        OUT.write(part)
        n -= len(part)


def text(id, value):
    send({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": value}]}})


def escape(pidfile):
    """A sleeper in a session of its own, whose parent exits: it is nobody's child."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            with open(pidfile + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.rename(pidfile + ".tmp", pidfile)
            time.sleep(600)
        os._exit(0)
    os.wait()


TOOLS = ["junk", "huge", "endless", "flood", "spawn"]


def main():
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, id = msg.get("method"), msg.get("id")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": msg["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "rogue", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]}})
        elif method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            if name == "junk":
                write_bytes(args["bytes"])
                OUT.write(b"\n")
                text(id, "after junk")
            elif name == "huge":
                head = json.dumps({"jsonrpc": "2.0", "id": id, "result": {
                    "content": [{"type": "text", "text": "@"}]}}).encode()
                before, after = head.split(b"@")
                OUT.write(before)
                write_bytes(args["bytes"], b"a" * (1 << 20))
                OUT.write(after + b"\n")
                OUT.flush()
            elif name == "endless":
                while True:
                    write_bytes(1 << 20)
            elif name == "flood":
                for i in range(args["count"]):
                    send({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "info", "data": f"flood {i} " + "z" * 200}})
                    sys.stderr.write(f"stderr flood {i}\n")
                sys.stderr.flush()
                text(id, "flooded")
            elif name == "spawn":
                escape(args["pidfile"])
                text(id, "spawned")
        elif id is not None and method is not None:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})


if __name__ == "__main__":
    main()
