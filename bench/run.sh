#!/bin/sh
# make bench: release binaries, wrk, then the measurements (figures and ratios side by side).
set -eu
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null 2>&1; then
    echo "installing wrk (the HTTP load generator)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
make --no-print-directory static
cargo build --quiet --release -p mcpgw-testserver -p mcpgw-bench -p mcpgw-ffi
# The AgentScope-Docker section imports the Python tests' helpers, which check for the debug
# binaries they use.
make --no-print-directory -C bindings/python native >/dev/null 2>&1
# Whatever the bench starts, it stops: none of the project's processes may be left running.
mkdir -p target && sh mk/leftovers.sh snapshot target/bench-leftovers.pids
# The Rust bench's failure does not stop the Python side from measuring; it is the exit status.
status=0
target/release/mcpgw-bench "$@" || status=$?
# One host process holding 1,000 sessions through the Rust host driver.
echo
echo "rust host driver: 1000 sessions in one process (one runtime thread), calls across all of them"
target/release/mcpgw-sessions 1000 4 5 || status=$?
# The host's policy (50 rules) and audit on a call, against the same call without them.
echo
echo "rust host driver: a call with the host's policy and audit on, against the same call plain"
target/release/mcpgw-governed 2000 || status=$?
# Node: one process holding 1,000 open sessions, calling across all of them.
echo
echo "node: one process holding 1,000 sessions against 4 local gateways"
make --no-print-directory -C bindings/node bench || status=$?
# The Python side: AgentScope's stock host client against mcpgw's AgentScope adapter.
echo
echo "python: one tool call through AgentScope's LocalBackend, same mcpgw-gateway"
MCPGW_LIB=target/release/libmcpgw.so PYTHONPATH=bindings/python/src .venv/bin/python bench/python_adapter.py \
    target/x86_64-unknown-linux-gnu/release/mcpgw-gateway target/release/mcpgw-testserver
# AgentScope's DockerWorkspace, its own against the same workspace swapped (images built offline).
echo
echo "python: one MCP tool call through AgentScope's DockerWorkspace, stock and swapped by use_mcpgw"
MCPGW_LIB=target/release/libmcpgw.so .venv/bin/python bench/agentscope_docker.py \
    target/x86_64-unknown-linux-gnu/release/mcpgw-gateway target/release/mcpgw-testserver || status=$?
echo
echo "python: one process holding 1000 sessions (local attach processes against 4 gateways)"
MCPGW_LIB=target/release/libmcpgw.so PYTHONPATH=bindings/python/src .venv/bin/python bench/python_sessions.py \
    target/x86_64-unknown-linux-gnu/release/mcpgw-gateway target/release/mcpgw-testserver || status=$?
# The cloud sandboxes, each through its own SDK and daemon: a call over the session channel
# against the same call one-shot, beside the floor of the provider's streaming API.
echo
echo "python: a tool call through each cloud sandbox's SDK (tests/providers/README.md)"
MCPGW_LIB=target/release/libmcpgw.so PYTHONPATH=bindings/python/src .venv/bin/python bench/providers.py || status=$?
# The Go binding: one process holding 1,000 sessions (memory per session, threads, calls/s).
echo
echo "go: one host process holding 1,000 sessions (make -C bindings/go bench)"
make --no-print-directory -C bindings/go bench || status=$?
# The C loop: one thread holding 1,000 sessions.
echo
echo "c: one thread holding many sessions (examples/c/bench_sessions.c), and a call through mcpgw_client against host_loop (bench_client.c)"
make --no-print-directory -C examples/c bench || status=$?
# The host endpoint into Docker, against the same SDK client straight to the same server.
echo
echo "host endpoint: tools/call by the TypeScript SDK client through mcpgw mcp into Docker"
sh bench/host_endpoint.sh || status=$?
echo
sh mk/leftovers.sh check target/bench-leftovers.pids || status=$?
exit $status
