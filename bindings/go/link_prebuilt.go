//go:build linux && amd64 && !mcpgw_intree && !mcpgw_pkgconfig && !mcpgw_static

package mcpgw

// The default on linux/amd64: the prebuilt static libmcpgw and its header that released
// versions of this module carry in prebuilt/ (as `go get` fetches them), linked into the Go
// binary, so building needs only a C compiler and the program needs no libmcpgw.so at run
// time; the native libraries it needs are in link_syslibs.go. The tags mcpgw_pkgconfig and
// mcpgw_static link an installed libmcpgw instead (link_pkgconfig.go, link_static.go).
//
// A checkout of the repository has no prebuilt/ files (they are built, `make -C bindings/go
// prebuilt`): the #error says so where the compiler would only say that mcpgw.h is missing.

// #cgo CFLAGS: -I${SRCDIR}/prebuilt/include
// #cgo LDFLAGS: -L${SRCDIR}/prebuilt/linux-amd64 -lmcpgw
// #if defined(__has_include)
// #if !__has_include(<mcpgw.h>) || !__has_include("../linux-amd64/libmcpgw.a")
// #error "this copy of the module has no prebuilt libmcpgw (prebuilt/include/mcpgw.h, prebuilt/linux-amd64/libmcpgw.a): released versions carry them; in a checkout run `make -C bindings/go prebuilt`, or build with -tags mcpgw_pkgconfig against an installed libmcpgw"
// #endif
// #endif
import "C"
