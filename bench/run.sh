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
# The Rust bench's failure does not stop the Python side from measuring; it is the exit status.
status=0
target/release/mcpgw-bench "$@" || status=$?
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
# The host endpoint into Docker, against the same SDK client straight to the same server.
echo
echo "host endpoint: tools/call by the TypeScript SDK client through mcpgw mcp into Docker"
sh bench/host_endpoint.sh || status=$?
exit $status
