#!/bin/sh
# A throwaway sandbox made of Linux namespaces (own network with only `lo` up, own PID and mount
# namespaces, a private /tmp), for the end-to-end tests and the C examples. The host cannot reach
# any port inside; commands get in with `nsenter -t PID -n -p -m -r -w`. The repository (and
# $CARGO_TARGET_DIR) stay visible inside even when they live under /tmp, so the binaries under
# test can run there.
#
#   sandbox.sh check                              exit 0 when such a sandbox can be made here,
#                                                 else print why and exit 1
#   sandbox.sh start DIR [--minimal [--libs-for BINARY]]
#                                                 make one, print the host pid of its init
#   sandbox.sh stop DIR                           end it and remove DIR
#
# --minimal gives the sandbox its own root in DIR/root holding nothing but Debian's static
# busybox (installed with apt-get when missing) and, with --libs-for, the shared libraries that
# BINARY needs (no curl, no python). Needs root.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "sandbox.sh: $*" >&2; exit 1; }

check() {
    [ "$(id -u)" = 0 ] || { echo "needs root (Linux namespaces are made with unshare)"; return 1; }
    for tool in unshare nsenter ip; do
        command -v "$tool" >/dev/null 2>&1 || { echo "needs $tool"; return 1; }
    done
    unshare --net --pid --mount --fork true 2>/dev/null ||
        { echo "unshare --net --pid --mount --fork is refused here"; return 1; }
}

make_root() {
    root=$1 libs_for=$2
    mkdir -p "$root/bin" "$root/tmp" "$root/proc" "$root/dev" "$root/usr/local/bin"
    cp "$(sh "$HERE/busybox.sh")" "$root/bin/busybox"
    for applet in $("$root/bin/busybox" --list); do
        [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done
    for d in null zero random urandom; do : > "$root/dev/$d"; done
    if [ -n "$libs_for" ]; then
        for lib in $(ldd "$libs_for" | grep -o '/[^ ]*'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
    fi
}

start() {
    dir=$1; shift
    minimal= libs_for=
    while [ $# -gt 0 ]; do
        case $1 in
            --minimal) minimal=1 ;;
            --libs-for) libs_for=$2; shift ;;
            *) die "unknown option $1" ;;
        esac
        shift
    done
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    rm -f "$dir/ready"
    if [ -n "$minimal" ]; then
        make_root "$dir/root" "$libs_for"
        inner='mount --make-rprivate / &&
            mount -t proc proc "$1/root/proc" &&
            for d in null zero random urandom; do mount --bind "/dev/$d" "$1/root/dev/$d"; done &&
            mount -t tmpfs -o mode=1777 tmpfs "$1/root/tmp" &&
            ip link set lo up && echo ready > "$1/ready" &&
            exec chroot "$1/root" /bin/sleep 2147483647'
    else
        # Directories under /tmp that must survive the private /tmp are held open (fds 3 and 4)
        # before it is mounted, then bound back at their old paths. "ready" is written only
        # once the private /tmp is in place (through fd 5, DIR itself, which may be under the
        # host's /tmp): a command entering earlier would write into the host's /tmp, hidden
        # from it a moment later.
        inner='mount --make-rprivate / &&
            mount -t proc proc /proc &&
            ip link set lo up &&
            exec 3<"$2" 4<"$3" 5<"$1" &&
            mount -t tmpfs -o mode=1777 tmpfs /tmp &&
            for fd in 3 4; do
                eval "p=\$$((fd - 1))"
                case $p in /tmp/*) mkdir -p "$p" && mount --no-canonicalize --bind "/proc/self/fd/$fd" "$p" ;; esac
            done &&
            echo ready > /proc/self/fd/5/ready &&
            exec 3<&- 4<&- 5<&- sleep 2147483647'
    fi
    repo=$(cd "$(dirname "$0")/.." && pwd)
    target=${CARGO_TARGET_DIR:-$repo/target}
    mkdir -p "$target"
    target=$(cd "$target" && pwd)
    unshare --net --pid --mount --fork --kill-child sh -c "$inner" sh "$dir" "$repo" "$target" \
        </dev/null >"$dir/log" 2>&1 &
    outer=$!
    i=0
    while [ ! -e "$dir/ready" ]; do
        i=$((i + 1))
        if [ $i -gt 100 ] || ! kill -0 "$outer" 2>/dev/null; then
            cat "$dir/log" >&2
            die "the sandbox did not come up"
        fi
        sleep 0.05
    done
    init=$(cat "/proc/$outer/task/$outer/children")
    init=${init%% *}
    echo "$outer" > "$dir/outer.pid"
    echo "$init" > "$dir/init.pid"
    echo "$init"
}

stop() {
    dir=$1
    if [ -f "$dir/init.pid" ]; then
        # The init of a PID namespace takes every process of the namespace with it.
        kill -KILL "$(cat "$dir/init.pid")" 2>/dev/null || true
    fi
    if [ -f "$dir/outer.pid" ]; then
        outer=$(cat "$dir/outer.pid")
        i=0
        while kill -0 "$outer" 2>/dev/null && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
    fi
    rm -rf "$dir"
}

case ${1:-} in
    check) check ;;
    start) [ $# -ge 2 ] || die "usage: sandbox.sh start DIR [--minimal [--libs-for BINARY]]"; shift; start "$@" ;;
    stop) [ $# -eq 2 ] || die "usage: sandbox.sh stop DIR"; stop "$2" ;;
    *) die "usage: sandbox.sh check | start DIR [--minimal [--libs-for BINARY]] | stop DIR" ;;
esac
