#!/bin/sh
# Prints the path of a static busybox (one that loads without any shared library), installing
# Debian's busybox-static with apt-get when there is none. Used by the sandboxes of the tests
# (tests/sandbox.sh --minimal, tests/docker/sandbox.sh image).
set -eu
for b in /bin/busybox /usr/bin/busybox; do
    if [ -x "$b" ] && ! ldd "$b" >/dev/null 2>&1; then echo "$b"; exit 0; fi
done
echo "busybox.sh: installing busybox-static" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q busybox-static >&2 ||
    { apt-get update -q >&2 && apt-get install -y -q busybox-static >&2; } ||
    { echo "busybox.sh: cannot install busybox-static" >&2; exit 1; }
echo /bin/busybox
