//go:build !(linux && amd64) && !mcpgw_intree && !mcpgw_pkgconfig && !mcpgw_static

package mcpgw

// No prebuilt libmcpgw for this platform: say so at build time, with what to do.

// #error "the module carries a prebuilt libmcpgw for linux/amd64 only: on this platform build libmcpgw from the mcpgw repository (`make install PREFIX=...`) and build with -tags mcpgw_pkgconfig (or mcpgw_static)"
import "C"
