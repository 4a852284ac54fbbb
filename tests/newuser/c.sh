#!/bin/sh
# A new user's C program, built with pkg-config from the installed tree alone: linked against
# libmcpgw.so (with an rpath, and without one through LD_LIBRARY_PATH) and against libmcpgw.a,
# each run against the installed gateway. See README.md for the phases and the environment.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG=c # read by lib.sh
export NEWUSER_LANG
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"

case ${1:-} in
    prepare) exit 0 ;; # nothing besides the installed tree
    test) ;;
    *) echo "usage: c.sh prepare|test" >&2; exit 2 ;;
esac

need cc pkg-config readelf ldd
prefix=${MCPGW_PREFIX:?}
testserver=${NEWUSER_TESTSERVER:?}

# What the README tells a C user to do.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
pkg-config --exists mcpgw mcpgw-static || fail "pkg-config finds no mcpgw in $PKG_CONFIG_PATH"
say "pkg-config --cflags mcpgw:               $(pkg-config --cflags mcpgw)"
say "pkg-config --libs mcpgw:                 $(pkg-config --libs mcpgw)"
say "pkg-config --static --libs mcpgw-static: $(pkg-config --static --libs mcpgw-static)"
say "pkg-config --variable=gateway mcpgw:     $(pkg-config --variable=gateway mcpgw)"
gateway=$(pkg-config --variable=gateway mcpgw)
libdir=$(pkg-config --variable=libdir mcpgw)
helpers=$(pkg-config --variable=pkgdatadir mcpgw)
[ -x "$gateway" ] || fail "the gateway variable names no executable: $gateway"
case $(readelf -d "$gateway" 2>&1) in *NEEDED*) fail "$gateway is not static" ;; esac

cp "$here/c/app.c" .
cflags="-std=c11 -O1 -Wall -Wextra -Werror -pedantic"
# shellcheck disable=SC2046,SC2086 # pkg-config output is a list of words
{
    logged cc $cflags $(pkg-config --cflags mcpgw) -I"$helpers" app.c "$helpers/host_loop.c" "$helpers/host_spawn.c" \
        $(pkg-config --libs mcpgw) -Wl,-rpath,"$libdir" -o app-shared
    logged cc $cflags $(pkg-config --cflags mcpgw) -I"$helpers" app.c "$helpers/host_loop.c" "$helpers/host_spawn.c" \
        $(pkg-config --libs mcpgw) -o app-ldpath
    logged cc $cflags $(pkg-config --cflags mcpgw-static) -I"$helpers" app.c "$helpers/host_loop.c" "$helpers/host_spawn.c" \
        $(pkg-config --static --libs mcpgw-static) -o app-static
}

soname=$(readelf -d "$libdir/libmcpgw.so" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
readelf -d app-shared | grep -q "NEEDED.*\[$soname\]" || fail "app-shared does not need $soname"
ldd app-shared | grep -q "$soname => $libdir/$soname" ||
    fail "app-shared does not load $libdir/$soname: $(ldd app-shared | grep mcpgw)"
if ldd app-static | grep -q libmcpgw; then fail "app-static needs $(ldd app-static | grep libmcpgw)"; fi
leak_check app-shared app-ldpath app-static

for app in app-shared app-static; do
    out=$(./$app "$gateway" "$testserver") || fail "$app: $out"
    case $out in *"answer: hello from a new user"*) ;; *) fail "$app: $out" ;; esac
    say "$app: ok ($(echo "$out" | tail -n 1))"
done
out=$(LD_LIBRARY_PATH="$libdir" ./app-ldpath "$gateway" "$testserver") || fail "app-ldpath: $out"
say "app-ldpath with LD_LIBRARY_PATH: ok"
say "passed"
