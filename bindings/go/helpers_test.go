package mcpgw_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// The binaries every end-to-end test and example runs: the gateway (run "in the sandbox", a
// temp dir driven with sh -c) and the project's MCP test server.
var (
	repoRoot      string
	gatewayBin    string
	testServerBin string
)

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// requireAttach skips a session test when the gateway binary has no `attach` subcommand (a
// build from before the session channel), saying so.
func requireAttach(t testing.TB) {
	t.Helper()
	attachOnce.Do(func() {
		out, _ := exec.Command(gatewayBin, "--help").CombinedOutput()
		hasAttach = strings.Contains(string(out), "mcpgw-gateway attach")
	})
	if !hasAttach {
		t.Skipf("SKIPPED: %s has no attach subcommand (the session channel's gateway side)", gatewayBin)
	}
}

var (
	attachOnce sync.Once
	hasAttach  bool
)

// local is LocalExec as a func(dir) Exec, the form newClient takes.
func local(dir string) mcpgw.Exec { return mcpgw.LocalExec(dir) }

func TestMain(m *testing.M) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	repoRoot = root
	gatewayBin = envOr("MCPGW_TEST_GATEWAY", filepath.Join(root, "target", "debug", "mcpgw-gateway"))
	testServerBin = envOr("MCPGW_TEST_SERVER", filepath.Join(root, "target", "debug", "mcpgw-testserver"))
	for _, p := range []string{gatewayBin, testServerBin} {
		if _, err := os.Stat(p); err != nil {
			fmt.Fprintf(os.Stderr, "%s is missing: run `make -C bindings/go test`, or build it "+
				"with `cargo build -p mcpgw-gateway -p mcpgw-testserver` at the repository root\n", p)
			os.Exit(2)
		}
	}
	code := m.Run()
	stopDockerSandboxes()
	os.Exit(code)
}

// sandbox is a gateway launched in a temp dir through LocalExec.
type sandbox struct {
	dir     string
	client  *mcpgw.Client
	info    *mcpgw.GatewayInfo
	stopped bool // by the test itself

	mu       sync.Mutex
	commands []string // every command run, to check that none carries the token
}

// newClient makes a client whose sandbox is a fresh temp dir; it launches nothing.
func newClient(t testing.TB, exec func(dir string) mcpgw.Exec, opts ...mcpgw.Option) (*mcpgw.Client, string) {
	t.Helper()
	dir := t.TempDir()
	if exec == nil {
		exec = local
	}
	all := append([]mcpgw.Option{
		mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(dir, "state")),
		mcpgw.WithTimeout(30 * time.Second),
	}, opts...)
	c, err := mcpgw.NewClient(exec(dir), all...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, dir
}

// startSandbox launches a gateway. On cleanup it stops it, checks that its process is gone,
// and that no command the client ran carried the gateway's token.
func startSandbox(t *testing.T, opts ...mcpgw.Option) *sandbox {
	t.Helper()
	sb := &sandbox{}
	recording := func(dir string) mcpgw.Exec {
		run := mcpgw.LocalExec(dir)
		return mcpgw.StdinExecFunc(func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
			sb.mu.Lock()
			sb.commands = append(sb.commands, command)
			sb.mu.Unlock()
			return run(ctx, command, stdin)
		})
	}
	c, dir := newClient(t, recording, opts...)
	info, err := c.StartGateway(context.Background())
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	token, err := os.ReadFile(info.TokenFile)
	if err != nil || len(bytes.TrimSpace(token)) < 32 {
		t.Fatalf("token file %s: %q, %v", info.TokenFile, token, err)
	}
	sb.dir, sb.client, sb.info = dir, c, info
	t.Cleanup(func() {
		if !sb.stopped {
			if err := c.StopGateway(context.Background()); err != nil {
				t.Errorf("StopGateway: %v", err)
			}
			waitGone(t, "the gateway", info.PID)
		}
		sb.mu.Lock()
		defer sb.mu.Unlock()
		for _, cmd := range sb.commands {
			if strings.Contains(cmd, string(bytes.TrimSpace(token))) {
				t.Errorf("a command carries the gateway token")
			}
		}
		if len(sb.commands) < 2 {
			t.Errorf("only %d commands were recorded", len(sb.commands))
		}
	})
	return sb
}

// testServerSpec registers the project's MCP test server over stdio.
func testServerSpec(name string) mcpgw.MCPSpec {
	return mcpgw.StdioSpec(name, testServerBin, "stdio")
}

// alive reports whether pid is a live process (a zombie waiting for its reaper is not).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name, which may itself hold ") ".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitGone fails the test unless pid has exited within a few seconds.
func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Errorf("%s: no pid", what)
		return
	}
	for deadline := time.Now().Add(5 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Errorf("%s (pid %d) is still running", what, pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits up to a few seconds for path to hold want, and says how long it took.
func waitFile(t *testing.T, path, want string) time.Duration {
	t.Helper()
	began := time.Now()
	var got []byte
	for deadline := began.Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if got, _ = os.ReadFile(path); string(got) == want {
			return time.Since(began)
		}
	}
	t.Errorf("%s holds %q, want %q", path, got, want)
	return time.Since(began)
}

// waitFor polls cond until it holds, failing the test after a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// entered is an Exec that runs commands locally in dir and closes the returned channel when a
// command containing marker starts: the moment a call is in flight.
func entered(dir, marker string) (mcpgw.Exec, <-chan struct{}) {
	run := mcpgw.LocalExec(dir)
	ch := make(chan struct{})
	var once sync.Once
	return mcpgw.StdinExecFunc(func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		if strings.Contains(command, marker) {
			once.Do(func() { close(ch) })
		}
		return run(ctx, command, stdin)
	}), ch
}

// asError is the *mcpgw.Error in err, failing the test when there is none.
func asError(t *testing.T, err error) *mcpgw.Error {
	t.Helper()
	var e *mcpgw.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *mcpgw.Error", err, err)
	}
	return e
}
