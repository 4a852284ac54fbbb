// Package gateway carries the static mcpgw-gateway for linux/amd64 sandboxes, the one of the
// module's release, embedded in the program that imports it, so that a program built from
// `go get` alone can install the gateway into a sandbox:
//
//	path, err := gateway.Path()
//	if err != nil { ... }
//	_, err = client.EnsureGatewayBinary(ctx, path)
//
// The binary adds about 12 MiB to the program, which is why it is a package of its own: a
// program that installs the gateway some other way (baked into its image, say) does not import
// it. Only released versions of the module carry the binary; in a checkout of the repository
// Bytes and Path fail and say so.
package gateway

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// The released module's bin/ holds linux-amd64/mcpgw-gateway besides a README; a checkout's
// only the README.
//
//go:embed bin
var files embed.FS

const embedded = "bin/linux-amd64/mcpgw-gateway"

// ErrNotBundled is returned by Bytes and Path when this copy of the module carries no gateway
// binary (a checkout of the repository rather than a released version).
var ErrNotBundled = errors.New("this copy of github.com/mcpgw/mcpgw/bindings/go carries no " +
	"mcpgw-gateway (released versions do): give EnsureGatewayBinary the path of a static " +
	"gateway instead (`make static` in the repository builds one)")

// Bytes returns the embedded static mcpgw-gateway for linux/amd64.
func Bytes() ([]byte, error) {
	data, err := files.ReadFile(embedded)
	if err != nil {
		return nil, ErrNotBundled
	}
	return data, nil
}

var cached struct {
	once sync.Once
	path string
	err  error
}

// Path returns the path of a file holding the embedded gateway, for Client.EnsureGatewayBinary
// (which reads it from the host). The file is written once into the user's cache directory
// (os.UserCacheDir, else the temporary directory), under mcpgw/gateway-<SHA-256 prefix>/, and
// checked and reused by every later call and program of the same release.
func Path() (string, error) {
	cached.once.Do(func() {
		data, err := Bytes()
		if err != nil {
			cached.err = err
			return
		}
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cached.path, cached.err = writeOnce(filepath.Join(base, "mcpgw"), data)
	})
	return cached.path, cached.err
}

// writeOnce makes dir/gateway-<hash>/mcpgw-gateway hold data, executable, and returns its
// path. A file already there with the same bytes is kept; any other is replaced. The bytes are
// written to a temporary file and renamed into place, so a concurrent reader never sees a
// partial file.
func writeOnce(dir string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	target := filepath.Join(dir, "gateway-"+hex.EncodeToString(sum[:8]), "mcpgw-gateway")
	if have, err := os.ReadFile(target); err == nil && bytes.Equal(have, data) {
		return target, nil
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("gateway: cannot write the gateway binary to %s: %w", target, err)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fail(err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), ".mcpgw-gateway-*")
	if err != nil {
		return fail(err)
	}
	_, werr := tmp.Write(data)
	err = errors.Join(werr, tmp.Close(), os.Chmod(tmp.Name(), 0o755))
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fail(err)
	}
	return target, nil
}
