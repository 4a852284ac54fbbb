#!/bin/sh
# The Node user of the rehearsal: an empty project whose .npmrc names the rehearsal's registry,
# `npm install mcpgw`, then the README's Node example (app.mjs). See README.md for the contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG="rehearsal node"
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"
need node npm docker python3
stage=${REHEARSAL_STAGE:?} out=${REHEARSAL_OUT:?}

printf 'registry=%s\nupdate-notifier=false\nfund=false\naudit=false\n' "${REHEARSAL_NPM:?}" > .npmrc
logged npm init -y >/dev/null
logged npm install --loglevel=error mcpgw > npm-install.log 2>&1 || fail "npm install mcpgw: $(cat npm-install.log)"
installed=$(node -p "require('mcpgw/package.json').version")
[ "$installed" = "${REHEARSAL_VERSION:?}" ] || fail "installed mcpgw $installed, not $REHEARSAL_VERSION"
cp "$stage/example.mjs" app.mjs
logged node app.mjs > "$out/output" 2>&1 || fail "app.mjs: $(cat "$out/output")"
date +%s.%N > "$out/answered"
# The host endpoint, the package's bin, as an MCP client's configuration runs it.
logged python3 "$here/endpoint.py" npx --no mcpgw -- mcp-server-everything \
    > "$out/endpoint" 2> "$out/endpoint.log" || fail "npx mcpgw mcp: $(cat "$out/endpoint.log")"
echo "$PWD/node_modules" > "$out/installed"
node --input-type=module -e "import { gatewayBinary } from 'mcpgw'; console.log(gatewayBinary())" > "$out/bundled"
