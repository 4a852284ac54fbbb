//go:build mcpgw_vendor_prebuilt

package mcpgw

// Never built (no build sets this tag): `go mod vendor` honours no build constraint, so these
// imports make it copy the prebuilt directories, with libmcpgw.a and mcpgw.h, into vendor/,
// where link_prebuilt.go finds them. (A directory without an imported Go package is left out
// of vendor/.)

import (
	_ "github.com/mcpgw/mcpgw/bindings/go/prebuilt/include"
	_ "github.com/mcpgw/mcpgw/bindings/go/prebuilt/linux-amd64"
)
