//go:build mcpgw_intree

package mcpgw

// With `-tags mcpgw_intree`, for the repository's own tests and examples only: the header of
// this checkout and the static library of its release build (`make -C bindings/go lib`, i.e.
// `cargo build --release -p mcpgw-ffi`), linked into the Go binary.
//
// The libraries after libmcpgw.a are what the Rust static library needs besides libc, as
// `rustc --print native-static-libs` reports them; the installed mcpgw.pc carries the same list
// in Libs.private. This file is the one place of the Go binding that names them
// (`make -C bindings/go check-static-libs` compares it with the build's list when the build
// wrote one). The #error says what to do where the linker would only say that a file is missing
// (the path is relative to the include directory).

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: ${SRCDIR}/../../target/release/libmcpgw.a -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
// #if defined(__has_include)
// #if !__has_include("../target/release/libmcpgw.a")
// #error "target/release/libmcpgw.a is missing: build it with `make -C bindings/go lib` (or `cargo build --release -p mcpgw-ffi`)"
// #endif
// #endif
import "C"
