//go:build !mcpgw_shared

package mcpgw

// The default: libmcpgw.a of this checkout's release build (`make -C bindings/go lib`, or
// `cargo build --release -p mcpgw`), linked into the Go binary, which then needs no
// libmcpgw.so at run time. The extra libraries are what the Rust static library needs
// besides libc (`rustc --print native-static-libs`). The check says what to do where the
// linker would only say that the file is missing (the path is relative to the include
// directory).

// #cgo CFLAGS: -I${SRCDIR}/../../include
// #cgo LDFLAGS: ${SRCDIR}/../../target/release/libmcpgw.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
// #if defined(__has_include)
// #if !__has_include("../target/release/libmcpgw.a")
// #error "target/release/libmcpgw.a is missing: build it with `make -C bindings/go lib` (or `cargo build --release -p mcpgw`)"
// #endif
// #endif
import "C"
