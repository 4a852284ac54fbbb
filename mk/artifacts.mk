# `make artifacts`: every artifact a user installs with the language's own command, needing no
# Rust and no clone, built into dist/ from one release build (mk/build-lib.sh release for
# libmcpgw, `make static` for the gateway: nothing is compiled twice), then checked together
# (mk/check-artifacts.sh: one version, one ABI, one gateway everywhere) and summed
# (dist/SHA256SUMS). Included by the root Makefile.
#
#   dist/mcpgw-VERSION-x86_64-linux-gnu.tar.gz   C: `make dist`, the installed tree
#   dist/npm/mcpgw-VERSION.tgz                   npm install mcpgw (bindings/node: make pack)
#   dist/python/mcpgw_client-VERSION-py3-none-manylinux_2_N_x86_64.whl
#   dist/python/mcpgw_client-VERSION.tar.gz      pip install mcpgw-client (bindings/python:
#                                                make wheel sdist)
#   dist/goproxy/github.com/mcpgw/mcpgw/bindings/go/@v/{list,vVERSION.info,.mod,.zip}
#                                                go get github.com/mcpgw/mcpgw/bindings/go: a
#                                                module proxy directory (bindings/go: make module)
#
# `make rehearsal` (tests/rehearsal) publishes them to registries started locally and installs
# them from there into empty projects.

ARTIFACTS_DIR := $(MCPGW_ROOT)/dist

.PHONY: artifacts

artifacts: lib-release static-bins
	rm -rf $(ARTIFACTS_DIR)/npm $(ARTIFACTS_DIR)/python $(ARTIFACTS_DIR)/goproxy
	$(MAKE) -f $(MCPGW_ROOT)/mk/install.mk --no-print-directory dist
	$(MAKE) -C $(MCPGW_ROOT)/bindings/node --no-print-directory pack DIST=$(ARTIFACTS_DIR)/npm
	$(MAKE) -C $(MCPGW_ROOT)/bindings/python --no-print-directory wheel sdist DIST=$(ARTIFACTS_DIR)/python
	$(MAKE) -C $(MCPGW_ROOT)/bindings/go --no-print-directory module GOPROXY_DIR=$(ARTIFACTS_DIR)/goproxy
	sh $(MCPGW_ROOT)/mk/check-artifacts.sh $(ARTIFACTS_DIR)
