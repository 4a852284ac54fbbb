package mcpgw_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// The binaries every end-to-end test and example runs: the gateway (run "in the sandbox", a
// temp dir) and the project's MCP test server.
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
	stopContainers()
	os.Exit(code)
}

// newClient makes a client whose sandbox is a fresh temp dir, entered with mk(dir) (the Local
// backend when mk is nil); it launches nothing.
func newClient(t testing.TB, mk func(dir string) mcpgw.Backend, opts ...mcpgw.Option) (*mcpgw.Client, string) {
	t.Helper()
	dir := t.TempDir()
	if mk == nil {
		mk = func(dir string) mcpgw.Backend { return mcpgw.Local(dir) }
	}
	all := append([]mcpgw.Option{
		mcpgw.WithGatewayPath(gatewayBin),
		mcpgw.WithStateDir(filepath.Join(dir, "state")),
		mcpgw.WithTimeout(30 * time.Second),
	}, opts...)
	c, err := mcpgw.NewClient(mk(dir), all...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c, dir
}

// recorder is an argv prefix that logs every process the client starts, one line each (its
// arguments joined by spaces, newlines as spaces), then runs it: the Argv backend, seen from
// outside. Commands of a channel hold "attach".
type recorder struct {
	script, log, broken string
}

func newRecorder(t testing.TB) *recorder {
	dir := t.TempDir()
	r := &recorder{script: filepath.Join(dir, "record"), log: filepath.Join(dir, "log"), broken: filepath.Join(dir, "broken")}
	script := `#!/bin/sh
printf '%s\n' "$(printf '%s ' "$@" | tr '\n' ' ')" >> '` + r.log + `'
case "$*" in *" attach "*) if [ -e '` + r.broken + `' ]; then echo 'recorder: channels are broken' >&2; exit 3; fi ;; esac
exec "$@"
`
	if err := os.WriteFile(r.script, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *recorder) backend() mcpgw.Backend { return mcpgw.Argv([]string{r.script}, false) }

// lines are the processes started so far; channels says whether to count channels or commands.
func (r *recorder) lines(channels bool) []string {
	text, _ := os.ReadFile(r.log)
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if l != "" && strings.Contains(l, " attach ") == channels {
			out = append(out, l)
		}
	}
	return out
}

// breakChannels makes every later channel fail at once (exit 3), or work again.
func (r *recorder) breakChannels(t testing.TB, broken bool) {
	t.Helper()
	if broken {
		if err := os.WriteFile(r.broken, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		_ = os.Remove(r.broken)
	}
}

// sandbox is a gateway launched in a temp dir through a recorder.
type sandbox struct {
	dir     string
	client  *mcpgw.Client
	info    *mcpgw.GatewayInfo
	rec     *recorder
	stopped bool // by the test itself
}

// startSandbox launches a gateway. On cleanup it stops it, checks that its process is gone,
// and that no process the client started carried the gateway's token.
func startSandbox(t *testing.T, opts ...mcpgw.Option) *sandbox {
	t.Helper()
	sb := &sandbox{rec: newRecorder(t)}
	c, dir := newClient(t, func(string) mcpgw.Backend { return sb.rec.backend() }, opts...)
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
			if err := c.CloseSession(context.Background()); err != nil {
				t.Errorf("CloseSession: %v", err)
			}
			if err := c.StopGateway(context.Background()); err != nil {
				t.Errorf("StopGateway: %v", err)
			}
			waitGone(t, "the gateway", info.PID)
		}
		all := append(sb.rec.lines(false), sb.rec.lines(true)...)
		for _, cmd := range all {
			if strings.Contains(cmd, string(bytes.TrimSpace(token))) {
				t.Errorf("a process's argv carries the gateway token")
			}
		}
		if len(all) < 2 {
			t.Errorf("only %d processes were recorded", len(all))
		}
	})
	return sb
}

// oneShotCommands is how many one-shot commands the sandbox's client ran so far.
func (sb *sandbox) oneShotCommands() int { return len(sb.rec.lines(false)) }

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
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
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
	for deadline := began.Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		if got, _ = os.ReadFile(path); string(got) == want {
			return time.Since(began)
		}
	}
	t.Errorf("%s holds %q, want %q", path, got, want)
	return time.Since(began)
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
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

// attachProcesses lists the live `mcpgw-gateway attach` processes whose command line mentions
// dir.
func attachProcesses(dir string) []int {
	var found []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == "attach" && strings.Contains(string(cmdline), dir) && alive(pid) {
			found = append(found, pid)
		}
	}
	return found
}

// killAttach kills the one attach process of dir, the far end of the session channel.
func killAttach(t *testing.T, dir string) {
	t.Helper()
	procs := attachProcesses(dir)
	if len(procs) != 1 {
		t.Fatalf("attach processes of %s: %v", dir, procs)
	}
	if err := syscall.Kill(procs[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// shRun is an Exec backend's RunFunc running commands on this machine with `sh -c` in dir,
// as an SDK's commands.run would in its sandbox; before is called with each command first.
func shRun(dir string, before func(command string)) mcpgw.RunFunc {
	return func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		if before != nil {
			before(command)
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Dir = dir
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 2 * time.Second
		err := cmd.Run()
		var exitErr *exec.ExitError
		switch {
		case ctx.Err() != nil:
			return mcpgw.ExecResult{}, ctx.Err()
		case errors.As(err, &exitErr):
			return mcpgw.ExecResult{ExitCode: exitErr.ExitCode(), Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
		case err != nil && !errors.Is(err, exec.ErrWaitDelay):
			return mcpgw.ExecResult{}, err
		}
		return mcpgw.ExecResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}, nil
	}
}

// shOpener is an Exec backend's OpenFunc opening channels on this machine with `sh -c` in dir,
// keeping each one's process so that a test can kill it.
type shOpener struct {
	dir    string
	mu     sync.Mutex
	cmds   []*exec.Cmd
	opened int
}

func (o *shOpener) open(_ context.Context, command string) (*mcpgw.Channel, error) {
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = o.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.cmds = append(o.cmds, cmd)
	o.opened++
	o.mu.Unlock()
	// Both outputs are read to their end before Wait, as exec.Cmd wants.
	var reads sync.WaitGroup
	reads.Add(2)
	return &mcpgw.Channel{
		Stdin:  stdin,
		Stdout: &doneReader{r: stdout, done: reads.Done},
		Stderr: &doneReader{r: stderr, done: reads.Done},
		Wait: func() (int, error) {
			reads.Wait()
			err := cmd.Wait()
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return exitErr.ExitCode(), nil
			}
			return 0, err
		},
		Kill: func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) },
	}, nil
}

// count is how many channels were opened.
func (o *shOpener) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.opened
}

// doneReader calls done once its reader has ended.
type doneReader struct {
	r    io.Reader
	once sync.Once
	done func()
}

func (d *doneReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	if err != nil {
		d.once.Do(d.done)
	}
	return n, err
}

// entered is a RunFunc that runs commands locally in dir and closes the returned channel when a
// command containing marker starts: the moment a call is in flight.
func entered(dir, marker string) (mcpgw.RunFunc, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return shRun(dir, func(command string) {
		if strings.Contains(command, marker) {
			once.Do(func() { close(ch) })
		}
	}), ch
}
