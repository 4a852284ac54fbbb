#!/bin/sh
# A new user: someone who has only the installed tree (`make install PREFIX=...`, or the
# `make dist` tarball unpacked somewhere else) and builds a program of their own, in each
# language, in a directory outside the repository. Run by `make test-newuser` (and `make test`).
#
#   tests/newuser/run.sh [LANG...]      default: every tests/newuser/*.sh but lib.sh and run.sh
#
# 1. installs into a fresh temporary prefix and builds the dist tarball, unpacked elsewhere;
# 2. runs `LANG.sh prepare` with the repository visible (a language takes from it what a user
#    would get from a package registry, into its stage directory);
# 3. runs `LANG.sh test` once against each tree, in a fresh project directory, with a clean
#    environment and, where this runs as root with unshare(1), the repository and its target
#    directory hidden under empty mounts: anything that still needs them fails;
# 4. uninstalls and checks that nothing is left in the prefix.
# The test MCP server (a fixture, not part of the product) is copied out of target/debug.
set -eu

started=$(date +%s)
say() { echo "newuser [+$(($(date +%s) - started))s]: $*"; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}
case $target_dir in /*) ;; *) target_dir=$repo/$target_dir ;; esac
make=${MAKE:-make}

if [ $# -gt 0 ]; then
    langs=$*
else
    langs=$(cd "$repo/tests/newuser" && for f in *.sh; do
        case $f in lib.sh | run.sh) ;; *) echo "${f%.sh}" ;; esac
    done)
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-newuser.XXXXXX")
tmp=$(cd "$tmp" && pwd -P)
case $tmp/ in "$repo"/* | "$target_dir"/*) echo "run.sh: $tmp is inside the repository" >&2; exit 1 ;; esac
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

say "installing into $tmp/prefix"
"$make" -C "$repo" --no-print-directory install PREFIX="$tmp/prefix" > "$tmp/install.log" 2>&1 ||
    { tail -n 30 "$tmp/install.log"; echo "newuser: make install failed" >&2; exit 1; }
say "installed tree:"
(cd "$tmp/prefix" && find . -mindepth 1 | sort | sed 's/^/  /')
"$make" -C "$repo" --no-print-directory dist > "$tmp/dist.log" 2>&1 ||
    { tail -n 30 "$tmp/dist.log"; echo "newuser: make dist failed" >&2; exit 1; }
tarball=$(sed -n 's/^dist: //p' "$tmp/dist.log")
mkdir "$tmp/elsewhere"
tar -C "$tmp/elsewhere" -xzf "$tarball"
unpacked=$(echo "$tmp"/elsewhere/mcpgw-*)
say "$tarball unpacked into $unpacked"

# The scripts and the fixture live outside the repository from here on.
mkdir "$tmp/fixture" "$tmp/stage"
cp -R "$repo/tests/newuser" "$tmp/scripts"
"${CARGO:-cargo}" build --quiet --manifest-path "$repo/Cargo.toml" -p mcpgw-testserver
cp "$target_dir/debug/mcpgw-testserver" "$tmp/fixture/"

# shellcheck source=tests/newuser/isolate.sh
. "$repo/tests/newuser/isolate.sh"
# Hides the repository (and the target directory) when it can: a private mount namespace
# with an empty tmpfs over each.
hide=
if can_hide; then
    hide=yes
else
    say "note: the repository stays visible (hiding it needs root and unshare);" \
        "builds are checked by scanning only"
fi
clean_path=$(path_without "$repo" "$target_dir")

failed=
for lang in $langs; do
    script=$tmp/scripts/$lang.sh
    [ -f "$script" ] || { echo "newuser: no $lang.sh" >&2; exit 2; }
    mkdir -p "$tmp/stage/$lang"
    (cd "$repo" && NEWUSER_REPO=$repo NEWUSER_STAGE=$tmp/stage/$lang sh "$script" prepare) ||
        { echo "newuser: $lang prepare failed" >&2; failed="$failed $lang"; continue; }
    for tree in "$tmp/prefix" "$unpacked"; do
        project=$(mktemp -d "$tmp/project-$lang.XXXXXX")
        say "$lang against $tree"
        set -- env -i PATH="$clean_path" HOME="${HOME:-/root}" TMPDIR="$tmp" LANG=C.UTF-8 \
            MCPGW_PREFIX="$tree" NEWUSER_STAGE="$tmp/stage/$lang" \
            NEWUSER_TESTSERVER="$tmp/fixture/mcpgw-testserver" NEWUSER_REPO="$repo" \
            NEWUSER_TARGET_DIR="$target_dir" NEWUSER_LOG="$project/commands.log" \
            sh "$script" test
        [ -z "$hide" ] || set -- hidden "$repo" "$target_dir" -- "$@"
        if ! (cd "$project" && "$@"); then
            echo "newuser: $lang FAILED against $tree" >&2
            failed="$failed $lang"
        fi
    done
done

say "uninstalling"
"$make" -C "$repo" --no-print-directory uninstall PREFIX="$tmp/prefix" > "$tmp/uninstall.log" 2>&1 ||
    { cat "$tmp/uninstall.log"; echo "newuser: make uninstall failed" >&2; exit 1; }
left=$(find "$tmp/prefix" ! -type d)
if [ -n "$left" ]; then
    echo "newuser: make uninstall left:" >&2
    echo "$left" >&2
    exit 1
fi

if [ -n "$failed" ]; then
    echo "newuser: FAILED:$failed" >&2
    exit 1
fi
say "every language passed (or said SKIPPED and why)"
