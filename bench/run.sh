#!/bin/sh
# make bench: release binaries, wrk, then the measurements (figures and ratios side by side).
set -eu
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null 2>&1; then
    echo "installing wrk (the HTTP load generator)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
make --no-print-directory static
cargo build --quiet --release -p mcpgw-testserver -p mcpgw-bench
exec target/release/mcpgw-bench "$@"
