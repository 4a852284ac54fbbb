//go:build mcpgw_intree || (linux && amd64 && !mcpgw_pkgconfig && !mcpgw_static)

package mcpgw

// What the static libmcpgw needs besides libc, for the builds that link libmcpgw.a themselves
// (link_intree.go, link_prebuilt.go), as `rustc --print native-static-libs` reports them; the
// installed mcpgw-static.pc carries the same list. This file is the one place of the Go binding
// that names them (`make -C bindings/go check-static-libs` compares it with the build's list).
// It sorts after those files on purpose: cgo passes the LDFLAGS of a package's files in file
// name order, and a library must come after the archive that needs it.

// #cgo LDFLAGS: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
import "C"
