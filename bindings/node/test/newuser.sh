#!/bin/sh
# A new Node user: a fresh project outside the repository installs the packed tarball
# (`make pack`) with npm and uses it with no environment variable: the bundled libmcpgw.so loads
# from node_modules, the installed gateway starts in a local sandbox (`sh -c` in a temp dir), the
# project's test server is registered and called one-shot and over a session, and TypeScript
# type-checks a program against the types the package carries.
#
#   sh test/newuser.sh                  stand-alone (make newuser): the tarball in bindings/node,
#                                       the gateway and test server of target/debug
#   sh test/newuser.sh prepare|test     the two phases of tests/newuser (see its README there:
#                                       NEWUSER_STAGE, MCPGW_PREFIX, NEWUSER_TESTSERVER)
set -eu

say() { printf 'node: %s\n' "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
skip() { echo "SKIPPED: node: $*"; exit 0; }

# What a user gets from a package registry: the tarball, and TypeScript with Node's types.
prepare() {
    package=$(cd "$(dirname "$0")/.." && pwd)
    stage=${NEWUSER_STAGE:?}
    version=$(node -p "require('$package/package.json').version")
    tarball=$package/mcpgw-$version.tgz
    [ -f "$tarball" ] || fail "$tarball is missing: run make -C bindings/node pack"
    cp "$tarball" "$stage/"
    # TypeScript (with its native compiler package) and Node's types, as npm installed them here.
    mkdir -p "$stage/tools/node_modules"
    for dep in typescript @typescript @types undici-types; do
        [ -d "$package/node_modules/$dep" ] && cp -R "$package/node_modules/$dep" "$stage/tools/node_modules/"
    done
    return 0
}

# The user's project, in the current (fresh, empty) directory.
run_test() {
    command -v node >/dev/null 2>&1 || skip "no node"
    command -v npm >/dev/null 2>&1 || skip "no npm"
    stage=${NEWUSER_STAGE:?}
    gateway=${NEWUSER_GATEWAY:-${MCPGW_PREFIX:?}/bin/mcpgw-gateway}
    testserver=${NEWUSER_TESTSERVER:?}
    tarball=$(ls "$stage"/mcpgw-*.tgz)
    # No variable of ours reaches the user's program.
    unset MCPGW_LIB MCPGW_GATEWAY MCPGW_TESTSERVER

    npm init -y >/dev/null
    npm pkg set type=module >/dev/null
    npm install --no-audit --no-fund --loglevel=error --prefer-offline "$tarball" ||
        fail "npm install $tarball"
    [ -f node_modules/mcpgw/prebuilds/linux-x64/libmcpgw.so ] ||
        fail "the package carries no prebuilds/linux-x64/libmcpgw.so"

    cat > app.mjs <<'EOF'
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, library, localExec, localSession, textOf } from 'mcpgw';

const [gatewayPath, serverPath] = process.argv.slice(2);
console.log(`library: ${library().path} (${library().version})`);
const sandbox = mkdtempSync(join(tmpdir(), 'mcpgw-newuser-'));
const client = new Client({ exec: localExec({ cwd: sandbox }), gatewayPath });
try {
  await client.startGateway();
  await client.addMcp({
    name: 'ts',
    mcp_config: { type: 'stdio_mcp', command: serverPath, args: ['stdio'] },
  });
  const chunk = await client.callTool('ts', 'echo', { text: 'hello from a new user' });
  console.log(`answer: ${textOf(chunk)}`);
  const session = await localSession(client, { cwd: sandbox });
  const again = await client.callTool('ts', 'echo', { text: 'over a session' });
  console.log(`session answer: ${textOf(again)}`);
  await session.close();
  await client.stopGateway();
} finally {
  client.close();
  rmSync(sandbox, { recursive: true, force: true });
}
EOF
    out=$(node app.mjs "$gateway" "$testserver" 2>&1) || fail "app.mjs: $out"
    say "$out"
    case $out in *"library: $PWD/node_modules/mcpgw/prebuilds/linux-x64/libmcpgw.so"*) ;;
        *) fail "the library did not load from the installed package" ;; esac
    case $out in *"answer: hello from a new user"*"session answer: over a session"*) ;;
        *) fail "unexpected output" ;; esac

    # TypeScript resolves the package's types through its exports.
    cat > app.ts <<'EOF'
import { Client, localExec, textOf, type McpEntry, type ToolChunk } from 'mcpgw';

export async function names(gatewayPath: string): Promise<string[]> {
  const client = new Client({ exec: localExec(), gatewayPath });
  const entries: McpEntry[] = await client.listMcps();
  const chunk: ToolChunk = await client.callTool('ts', 'echo', { text: 'x' });
  client.close();
  return [...entries.map((e) => `${e.name} ${e.status?.state}`), textOf(chunk)];
}
EOF
    tools=$stage/tools/node_modules
    node "$tools/typescript/bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext \
        --types node --typeRoots "$tools/@types" app.ts || fail "app.ts does not type-check"
    say "app.ts type-checks against the installed package's types"
}

case ${1:-standalone} in
    prepare) prepare ;;
    test) run_test ;;
    standalone)
        package=$(cd "$(dirname "$0")/.." && pwd)
        repo=$(cd "$package/../.." && pwd)
        target=${CARGO_TARGET_DIR:-$repo/target}
        work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-newuser-node-XXXXXX")
        trap 'rm -rf "$work"' EXIT
        mkdir "$work/stage" "$work/project"
        NEWUSER_STAGE=$work/stage sh "$0" prepare
        cd "$work/project"
        NEWUSER_STAGE=$work/stage NEWUSER_GATEWAY=$target/debug/mcpgw-gateway \
            NEWUSER_TESTSERVER=$target/debug/mcpgw-testserver sh "$package/test/newuser.sh" test
        say "ok"
        ;;
    *) echo "usage: newuser.sh [prepare|test]" >&2; exit 2 ;;
esac
