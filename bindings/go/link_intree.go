//go:build mcpgw_intree

package mcpgw

// With `-tags mcpgw_intree`, for the repository's own tests and examples only: the header of
// this checkout and the static library of its release build (`make -C bindings/go lib`, i.e.
// `sh mk/build-lib.sh release`), linked into the Go binary; the native libraries it needs are
// in link_syslibs.go. The #error says what to do where the linker would only say that a file is
// missing (the path is relative to the include directory).

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: ${SRCDIR}/../../target/release/libmcpgw.a
// #if defined(__has_include)
// #if !__has_include("../target/release/libmcpgw.a")
// #error "target/release/libmcpgw.a is missing: build it with `make -C bindings/go lib` (or `sh mk/build-lib.sh release`)"
// #endif
// #endif
import "C"
