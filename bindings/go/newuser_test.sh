#!/bin/sh
# A new user's Go program: a fresh module outside the repository that depends on the Go binding
# (github.com/mcpgw/mcpgw/bindings/go, as `go get` puts it in the module cache: its files only,
# read-only), finds libmcpgw through pkg-config in the installed tree alone (`make install
# PREFIX=...`: lib/pkgconfig/mcpgw.pc and mcpgw-static.pc, bin/mcpgw-gateway), starts the
# installed gateway locally, registers the test MCP server and calls a tool, one-shot and over a
# session. Built four ways: against libmcpgw.so through LD_LIBRARY_PATH, with an rpath, from a
# vendor directory, and statically (-tags mcpgw_static). Fails when a build or a binary reaches
# into the repository.
#
#   sh newuser_test.sh PREFIX TESTSERVER     everything, in temporary directories
#
# It follows tests/newuser's language-script contract (phases `prepare` with the repository as
# the working directory, `test` in a fresh project directory; MCPGW_PREFIX, NEWUSER_STAGE,
# NEWUSER_TESTSERVER, NEWUSER_REPO), so it can serve as tests/newuser/go.sh.
set -eu

say() { printf 'go: %s\n' "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }

prepare() {
    # What `go get` fetches: the module's own files (no build output), read-only.
    stage=${NEWUSER_STAGE:?}/mod
    mkdir -p "$stage"
    (cd bindings/go && find . -name build -prune -o -type f \
        \( -name '*.go' -o -name '*.h' -o -name go.mod -o -name go.sum \) -print) |
        while IFS= read -r f; do
            mkdir -p "$stage/$(dirname "$f")"
            cp "bindings/go/$f" "$stage/$f"
        done
    chmod -R a-w "$stage"
}

# Fails when the repository's path shows up in a binary's run path or resolved libraries.
leak_check() {
    repo=${NEWUSER_REPO:?}
    for bin in "$@"; do
        if readelf -d "$bin" | grep -E 'RUNPATH|RPATH' | grep -F -- "$repo" >/dev/null; then
            fail "$bin has a run path into $repo"
        fi
        if ldd "$bin" 2>&1 | grep -F -- "$repo" >/dev/null; then
            fail "$bin loads from $repo: $(ldd "$bin" | grep -F -- "$repo")"
        fi
    done
}

run_test() {
    for tool in go pkg-config readelf ldd; do
        command -v "$tool" >/dev/null 2>&1 || { echo "SKIPPED: go: needs $tool"; exit 0; }
    done
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
	chunk, err := client.CallTool(ctx, "ts", "echo", map[string]string{"text": "hello from a new user"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.OpenSession(ctx, mcpgw.LocalSession(dir)); err != nil {
		log.Fatal(err)
	}
	again, err := client.CallTool(ctx, "ts", "echo", map[string]string{"text": "over a session"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("libmcpgw %s: answer: %s; %s\n", mcpgw.Version(), chunk.Text(), again.Text())
}
GO

    go build -o app-ldpath .
    CGO_LDFLAGS="-Wl,-rpath,$libdir" go build -o app-rpath .
    go build -tags mcpgw_static -o app-static .
    go mod vendor
    [ -f vendor/github.com/mcpgw/mcpgw/bindings/go/cmcpgw.h ] || fail "go mod vendor left out cmcpgw.h"
    go build -mod=vendor -o app-vendored .

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
    *)
        [ $# -eq 2 ] || { echo "usage: sh newuser_test.sh PREFIX TESTSERVER | prepare | test" >&2; exit 2; }
        here=$(cd "$(dirname "$0")" && pwd)
        repo=$(cd "$here/../.." && pwd)
        work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-newuser-go.XXXXXX")
        trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
        mkdir "$work/stage" "$work/project"
        export MCPGW_PREFIX NEWUSER_STAGE NEWUSER_TESTSERVER NEWUSER_REPO
        MCPGW_PREFIX=$(cd "$1" && pwd) NEWUSER_TESTSERVER=$(realpath "$2")
        NEWUSER_STAGE=$work/stage NEWUSER_REPO=$repo
        (cd "$repo" && prepare)
        cd "$work/project" && run_test
        ;;
esac
