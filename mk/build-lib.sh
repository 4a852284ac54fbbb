#!/bin/sh
# Builds libmcpgw (the package mcpgw-ffi: libmcpgw.so and libmcpgw.a) with cargo and leaves next
# to it, in target/<profile>/, what linking against it takes:
#
#   mcpgw-static-libs.txt  the native libraries libmcpgw.a needs besides itself, one line, as
#                          rustc reports them for this very build (--print native-static-libs);
#                          the static link lines (mcpgw.pc, examples/c, the Go binding) read it
#   libmcpgw.so.<ABI>      a symlink named by the library's SONAME, so a program linked against
#                          libmcpgw.so finds it through an rpath to that directory
#
#   mk/build-lib.sh debug|release
#
# Prints the directory. Cargo decides what is stale; $CARGO and $CARGO_TARGET_DIR are honoured.
set -eu

profile=${1:?usage: build-lib.sh debug|release}
case $profile in
    debug) flag= ;;
    release) flag=--release ;;
    *) echo "build-lib.sh: unknown profile $profile" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cargo=${CARGO:-cargo}
dir=${CARGO_TARGET_DIR:-$root/target}/$profile
case $dir in /*) ;; *) dir=$root/$dir ;; esac
libs=$dir/mcpgw-static-libs.txt

build() {
    # `cargo rustc` hands the extra flag to the library's own rustc call only, so the
    # dependencies are built (and reused) exactly as by `cargo build`.
    # shellcheck disable=SC2086 # $flag is empty or one word
    (cd "$root" && "$cargo" rustc --quiet $flag -p mcpgw-ffi --lib -- \
        --print "native-static-libs=$libs") >&2
}
build
if [ ! -s "$libs" ]; then
    # The library was up to date, so rustc did not run and the file was never written (or
    # was deleted since): rebuild this one package to have it.
    # shellcheck disable=SC2086
    (cd "$root" && "$cargo" clean --quiet $flag -p mcpgw-ffi) >&2
    build
fi
[ -s "$libs" ] || { echo "build-lib.sh: rustc wrote no $libs" >&2; exit 1; }
# rustc writes the line without a newline.
[ "$(tail -c 1 "$libs" | od -An -c | tr -d ' ')" = '\n' ] || echo >> "$libs"

soname=$(readelf -d "$dir/libmcpgw.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ -n "$soname" ] || { echo "build-lib.sh: $dir/libmcpgw.so has no SONAME" >&2; exit 1; }
ln -sfn libmcpgw.so "$dir/$soname"
echo "$dir"
