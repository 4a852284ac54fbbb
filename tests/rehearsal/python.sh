#!/bin/sh
# The Python user of the rehearsal: an empty project, a virtualenv, `pip install mcpgw-client`
# from the rehearsal's package index (PIP_INDEX_URL, as a user of another index sets it), then
# the README's Python example. Afterwards, the unrelated PyPI project `mcpgw` installed beside
# it: no file of one is a file of the other, each package is where its import finds it. See
# README.md for the contract.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
NEWUSER_LANG="rehearsal python"
# shellcheck source=tests/newuser/lib.sh
. "$here/lib.sh"
need python3 docker
stage=${REHEARSAL_STAGE:?} out=${REHEARSAL_OUT:?}

logged python3 -m venv .venv
logged env PIP_INDEX_URL="${REHEARSAL_PYPI:?}" PIP_DISABLE_PIP_VERSION_CHECK=1 \
    .venv/bin/pip install --quiet mcpgw-client || fail "pip install mcpgw-client"
cp "$stage/example.py" app.py
logged .venv/bin/python app.py > "$out/output" 2>&1 || fail "app.py: $(cat "$out/output")"
date +%s.%N > "$out/answered"
# The host endpoint the wheel carries, as an MCP client's configuration runs it.
logged .venv/bin/python "$here/endpoint.py" .venv/bin/python -m mcpgw_client -- mcp-server-everything \
    > "$out/endpoint" 2> "$out/endpoint.log" || fail "python -m mcpgw_client mcp: $(cat "$out/endpoint.log")"

# What was installed: the distribution's own files.
.venv/bin/python - "$out" "${REHEARSAL_VERSION:?}" <<'PY'
import importlib.metadata, sys
from pathlib import Path
out, version = Path(sys.argv[1]), sys.argv[2]
dist = importlib.metadata.distribution("mcpgw-client")
assert dist.version == version, f"installed mcpgw-client {dist.version}, not {version}"
files = {Path(dist.locate_file(f)).resolve() for f in dist.files or []}
(out / "installed").write_text("".join(f"{p}\n" for p in sorted(files)))
import mcpgw_client
(out / "bundled").write_text(mcpgw_client.gateway_binary() + "\n")
PY

# The other `mcpgw` beside it (its wheel fetched from PyPI by run.sh; without its dependencies,
# which only its own code imports).
other=$(ls "$stage"/mcpgw-*.whl 2>/dev/null || true)
if [ -z "$other" ]; then
    say "SKIPPED: the clash check: run.sh found no wheel of the unrelated mcpgw"
else
    logged .venv/bin/pip install --quiet --no-deps --no-index "$other" || fail "pip install $other"
    .venv/bin/python - <<'PY' || fail "mcpgw-client and the unrelated mcpgw clash"
import importlib.metadata, importlib.util
from pathlib import Path
ours, theirs = (importlib.metadata.distribution(n) for n in ("mcpgw-client", "mcpgw"))
shared = {str(f) for f in ours.files or []} & {str(f) for f in theirs.files or []}
assert not shared, f"files of both: {sorted(shared)}"
# Theirs is `import mcpgw` (found, not imported: it needs FastAPI); ours still loads and works.
spec = importlib.util.find_spec("mcpgw")
assert spec and spec.origin and Path(theirs.locate_file("mcpgw/__init__.py")).samefile(spec.origin), spec
import mcpgw_client
assert Path(mcpgw_client.gateway_binary()).is_file() and mcpgw_client.library_version() == mcpgw_client.__version__
PY
    say "the unrelated mcpgw $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mcpgw"))') installs beside it: no file shared, mcpgw_client still works"
fi
