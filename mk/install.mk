# libmcpgw: header generation and `make install`. Include it from the root Makefile, or run it
# alone: `make -f mk/install.mk install PREFIX=/opt/mcpgw`.
#
#   install        release build; installs libmcpgw.so, libmcpgw.a, mcpgw.h and mcpgw.pc
#   uninstall      removes what install put there
#   header         regenerates include/mcpgw.h from src/ffi (cbindgen, via build.rs)
#   check-header   fails when the checked-in include/mcpgw.h is stale

MCPGW_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR ?=
CARGO ?= cargo
INSTALL ?= install
MCPGW_TARGET_DIR ?= $(if $(CARGO_TARGET_DIR),$(CARGO_TARGET_DIR),$(MCPGW_ROOT)/target)
MCPGW_VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' $(MCPGW_ROOT)/Cargo.toml | head -n 1)
# What a static libmcpgw.a needs besides libc (rustc --print native-static-libs).
MCPGW_STATIC_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl

.PHONY: install uninstall header check-header

install:
	cd $(MCPGW_ROOT) && $(CARGO) build --release -p mcpgw
	$(INSTALL) -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	$(INSTALL) -m 755 $(MCPGW_TARGET_DIR)/release/libmcpgw.so $(DESTDIR)$(LIBDIR)/libmcpgw.so
	$(INSTALL) -m 644 $(MCPGW_TARGET_DIR)/release/libmcpgw.a $(DESTDIR)$(LIBDIR)/libmcpgw.a
	$(INSTALL) -m 644 $(MCPGW_ROOT)/include/mcpgw.h $(DESTDIR)$(INCLUDEDIR)/mcpgw.h
	printf '%s\n' \
	  'prefix=$(PREFIX)' \
	  'libdir=$(LIBDIR)' \
	  'includedir=$(INCLUDEDIR)' \
	  '' \
	  'Name: mcpgw' \
	  'Description: Host-side client of mcpgw-gateway, the MCP gateway for sandboxed agent workspaces' \
	  'Version: $(MCPGW_VERSION)' \
	  'Libs: -L$${libdir} -lmcpgw' \
	  'Libs.private: $(MCPGW_STATIC_LIBS)' \
	  'Cflags: -I$${includedir}' \
	  > $(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libmcpgw.so $(DESTDIR)$(LIBDIR)/libmcpgw.a \
	  $(DESTDIR)$(INCLUDEDIR)/mcpgw.h $(DESTDIR)$(PKGCONFIGDIR)/mcpgw.pc

header:
	cd $(MCPGW_ROOT) && MCPGW_UPDATE_HEADER=1 $(CARGO) build -p mcpgw

check-header:
	cd $(MCPGW_ROOT) && $(CARGO) test -p mcpgw --lib -- ffi::tests::checked_in_header_is_current
