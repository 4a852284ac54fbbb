#!/bin/sh
# make bench: the host endpoint (`mcpgw mcp`) into a Docker container, against the same SDK
# client talking to the same server directly on this machine, and to the same server in the same
# container over a bare `docker exec -i` (the channel with nothing of mcpgw's on it); one run each.
set -eu
cd "$(dirname "$0")/.."
calls=${HOST_ENDPOINT_CALLS:-2000}
if ! why=$(sh tests/docker/sandbox.sh check); then
    echo "host mcp endpoint: SKIPPED: $why"
    exit 0
fi
cargo build --quiet --release -p mcpgw-cli
image=$(sh tests/docker/sandbox.sh image --node)
box=$(sh tests/docker/sandbox.sh start "$image")
trap 'sh tests/docker/sandbox.sh stop "$box"' EXIT
everything=tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
inside=/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
direct=$(node tests/clients/ts/bench.mjs "$calls" node "$everything" stdio)
exec=$(node tests/clients/ts/bench.mjs "$calls" docker exec -i "$box" node "$inside" stdio)
through=$(node tests/clients/ts/bench.mjs "$calls" target/release/mcpgw mcp \
    --docker "$box" --gateway /usr/local/bin/mcpgw-gateway -- node "$inside" stdio)
field() { printf '%s' "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
printf 'host mcp endpoint call p50 ms: %.3f (direct: %.3f, bare docker exec: %.3f)\n' \
    "$(field "$through" p50_ms)" "$(field "$direct" p50_ms)" "$(field "$exec" p50_ms)"
printf 'host mcp endpoint calls/s at 16 in flight: %.0f (direct: %.0f, bare docker exec: %.0f)\n' \
    "$(field "$through" calls_per_s)" "$(field "$direct" calls_per_s)" "$(field "$exec" calls_per_s)"
