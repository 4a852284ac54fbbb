#!/bin/sh
# Real Docker sandboxes for the tests: a busybox-only image built offline (nothing is pulled)
# holding the static gateway and test server, and containers without a network that commands
# enter with `docker exec` / `docker exec -i`. See tests/docker/README.md.
#
#   sandbox.sh check                  exit 0 when a docker daemon answers, else print why, exit 1
#   sandbox.sh image [--gateway PATH | --no-gateway] [--testserver PATH] [--node]
#                                     build the test image unless one with the same content
#                                     exists; print its name (mcpgw-test:<content hash>); with
#                                     --node it also holds this machine's node, the libraries it
#                                     loads, and tests/servers' npm servers (mcpgw-test-node:...),
#                                     server-everything also as the command mcp-server-everything;
#                                     --no-gateway leaves the gateway out (for installing it)
#                                     --daemon KIND=PATH adds a provider's in-sandbox daemon (e2b:
#                                     E2B's envd at /usr/local/bin/envd; daytona: Daytona's toolbox
#                                     daemon at /usr/local/bin/daytona-daemon) with what it needs
#                                     beside it: this machine's bash and the libraries it loads, a
#                                     `user` account with its home, /etc/shells (mcpgw-test-KIND:...)
#                                     --bash adds bash alone (OpenSandbox's pipe sessions need it)
#                                     --bin PATH adds a static program at /usr/local/bin/NAME (its
#                                     file name; repeatable), e.g. the conformance suite's server
#   sandbox.sh execd-image DIR         OpenSandbox's execd image (DIR/execd, DIR/bootstrap.sh and
#                                     busybox, whose `tail` the server runs in it), for an
#                                     opensandbox-server's execd_image (mcpgw-test-execd:...)
#   sandbox.sh start IMAGE [NAME] [--no-init] [-- DOCKER_RUN_OPTION...]
#                                     run a container (no network, docker's init as PID 1
#                                     unless --no-init), print its id
#   sandbox.sh stop NAME|ID...        remove containers forcefully, quietly
#   sandbox.sh cleanup [--images]     remove every container the tests started (and with
#                                     --images every test image)
#
# Containers and images carry the label mcpgw-test=1. $DOCKER names the CLI (default docker).
set -eu

DOCKER=${DOCKER:-docker}
LABEL=mcpgw-test
REPO=$(cd "$(dirname "$0")/../.." && pwd)
STATIC_DIR=${CARGO_TARGET_DIR:-$REPO/target}/x86_64-unknown-linux-gnu/release

die() { echo "sandbox.sh: $*" >&2; exit 1; }

check() {
    command -v "$DOCKER" >/dev/null 2>&1 || { echo "needs the docker CLI ($DOCKER is not on PATH)"; return 1; }
    # A wedged daemon must not hang the caller: bounded when timeout(1) exists.
    bound=
    command -v timeout >/dev/null 2>&1 && bound="timeout 20"
    # shellcheck disable=SC2086 # $bound is empty or two words
    if ! err=$($bound "$DOCKER" version --format '{{.Server.Version}}' 2>&1 >/dev/null); then
        echo "no docker daemon answers: $(printf '%s\n' "${err:-timed out}" | head -n 1)"
        return 1
    fi
}

# A binary for a busybox-only image: it must load without any shared library.
require_static() {
    [ -f "$1" ] || die "$1 is missing (make static builds it)"
    [ -x "$1" ] || die "$1 is not executable"
    if ldd "$1" 2>&1 | grep -q '=>'; then
        die "$1 is dynamically linked; the image has no libc (make static builds it statically)"
    fi
}

image() {
    gateway=$STATIC_DIR/mcpgw-gateway testserver=$STATIC_DIR/mcpgw-testserver node= daemon= bash= bins=
    while [ $# -gt 0 ]; do
        case $1 in
            --node) node=$(command -v node) || die "--node: no node on PATH" ;;
            --bash) bash=$(command -v bash) || die "--bash: no bash on PATH" ;;
            --daemon)
                [ $# -ge 2 ] || die "--daemon needs KIND=PATH"; daemon=$2; shift
                case ${daemon%%=*} in e2b|daytona) ;; *) die "--daemon: unknown kind ${daemon%%=*}" ;; esac
                [ -x "${daemon#*=}" ] || die "--daemon: ${daemon#*=} is not an executable file"
                require_static "${daemon#*=}"
                bash=$(command -v bash) || die "--daemon: no bash on PATH" ;;
            --bin)
                [ $# -ge 2 ] || die "--bin needs a path"
                case $2 in *[[:space:]]*) die "--bin: $2 has a space in its path" ;; esac
                [ -x "$2" ] || die "--bin: $2 is not an executable file"
                require_static "$2"
                bins="$bins $2"; shift ;;
            --gateway) [ $# -ge 2 ] || die "--gateway needs a path"; gateway=$2; shift ;;
            --gateway=*) gateway=${1#*=} ;;
            --no-gateway) gateway= ;;
            --testserver) [ $# -ge 2 ] || die "--testserver needs a path"; testserver=$2; shift ;;
            --testserver=*) testserver=${1#*=} ;;
            *) die "unknown option $1" ;;
        esac
        shift
    done
    [ -z "$gateway" ] || require_static "$gateway"
    require_static "$testserver"
    busybox=$(sh "$REPO/tests/busybox.sh")
    servers=$REPO/tests/servers
    if [ -n "$node" ]; then
        [ -f "$servers/node_modules/.package-lock.json" ] ||
            die "--node: $servers/node_modules is missing (make deps installs it)"
        node_inputs="$node $servers/node_modules/.package-lock.json"
    else
        node_inputs=
    fi
    # The tag covers every input, this script (the image layout) included.
    # shellcheck disable=SC2086 # $node_inputs and $bins are lists of paths without spaces
    hash=$({
        for f in "$busybox" ${gateway:+"$gateway"} "$testserver" "$0" $node_inputs ${bash:+"$bash"} \
            ${daemon:+"${daemon#*=}"} $bins; do sha256sum < "$f"; done
        echo "gateway:${gateway:+yes} daemon:${daemon%%=*}"
        for f in $bins; do basename "$f"; done
    } | sha256sum | cut -c1-12)
    name=$LABEL${node:+-node}${daemon:+-${daemon%%=*}}${bins:+-bin}:$hash
    if "$DOCKER" image inspect "$name" >/dev/null 2>&1; then echo "$name"; return; fi

    umask 022
    work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-image.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    root=$work/root
    mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin" "$root/usr/local/bin" \
        "$root/etc" "$root/root" "$root/proc" "$root/sys" "$root/dev" "$root/tmp" "$root/var/tmp"
    chmod 1777 "$root/tmp" "$root/var/tmp"
    chmod 700 "$root/root"
    cp "$busybox" "$root/bin/busybox"
    for applet in $("$busybox" --list-full); do
        case $applet in */*) ;; *) continue ;; esac # linuxrc
        [ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
    done
    if [ -n "$gateway" ]; then
        cp "$gateway" "$root/usr/local/bin/mcpgw-gateway"
        chmod 755 "$root/usr/local/bin/mcpgw-gateway"
    fi
    cp "$testserver" "$root/usr/local/bin/mcpgw-testserver"
    chmod 755 "$root/usr/local/bin/mcpgw-testserver"
    for f in $bins; do
        cp "$f" "$root/usr/local/bin/$(basename "$f")"
        chmod 755 "$root/usr/local/bin/$(basename "$f")"
    done
    if [ -n "$node" ]; then
        cp "$node" "$root/usr/local/bin/node"
        for lib in $(ldd "$node" | grep -o '/[^ ]*'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
        mkdir -p "$root/opt/mcp-servers"
        cp -R "$servers/node_modules" "$root/opt/mcp-servers/node_modules"
        # The command `npm install -g @modelcontextprotocol/server-everything` gives.
        ln -s /opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js \
            "$root/usr/local/bin/mcp-server-everything"
    fi
    if [ -n "$bash" ]; then
        rm -f "$root/bin/bash"
        cp "$bash" "$root/bin/bash"
        for lib in $(ldd "$bash" | grep -o '/[^ ]*'); do
            mkdir -p "$root$(dirname "$lib")"
            cp -L "$lib" "$root$lib"
        done
        printf '/bin/sh\n/bin/bash\n' > "$root/etc/shells"
    fi
    if [ -n "$daemon" ]; then
        case ${daemon%%=*} in
            e2b) cp "${daemon#*=}" "$root/usr/local/bin/envd" ;;
            daytona) cp "${daemon#*=}" "$root/usr/local/bin/daytona-daemon" ;;
        esac
        chmod 755 "$root/usr/local/bin/"*
        # The account E2B's SDK names by default (`user`), with a home; the daemons run as root.
        mkdir -p "$root/home/user" "$root/workspace"
        printf 'user:x:1000:1000:user:/home/user:/bin/bash\n' > "$work/users"
    fi
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' > "$root/etc/hosts"
    printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
        > "$root/etc/passwd"
    printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
    if [ -n "$daemon" ]; then
        cat "$work/users" >> "$root/etc/passwd"
        printf 'user:x:1000:\n' >> "$root/etc/group"
    fi
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$work/rootfs.tar" .
    "$DOCKER" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change "LABEL $LABEL=1" \
        --change 'CMD ["sleep", "infinity"]' \
        "$work/rootfs.tar" "$name" >/dev/null
    echo "$name"
}

execd_image() {
    dir=${1:-}
    [ -n "$dir" ] || die "usage: sandbox.sh execd-image DIR"
    require_static "$dir/execd"
    [ -f "$dir/bootstrap.sh" ] || die "$dir/bootstrap.sh is missing"
    busybox=$(sh "$REPO/tests/busybox.sh")
    hash=$(for f in "$busybox" "$dir/execd" "$dir/bootstrap.sh" "$0"; do sha256sum < "$f"; done |
        sha256sum | cut -c1-12)
    name=$LABEL-execd:$hash
    if "$DOCKER" image inspect "$name" >/dev/null 2>&1; then echo "$name"; return; fi
    umask 022
    work=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-image.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    root=$work/root
    mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/proc" "$root/sys" "$root/dev"
    chmod 1777 "$root/tmp"
    cp "$busybox" "$root/bin/busybox"
    for applet in $("$busybox" --list); do
        [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
    done
    cp "$dir/execd" "$root/execd"
    cp "$dir/bootstrap.sh" "$root/bootstrap.sh"
    chmod 755 "$root/execd" "$root/bootstrap.sh"
    printf 'root:x:0:0:root:/root:/bin/sh\n' > "$root/etc/passwd"
    printf 'root:x:0:\n' > "$root/etc/group"
    tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$work/rootfs.tar" .
    "$DOCKER" import --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change "LABEL $LABEL=1" \
        --change 'ENTRYPOINT ["/execd"]' "$work/rootfs.tar" "$name" >/dev/null
    echo "$name"
}

start() {
    image='' name='' init=--init
    while [ $# -gt 0 ]; do
        case $1 in
            --no-init) init= ;;
            --) shift; break ;;
            -*) die "unknown option $1" ;;
            *)
                if [ -z "$image" ]; then image=$1
                elif [ -z "$name" ]; then name=$1
                else die "unexpected argument $1"; fi ;;
        esac
        shift
    done
    [ -n "$image" ] || die "usage: sandbox.sh start IMAGE [NAME] [--no-init] [-- DOCKER_RUN_OPTION...]"
    # What is left in "$@" are extra `docker run` options.
    # shellcheck disable=SC2086 # $init is empty or one word
    exec "$DOCKER" run -d --pull never --network none $init --label "$LABEL=1" ${name:+--name "$name"} "$@" \
        "$image" sleep infinity
}

stop() {
    "$DOCKER" rm -f -v "$@" >/dev/null 2>&1 || true
}

cleanup() {
    ids=$("$DOCKER" ps -aq --filter "label=$LABEL") || die "cannot list containers"
    if [ -n "$ids" ]; then
        # shellcheck disable=SC2086 # one id per word
        "$DOCKER" rm -f -v $ids >/dev/null
        echo "sandbox.sh: removed $(echo "$ids" | wc -l) container(s)" >&2
    fi
    [ "${1:-}" = --images ] || return 0
    images=$("$DOCKER" images -q --filter "label=$LABEL" | sort -u) || die "cannot list images"
    if [ -n "$images" ]; then
        # shellcheck disable=SC2086 # one id per word
        "$DOCKER" rmi -f $images >/dev/null
        echo "sandbox.sh: removed $(echo "$images" | wc -l) image(s)" >&2
    fi
}

case ${1:-} in
    check) [ $# -eq 1 ] || die "usage: sandbox.sh check"; check ;;
    image) shift; image "$@" ;;
    execd-image) shift; execd_image "$@" ;;
    start) shift; start "$@" ;;
    stop) [ $# -ge 2 ] || die "usage: sandbox.sh stop NAME|ID..."; shift; stop "$@" ;;
    cleanup) [ $# -eq 1 ] || [ "$2" = --images ] || die "usage: sandbox.sh cleanup [--images]"; cleanup "${2:-}" ;;
    *) die "usage: sandbox.sh check | image [--gateway PATH | --no-gateway] [--testserver PATH] [--node] [--bash] [--daemon KIND=PATH] | execd-image DIR | start IMAGE [NAME] [--no-init] [-- DOCKER_RUN_OPTION...] | stop NAME|ID... | cleanup [--images]" ;;
esac
