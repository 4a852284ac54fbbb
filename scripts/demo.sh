#!/bin/sh
# The main job on an embedded default: a gateway launched in a local sandbox directory, the bundled
# test MCP server registered, its tools listed, one called, the ToolChunk printed.
set -eu
cd "$(dirname "$0")/.."
gateway=$PWD/target/debug/mcpgw-gateway
testserver=$PWD/target/debug/mcpgw-testserver
sandbox=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-demo.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$sandbox"
}
trap cleanup EXIT INT TERM

echo "== launching mcpgw-gateway in $sandbox"
ready=$("$gateway" --daemon --port 0 --token-file "$sandbox/state/token" \
    --instance-nonce demo --log-file "$sandbox/gateway.log")
echo "$ready"
port=$(printf '%s' "$ready" | sed 's/.*"port":\([0-9]*\).*/\1/')
pid=$(printf '%s' "$ready" | sed 's/.*"pid":\([0-9]*\).*/\1/')

request() {
    "$gateway" request "$@" --port "$port" --token-file "$sandbox/state/token"
}

echo "== registering the bundled test server"
request POST /mcps --data "{\"name\":\"demo\",\"is_stateful\":true,\"mcp_config\":{\"type\":\"stdio_mcp\",\"command\":\"$testserver\",\"args\":[\"stdio\"]}}"
echo "== its tools"
request GET /mcps/demo/tools | sed -n 's/"name":"\([^"]*\)"/\n  \1\n/gp' | grep '^  ' || true
echo "== calling echo"
request POST /mcps/demo/tools/echo --data '{"arguments":{"text":"hello from inside the sandbox"}}'
