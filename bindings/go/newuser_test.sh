#!/bin/sh
# A new user's Go program, outside the repository: a fresh module that depends on the binding,
# finds libmcpgw only through pkg-config in the installed PREFIX (`make install PREFIX=...`),
# starts the gateway locally, registers the test server and calls a tool. It uses a
# read-only copy of the module (as in the module cache), and `go mod vendor`, so that a cgo line
# naming anything outside the module, or a header found elsewhere, fails here.
#
#   sh newuser_test.sh PREFIX GATEWAY TESTSERVER
set -eu
[ $# -eq 3 ] || { echo "usage: sh newuser_test.sh PREFIX GATEWAY TESTSERVER" >&2; exit 2; }
prefix=$(cd "$1" && pwd) gateway=$(realpath "$2") server=$(realpath "$3")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-newuser.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT

# The module as `go get` would put it in the module cache: its files only, read-only.
mkdir "$work/mod"
(cd "$here" && find . -name build -prune -o -type f \( -name '*.go' -o -name '*.h' -o -name go.mod \) -print |
    while read -r f; do mkdir -p "$work/mod/$(dirname "$f")"; cp "$f" "$work/mod/$f"; done)
chmod -R a-w "$work/mod"

mkdir "$work/app" && cd "$work/app"
go mod init example.com/newuser >/dev/null 2>&1
go mod edit -require github.com/mcpgw/mcpgw/bindings/go@v0.0.0 \
    -replace github.com/mcpgw/mcpgw/bindings/go="$work/mod"
cat > main.go <<'GO'
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

func main() {
	gateway, server := os.Args[1], os.Args[2]
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "newuser-sandbox-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	client, err := mcpgw.NewClient(mcpgw.LocalExec(dir), mcpgw.WithGatewayPath(gateway),
		mcpgw.WithStateDir(filepath.Join(dir, "state")))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	if _, err := client.StartGateway(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.StopGateway(ctx)
	if err := client.AddMCP(ctx, mcpgw.StdioSpec("ts", server, "stdio")); err != nil {
		log.Fatal(err)
	}
	chunk, err := client.CallTool(ctx, "ts", "echo", map[string]string{"text": "hello from a new module"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("libmcpgw %s: %s\n", mcpgw.Version(), chunk.Text())
}
GO
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
echo "newuser: pkg-config says: $(pkg-config --cflags --libs mcpgw)"

# Linked against the installed libmcpgw.so, found at run time through LD_LIBRARY_PATH.
go build -o app-shared .
ldd app-shared | grep -q "$prefix/lib/libmcpgw.so\|libmcpgw.so.* => not found"
LD_LIBRARY_PATH="$prefix/lib" ./app-shared "$gateway" "$server"

# The same from a vendor directory.
go mod vendor
go build -mod=vendor -o app-vendored .
LD_LIBRARY_PATH="$prefix/lib" ./app-vendored "$gateway" "$server" >/dev/null

# Linked statically from the installed libmcpgw.a (pkg-config --static adds Libs.private).
go build -tags mcpgw_static -o app-static .
! ldd app-static | grep -q 'libmcpgw\.so'
./app-static "$gateway" "$server" >/dev/null
echo "newuser: built and ran a new module against $prefix (shared, vendored, static)"
