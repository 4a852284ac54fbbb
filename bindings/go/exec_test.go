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

	res, err := exec(ctx, `pwd; printf 'to stderr' >&2; exit 7`, nil)
	if err != nil || res.ExitCode != 7 || strings.TrimSpace(string(res.Stdout)) != dir || string(res.Stderr) != "to stderr" {
		t.Errorf("got %+v, %v", res, err)
	}
	if res, err := exec(ctx, `kill -9 $$`, nil); err != nil || res.ExitCode != 128+9 {
		t.Errorf("killed by a signal: %+v, %v", res, err)
	}
	if res, err := exec(ctx, `wc -c; cat`, nil); err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("no stdin: %+v, %v", res, err)
	}
	in := bytes.Repeat([]byte("0123456789\x00\xff"), 100_000)
	if res, err := exec(ctx, `cat`, in); err != nil || !bytes.Equal(res.Stdout, in) {
		t.Errorf("stdin of %d bytes came back as %d bytes (%v)", len(in), len(res.Stdout), err)
	}
	if _, err := mcpgw.LocalExec(filepath.Join(dir, "missing"))(ctx, "true", nil); err == nil {
		t.Error("a missing directory ran")
	}
	if !exec.PassesStdin() || (mcpgw.ExecFunc(nil)).PassesStdin() {
		t.Error("PassesStdin")
	}
}

// A cancelled command dies with everything it started, and says so.
func TestLocalExecCancelKillsTheGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancelled once the command has started its child.
		for ctx.Err() == nil {
			if text, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(text), "\n") {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	began := time.Now()
	_, err := mcpgw.LocalExec(dir)(ctx, `sleep 30 & echo $! > pid.tmp; mv pid.tmp pid; wait`, nil)
	if !errors.Is(err, context.Canceled) || time.Since(began) > 10*time.Second {
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
// line, and answers for the target named by its argv like the real CLI does (see
// tests/docker/README.md); for any other target it runs the `sh -c` command that ends its argv.
func standIn(t *testing.T, name string) (argvFile string) {
	dir := t.TempDir()
	argvFile = filepath.Join(dir, "argv")
	script := `#!/bin/sh
for a in "$0" "$@"; do printf '%s\n' "$a"; done > '` + argvFile + `'
for a in "$@"; do
	case $a in
	gone) echo "Error response from daemon: No such container: gone" >&2; exit 1 ;;
	nodaemon) echo "Cannot connect to the Docker daemon at unix:///nonexistent.sock. Is the docker daemon running?" >&2; exit 1 ;;
	nopod) echo 'Error from server (NotFound): pods "nopod" not found' >&2; exit 1 ;;
	noupgrade) echo "error: unable to upgrade connection: container not found (\"work\")" >&2; exit 1 ;;
	nosh) echo 'OCI runtime exec failed: exec failed: unable to start container process: exec: "sh": executable file not found in $PATH: unknown'; exit 126 ;;
	esac
done
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

const quotedCommand = `printf '%s' "it's" $HOME; echo failing >&2; exit 1`

// The argv of DockerExec, and how it tells docker's failures from the command's (the real
// daemon's answers are tested in docker_test.go).
func TestDockerExecArgv(t *testing.T) {
	argvFile := standIn(t, "docker")
	ctx := context.Background()
	res, err := mcpgw.DockerExec("box", "--user", "agent")(ctx, quotedCommand, nil)
	if err != nil || res.ExitCode != 1 || !bytes.HasPrefix(res.Stdout, []byte("it's")) {
		t.Errorf("a command exiting 1: %+v, %v", res, err)
	}
	want := []string{"docker", "exec", "--user", "agent", "box", "sh", "-c", quotedCommand}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	if res, err := mcpgw.DockerExec("box")(ctx, "cat", []byte("in")); err != nil || string(res.Stdout) != "in" {
		t.Errorf("stdin: %+v, %v", res, err)
	}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, []string{"docker", "exec", "-i", "box", "sh", "-c", "cat"}) {
		t.Errorf("argv with stdin %q", got)
	}
	for _, target := range []string{"gone", "nodaemon", "nosh"} {
		_, err := mcpgw.DockerExec(target)(ctx, "true", nil)
		var be *mcpgw.BackendError
		if !errors.As(err, &be) || be.Backend != "docker" || be.Target != target {
			t.Errorf("%s: %v", target, err)
		}
	}
}

func TestKubectlExecArgv(t *testing.T) {
	argvFile := standIn(t, "kubectl")
	ctx := context.Background()
	res, err := mcpgw.KubectlExec("sandbox-0", "--namespace", "agents", "--container", "work")(ctx, quotedCommand, nil)
	if err != nil || res.ExitCode != 1 || !bytes.HasPrefix(res.Stdout, []byte("it's")) {
		t.Errorf("got %+v, %v", res, err)
	}
	want := []string{"kubectl", "exec", "--namespace", "agents", "--container", "work", "sandbox-0", "--", "sh", "-c", quotedCommand}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	if res, err := mcpgw.KubectlExec("pod")(ctx, "cat", []byte("in")); err != nil || string(res.Stdout) != "in" {
		t.Errorf("stdin: %+v, %v", res, err)
	}
	if got := readArgv(t, argvFile); !reflect.DeepEqual(got, []string{"kubectl", "exec", "-i", "pod", "--", "sh", "-c", "cat"}) {
		t.Errorf("argv with stdin %q", got)
	}
	for _, target := range []string{"nopod", "noupgrade"} {
		_, err := mcpgw.KubectlExec(target)(ctx, "true", nil)
		var be *mcpgw.BackendError
		if !errors.As(err, &be) || be.Backend != "kubectl" || be.ExitCode != 1 {
			t.Errorf("%s: %v", target, err)
		}
	}
}
