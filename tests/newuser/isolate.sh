# shellcheck shell=sh
# Running a new user's commands away from the repository: shared by tests/newuser/run.sh and
# tests/rehearsal/run.sh (sourced; POSIX sh).

# Whether directories can be hidden here: root, with unshare(1) and private mount namespaces.
# (Root bypasses file permissions, so only mounts hide.)
can_hide() {
    [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
        unshare --mount --propagation private true 2>/dev/null
}

# path_without DIR...: $PATH without its entries inside any DIR (and without "/").
path_without() {
    printf '%s' "$PATH" | tr ':' '\n' | {
        out=
        while IFS= read -r entry; do
            keep=yes
            [ "$entry" != / ] || keep=
            for dir in "$@"; do
                case $entry/ in "$dir"/*) keep= ;; esac
            done
            [ -z "$keep" ] || out=$out$entry:
        done
        printf '%s' "${out%:}"
    }
}

# hidden DIR... -- CMD...: runs CMD in a private mount namespace where each DIR that exists is
# an empty tmpfs (a DIR inside one hidden before is gone already and skipped).
hidden() {
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --propagation private sh -c '
        while [ "$1" != -- ]; do
            [ ! -d "$1" ] || mount -t tmpfs -o size=64k,mode=0 mcpgw-hidden "$1" || exit 1
            shift
        done
        shift
        exec "$@"' sh "$@"
}
