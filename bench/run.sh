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
# The C loop: one thread holding 1,000 sessions.
echo
echo "c: one thread holding many sessions (examples/c/bench_sessions.c)"
make --no-print-directory -C examples/c bench || status=$?
exit $status
