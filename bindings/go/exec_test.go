package mcpgw_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

func TestLocalExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exec := mcpgw.LocalExec(dir)
	ctx := context.Background()

	res, err := exec(ctx, `pwd; printf 'to stderr' >&2; exit 7`)
	if err != nil || res.ExitCode != 7 || strings.TrimSpace(string(res.Stdout)) != dir || string(res.Stderr) != "to stderr" {
		t.Errorf("got %+v, %v", res, err)
	}
	if res, err := exec(ctx, `kill -9 $$`); err != nil || res.ExitCode != 128+9 {
		t.Errorf("killed by a signal: %+v, %v", res, err)
	}
	if _, err := mcpgw.LocalExec(filepath.Join(dir, "missing"))(ctx, "true"); err == nil {
		t.Error("a missing directory ran")
	}
}

// A cancelled command dies with everything it started, and says so.
func TestLocalExecCancelKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	began := time.Now()
	_, err := mcpgw.LocalExec(dir)(ctx, `sleep 30 & echo $! > pid; wait`)
	if !errors.Is(err, context.Canceled) || time.Since(began) > 3*time.Second {
		t.Fatalf("cancelled command: %v after %v", err, time.Since(began))
	}
	text, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the command's child", pid)
}

// standIn puts an executable called name first on PATH: it records its argv, one argument a
// line, exits 125 for the target "gone" like docker does, and otherwise runs the `sh -c`
// command that ends its argv here.
func standIn(t *testing.T, name string) (argvFile string) {
	dir := t.TempDir()
	argvFile = filepath.Join(dir, "argv")
	script := `#!/bin/sh
for a in "$0" "$@"; do printf '%s\n' "$a"; done > '` + argvFile + `'
for a in "$@"; do [ "$a" = gone ] && { echo "Error: No such container: gone" >&2; exit 125; }; done
while [ "$1" != sh ]; do shift; done
exec "$@"
`
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return argvFile
}

func readArgv(t *testing.T, file string) []string {
	t.Helper()
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	argv[0] = filepath.Base(argv[0])
	return argv
}

const quotedCommand = `printf '%s' "it's" $HOME; exit 3`

func TestDockerExec(t *testing.T) {
	argvFile := standIn(t, "docker")
	ctx := context.Background()
	res, err := mcpgw.DockerExec("box", "--user", "agent")(ctx, quotedCommand)
	if err != nil || res.ExitCode != 3 || !bytes.HasPrefix(res.Stdout, []byte("it's")) {
		t.Errorf("got %+v, %v", res, err)
	}
	want := []string{"docker", "exec", "--user", "agent", "box", "sh", "-c", quotedCommand}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	// docker's own failure (exit 125) means the command never ran.
	_, err = mcpgw.DockerExec("gone")(ctx, "true")
	if err == nil || !strings.Contains(err.Error(), "No such container") {
		t.Errorf("missing container: %v", err)
	}
}

func TestKubectlExec(t *testing.T) {
	argvFile := standIn(t, "kubectl")
	res, err := mcpgw.KubectlExec("sandbox-0", "--namespace", "agents", "--container", "work")(context.Background(), quotedCommand)
	if err != nil || res.ExitCode != 3 || !bytes.HasPrefix(res.Stdout, []byte("it's")) {
		t.Errorf("got %+v, %v", res, err)
	}
	want := []string{"kubectl", "exec", "--namespace", "agents", "--container", "work", "sandbox-0", "--", "sh", "-c", quotedCommand}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
}
