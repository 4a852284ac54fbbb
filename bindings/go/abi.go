package mcpgw

// #include <mcpgw.h>
// #if MCPGW_ABI_VERSION != 3
// #error "this version of the Go binding is written for libmcpgw ABI version 3, but the mcpgw.h found has another: install the matching libmcpgw (pkg-config --modversion mcpgw)"
// #endif
import "C"

import "fmt"

// ABIVersion is the libmcpgw ABI version this package is built for (MCPGW_ABI_VERSION of the
// header it was compiled with).
const ABIVersion = C.MCPGW_ABI_VERSION

// abiError is set at init when the library linked at run time has another ABI version than the
// header this package was compiled with (a shared libmcpgw replaced after the build): every
// NewClient then fails with it, before any other call reaches the library.
var abiError = checkABI()

func checkABI() error {
	if got := uint32(C.mcpgw_abi_version()); got != ABIVersion {
		return &Error{Op: "init", Code: CodeInvalidState, Message: fmt.Sprintf(
			"init: the libmcpgw loaded at run time (version %s) has ABI version %d, but this program "+
				"was built against ABI version %d: rebuild it, or make the matching libmcpgw.so "+
				"the one found at run time (LD_LIBRARY_PATH, rpath)", Version(), got, ABIVersion)}
	}
	return nil
}

// Version is the version of the linked libmcpgw, e.g. "0.3.0".
func Version() string { return C.GoString(C.mcpgw_version()) }
