#!/bin/sh
# The C user of the rehearsal: an empty directory with the release tarball in it (what a
# download gives), the README's C example (app.c) built and run by the README's build lines,
# then compiled once more with -Wall -Wextra -Werror -pedantic. See README.md for the contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG="rehearsal c"
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"
need cc pkg-config docker python3
stage=${REHEARSAL_STAGE:?} out=${REHEARSAL_OUT:?}

cp "$stage"/mcpgw-*-x86_64-linux-gnu.tar.gz "$stage/example.c" "$stage/build.sh" .
mv example.c app.c
logged sh -eu build.sh > "$out/output" 2>&1 || fail "build.sh: $(cat "$out/output")"
date +%s.%N > "$out/answered"
tree=$(echo "$PWD"/mcpgw-*-x86_64-linux-gnu)
echo "$tree" > "$out/installed"
echo "$tree/bin/mcpgw-gateway" > "$out/bundled"
# The host endpoint the tarball carries beside the gateway.
logged python3 "$here/endpoint.py" "$tree/bin/mcpgw" -- mcp-server-everything \
    > "$out/endpoint" 2> "$out/endpoint.log" || fail "bin/mcpgw mcp: $(cat "$out/endpoint.log")"
share=$tree/share/mcpgw
# shellcheck disable=SC2046 # pkg-config output is a list of words
logged cc -std=c11 -Wall -Wextra -Werror -pedantic -I"$share" \
    $(PKG_CONFIG_PATH=$tree/lib/pkgconfig pkg-config --cflags mcpgw) -DMCPGW_GATEWAY='"gateway"' \
    -c app.c -o /dev/null || fail "app.c does not compile cleanly"
leak_check app
