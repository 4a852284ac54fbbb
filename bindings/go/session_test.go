package mcpgw_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// testOpener opens session channels on this machine like LocalSession, but keeps each
// channel's process so that a test can kill it, and can be switched to channels that die at
// once.
type testOpener struct {
	dir    string
	broken atomic.Bool
	mu     sync.Mutex
	procs  []*exec.Cmd
	opened atomic.Int32
}

type testChannel struct {
	io.Reader
	stdin io.WriteCloser
	cmd   *exec.Cmd
	once  sync.Once
	err   error
}

func (c *testChannel) Write(p []byte) (int, error) { return c.stdin.Write(p) }

func (c *testChannel) Close() error {
	c.once.Do(func() {
		c.stdin.Close()
		c.err = c.cmd.Wait()
	})
	return c.err
}

func (o *testOpener) open(_ context.Context, command string) (io.ReadWriteCloser, error) {
	o.opened.Add(1)
	if o.broken.Load() {
		command = "echo 'no gateway here' >&2; exit 3"
	}
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
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.procs = append(o.procs, cmd)
	o.mu.Unlock()
	return &testChannel{Reader: stdout, stdin: stdin, cmd: cmd}, nil
}

// kill kills the process group of the last channel opened.
func (o *testOpener) kill(t *testing.T) {
	o.mu.Lock()
	cmd := o.procs[len(o.procs)-1]
	o.mu.Unlock()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

// attachProcesses lists the live `mcpgw-gateway attach` processes whose command line mentions dir.
func attachProcesses(dir string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == "attach" && strings.Contains(string(cmdline), dir) && alive(atoi(e.Name())) {
			found = append(found, e.Name())
		}
	}
	return found
}

func atoi(s string) int {
	var n int
	_, _ = fmt.Sscan(s, &n)
	return n
}

// sessionSandbox is a sandbox whose client has a session open through a testOpener.
func sessionSandbox(t *testing.T) (*sandbox, *testOpener) {
	t.Helper()
	requireAttach(t)
	sb := startSandbox(t)
	if err := sb.client.AddMCP(context.Background(), testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	opener := &testOpener{dir: sb.dir}
	info, err := sb.client.OpenSession(context.Background(), opener.open)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if info.Launched || info.Port != sb.info.Port || info.PID != sb.info.PID || info.V != 1 {
		t.Fatalf("session info %+v, gateway %+v", info, sb.info)
	}
	t.Cleanup(func() { sb.client.CloseSession() })
	return sb, opener
}

// oneShotCommands is how many commands the sandbox's client ran one-shot so far.
func (sb *sandbox) oneShotCommands() int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return len(sb.commands)
}

// Every REST method goes over the session: no command runs one-shot.
func TestSessionCarriesEveryRESTCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := sessionSandbox(t)
	c := sb.client
	before := sb.oneShotCommands()

	if h, err := c.Health(ctx); err != nil || h.Status != "ok" || h.InstanceNonce == nil || *h.InstanceNonce != sb.info.InstanceNonce {
		t.Errorf("Health = %+v, %v", h, err)
	}
	if err := c.AddMCP(ctx, testServerSpec("second")); err != nil {
		t.Errorf("AddMCP: %v", err)
	}
	if specs, err := c.ListMCPs(ctx); err != nil || len(specs) != 2 {
		t.Errorf("ListMCPs = %v, %v", specs, err)
	}
	if tools, err := c.ListTools(ctx, "ts"); err != nil || len(tools) < 6 {
		t.Errorf("ListTools = %v, %v", tools, err)
	}
	text := "over the session: it's $(not) `run` \"quoted\" \\ ünïcödé\nline two"
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": text}); err != nil || chunk.Text() != text {
		t.Errorf("CallTool echo = %v, %v", chunk, err)
	}
	if chunk, err := c.CallTool(ctx, "ts", "media", nil); err != nil || len(chunk.Content) != 5 || len(chunk.Content[3].Source.Data) != 256 {
		t.Errorf("CallTool media = %v, %v", chunk, err)
	}
	if _, err := c.CallTool(ctx, "ts", "nope", nil); !errors.Is(err, mcpgw.ErrNotFound) || asError(t, err).HTTPStatus != 404 {
		t.Errorf("unknown tool: %v", err)
	}
	if err := c.RemoveMCP(ctx, "second"); err != nil {
		t.Errorf("RemoveMCP: %v", err)
	}
	bob := c.Scope("bob", "s1")
	if err := bob.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Errorf("AddMCP in a scope: %v", err)
	}
	if specs, err := bob.ListMCPs(ctx); err != nil || len(specs) != 1 {
		t.Errorf("scope's ListMCPs = %v, %v", specs, err)
	}
	if n := sb.oneShotCommands() - before; n != 0 {
		t.Errorf("%d commands ran one-shot while the session was open", n)
	}
	if c.Session() == nil {
		t.Error("Session() is nil while open")
	}
}

// A session opened by a client that knows no gateway launches one in the same exec.
func TestSessionLaunchesTheGateway(t *testing.T) {
	t.Parallel()
	requireAttach(t)
	ctx := context.Background()
	c, dir := newClient(t, nil)
	info, err := c.OpenSession(ctx, mcpgw.LocalSession(dir))
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	if !info.Launched || info.PID <= 0 || c.Port() != info.Port || info.InstanceNonce == nil {
		t.Fatalf("info %+v, port %d", info, c.Port())
	}
	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "launched"}); err != nil || chunk.Text() != "launched" {
		t.Fatalf("CallTool: %v, %v", chunk, err)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatalf("StopGateway: %v", err)
	}
	waitGone(t, "the gateway", info.PID)
	if c.Session() != nil {
		t.Error("the session outlived StopGateway")
	}
	if procs := attachProcesses(dir); len(procs) != 0 {
		t.Errorf("attach processes left: %v", procs)
	}
}

// 64 calls at once over one session; every answer belongs to its request.
func TestSessionConcurrentCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := sessionSandbox(t)
	before := sb.oneShotCommands()
	t.Logf("64 concurrent calls over one session took %v", concurrentCalls(ctx, t, sb.client, 64))
	if k := sb.oneShotCommands() - before; k != 0 {
		t.Errorf("%d commands ran one-shot", k)
	}
}

// Progress chunks arrive in order, before the result, as the server sends them.
func TestSessionProgress(t *testing.T) {
	t.Parallel()
	sb, _ := sessionSandbox(t)
	type arrival struct {
		at    time.Time
		chunk mcpgw.ToolChunk
	}
	var got []arrival
	began := time.Now()
	final, err := sb.client.CallTool(context.Background(), "ts", "slow", map[string]any{"seconds": 1, "steps": 5},
		mcpgw.WithProgress(func(c mcpgw.ToolChunk) { got = append(got, arrival{time.Now(), c}) }))
	ended := time.Now()
	if err != nil || !final.IsLast || final.Progress() != nil {
		t.Fatalf("CallTool = %+v, %v", final, err)
	}
	if len(got) != 5 {
		t.Fatalf("%d progress chunks: %+v", len(got), got)
	}
	var offsets []string
	for i, a := range got {
		p := a.chunk.Progress()
		if p == nil || a.chunk.IsLast || p.Progress != float64(i+1) || p.Total == nil || *p.Total != 5 {
			t.Errorf("chunk %d: %+v (%+v)", i, a.chunk, p)
		}
		offsets = append(offsets, a.at.Sub(began).Round(time.Millisecond).String())
	}
	t.Logf("progress arrived at %s; the result at %v", strings.Join(offsets, ", "), ended.Sub(began).Round(time.Millisecond))
	// Spread over the call as the server sends them (every 200 ms), not all at its end.
	if first := ended.Sub(got[0].at); first < 600*time.Millisecond {
		t.Errorf("the first progress chunk came only %v before the result", first)
	}
	if last := got[4].at.Sub(got[0].at); last < 500*time.Millisecond {
		t.Errorf("the progress chunks came within %v of each other", last)
	}
}

// Cancelling a call's context sends a cancel frame: the server is told at once and stops.
func TestSessionCancel(t *testing.T) {
	t.Parallel()
	sb, _ := sessionSandbox(t)
	marker := filepath.Join(sb.dir, "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelledAt time.Time
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30, "steps": 300, "cancel_marker": marker},
		mcpgw.WithProgress(func(mcpgw.ToolChunk) {
			if cancelledAt.IsZero() {
				cancelledAt = time.Now()
				cancel()
			}
		}))
	returned := time.Since(cancelledAt)
	if !errors.Is(err, mcpgw.ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	waitFile(t, marker, "cancelled")
	took := time.Since(cancelledAt)
	t.Logf("the call returned %v after the cancel; the server wrote its cancel marker %v after it", returned, took)
	if took > 500*time.Millisecond {
		t.Errorf("the cancel marker came %v after the cancel", took)
	}
	if chunk, err := sb.client.CallTool(context.Background(), "ts", "echo", map[string]string{"text": "after"}); err != nil || chunk.Text() != "after" {
		t.Errorf("call after a cancelled one: %v, %v", chunk, err)
	}
}

// A session whose channel dies fails the calls in flight with ErrSessionLost at once; the next
// call opens a new session; when that cannot open, calls go one-shot.
func TestSessionLostAndReopened(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, opener := sessionSandbox(t)
	var killedAt time.Time
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30, "steps": 300},
		mcpgw.WithProgress(func(mcpgw.ToolChunk) {
			if killedAt.IsZero() {
				killedAt = time.Now()
				opener.kill(t)
			}
		}))
	lostAfter := time.Since(killedAt)
	if !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Fatalf("call in flight on a killed channel: %v", err)
	}
	t.Logf("the call in flight failed %v after the channel was killed: %v", lostAfter, err)
	if lostAfter > time.Second {
		t.Errorf("the lost call failed only after %v", lostAfter)
	}

	before := sb.oneShotCommands()
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": "reopened"}); err != nil || chunk.Text() != "reopened" {
		t.Fatalf("call after the loss: %v, %v", chunk, err)
	}
	if n := opener.opened.Load(); n != 2 || sb.oneShotCommands() != before {
		t.Errorf("%d sessions opened, %d one-shot commands", n, sb.oneShotCommands()-before)
	}

	// The channel dies again, and cannot be opened any more: the call that was waiting for the
	// new session was never sent, and goes one-shot.
	opener.broken.Store(true)
	opener.kill(t)
	waitFor(t, "the session to be lost", func() bool { return sb.client.Session() == nil })
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": "one-shot"}); err != nil || chunk.Text() != "one-shot" {
		t.Fatalf("call without a session: %v, %v", chunk, err)
	}
	if sb.oneShotCommands() == before {
		t.Error("no command ran one-shot")
	}
}

// Closing the session fails what it carries, ends attach, and later calls go one-shot.
func TestSessionClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, opener := sessionSandbox(t)
	if procs := attachProcesses(sb.dir); len(procs) != 1 {
		t.Fatalf("attach processes while open: %v", procs)
	}
	errc := make(chan error, 1)
	inFlight := make(chan struct{})
	var once sync.Once
	go func() {
		_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30, "steps": 300},
			mcpgw.WithProgress(func(mcpgw.ToolChunk) { once.Do(func() { close(inFlight) }) }))
		errc <- err
	}()
	<-inFlight
	for range 2 {
		if err := sb.client.CloseSession(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Errorf("call in flight during CloseSession: %v", err)
	}
	opener.mu.Lock()
	state := opener.procs[0].ProcessState
	opener.mu.Unlock()
	if state == nil {
		t.Error("the channel's process was not waited for")
	}
	if procs := attachProcesses(sb.dir); len(procs) != 0 {
		t.Errorf("attach processes left: %v", procs)
	}
	before := sb.oneShotCommands()
	if _, err := sb.client.ListMCPs(ctx); err != nil || sb.oneShotCommands() == before {
		t.Errorf("call after CloseSession: %v (one-shot: %d)", err, sb.oneShotCommands()-before)
	}
	if opener.opened.Load() != 1 {
		t.Error("a closed session was reopened")
	}
}

// A session that cannot open says why, and leaves the client one-shot.
func TestSessionOpenFailure(t *testing.T) {
	t.Parallel()
	requireAttach(t)
	ctx := context.Background()
	c, dir := newClient(t, nil, mcpgw.WithGatewayPath(filepath.Join(t.TempDir(), "no-such-gateway")))
	_, err := c.OpenSession(ctx, mcpgw.LocalSession(dir))
	if !errors.Is(err, mcpgw.ErrSessionLost) || !strings.Contains(err.Error(), "attach") {
		t.Fatalf("OpenSession without a gateway binary: %v", err)
	}
	t.Logf("OpenSession without a gateway binary: %v", err)
	if c.Session() != nil {
		t.Error("a failed session is kept")
	}
	if _, err := c.ListMCPs(ctx); !errors.Is(err, mcpgw.ErrGatewayNotRunning) {
		t.Errorf("call after a failed OpenSession: %v", err)
	}
}

// Many progress chunks and results of every size cross the channel intact.
func TestSessionLargeResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb, _ := sessionSandbox(t)
	sizes := []int{0, 1, 65535, 65536, 200_000, 2 << 20}
	for _, n := range sizes {
		chunk, err := sb.client.CallTool(ctx, "ts", "big", map[string]int{"bytes": n})
		if err != nil || len(chunk.Text()) != n || (n > 16 && chunk.Text()[:16] != "0123456789abcdef") {
			t.Errorf("big %d: %d bytes, %v", n, len(chunk.Text()), err)
		}
	}
	text := strings.Repeat("x", 1<<20)
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": text}); err != nil || chunk.Text() != text {
		t.Errorf("echo of 1 MiB: %v", err)
	}
	var seen []float64
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 0.5, "steps": 500},
		mcpgw.WithProgress(func(c mcpgw.ToolChunk) { seen = append(seen, c.Progress().Progress) }))
	if err != nil || len(seen) != 500 || !sort.Float64sAreSorted(seen) {
		t.Errorf("500 progress steps: %d seen, sorted %v, %v", len(seen), sort.Float64sAreSorted(seen), err)
	}
	raw, _ := json.Marshal(seen[:3])
	t.Logf("first progress values %s", raw)
}
