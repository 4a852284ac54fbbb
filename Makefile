# mcpgw: `make demo` runs the main job, `make test` runs every test, `make bench` measures.
# Whatever the tests need that a fresh machine lacks (npm packages, the Python virtualenv with
# AgentScope and mcp-server-time) is installed here on first use.

CARGO ?= cargo
PYTHON ?= python3
VENV := .venv
VENV_STAMP := $(VENV)/.installed
NODE_SERVERS := tests/servers/node_modules/.package-lock.json

.PHONY: all build release demo test test-rust lint deps bench clean

all: build

build:
	$(CARGO) build --workspace --bins

release:
	$(CARGO) build --release -p mcpgw-gateway -p mcpgw

demo: build
	sh scripts/demo.sh

deps: $(VENV_STAMP) $(NODE_SERVERS)

$(VENV_STAMP): tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

$(NODE_SERVERS): tests/servers/package-lock.json
	npm ci --prefix tests/servers --no-audit --no-fund --loglevel=error

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

test-rust: deps build
	$(CARGO) test --workspace

test: lint test-rust

bench: deps
	sh bench/run.sh

clean:
	$(CARGO) clean
	rm -rf $(VENV) tests/servers/node_modules

-include mk/install.mk
