package mcpgw_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// standIn puts an executable called name first on PATH: it records its argv, one argument a
// line, answers for the pods named "nopod" and "unreachable" as kubectl does (exit 1 with
// kubectl's own words), and for any other pod runs the `sh -c` command after "--" on this
// machine, the pod being this machine. Not parallel: it changes PATH.
func standIn(t *testing.T, name string) (argvFile string) {
	dir := t.TempDir()
	argvFile = filepath.Join(dir, "argv")
	script := `#!/bin/sh
for a in "$0" "$@"; do printf '%s\n' "$a"; done >> '` + argvFile + `'
for a in "$@"; do
	case $a in
	nopod) echo 'Error from server (NotFound): pods "nopod" not found' >&2; exit 1 ;;
	unreachable) echo 'The connection to the server localhost:8080 was refused - did you specify the right host or port?' >&2; exit 1 ;;
	esac
done
while [ "$1" != -- ]; do shift; done
shift
exec "$@"
`
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return argvFile
}

// The kubectl backend through a stand-in kubectl: its argv, a whole cycle one-shot and over a
// session, and kubectl's own failures as a BackendError.
func TestKubectlBackend(t *testing.T) {
	argvFile := standIn(t, "kubectl")
	ctx := context.Background()
	c, dir := newClient(t, func(string) mcpgw.Backend {
		return mcpgw.Kubectl("sandbox-0", mcpgw.PodOptions{Namespace: "agents", Container: "work", Options: []string{"--context", "prod"}})
	})
	info, err := c.StartGateway(ctx)
	if err != nil {
		t.Fatalf("StartGateway through kubectl: %v", err)
	}
	text, _ := os.ReadFile(argvFile)
	want := "kubectl\n--context\nprod\nexec\n-i\n--namespace\nagents\n--container\nwork\nsandbox-0\n--\nsh\n-c\n"
	if !strings.Contains(string(text), want) {
		t.Errorf("kubectl's argv:\n%s\nwant it to hold:\n%s", text, want)
	}
	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenSession(ctx); err != nil {
		t.Fatalf("OpenSession through kubectl: %v", err)
	}
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "via kubectl"}); err != nil || chunk.Text() != "via kubectl" {
		t.Errorf("a call over kubectl exec -i: %v, %v", chunk, err)
	}
	if err := c.CloseSession(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the gateway", info.PID)
	if procs := attachProcesses(dir); len(procs) != 0 {
		t.Errorf("attach processes left: %v", procs)
	}

	for pod, state := range map[string]mcpgw.BackendFailureState{"nopod": mcpgw.BackendGone, "unreachable": mcpgw.BackendUnreachable} {
		c, err := mcpgw.NewClient(mcpgw.Kubectl(pod))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for what, op := range map[string]func() error{
			"one-shot": func() error { _, err := c.StartGateway(ctx); return err },
			"session":  func() error { _, err := c.OpenSession(ctx); return err },
		} {
			err := op()
			var be *mcpgw.BackendError
			if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.As(err, &be) || be.State != state || be.Backend != "kubectl" ||
				be.Target != pod || be.ExitCode != 1 {
				t.Errorf("%s in pod %s: %v", what, pod, err)
			}
		}
	}
}
