// Package include holds mcpgw.h in released versions of the module (a checkout builds it:
// `make -C bindings/go prebuilt`). It has no Go code: the package exists so that `go mod
// vendor` copies the header (see vendor_prebuilt.go).
package include
