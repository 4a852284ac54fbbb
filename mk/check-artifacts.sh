#!/bin/sh
# Checks the artifacts of `make artifacts` together, as a user would receive them (each one
# unpacked from its file), and writes DIST/SHA256SUMS:
#
#   - every artifact is of the release's version (mk/version.sh): the C tarball's name and .pc
#     files, the npm package.json, the wheel's and sdist's metadata, the Go module's version;
#   - the Go module mcpsdk is of that version too and requires the binding's (no replace);
#   - every binding expects the ABI version of the header (include/mcpgw.h), and every library
#     they carry answers that ABI version and the release's version when loaded (the shared
#     libraries with dlopen, the Go module's libmcpgw.a linked into a C program);
#   - the header the Go module carries is the repository's, and its libmcpgw.a is the tarball's;
#   - every package carries the same static gateway (no program interpreter: it runs in images
#     without a libc), which says it is of the release's version; the C tarball, the npm package
#     (its bin) and the wheel carry the same static host endpoint `mcpgw` beside it;
#   - the sdist holds no native file.
#
#   mk/check-artifacts.sh DIST
#
# Prints one line per artifact (file and size), then `artifacts: VERSION (ABI N) consistent`.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
dist=$(cd "${1:?usage: check-artifacts.sh DIST}" && pwd)
version=$(sh "$root/mk/version.sh")
abi=$(sed -n 's/^#define MCPGW_ABI_VERSION \([0-9]*\)$/\1/p' "$root/include/mcpgw.h")
[ -n "$abi" ] || { echo "check-artifacts: no MCPGW_ABI_VERSION in include/mcpgw.h" >&2; exit 1; }
module=github.com/mcpgw/mcpgw/bindings/go
cc=${CC:-cc}

fail() { echo "check-artifacts: $*" >&2; exit 1; }
one() {
    # The one file matching a pattern, or a failure naming what was found.
    # shellcheck disable=SC2086 # $1 is a pattern, to expand
    set -- $1
    if [ $# -ne 1 ] || [ ! -f "$1" ]; then fail "expected one file, found: $*"; fi
    echo "$1"
}
size() { awk -v b="$(wc -c < "$1")" 'BEGIN { if (b < 1048576) printf "%.0f KiB", b / 1024; else printf "%.1f MiB", b / 1048576 }'; }
same() { cmp -s "$1" "$2" || fail "$1 and $2 differ"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-artifacts.XXXXXX")
trap 'rm -rf "$work"' EXIT

tarball=$(one "$dist/mcpgw-$version-x86_64-linux-gnu.tar.gz")
npm=$(one "$dist/npm/mcpgw-$version.tgz")
wheel=$(one "$dist/python/mcpgw_client-$version-py3-none-manylinux_2_*_x86_64.whl")
sdist=$(one "$dist/python/mcpgw_client-$version.tar.gz")
gov=$dist/goproxy/$module/@v
gozip=$(one "$gov/v$version.zip")
sdkv=$dist/goproxy/$module/mcpsdk/@v
sdkzip=$(one "$sdkv/v$version.zip")

mkdir "$work/c" "$work/npm" "$work/wheel" "$work/sdist" "$work/go"
tar -C "$work/c" -xzf "$tarball"
tar -C "$work/npm" -xzf "$npm"
tar -C "$work/sdist" -xzf "$sdist"
python3 -m zipfile -e "$wheel" "$work/wheel"
python3 -m zipfile -e "$gozip" "$work/go"
c=$work/c/mcpgw-$version-x86_64-linux-gnu
n=$work/npm/package
w=$work/wheel
g=$work/go/$module@v$version

# Versions.
for pc in mcpgw mcpgw-static; do
    grep -qx "Version: $version" "$c/lib/pkgconfig/$pc.pc" || fail "$pc.pc is not of version $version"
done
[ "$(node -p "require(process.argv[1]).version" "$n/package.json")" = "$version" ] ||
    fail "the npm package.json is not of version $version"
for field in "Name: mcpgw-client" "Version: $version"; do
    grep -qx "$field" "$w/mcpgw_client-$version.dist-info/METADATA" ||
        fail "the wheel's METADATA is not mcpgw-client $version (no '$field')"
done
grep -qx "Version: $version" "$work/sdist/mcpgw_client-$version/PKG-INFO" ||
    fail "the sdist's PKG-INFO is not of version $version"
grep -q "\"Version\":\"v$version\"" "$gov/v$version.info" || fail "v$version.info names another version"
grep -qx "v$version" "$gov/list" || fail "the module proxy's list lacks v$version"
same "$gov/v$version.mod" "$g/go.mod"
# mcpsdk: the same version, requiring this version of the binding, not the checkout's.
grep -qx "v$version" "$sdkv/list" || fail "the module proxy's list of mcpsdk lacks v$version"
grep -q "^[[:space:]]*$module v$version\$" "$sdkv/v$version.mod" || fail "mcpsdk's go.mod does not require $module v$version"
! grep -q "^replace\|=>" "$sdkv/v$version.mod" || fail "mcpsdk's go.mod replaces a module: $(grep "=>" "$sdkv/v$version.mod")"
python3 -m zipfile -l "$sdkzip" | grep -q "$module/mcpsdk@v$version/transport.go" || fail "mcpsdk's zip has no transport.go"

# What each binding expects.
grep -qx "export const ABI_VERSION = $abi;" "$n/src/ffi.js" || fail "the npm package expects another ABI than $abi"
grep -qx "ABI_VERSION = $abi" "$w/mcpgw_client/_native.py" || fail "the wheel expects another ABI than $abi"
grep -q "^// #if MCPGW_ABI_VERSION != $abi\$" "$g/abi.go" || fail "the Go module expects another ABI than $abi"
same "$root/include/mcpgw.h" "$c/include/mcpgw.h"
same "$root/include/mcpgw.h" "$g/prebuilt/include/mcpgw.h"
same "$c/lib/libmcpgw.a" "$g/prebuilt/linux-amd64/libmcpgw.a"

# What each library answers: dlopen for the shared ones, a static link for the archive.
cat > "$work/ask.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    const char *(*version)(void) = (const char *(*)(void))dlsym(lib, "mcpgw_version");
    unsigned (*abi)(void) = (unsigned (*)(void))dlsym(lib, "mcpgw_abi_version");
    if (!version || !abi) { fprintf(stderr, "no mcpgw_version or mcpgw_abi_version\n"); return 1; }
    printf("%s %u\n", version(), abi());
    return argc == 2 ? 0 : 1;
}
EOF
cat > "$work/ask_static.c" <<'EOF'
#include <mcpgw.h>
#include <stdio.h>
int main(void) { printf("%s %u\n", mcpgw_version(), mcpgw_abi_version()); return 0; }
EOF
"$cc" -o "$work/ask" "$work/ask.c" -ldl
# shellcheck disable=SC2046 # the native libraries are a list of words
"$cc" -I"$g/prebuilt/include" -o "$work/ask_static" "$work/ask_static.c" "$g/prebuilt/linux-amd64/libmcpgw.a" \
    $(sed -n 's|^// #cgo LDFLAGS: ||p' "$g/link_syslibs.go")
for lib in "$c/lib/libmcpgw.so.$version" "$n/prebuilds/linux-x64/libmcpgw.so" "$w/mcpgw_client/_lib/libmcpgw.so"; do
    said=$("$work/ask" "$lib") || fail "$lib does not load: $said"
    [ "$said" = "$version $abi" ] || fail "$lib says version and ABI '$said', not '$version $abi'"
done
said=$("$work/ask_static")
[ "$said" = "$version $abi" ] || fail "the Go module's libmcpgw.a says '$said', not '$version $abi'"

# One gateway everywhere, one host endpoint beside it (not in the Go module).
for name in mcpgw-gateway mcpgw; do
    bin=$c/bin/$name
    if readelf -l "$bin" | grep -q INTERP; then fail "$bin has a program interpreter: it is not static"; fi
    [ "$("$bin" --version)" = "$name $version" ] || fail "$bin --version says $("$bin" --version)"
    same "$bin" "$n/gateway/linux-x64/$name"
    same "$bin" "$w/mcpgw_client/_bin/$name"
done
same "$c/bin/mcpgw-gateway" "$g/gateway/bin/linux-amd64/mcpgw-gateway"
[ "$(node -p "require(process.argv[1]).bin.mcpgw" "$n/package.json")" = gateway/linux-x64/mcpgw ] ||
    fail "the npm package's bin mcpgw is not gateway/linux-x64/mcpgw"

# The sdist is sources only.
natives=$(find "$work/sdist" -name '*.so*' -o -name '*.a' -o -name mcpgw-gateway -o -name mcpgw -type f)
[ -z "$natives" ] || fail "the sdist holds native files: $natives"

(cd "$dist" && find . -type f ! -name SHA256SUMS | sed 's|^\./||' | sort | xargs sha256sum) > "$dist/SHA256SUMS"
for f in "$tarball" "$npm" "$wheel" "$sdist" "$gozip" "$sdkzip"; do
    printf '  %-72s %s\n' "${f#"$dist"/}" "$(size "$f")"
done
echo "artifacts: $version (ABI $abi) consistent; checksums in ${dist#"$root"/}/SHA256SUMS"
