# mcpgw: `make demo` runs the main job, `make test` runs every test, `make bench` measures.
# Whatever the tests need that a fresh machine lacks (npm packages, the Python virtualenv with
# AgentScope and mcp-server-time) is installed here on first use.

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
NODE_SERVERS := tests/servers/node_modules/.package-lock.json
# MCP clients nobody here wrote, for the host endpoint's tests: the official TypeScript SDK,
# inspector-cli and the Vercel AI SDK (npm), and langchain-mcp-adapters in a virtualenv of its
# own (it needs mcp<2; .venv holds AgentScope's mcp 2.x, the Python SDK client the tests run).
NODE_CLIENTS := tests/clients/node_modules/.package-lock.json
LANGCHAIN_VENV := tests/clients/.venv
LANGCHAIN_STAMP := $(LANGCHAIN_VENV)/.installed
# The official MCP conformance suite, both lines, and Node 22 for the newer one (npm), and its
# reference server, the Go SDK's conformance everything-server, built static for the test image
# (tests/conformance).
NODE_CONFORMANCE := tests/conformance/node_modules/.package-lock.json
CONFORMANCE_SERVER := target/conformance/conformance-server
# OpenSandbox's server, which the provider tests start (tests/providers/README.md).
OPENSANDBOX_VENV := tests/providers/.venv-opensandbox
OPENSANDBOX_STAMP := $(OPENSANDBOX_VENV)/.installed

# The release gateway and the test MCP server: static binaries for any image (no loader, no
# libc, no NSS from them). getrandom(2) is called directly: a static binary cannot probe for the
# libc wrapper.
STATIC_TARGET := x86_64-unknown-linux-gnu
STATIC_RUSTFLAGS := -C target-feature=+crt-static --cfg getrandom_backend="linux_getrandom"
STATIC_GATEWAY := target/$(STATIC_TARGET)/release/mcpgw-gateway
STATIC_TESTSERVER := target/$(STATIC_TARGET)/release/mcpgw-testserver
STATIC_HOST := target/$(STATIC_TARGET)/release/mcpgw

.PHONY: all build release static static-host docker-image demo test rehearsal test-rust test-c test-go test-node test-python test-newuser test-conformance lint deps bench soak fuzz clean

all: build

build:
	$(CARGO) build --workspace --bins

# The release libmcpgw and the static gateway, as `make install` and `make dist` ship them.
release: lib-release static static-host

# From scratch: about 8 minutes of CPU (29 minutes of wall time measured on 2 cores shared with
# other builds); cargo reuses it afterwards.
static:
	RUSTFLAGS='$(STATIC_RUSTFLAGS)' $(CARGO) build --release -p mcpgw-gateway -p mcpgw-testserver --target $(STATIC_TARGET)
	@ls -l $(STATIC_GATEWAY) $(STATIC_TESTSERVER) | awk '{printf "static: %s (%.1f MiB)\n", $$NF, $$5/1048576}'

# The host endpoint `mcpgw` (crate cli/) built the same way, for the packages: one file that
# runs on any Linux x86_64 host. A cargo run of its own, so that its dependencies' features do
# not change the gateway's build.
static-host:
	RUSTFLAGS='$(STATIC_RUSTFLAGS)' $(CARGO) build --release -p mcpgw-cli --bin mcpgw --target $(STATIC_TARGET)
	@ls -l $(STATIC_HOST) | awk '{printf "static: %s (%.1f MiB)\n", $$NF, $$5/1048576}'

# The busybox-only Docker image the docker-sandbox tests run in, tagged by content.
docker-image: static
	sh tests/docker/sandbox.sh image --gateway $(STATIC_GATEWAY) --testserver $(STATIC_TESTSERVER)

demo: build
	$(CARGO) run --quiet --example demo

deps: $(VENV_STAMP) $(NODE_SERVERS) $(NODE_CLIENTS) $(LANGCHAIN_STAMP) $(OPENSANDBOX_STAMP) \
	$(NODE_CONFORMANCE) $(CONFORMANCE_SERVER)

$(VENV_STAMP): tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

$(NODE_SERVERS): tests/servers/package-lock.json
	npm ci --prefix tests/servers --no-audit --no-fund --loglevel=error

$(NODE_CLIENTS): tests/clients/package-lock.json
	npm ci --prefix tests/clients --no-audit --no-fund --loglevel=error

$(NODE_CONFORMANCE): tests/conformance/package-lock.json
	npm ci --prefix tests/conformance --no-audit --no-fund --loglevel=error

# Rebuilt only when the module's pins change (go.mod, go.sum).
$(CONFORMANCE_SERVER): tests/conformance/server/go.mod tests/conformance/server/go.sum
	mkdir -p $(dir $@)
	cd tests/conformance/server && CGO_ENABLED=0 go build -trimpath -o $(abspath $@) \
		github.com/modelcontextprotocol/go-sdk/conformance/everything-server

$(LANGCHAIN_STAMP): tests/clients/requirements-langchain.txt
	$(PYTHON) -m venv $(LANGCHAIN_VENV)
	$(LANGCHAIN_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/clients/requirements-langchain.txt
	touch $@

$(OPENSANDBOX_STAMP): tests/providers/opensandbox-server.txt
	$(PYTHON) -m venv $(OPENSANDBOX_VENV)
	$(OPENSANDBOX_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/providers/opensandbox-server.txt
	touch $@

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-rust: deps build static
	$(CARGO) test --workspace --no-fail-fast

test-c: build
	$(MAKE) -C examples/c check

test-go: build
	$(MAKE) -C bindings/go test

test-node: build
	$(MAKE) -C bindings/node test

test-python: deps
	$(MAKE) -C bindings/python test

# The official conformance suite's server scenarios, straight to its reference server and
# through `mcpgw mcp --http` into a Docker container (stdio and HTTP upstreams): every check the
# same, and docs/mcp-on-the-host.md's table the run's (tests/conformance/run.py).
test-conformance: build static $(NODE_CONFORMANCE) $(CONFORMANCE_SERVER)
	MCPGW_CONFORMANCE_SERVER=$(CONFORMANCE_SERVER) $(PYTHON) tests/conformance/run.py

# A new user's project in a temporary directory, built only from `make install`'s tree.
test-newuser: build
	sh tests/newuser/run.sh

# The release rehearsal (tests/rehearsal): `make artifacts` published to registries started for
# the test, installed from them into empty projects with no Rust toolchain, each followed by the
# README's example: a first tool call into a Docker container.
rehearsal: deps artifacts
	sh tests/rehearsal/run.sh

# Every suite in turn; after each, none of the project's processes may be left running that
# was not running before (mk/leftovers.sh).
SUITES := lint test-rust test-c test-go test-node test-python test-conformance test-newuser rehearsal
LEFTOVERS := target/leftovers.pids
test:
	@mkdir -p target && sh mk/leftovers.sh snapshot $(LEFTOVERS)
	@for suite in $(SUITES); do \
		$(MAKE) --no-print-directory $$suite || exit 1; \
		sh mk/leftovers.sh check $(LEFTOVERS) || exit 1; \
	done
	@echo "make test: every test passed"

bench: deps
	sh bench/run.sh

# 100,000 calls at 50 in flight with faults injected, through the gateway and the library;
# then 5,000 through `mcpgw mcp --http` into Docker with hostile clients alongside and the
# container killed once.
soak: static
	$(CARGO) build --quiet --release -p mcpgw-testserver -p mcpgw-bench -p mcpgw-cli
	target/release/mcpgw-soak
	target/release/mcpgw-endpoint-soak

# Runs every fuzz target for FUZZ_SECONDS (cargo fuzz, libFuzzer; no nightly needed with
# `-s none`), then minimizes its corpus into fuzz/corpus/, which `make test` replays. A crash
# stops here with its input in fuzz/artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := response chunk quote frame stream spec request jsonrpc host endpoint
fuzz:
	command -v cargo-fuzz >/dev/null 2>&1 || $(CARGO) install cargo-fuzz --locked
	for t in $(FUZZ_TARGETS); do \
		$(CARGO) fuzz run --fuzz-dir fuzz --features libfuzzer -s none $$t -- \
			-max_total_time=$(FUZZ_SECONDS) -max_len=65536 || exit 1; \
		$(CARGO) fuzz cmin --fuzz-dir fuzz --features libfuzzer -s none $$t || exit 1; \
	done

clean:
	$(CARGO) clean
	rm -rf $(VENV) $(LANGCHAIN_VENV) $(OPENSANDBOX_VENV) dist tests/servers/node_modules tests/clients/node_modules bindings/node/node_modules
	$(MAKE) -C examples/c clean
	$(MAKE) -C bindings/go clean

-include mk/install.mk
-include mk/artifacts.mk
