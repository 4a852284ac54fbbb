//go:build mcpgw_static && !mcpgw_intree

package mcpgw

// With `-tags mcpgw_static`: the installed libmcpgw.a, found through pkg-config like the default,
// linked into the Go binary, which then needs no libmcpgw.so at run time. `pkg-config --static`
// adds the libraries the Rust static library needs (mcpgw.pc's Libs.private, written by `make
// install` from `rustc --print native-static-libs`). The linker flags here come before
// pkg-config's, so -lmcpgw finds libmcpgw.a first (-L applies to every -l, wherever it is), and
// --as-needed keeps pkg-config's own -lmcpgw (the shared library beside it) out of the binary.

// #cgo LDFLAGS: -Wl,-Bstatic -lmcpgw -Wl,-Bdynamic -Wl,--as-needed
// #cgo pkg-config: --static mcpgw
import "C"
