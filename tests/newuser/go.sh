#!/bin/sh
# A new user's Go program: a fresh module that depends on the Go binding
# (github.com/mcpgw/mcpgw/bindings/go, as `go get` puts it in the module cache: its files only,
# read-only), finds libmcpgw through pkg-config in the installed tree alone (-tags
# mcpgw_pkgconfig: the default links the prebuilt library a released module carries, which
# tests/rehearsal installs through a module proxy), starts the installed gateway in a local
# sandbox, registers the test MCP server and calls a tool, one-shot and over a session. Built
# four ways: against libmcpgw.so through LD_LIBRARY_PATH, with an rpath (CGO_LDFLAGS), from a
# vendor directory, and statically (-tags mcpgw_static, mcpgw-static.pc). See README.md for
# the phases and the environment.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG=go
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"

prepare() {
    # What `go get` fetches: the module's own files (no build output), read-only (the files:
    # run.sh must be able to remove the stage).
    stage=${NEWUSER_STAGE:?}/mod
    mkdir -p "$stage"
    (cd bindings/go && find . -name build -prune -o -type f \
        \( -name '*.go' -o -name '*.h' -o -name go.mod -o -name go.sum \) -print) |
        while IFS= read -r f; do
            mkdir -p "$stage/$(dirname "$f")"
            cp "bindings/go/$f" "$stage/$f"
        done
    find "$stage" -type f -exec chmod a-w {} +
}

run_test() {
    need go pkg-config readelf ldd
    prefix=${MCPGW_PREFIX:?}
    testserver=${NEWUSER_TESTSERVER:?}
    module=${NEWUSER_STAGE:?}/mod
    # What the README tells a Go user to do.
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
    pkg-config --exists mcpgw mcpgw-static || fail "pkg-config finds no mcpgw and mcpgw-static in $PKG_CONFIG_PATH"
    gateway=$(pkg-config --variable=gateway mcpgw)
    libdir=$(pkg-config --variable=libdir mcpgw)
    [ -x "$gateway" ] || fail "the gateway variable of mcpgw.pc names no executable: '$gateway'"
    say "pkg-config --cflags --libs mcpgw: $(pkg-config --cflags --libs mcpgw)"
    # No network and no module proxy: the binding needs nothing but the standard library.
    export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=

    go mod init example.com/newuser >/dev/null 2>&1
    go mod edit -require github.com/mcpgw/mcpgw/bindings/go@v0.0.0 \
        -replace github.com/mcpgw/mcpgw/bindings/go="$module"
    cat > main.go <<'GO'
// A new user's program: launches the gateway in a local "sandbox" (a temp dir, sh -c), registers
// an MCP server, calls a tool one-shot and over a session.
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
	client, err := mcpgw.NewClient(mcpgw.Local(dir), mcpgw.WithGatewayPath(gateway),
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
	chunk, err := client.CallTool(ctx, "ts", "echo", map[string]string{"text": "hello from a new user"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.OpenSession(ctx); err != nil {
		log.Fatal(err)
	}
	defer client.CloseSession(ctx)
	again, err := client.CallTool(ctx, "ts", "echo", map[string]string{"text": "over a session"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("libmcpgw %s: answer: %s; %s\n", mcpgw.Version(), chunk.Text(), again.Text())
}
GO

    logged go build -tags mcpgw_pkgconfig -o app-ldpath .
    logged env CGO_LDFLAGS="-Wl,-rpath,$libdir" go build -tags mcpgw_pkgconfig -o app-rpath .
    logged go build -tags mcpgw_static -o app-static .
    logged go mod vendor
    logged go build -mod=vendor -tags mcpgw_pkgconfig -o app-vendored .

    soname=$(readelf -d "$libdir/libmcpgw.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
    readelf -d app-rpath | grep -q "NEEDED.*\[$soname\]" || fail "app-rpath does not need $soname"
    ldd app-rpath | grep -q "$soname => $libdir/$soname" ||
        fail "app-rpath does not load $libdir/$soname: $(ldd app-rpath | grep mcpgw)"
    if ldd app-static | grep -q libmcpgw; then fail "app-static needs $(ldd app-static | grep libmcpgw)"; fi
    leak_check app-ldpath app-rpath app-static app-vendored

    for app in app-rpath app-static; do
        out=$(./$app "$gateway" "$testserver" 2>&1) || fail "$app: $out"
        case $out in *"answer: hello from a new user; over a session"*) ;; *) fail "$app: $out" ;; esac
        say "$app: ok ($out)"
    done
    for app in app-ldpath app-vendored; do
        out=$(LD_LIBRARY_PATH="$libdir" ./$app "$gateway" "$testserver" 2>&1) || fail "$app: $out"
        say "$app with LD_LIBRARY_PATH: ok"
    done
    say "passed"
}

case ${1:-} in
    prepare) prepare ;;
    test) run_test ;;
    *) echo "usage: go.sh prepare|test" >&2; exit 2 ;;
esac
