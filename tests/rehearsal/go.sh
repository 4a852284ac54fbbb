#!/bin/sh
# The Go user of the rehearsal: an empty module, `go get
# github.com/mcpgw/mcpgw/bindings/go@vVERSION` through the rehearsal's module proxy (GOPROXY; no
# checksum database knows a version published there, hence GONOSUMDB), then the README's Go
# example, built with cgo and the prebuilt library the module carries. Afterwards the same
# program from a vendor directory. See README.md for the contract.
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
