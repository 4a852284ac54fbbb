// Package linuxamd64 holds the prebuilt static libmcpgw.a for linux/amd64 in released versions
// of the module (a checkout builds it: `make -C bindings/go prebuilt`), which the default build
// links (link_prebuilt.go). It has no Go code: the package exists so that `go mod vendor`
// copies the archive (see vendor_prebuilt.go).
package linuxamd64
