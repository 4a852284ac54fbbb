#!/bin/sh
# make bench: the host endpoint (`mcpgw mcp`) into a Docker container, against the same SDK
# client talking to the same server directly on this machine, and to the same server in the same
# container over a bare `docker exec -i` (the channel with nothing of mcpgw's on it).
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
figures=$(mktemp)
trap 'rm -f "$figures"; sh tests/docker/sandbox.sh stop "$box"' EXIT
everything=tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
inside=/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js
field() { printf '%s' "$1" | sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p"; }
# Rounds interleave the three, so that drift on a shared machine hits each alike; each figure
# is the median of its rounds.
rounds=${HOST_ENDPOINT_ROUNDS:-3}
for _ in $(seq "$rounds"); do
    for kind in direct exec through; do
        case $kind in
        direct) out=$(node tests/clients/ts/bench.mjs "$calls" node "$everything" stdio) ;;
        exec) out=$(node tests/clients/ts/bench.mjs "$calls" docker exec -i "$box" node "$inside" stdio) ;;
        through) out=$(node tests/clients/ts/bench.mjs "$calls" target/release/mcpgw mcp \
            --docker "$box" --gateway /usr/local/bin/mcpgw-gateway -- node "$inside" stdio) ;;
        esac
        echo "$kind p50 $(field "$out" p50_ms)" >>"$figures"
        echo "$kind rate $(field "$out" calls_per_s)" >>"$figures"
    done
done
median() {
    awk -v k="$1" -v f="$2" '$1 == k && $2 == f { print $3 }' "$figures" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
printf 'host mcp endpoint call p50 ms: %.3f (direct: %.3f, bare docker exec: %.3f; medians of %s rounds)\n' \
    "$(median through p50)" "$(median direct p50)" "$(median exec p50)" "$rounds"
x=$(median through rate)
y=$(median direct rate)
z=$(median exec rate)
printf 'host mcp endpoint calls/s at 16 in flight: %.0f (direct: %.0f, bare docker exec: %.0f; %.2f of direct, %.2f of bare)\n' \
    "$x" "$y" "$z" "$(awk "BEGIN { print $x / $y }")" "$(awk "BEGIN { print $x / $z }")"
