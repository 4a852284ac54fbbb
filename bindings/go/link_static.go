//go:build mcpgw_static && !mcpgw_intree

package mcpgw

// With `-tags mcpgw_static`: the installed libmcpgw.a, linked into the Go binary, which then
// needs no libmcpgw.so at run time. `make install` writes mcpgw-static.pc next to mcpgw.pc for
// this: its Libs name libmcpgw.a and the native libraries the Rust static library needs, as
// `rustc --print native-static-libs` reported them when the library was built.

// #cgo pkg-config: mcpgw-static
import "C"
