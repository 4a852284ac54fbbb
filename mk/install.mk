# libmcpgw and mcpgw-gateway for users of any language: the library builds, `make install`, the
# binary tarball, and the header. Included by the root Makefile; also runs alone:
# `make -f mk/install.mk install PREFIX=/opt/mcpgw`.
#
#   lib-debug, lib-release  build libmcpgw (mk/build-lib.sh): libmcpgw.so, libmcpgw.a, and next
#                  to them mcpgw-static-libs.txt (the native libraries of a static link) and the
#                  SONAME symlink
#   install        release library, static gateway and host endpoint, header, pkg-config
#                  files, helper sources:
#                    bin/mcpgw-gateway                 the static gateway (`make static`)
#                    bin/mcpgw                         the host endpoint, `mcpgw mcp ...` (`make
#                                                      static-host`), static; it installs the
#                                                      gateway next to it into a sandbox
#                    lib/libmcpgw.so.X.Y.Z, its SONAME symlink libmcpgw.so.X.Y, libmcpgw.so
#                    lib/libmcpgw.a
#                    lib/pkgconfig/mcpgw.pc            shared: `pkg-config --libs mcpgw`
#                    lib/pkgconfig/mcpgw-static.pc     static: `pkg-config --static --libs mcpgw-static`
#                    include/mcpgw.h
#                    share/mcpgw/                      exec_process.c/.h (mcpgw_client's ready
#                                                      callbacks), host_loop.c/.h (the C loop),
#                                                      host_spawn.c/.h (what both spawn with)
#                  The .pc files locate the tree from their own place (${pcfiledir}), so the
#                  tree may be moved as a whole.
#   uninstall      removes exactly what install put there
#   dist           dist/mcpgw-VERSION-ARCH-linux-gnu.tar.gz: the same tree, for users who do not
#                  build Rust
#   header         regenerates include/mcpgw.h from src/ffi (cbindgen, via build.rs)
#   check-header   fails when the checked-in include/mcpgw.h is stale

MCPGW_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

PREFIX ?= /usr/local
override PREFIX := $(abspath $(PREFIX))
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
MCPGW_DATADIR ?= $(PREFIX)/share/mcpgw
DESTDIR ?=
CARGO ?= cargo
INSTALL ?= install
STATIC_TARGET ?= x86_64-unknown-linux-gnu
MCPGW_TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(abspath $(CARGO_TARGET_DIR)),$(MCPGW_ROOT)/target)
MCPGW_VERSION := $(shell sh $(MCPGW_ROOT)/mk/version.sh)
MCPGW_RELEASE := $(MCPGW_TARGET_DIR)/release
MCPGW_STATIC_GATEWAY := $(MCPGW_TARGET_DIR)/$(STATIC_TARGET)/release/mcpgw-gateway
MCPGW_STATIC_HOST := $(MCPGW_TARGET_DIR)/$(STATIC_TARGET)/release/mcpgw
# The helper sources a C user copies into a project: the ready exec callbacks of mcpgw_client,
# the thin loop around the host driver, and the process spawning both use.
MCPGW_SHARE_FILES := exec_process.c exec_process.h host_loop.c host_loop.h host_spawn.c host_spawn.h
# x86_64-unknown-linux-gnu -> x86_64-linux-gnu
MCPGW_DIST_NAME := mcpgw-$(MCPGW_VERSION)-$(subst -unknown-,-,$(STATIC_TARGET))
MCPGW_DIST_DIR := $(MCPGW_ROOT)/dist
dist_prefix := $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME)

# Absolute, so that the .pc files can be written relative to where they land.
abs_prefix = $(abspath $(PREFIX))
abs_dir = $(abspath $(1))
# A directory as the .pc files name it: ${prefix}/... under the prefix, else absolute.
pc_dir = $(patsubst $(abs_prefix)/%,$${prefix}/%,$(call abs_dir,$(1)))
# The prefix as the .pc files name it: relative to ${pcfiledir} when they live under it, so
# the installed tree can be moved (and the dist tarball unpacked anywhere).
pc_prefix = $(if $(filter $(abs_prefix)/%,$(call abs_dir,$(PKGCONFIGDIR))),$${pcfiledir}/$(shell realpath -m --relative-to=$(call abs_dir,$(PKGCONFIGDIR)) $(abs_prefix)),$(abs_prefix))
# Read when the recipes run, after the library was built.
MCPGW_SONAME = $(shell readelf -d $(MCPGW_RELEASE)/libmcpgw.so | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
MCPGW_NATIVE_LIBS = $(shell cat $(MCPGW_RELEASE)/mcpgw-static-libs.txt)

.PHONY: lib-debug lib-release static-bins install install-files uninstall dist header check-header

lib-debug lib-release:
	CARGO='$(CARGO)' CARGO_TARGET_DIR='$(MCPGW_TARGET_DIR)' sh $(MCPGW_ROOT)/mk/build-lib.sh $(@:lib-%=%) >/dev/null

# The static gateway and host endpoint (the root Makefile's static and static-host).
static-bins:
	$(MAKE) -C $(MCPGW_ROOT) static static-host

define pc_vars
prefix=$(pc_prefix)
exec_prefix=$${prefix}
bindir=$(call pc_dir,$(BINDIR))
libdir=$(call pc_dir,$(LIBDIR))
includedir=$(call pc_dir,$(INCLUDEDIR))
pkgdatadir=$(call pc_dir,$(MCPGW_DATADIR))
# The static gateway binary, to install into sandboxes (ensure_gateway_binary).
gateway=$${bindir}/mcpgw-gateway
endef

define mcpgw_pc
$(pc_vars)

Name: mcpgw
Description: Host-side client of mcpgw-gateway, the MCP gateway for sandboxed agent workspaces
Version: $(MCPGW_VERSION)
Libs: -L$${libdir} -lmcpgw
Libs.private: $(MCPGW_NATIVE_LIBS)
Cflags: -I$${includedir}
endef

define mcpgw_static_pc
$(pc_vars)

Name: mcpgw-static
Description: libmcpgw linked statically (libmcpgw.a) into a program; needs no libmcpgw.so at run time
Version: $(MCPGW_VERSION)
Libs: $${libdir}/libmcpgw.a $(MCPGW_NATIVE_LIBS)
Cflags: -I$${includedir}
endef

# The .pc files are written once install-files made their directory (make expands a recipe,
# $(file ...) included, just before running it).
install: install-files
	$(file >$(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc,$(mcpgw_pc))
	$(file >$(DESTDIR)$(PKGCONFIGDIR)/mcpgw-static.pc,$(mcpgw_static_pc))
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc $(DESTDIR)$(PKGCONFIGDIR)/mcpgw-static.pc
	@echo "installed into $(DESTDIR)$(PREFIX)"

install-files: lib-release static-bins
	@[ -n '$(MCPGW_SONAME)' ] || { echo '$(MCPGW_RELEASE)/libmcpgw.so has no SONAME' >&2; exit 1; }
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MCPGW_DATADIR)
	$(INSTALL) -m 755 $(MCPGW_STATIC_GATEWAY) $(DESTDIR)$(BINDIR)/mcpgw-gateway
	$(INSTALL) -m 755 $(MCPGW_STATIC_HOST) $(DESTDIR)$(BINDIR)/mcpgw
	$(INSTALL) -m 755 $(MCPGW_RELEASE)/libmcpgw.so $(DESTDIR)$(LIBDIR)/libmcpgw.so.$(MCPGW_VERSION)
	ln -sfn libmcpgw.so.$(MCPGW_VERSION) $(DESTDIR)$(LIBDIR)/$(MCPGW_SONAME)
	ln -sfn $(MCPGW_SONAME) $(DESTDIR)$(LIBDIR)/libmcpgw.so
	$(INSTALL) -m 644 $(MCPGW_RELEASE)/libmcpgw.a $(DESTDIR)$(LIBDIR)/libmcpgw.a
	$(INSTALL) -m 644 $(MCPGW_ROOT)/include/mcpgw.h $(DESTDIR)$(INCLUDEDIR)/mcpgw.h
	$(INSTALL) -m 644 $(addprefix $(MCPGW_ROOT)/examples/c/,$(MCPGW_SHARE_FILES)) $(DESTDIR)$(MCPGW_DATADIR)/

# The SONAME symlink is named after what the installed library says.
uninstall:
	@lib=$(DESTDIR)$(LIBDIR)/libmcpgw.so.$(MCPGW_VERSION); \
	if [ -f "$$lib" ]; then \
		soname=$$(readelf -d "$$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p'); \
		[ -z "$$soname" ] || rm -f "$(DESTDIR)$(LIBDIR)/$$soname"; \
	fi
	rm -f $(DESTDIR)$(BINDIR)/mcpgw-gateway $(DESTDIR)$(BINDIR)/mcpgw \
		$(DESTDIR)$(LIBDIR)/libmcpgw.so.$(MCPGW_VERSION) $(DESTDIR)$(LIBDIR)/libmcpgw.so \
		$(DESTDIR)$(LIBDIR)/libmcpgw.a $(DESTDIR)$(INCLUDEDIR)/mcpgw.h \
		$(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc $(DESTDIR)$(PKGCONFIGDIR)/mcpgw-static.pc \
		$(addprefix $(DESTDIR)$(MCPGW_DATADIR)/,$(MCPGW_SHARE_FILES))
	rmdir $(DESTDIR)$(MCPGW_DATADIR) 2>/dev/null || true

# The tarball holds the installed tree under one top directory; its members carry no owner
# and the time of the last commit, and gzip no name or time, so a rebuild gives the same bytes.
dist:
	rm -rf $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME) $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME).tar.gz
	$(MAKE) -f $(MCPGW_ROOT)/mk/install.mk install DESTDIR= PREFIX=$(dist_prefix) \
		BINDIR=$(dist_prefix)/bin LIBDIR=$(dist_prefix)/lib INCLUDEDIR=$(dist_prefix)/include \
		PKGCONFIGDIR=$(dist_prefix)/lib/pkgconfig MCPGW_DATADIR=$(dist_prefix)/share/mcpgw
	epoch=$$(git -C $(MCPGW_ROOT) log -1 --format=%ct 2>/dev/null || echo 0); \
	tar -C $(MCPGW_DIST_DIR) --sort=name --owner=0 --group=0 --numeric-owner \
		--mtime=@$$epoch -cf - $(MCPGW_DIST_NAME) | gzip -9n > $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME).tar.gz
	rm -rf $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME)
	@echo "dist: $(MCPGW_DIST_DIR)/$(MCPGW_DIST_NAME).tar.gz"

header:
	cd $(MCPGW_ROOT) && MCPGW_UPDATE_HEADER=1 $(CARGO) build -p mcpgw-ffi

check-header:
	cd $(MCPGW_ROOT) && $(CARGO) test -p mcpgw-ffi --lib -- tests::checked_in_header_is_current
