package mcpgw

// #include <mcpgw.h>
import "C"

// Version is the version of the linked libmcpgw, e.g. "0.1.0".
func Version() string { return C.GoString(C.mcpgw_version()) }
