package gateway

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A released module carries an ELF executable; a checkout carries none and says so.
func TestBytesIsTheGatewayOrSaysThereIsNone(t *testing.T) {
	data, err := Bytes()
	switch {
	case err == nil:
		if !bytes.HasPrefix(data, []byte("\x7fELF")) {
			t.Fatalf("the embedded gateway is not an ELF file (%d bytes)", len(data))
		}
	case errors.Is(err, ErrNotBundled):
		if _, perr := Path(); !errors.Is(perr, ErrNotBundled) {
			t.Fatalf("Path() = %v, want ErrNotBundled", perr)
		}
	default:
		t.Fatalf("Bytes() = %v", err)
	}
}

func TestWriteOnceWritesReusesAndRepairs(t *testing.T) {
	dir := t.TempDir()
	data := []byte("\x7fELF a gateway")
	path, err := writeOnce(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(filepath.Dir(path)) != dir || filepath.Base(path) != "mcpgw-gateway" {
		t.Fatalf("path %s is not dir/gateway-<hash>/mcpgw-gateway under %s", path, dir)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v, want 0755", st.Mode().Perm())
	}

	// The same bytes: the same file, untouched.
	again, err := writeOnce(dir, data)
	if err != nil || again != path {
		t.Fatalf("second writeOnce = %q, %v; want %q", again, err, path)
	}
	if st2, _ := os.Stat(path); !os.SameFile(st, st2) {
		t.Fatal("the file was rewritten although it held the same bytes")
	}

	// A damaged file is replaced.
	if err := os.WriteFile(path, []byte("truncated"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := writeOnce(dir, data); err != nil {
		t.Fatal(err)
	}
	if have, _ := os.ReadFile(path); !bytes.Equal(have, data) {
		t.Fatalf("the damaged file holds %q", have)
	}

	// Other bytes (another release) go elsewhere, and nothing temporary is left.
	other, err := writeOnce(dir, []byte("\x7fELF another gateway"))
	if err != nil || other == path {
		t.Fatalf("writeOnce of other bytes = %q, %v", other, err)
	}
	for _, p := range []string{path, other} {
		entries, _ := os.ReadDir(filepath.Dir(p))
		if len(entries) != 1 {
			t.Fatalf("%s holds %d entries, want only mcpgw-gateway", filepath.Dir(p), len(entries))
		}
	}
}

func TestWriteOnceSaysWhereItCannotWrite(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := writeOnce(blocker, []byte("x"))
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(blocker)) {
		t.Fatalf("writeOnce under a file = %v; want an error naming %s", err, blocker)
	}
}
