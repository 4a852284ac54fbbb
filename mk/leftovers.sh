#!/bin/sh
# The project's processes left running by the tests: `make test` records the ones running
# before it starts and, after every suite, fails listing those that appeared since and are still
# running (a test that starts a gateway, a server or an endpoint stops it, also when it fails).
#
#   leftovers.sh snapshot FILE    record the project's processes running now
#   leftovers.sh check FILE       list the ones not in FILE; exit 1 when there are any
#
# The project's processes: mcpgw, mcpgw-gateway and mcpgw-testserver (by their command name),
# wherever they run (processes in containers included: this PID namespace sees them).
set -eu

ours() {
    for stat in /proc/[0-9]*/stat; do
        pid=${stat#/proc/}; pid=${pid%/stat}
        comm=$(sed -n 's/^[0-9]* (\(.*\)) [^Z].*/\1/p' "$stat" 2>/dev/null) || continue
        case $comm in
            mcpgw|mcpgw-gateway|mcpgw-testserve*) echo "$pid" ;;
        esac
    done
}

case ${1:-} in
    snapshot) ours >"$2" ;;
    check)
        left=
        for pid in $(ours); do
            grep -qx "$pid" "$2" || left="$left $pid"
        done
        [ -z "$left" ] && { echo "leftovers: none of the project's processes left running"; exit 0; }
        echo "leftovers: the tests left these running:"
        for pid in $left; do
            printf '  %s: %s\n' "$pid" "$(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null)"
        done
        exit 1 ;;
    *) echo "usage: leftovers.sh snapshot FILE | check FILE" >&2; exit 2 ;;
esac
