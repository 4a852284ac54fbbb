#!/bin/sh
# A new Node user: a fresh project installs the npm package (the `npm pack` tarball, with
# libmcpgw.so bundled under prebuilds/linux-x64 and the static gateway under gateway/linux-x64)
# and uses it with no environment variable: the library loads from node_modules, the bundled
# gateway is installed into a local sandbox (`sh -c` in a temp dir) by ensureGatewayBinary() and
# started there, the test server is registered and called one-shot and over a session, and
# TypeScript type-checks a program against the types the package carries. See README.md for the
# phases. (tests/rehearsal installs the same package from a registry.)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG=node
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"

case ${1:-} in
    prepare)
        # What a user gets from the npm registry: the package, and TypeScript with Node's types.
        need node npm
        stage=${NEWUSER_STAGE:?}
        make --no-print-directory -C bindings/node pack > "$stage/pack.log" 2>&1 ||
            { tail -n 20 "$stage/pack.log"; fail "make -C bindings/node pack"; }
        cp "dist/npm/mcpgw-$(sh mk/version.sh).tgz" "$stage/"
        mkdir -p "$stage/tools/node_modules"
        for dep in typescript @typescript @types undici-types; do
            [ ! -d "bindings/node/node_modules/$dep" ] ||
                cp -R "bindings/node/node_modules/$dep" "$stage/tools/node_modules/"
        done
        exit 0
        ;;
    test) ;;
    *) echo "usage: node.sh prepare|test" >&2; exit 2 ;;
esac

need node npm readelf ldd
stage=${NEWUSER_STAGE:?}
testserver=${NEWUSER_TESTSERVER:?}
gateway=${MCPGW_PREFIX:?}/bin/mcpgw-gateway
[ -x "$gateway" ] || fail "no installed gateway at $gateway"
tarball=$(ls "$stage"/mcpgw-*.tgz)

# What the README tells a Node user to do.
logged npm init -y >/dev/null
logged npm pkg set type=module
logged npm install --no-audit --no-fund --loglevel=error --prefer-offline "$tarball" ||
    fail "npm install $tarball"
lib=node_modules/mcpgw/prebuilds/linux-x64/libmcpgw.so
[ -f "$lib" ] || fail "the package carries no prebuilds/linux-x64/libmcpgw.so"
leak_check "$lib"

cat > app.mjs <<'EOF'
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, gatewayBinary, library, local, textOf } from 'mcpgw';

const [serverPath] = process.argv.slice(2);
console.log(`library: ${library().path} (${library().version})`);
console.log(`gateway: ${gatewayBinary()}`);
const sandbox = mkdtempSync(join(tmpdir(), 'mcpgw-newuser-node-'));
const gatewayPath = join(sandbox, 'bin', 'mcpgw-gateway');
const client = new Client(local({ cwd: sandbox }), { gatewayPath });
try {
  const installed = await client.ensureGatewayBinary();
  console.log(`installed: ${installed.uploaded}`);
  await client.startGateway();
  await client.addMcp({
    name: 'ts',
    mcp_config: { type: 'stdio_mcp', command: serverPath, args: ['stdio'] },
  });
  const chunk = await client.callTool('ts', 'echo', { text: 'hello from a new user' });
  console.log(`answer: ${textOf(chunk)}`);
  await client.openSession();
  const again = await client.callTool('ts', 'echo', { text: 'over a session' });
  console.log(`session answer: ${textOf(again)}`);
  await client.closeSession();
  await client.stopGateway();
} finally {
  await client.close();
  rmSync(sandbox, { recursive: true, force: true });
}
EOF
out=$(logged node app.mjs "$testserver" 2>&1) || fail "app.mjs: $out"
case $out in *"library: $PWD/$lib"*) ;; *) fail "the library did not load from the package: $out" ;; esac
bundled=node_modules/mcpgw/gateway/linux-x64/mcpgw-gateway
case $out in *"gateway: $PWD/$bundled"*"installed: true"*) ;;
    *) fail "the bundled gateway was not installed from the package: $out" ;; esac
cmp -s "$bundled" "$gateway" || fail "the package's gateway differs from the installed tree's $gateway"
case $out in *"answer: hello from a new user"*"session answer: over a session"*) ;;
    *) fail "app.mjs: $out" ;; esac
say "app.mjs: ok ($(echo "$out" | head -n 1))"

# TypeScript resolves the package's types through its exports.
cat > app.ts <<'EOF'
import { Client, local, textOf, type McpEntry, type ToolChunk } from 'mcpgw';

export async function names(gatewayPath: string): Promise<string[]> {
  const client = new Client(local(), { gatewayPath });
  const entries: McpEntry[] = await client.listMcps();
  const chunk: ToolChunk = await client.callTool('ts', 'echo', { text: 'x' });
  await client.close();
  return [...entries.map((e) => `${e.name} ${e.status?.state}`), textOf(chunk)];
}
EOF
tools=$stage/tools/node_modules
if [ -d "$tools/typescript" ] && [ -d "$tools/@types/node" ]; then
    logged node "$tools/typescript/bin/tsc" --noEmit --strict --module nodenext \
        --moduleResolution nodenext --types node --typeRoots "$tools/@types" app.ts ||
        fail "app.ts does not type-check against the package's types"
    say "app.ts type-checks against the installed package's types"
else
    say "no TypeScript staged (npm ci in bindings/node installs it): type check left out"
fi
leak_check
say "passed"
