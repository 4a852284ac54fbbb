//go:build mcpgw_shared

package mcpgw

// With `-tags mcpgw_shared`: libmcpgw.so of this checkout's release build, found at run time
// through an rpath to that directory (for a library moved elsewhere, LD_LIBRARY_PATH must say
// where).

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: -L${SRCDIR}/../../target/release -lmcpgw -Wl,-rpath,${SRCDIR}/../../target/release
// #if defined(__has_include)
// #if !__has_include("../target/release/libmcpgw.so")
// #error "target/release/libmcpgw.so is missing: build it with `make -C bindings/go lib` (or `cargo build --release -p mcpgw`)"
// #endif
// #endif
import "C"
