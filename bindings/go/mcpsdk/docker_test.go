package mcpsdk_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The official Go SDK's client of tests/clients/go runs its script of every feature of
// server-everything (tools, resources with a subscription, prompts, completion, logging,
// progress, cancel, and sampling, elicitation and roots answered by the SDK's handlers) against
// the server inside a Docker container, through this package's transport over the binding's
// Docker session; every answer is compared with the same client's run straight to a
// server-everything on this machine, as cli/tests/clients.rs compares the endpoint's runs.
func TestEverythingInDockerThroughTheTransport(t *testing.T) {
	t.Parallel()
	sandboxSh := filepath.Join(repoRoot, "tests", "docker", "sandbox.sh")
	if out, err := exec.Command("sh", sandboxSh, "check").Output(); err != nil {
		t.Skipf("SKIPPED: docker: %s", strings.TrimSpace(string(out)+" "+err.Error()))
	}
	// The node test image (its gateway from `make static`, which make -C bindings/go test-sdk
	// runs), named by the Makefile or built here.
	image := os.Getenv("MCPGW_TEST_NODE_IMAGE")
	if image == "" {
		image = strings.TrimSpace(run(t, exec.Command("sh", sandboxSh, "image", "--node")))
	}
	everything := filepath.Join(t.TempDir(), "everything")
	build := exec.Command("go", "build", "-tags", "mcpgw_intree", "-o", everything, ".")
	build.Dir = filepath.Join(repoRoot, "tests", "clients", "go")
	run(t, build)

	name := fmt.Sprintf("mcpgw-go-sdk-%d", os.Getpid())
	container := strings.TrimSpace(run(t, exec.Command("sh", sandboxSh, "start", image, name)))
	t.Cleanup(func() { _ = exec.Command("sh", sandboxSh, "stop", container).Run() })

	direct := make(chan map[string]any, 1)
	go func() { direct <- runScript(t, everything, "stdio", "node", everythingJS, "stdio") }()
	got := runScript(t, everything, "binding", "docker", container,
		"node", "/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js", "stdio")
	assertSameAnswers(t, got, <-direct)

	// The client stopped the gateway it launched: nothing runs in the container but its init
	// and its sleep.
	var left []string
	for _, line := range strings.Split(run(t, exec.Command("docker", "exec", container, "ps", "-o", "pid,args")), "\n")[1:] {
		_, args, _ := strings.Cut(strings.TrimSpace(line), " ")
		args = strings.TrimSpace(args)
		if args != "" && !strings.HasPrefix(args, "/sbin/docker-init") && !strings.HasPrefix(args, "sleep ") &&
			!strings.HasPrefix(args, "ps ") {
			left = append(left, line)
		}
	}
	if len(left) > 0 {
		t.Errorf("left running in the container: %q", left)
	}
}

// run runs cmd, failing the test with its stderr when it fails; its stdout.
func run(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, stderr.String())
	}
	return string(out)
}

// runScript runs the client with args; the JSON object it printed.
func runScript(t *testing.T, client string, args ...string) map[string]any {
	t.Helper()
	cmd := exec.Command(client, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("the Go SDK client %v: %v", args, err)
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Errorf("the Go SDK client %v printed no JSON object (%v): %s", args, err, out)
	}
	return v
}

// assertSameAnswers fails the test, naming each step that differs, unless two runs of the
// script got the same answers but for ids and times: testkit's mcpgw-same-answers judges, by the
// rules of the endpoint's tests.
func assertSameAnswers(t *testing.T, got, want map[string]any) {
	t.Helper()
	if got == nil || want == nil {
		t.Fatal("a run printed nothing to compare")
	}
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "got.json"), filepath.Join(dir, "want.json")}
	for i, v := range []map[string]any{got, want} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(files[i], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Exit 1: they differ, each step said; anything else is a failure of the comparison.
	out, err := exec.Command(sameAnswersBin, "go", files[0], files[1]).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		t.Errorf("%s", out)
	case err != nil:
		t.Fatalf("%s: %v: %s", sameAnswersBin, err, out)
	}
}
