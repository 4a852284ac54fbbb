#!/bin/sh
# Prints the release's version: the workspace's, from Cargo.toml ([workspace.package] version).
# Every artifact takes its version from here (Makefiles, the rehearsal), or reads Cargo.toml the
# same way (the Python build backend, the tests).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(awk '
    /^\[/ { section = $0; next }
    section == "[workspace.package]" && $1 == "version" { gsub(/[" ]/, "", $3); print $3; exit }
' "$root/Cargo.toml")
[ -n "$version" ] || { echo "version.sh: no version in [workspace.package] of $root/Cargo.toml" >&2; exit 1; }
echo "$version"
