//go:build mcpgw_pkgconfig && !mcpgw_intree && !mcpgw_static

package mcpgw

// With `-tags mcpgw_pkgconfig`: libmcpgw as installed (`make install PREFIX=...` at the
// repository root, or the release tarball unpacked anywhere), found through pkg-config (set
// PKG_CONFIG_PATH to PREFIX/lib/pkgconfig when PREFIX is not a system directory). The header
// comes from the installed include directory. Which library is linked is the linker's choice:
// libmcpgw.so when it is installed (then found at run time like any shared library: ldconfig,
// LD_LIBRARY_PATH or an rpath given in CGO_LDFLAGS), else libmcpgw.a. The tag mcpgw_static
// links the installed libmcpgw.a (mcpgw-static.pc).

// #cgo pkg-config: mcpgw
import "C"
