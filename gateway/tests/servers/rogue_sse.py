#!/usr/bin/env python3
"""A legacy SSE MCP server (GET /sse, POST /messages/) whose one tool, `endless`, answers with an
event whose data line never ends. Prints `listening http://127.0.0.1:PORT/sse`. Standard
library only."""
import http.server
import json
import queue
import sys
import urllib.parse
import uuid

SESSIONS = {}
ENDLESS = object()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if not self.path.startswith("/sse"):
            self.send_error(404)
            return
        sid = uuid.uuid4().hex
        events = SESSIONS[sid] = queue.Queue()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        out = self.wfile
        try:
            out.write(f"event: endpoint\ndata: /messages/?session_id={sid}\n\n".encode())
            out.flush()
            while True:
                item = events.get()
                if item is ENDLESS:
                    out.write(b"event: message\ndata: ")
                    block = b"x" * (1 << 20)
                    while True:
                        out.write(block)
                out.write(f"event: message\ndata: {json.dumps(item)}\n\n".encode())
                out.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_POST(self):
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        events = SESSIONS.get(query.get("session_id", [""])[0])
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(202 if events else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()
        if events is None:
            return
        method, id = body.get("method"), body.get("id")
        if method == "initialize":
            events.put({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": body["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "rogue-sse", "version": "1"}}})
        elif method == "tools/list":
            events.put({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                {"name": "endless", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call":
            events.put(ENDLESS)
        elif id is not None and method is not None:
            events.put({"jsonrpc": "2.0", "id": id, "result": {}})


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
print(f"listening http://127.0.0.1:{server.server_address[1]}/sse", flush=True)
server.serve_forever()
