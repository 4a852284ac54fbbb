# Shared by the tests/newuser language scripts (sourced; POSIX sh). See README.md.

say() { printf '%s: %s\n' "${NEWUSER_LANG:-newuser}" "$*"; }
fail() { say "FAILED: $*" >&2; exit 1; }
skip() { echo "SKIPPED: ${NEWUSER_LANG:-newuser}: $*"; exit 0; }

# Skips the language when one of its tools is missing.
need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || skip "needs $tool"
    done
}

# Runs a command and appends it, as run, to the log that leak_check reads.
logged() {
    printf '%s\n' "$*" >> "${NEWUSER_LOG:?}"
    "$@"
}

# Fails when the repository's path (or its target directory's) shows up in the commands
# logged so far, or in the RUNPATH, RPATH or resolved libraries of the given binaries:
# whatever they need must come from the installed tree.
leak_check() {
    for path in "${NEWUSER_REPO:?}" ${NEWUSER_TARGET_DIR:+"$NEWUSER_TARGET_DIR"}; do
        if grep -F -- "$path" "${NEWUSER_LOG:?}" >/dev/null; then
            fail "a build command names $path: $(grep -F -- "$path" "$NEWUSER_LOG" | head -n 1)"
        fi
        for bin in "$@"; do
            if readelf -d "$bin" | grep -E 'RUNPATH|RPATH' | grep -F -- "$path" >/dev/null; then
                fail "$bin has a run path into $path"
            fi
            if ldd "$bin" 2>&1 | grep -F -- "$path" >/dev/null; then
                fail "$bin loads from $path: $(ldd "$bin" | grep -F -- "$path")"
            fi
        done
    done
}
