#!/bin/sh
# The release rehearsal (`make rehearsal`, part of `make test`; see README.md): the artifacts of
# `make artifacts` are published to registries started here, on loopback, for this run only
# (verdaccio for npm, pypiserver for Python, a module proxy directory for Go; the C tarball is a
# download), then installed from there into empty projects outside the repository, with the
# repository, its target directory and the Rust toolchain hidden, each followed by the README's
# example for its language: a first tool call into a fresh Docker container, whose gateway the
# package's own ensure_gateway_binary installs. One line per language:
#
#   rehearsal LANG: installed from REGISTRY in S s, SIZE MiB, first call ok
#
# S is the time from the empty project to the first call's answer, SIZE what the install put on
# disk (for npm, node_modules with koffi). A last line gives the baseline: what one docker exec
# costs at that moment, and the load.
#
#   tests/rehearsal/run.sh [LANG...]      default: python node go c
set -eu

VERDACCIO_VERSION=6.8.0 # the newest that runs on Node 20
PYPISERVER_VERSION=2.4.2
TWINE_VERSION=7.0.0
# The unrelated PyPI project of the name mcpgw, installed beside mcpgw-client to show no clash.
OTHER_MCPGW=mcpgw==0.1.0

started=$(date +%s)
say() { echo "rehearsal [+$(($(date +%s) - started))s]: $*"; }
fail() { echo "rehearsal: FAILED: $*" >&2; exit 1; }

repo=$(cd "$(dirname "$0")/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}
case $target_dir in /*) ;; *) target_dir=$repo/$target_dir ;; esac
sandbox=$repo/tests/docker/sandbox.sh
dist=$repo/dist
tools=$target_dir/rehearsal
langs=${*:-python node go c}
version=$(sh "$repo/mk/version.sh")
# shellcheck source=tests/newuser/isolate.sh
. "$repo/tests/newuser/isolate.sh"

if ! reason=$(sh "$sandbox" check); then
    echo "SKIPPED: rehearsal: every language ends with a call into a Docker container: $reason"
    exit 0
fi
command -v ss >/dev/null || fail "needs ss (iproute2) to find the ports the registries listen on"

# The artifacts, as `make artifacts` left them, and a check that a stale one would be caught.
sh "$repo/mk/check-artifacts.sh" "$dist" >/dev/null || fail "dist/ is not what make artifacts builds (run it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-rehearsal.XXXXXX")
tmp=$(cd "$tmp" && pwd -P)
case $tmp/ in "$repo"/* | "$target_dir"/*) fail "$tmp is inside the repository" ;; esac
pids='' containers=''
cleanup() {
    for pid in $pids; do kill "$pid" 2>/dev/null || true; done
    for pid in $pids; do wait "$pid" 2>/dev/null || true; done
    # shellcheck disable=SC2086 # one id per word
    [ -z "$containers" ] || sh "$sandbox" stop $containers
    # The Go module cache is read-only.
    chmod -R u+w "$tmp" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp -R "$dist" "$tmp/stale"
(
    cd "$tmp/stale/npm" && mkdir x && tar -C x -xzf "mcpgw-$version.tgz"
    cd x/package && npm pkg set version=0.0.0-stale && cd .. && tar -czf "../mcpgw-$version.tgz" package
)
if sh "$repo/mk/check-artifacts.sh" "$tmp/stale" > "$tmp/stale.log" 2>&1; then
    fail "mk/check-artifacts.sh passed an npm package of another version"
fi
grep -q "the npm package.json is not of version $version" "$tmp/stale.log" ||
    fail "mk/check-artifacts.sh did not say why: $(cat "$tmp/stale.log")"
rm -rf "$tmp/stale" "$tmp/stale.log"
say "artifacts of $version checked (and a stale npm package refused)"

# The registries' own software, installed once into the target directory.
verdaccio_dir=$tools/verdaccio-$VERDACCIO_VERSION
if [ ! -f "$verdaccio_dir/.installed" ]; then
    say "installing verdaccio $VERDACCIO_VERSION into $verdaccio_dir"
    rm -rf "$verdaccio_dir"
    npm install --prefix "$verdaccio_dir" --no-audit --no-fund --loglevel=error \
        "verdaccio@$VERDACCIO_VERSION" > "$tmp/verdaccio-install.log" 2>&1 ||
        { tail -n 20 "$tmp/verdaccio-install.log"; fail "npm install verdaccio@$VERDACCIO_VERSION"; }
    touch "$verdaccio_dir/.installed"
fi
pypi_dir=$tools/pypiserver-$PYPISERVER_VERSION-twine-$TWINE_VERSION
if [ ! -f "$pypi_dir/.installed" ]; then
    say "installing pypiserver $PYPISERVER_VERSION and twine $TWINE_VERSION into $pypi_dir"
    rm -rf "$pypi_dir"
    { python3 -m venv "$pypi_dir" &&
        "$pypi_dir/bin/pip" install --quiet --disable-pip-version-check \
            "pypiserver==$PYPISERVER_VERSION" "twine==$TWINE_VERSION"; } > "$tmp/pypi-install.log" 2>&1 ||
        { cat "$tmp/pypi-install.log"; fail "pip install pypiserver twine"; }
    touch "$pypi_dir/.installed"
fi
other_dir=$tools/other-mcpgw
if ! ls "$other_dir"/mcpgw-*.whl >/dev/null 2>&1; then
    "$pypi_dir/bin/pip" download --quiet --disable-pip-version-check --no-deps --only-binary :all: \
        -d "$other_dir" "$OTHER_MCPGW" > "$tmp/other.log" 2>&1 ||
        say "note: cannot download $OTHER_MCPGW from PyPI ($(tail -n 1 "$tmp/other.log")): the clash check is left out"
fi

# A fresh container per language: busybox, node and server-everything, no gateway.
image=$(sh "$sandbox" image --no-gateway --node) || fail "cannot build the rehearsal image"

# serve LOG CMD...: starts CMD (which listens on an ephemeral port of 127.0.0.1) and sets $port
# to the port it listens on once it does.
serve() {
    log=$1
    shift
    "$@" > "$log" 2>&1 &
    pid=$!
    pids="$pids $pid"
    deadline=$(($(date +%s) + 60))
    while :; do
        port=$(ss -Hltnp | awk -v p="pid=$pid," 'index($0, p) { n = split($4, a, ":"); print a[n]; exit }')
        [ -z "$port" ] || return 0
        kill -0 "$pid" 2>/dev/null || { tail -n 20 "$log" >&2; fail "$1 exited before listening"; }
        [ "$(date +%s)" -lt "$deadline" ] || { tail -n 20 "$log" >&2; fail "$1 did not listen within 60 s"; }
        sleep 0.1
    done
}

mkdir -p "$tmp/registry/verdaccio" "$tmp/registry/pypi"
uplink=$(npm config get registry)
# The mcpgw package only from what is published here; its dependencies through to npm's registry.
cat > "$tmp/registry/verdaccio/config.yaml" <<EOF
storage: $tmp/registry/verdaccio/storage
auth:
  htpasswd:
    file: $tmp/registry/verdaccio/htpasswd
    max_users: 1
uplinks:
  upstream:
    url: $uplink
packages:
  'mcpgw':
    access: \$all
    publish: \$authenticated
  '**':
    access: \$all
    proxy: upstream
log: { type: stdout, format: pretty, level: warn }
EOF
serve "$tmp/registry/verdaccio.log" "$verdaccio_dir/node_modules/.bin/verdaccio" \
    --config "$tmp/registry/verdaccio/config.yaml" --listen 127.0.0.1:0
npm_port=$port npm_registry=http://127.0.0.1:$port/
serve "$tmp/registry/pypiserver.log" "$pypi_dir/bin/pypi-server" run -i 127.0.0.1 -p 0 -a . -P . \
    "$tmp/registry/pypi"
pypi=http://127.0.0.1:$port
say "verdaccio $VERDACCIO_VERSION at $npm_registry, pypiserver $PYPISERVER_VERSION at $pypi/"

# Publishing, as a maintainer would: a registry user (what `npm adduser` asks for), npm publish;
# twine check and twine upload; the module proxy directory copied where the proxy serves from.
token=$(printf '{"name":"rehearsal","password":"%s"}' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" |
    curl -sf -X PUT -H 'Content-Type: application/json' --data-binary @- \
        "${npm_registry}-/user/org.couchdb.user:rehearsal" |
    node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).token))') ||
    fail "cannot create a user in verdaccio"
(umask 077 && printf 'registry=%s\n//127.0.0.1:%s/:_authToken=%s\nupdate-notifier=false\n' \
    "$npm_registry" "$npm_port" "$token" > "$tmp/publish.npmrc")
npm publish --userconfig "$tmp/publish.npmrc" "$dist/npm/mcpgw-$version.tgz" > "$tmp/npm-publish.log" 2>&1 ||
    { cat "$tmp/npm-publish.log"; fail "npm publish"; }
[ "$(npm view --userconfig "$tmp/publish.npmrc" "mcpgw@$version" version)" = "$version" ] ||
    fail "verdaccio does not serve mcpgw@$version after npm publish"
"$pypi_dir/bin/twine" check --strict "$dist"/python/* > "$tmp/twine.log" 2>&1 ||
    { cat "$tmp/twine.log"; fail "twine check"; }
TWINE_USERNAME=rehearsal TWINE_PASSWORD=rehearsal "$pypi_dir/bin/twine" upload --non-interactive \
    --disable-progress-bar --repository-url "$pypi/" "$dist"/python/* > "$tmp/twine.log" 2>&1 ||
    { cat "$tmp/twine.log"; fail "twine upload"; }
curl -sf "$pypi/simple/mcpgw-client/" | grep -q "mcpgw_client-$version-py3-none-manylinux" ||
    fail "pypiserver does not list the wheel after twine upload"
cp -R "$dist/goproxy" "$tmp/registry/goproxy"
goproxy=file://$tmp/registry/goproxy
say "published mcpgw $version to verdaccio, mcpgw-client $version to pypiserver, the Go module to $goproxy"

# The README's examples and install lines, read before the repository is hidden.
example() {
    awk -v name="$1" '
        $0 == "<!-- example: " name " -->" { found = 1; next }
        found == 1 && /^```/ { found = 2; next }
        found == 2 && /^```$/ { exit }
        found == 2 { print }
    ' "$repo/README.md"
}
install_block=$(example install)
for line in "pip install mcpgw-client" "npm install mcpgw" "go get github.com/mcpgw/mcpgw/bindings/go@latest"; do
    printf '%s\n' "$install_block" | grep -q "^$line " || fail "README.md's install block has no '$line'"
done

hide=
if can_hide; then
    hide=yes
else
    say "note: the repository and the Rust toolchain stay visible (hiding them needs root and unshare); PATH has neither"
fi
rust_dirs="${CARGO_HOME:-$HOME/.cargo} ${RUSTUP_HOME:-$HOME/.rustup}"
# shellcheck disable=SC2086 # two directories
clean_path=$(path_without "$repo" "$target_dir" $rust_dirs)
# The interpreter behind a version manager's shim, which needs the real HOME.
python_dir=$(dirname "$(python3 -c 'import sys; print(sys.executable)')")
clean_path=$python_dir:$clean_path
for tool in cargo rustc rustup; do
    ! PATH=$clean_path command -v "$tool" >/dev/null 2>&1 || fail "$tool is still on the clean PATH"
done
gocache=$(go env GOCACHE 2>/dev/null || true)
mkdir -p "$tmp/scripts"
cp "$repo"/tests/rehearsal/*.sh "$repo"/tests/rehearsal/*.py "$repo/tests/newuser/lib.sh" "$tmp/scripts/"
gateway_sum=$(sha256sum < "$target_dir/x86_64-unknown-linux-gnu/release/mcpgw-gateway" | cut -d' ' -f1)

failed=''
# rehearse LANG REGISTRY NAME=VALUE...: one language, in a fresh project, home and container.
rehearse() {
    lang=$1 registry=$2
    shift 2
    stage=$tmp/stage/$lang out=$tmp/out/$lang home=$tmp/home/$lang
    mkdir -p "$stage" "$out" "$home"
    project=$(mktemp -d "$tmp/project-$lang.XXXXXX")
    container=$(sh "$sandbox" start "$image") || fail "cannot start a container of $image"
    containers="$containers $container"
    ! docker exec "$container" test -e /usr/local/bin/mcpgw-gateway || fail "$image already has a gateway"
    case $lang in
        python) ext=py ;; node) ext=mjs ;; go) ext=go ;; c) ext=c ;;
    esac
    example "$lang" > "$stage/example.$ext.in"
    [ "$(grep -c my-sandbox "$stage/example.$ext.in")" = 1 ] ||
        fail "README.md's $lang example does not name the container my-sandbox once"
    sed "s/my-sandbox/$container/" "$stage/example.$ext.in" > "$stage/example.$ext"
    case $lang in
        python) cp "$other_dir"/mcpgw-*.whl "$stage/" 2>/dev/null || true ;;
        c) example c-build > "$stage/build.sh" && cp "$dist/mcpgw-$version-x86_64-linux-gnu.tar.gz" "$stage/" ;;
    esac
    set -- env -i PATH="$clean_path" HOME="$home" TMPDIR="$tmp" LANG=C.UTF-8 \
        REHEARSAL_STAGE="$stage" REHEARSAL_OUT="$out" REHEARSAL_VERSION="$version" REHEARSAL_CONTAINER="$container" \
        NEWUSER_LOG="$project/commands.log" NEWUSER_REPO="$repo" NEWUSER_TARGET_DIR="$target_dir" \
        "$@" sh "$tmp/scripts/$lang.sh"
    # shellcheck disable=SC2086 # two directories
    [ -z "$hide" ] || set -- hidden "$repo" "$target_dir" $rust_dirs -- "$@"
    t0=$(date +%s.%N)
    if ! (cd "$project" && "$@"); then
        echo "rehearsal: $lang FAILED" >&2
        failed="$failed $lang"
        return
    fi
    t1=$(cat "$out/answered")
    case $lang in
        c) expect='"text":"Echo: hello"' ;;
        *) expect='running Echo: hello' ;;
    esac
    grep -qF "$expect" "$out/output" || { failed="$failed $lang"; echo "rehearsal: $lang: no '$expect' in: $(cat "$out/output")" >&2; return; }
    installed_sum=$(docker exec "$container" sha256sum /usr/local/bin/mcpgw-gateway | cut -d' ' -f1)
    bundled_sum=$(sha256sum < "$(cat "$out/bundled")" | cut -d' ' -f1)
    if [ "$installed_sum" != "$bundled_sum" ] || [ "$bundled_sum" != "$gateway_sum" ]; then
        failed="$failed $lang"
        echo "rehearsal: $lang: the container's gateway ($installed_sum) is not the package's ($bundled_sum) of this release ($gateway_sum)" >&2
        return
    fi
    # shellcheck disable=SC2046 # one path a line, no spaces in them
    size=$(du -scb $(cat "$out/installed") | tail -n 1 | cut -f1)
    # The baseline beside the figures: what one exec into the container costs now.
    e0=$(date +%s.%N) && docker exec "$container" true && e1=$(date +%s.%N)
    exec_s=$(echo "$e0 $e1" | awk '{ printf "%.2f", $2 - $1 }')
    sh "$sandbox" stop "$container"
    echo "$label installed from $registry in $(echo "$t0 $t1" | awk '{ printf "%.1f", $2 - $1 }') s, $(echo "$size" | awk '{ printf "%.1f", $1 / 1048576 }') MiB, first call ok"
    if [ -f "$out/endpoint" ]; then
        grep -q ': Echo: hello$' "$out/endpoint" || { failed="$failed $lang"; echo "rehearsal: $lang: mcpgw mcp answered: $(cat "$out/endpoint")" >&2; return; }
        echo "$label mcpgw mcp from the package into the container: $(cat "$out/endpoint")"
    fi
}

for lang in $langs; do
    case $lang in
        # The label of each language's measured lines.
        python) label='rehearsal python:'; rehearse python "pypiserver $PYPISERVER_VERSION ($pypi/simple/)" REHEARSAL_PYPI="$pypi/simple/" ;;
        node) label='rehearsal node:'; rehearse node "verdaccio $VERDACCIO_VERSION ($npm_registry)" REHEARSAL_NPM="$npm_registry" ;;
        go) label='rehearsal go:'; rehearse go "a module proxy directory (GOPROXY=$goproxy)" REHEARSAL_GOPROXY="$goproxy" \
            ${gocache:+GOCACHE="$gocache"} ;;
        c) label='rehearsal c:'; rehearse c "the release tarball (mcpgw-$version-x86_64-linux-gnu.tar.gz)" ;;
        *) fail "no language $lang (python node go c)" ;;
    esac
done

echo "rehearsal baseline: one docker exec took ${exec_s:-?} s, load average $(cut -d' ' -f1 /proc/loadavg) on $(nproc) cores"
[ -z "$failed" ] || fail "$failed"
say "every language installed from its registry and made its first call"
