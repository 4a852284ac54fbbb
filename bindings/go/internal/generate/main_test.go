package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The checked-in generated files are what the generator makes of the current header and Rust
// source. Outside a checkout of the repository (the module cache) there is nothing to compare.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	header := filepath.Join("..", "..", "..", "..", "include", "mcpgw.h")
	rest := filepath.Join("..", "..", "..", "..", "src", "wire", "rest.rs")
	if _, err := os.Stat(header); err != nil {
		t.Skipf("SKIPPED: not in a checkout of the repository (%v)", err)
	}
	files, err := generate(header, rest)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go generate` in bindings/go", name)
		}
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"HOST_IO": "HostIO", "OK": "OK", "GATEWAY_NOT_RUNNING": "GatewayNotRunning"} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
	if got := snake("Connecting"); got != "connecting" {
		t.Errorf("snake = %q", got)
	}
}
