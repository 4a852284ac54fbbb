#!/bin/sh
# The Go user of the rehearsal: an empty module, `go get
# github.com/mcpgw/mcpgw/bindings/go@vVERSION` through the rehearsal's module proxy (GOPROXY; no
# checksum database knows a version published there, hence GONOSUMDB), then the README's Go
# example, built with cgo and the prebuilt library the module carries. Afterwards the same
# program from a vendor directory, and the module mcpsdk of the same version: the official Go
# MCP SDK's client calling the container's server through it. See README.md for the contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG="rehearsal go"
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"
need go cc docker readelf ldd
stage=${REHEARSAL_STAGE:?} out=${REHEARSAL_OUT:?} version=${REHEARSAL_VERSION:?}
module=github.com/mcpgw/mcpgw/bindings/go
export GOPROXY="${REHEARSAL_GOPROXY:?}" GONOSUMDB=github.com/mcpgw/mcpgw GOTOOLCHAIN=local GOFLAGS=

logged go mod init example.com/app 2>/dev/null
logged go get "$module@v$version" 2>/dev/null || fail "go get $module@v$version"
cp "$stage/example.go" main.go
logged go build -o app . || fail "go build"
logged ./app > "$out/output" 2>&1 || fail "app: $(cat "$out/output")"
date +%s.%N > "$out/answered"
dir=$(go list -m -f '{{.Dir}}' "$module")
echo "$dir" > "$out/installed"
echo "$dir/gateway/bin/linux-amd64/mcpgw-gateway" > "$out/bundled"

if ldd app | grep -q libmcpgw; then fail "app needs $(ldd app | grep libmcpgw)"; fi
# The README's `go get ...@latest` finds this version through the same proxy.
latest=$(go list -m -f '{{.Version}}' "$module@latest")
[ "$latest" = "v$version" ] || fail "$module@latest is $latest, not v$version"
logged go mod vendor
logged go build -mod=vendor -o app-vendored . || fail "go build -mod=vendor"
leak_check app app-vendored
say "built with the module's prebuilt libmcpgw.a (no libmcpgw.so needed), also from vendor/"

# The module mcpsdk of the same version, in a module of its own: mcpsdk from the same proxy,
# the official SDK and its dependencies from the Go module proxy (no checksum database answers
# on this machine, hence GOSUMDB=off for these steps alone).
sdk=$module/mcpsdk
mkdir sdk-app
cd sdk-app
logged go mod init example.com/sdkapp 2>/dev/null
cat > main.go <<EOS
package main

import (
	"context"
	"fmt"
	"log"

	mcpgw "$module"
	"$module/gateway"
	"$sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx := context.Background()
	client, err := mcpgw.NewClient(mcpgw.Docker("${REHEARSAL_CONTAINER:?}"), mcpgw.WithGatewayPath("/usr/local/bin/mcpgw-gateway"))
	check(err)
	defer client.Close()
	bundled, err := gateway.Path()
	check(err)
	_, err = client.EnsureGatewayBinary(ctx, bundled)
	check(err)
	_, err = client.OpenSession(ctx)
	check(err)
	defer client.StopGateway(ctx)
	check(client.AddMCP(ctx, mcpgw.StdioSpec("everything", "mcp-server-everything")))
	sdk := mcp.NewClient(&mcp.Implementation{Name: "rehearsal", Version: "1"}, nil)
	session, err := sdk.Connect(ctx, mcpsdk.NewTransport(client, "everything"),
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	check(err)
	defer session.Close()
	args := map[string]any{"message": "hello"}
	result, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
	check(err)
	fmt.Println(result.Content[0].(*mcp.TextContent).Text)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
EOS
network="GOPROXY=$GOPROXY,https://proxy.golang.org GOSUMDB=off"
# shellcheck disable=SC2086 # two assignments
logged env $network go get "$sdk@v$version" 2>/dev/null || fail "go get $sdk@v$version"
# shellcheck disable=SC2086
logged env $network go mod tidy 2>/dev/null || fail "go mod tidy"
logged go build -o app-sdk . || fail "go build (mcpsdk)"
answer=$(./app-sdk 2>&1) || fail "app-sdk: $answer"
[ "$answer" = "Echo: hello" ] || fail "the Go SDK's client through mcpsdk answered: $answer"
[ "$(go list -m -f '{{.Version}}' "$sdk")" = "v$version" ] || fail "$sdk is not v$version"
[ "$(go list -m -f '{{.Version}}' "$module")" = "v$version" ] || fail "mcpsdk brought $module $(go list -m -f '{{.Version}}' "$module")"
leak_check app-sdk
say "the official Go MCP SDK's client called the container's server through mcpsdk v$version"
