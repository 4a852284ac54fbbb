package mcpgw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// A context deadline becomes the gateway's deadline: it cancels the call upstream and answers
// 504, which arrives while the context is still waiting. The deadline is long enough for the
// margin (a tenth, at most a second) to hold on a loaded machine under the race detector.
func TestContextDeadline(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(context.Background(), testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	marker := filepath.Join(sb.dir, "cancelled")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	began := time.Now()
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30, "cancel_marker": marker})
	took := time.Since(began)
	if !errors.Is(err, mcpgw.ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call with an 8 s deadline: %v", err)
	}
	t.Logf("a call with an 8 s deadline returned after %v", took.Round(time.Millisecond))
	if e := asError(t, err); e.HTTPStatus != 504 || e.Detail == "" || e.Code != mcpgw.CodeDeadline {
		t.Errorf("want the gateway's 504 with a detail: %+v", e)
	}
	waitFile(t, marker, "cancelled")
}

// Cancelling the context abandons the call at once; the killed request makes the gateway
// cancel the call upstream; the client stays usable.
func TestContextCancel(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(context.Background(), testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	marker := filepath.Join(sb.dir, "cancelled")
	ctx, cancel := context.WithCancel(context.Background())
	// Cancelled once the gateway has counted the call, i.e. it is in flight upstream.
	go func() {
		defer cancel()
		for ctx.Err() == nil {
			specs, err := sb.client.ListMCPs(context.Background())
			if err == nil && len(specs) == 1 && specs[0].Status != nil && specs[0].Status.Calls > 0 {
				return
			}
		}
	}()
	began := time.Now()
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 20, "cancel_marker": marker})
	t.Logf("the cancelled call returned after %v", time.Since(began).Round(time.Millisecond))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, mcpgw.ErrCancelled) || errors.Is(err, mcpgw.ErrDeadline) ||
		errors.Is(err, mcpgw.ErrExecFailed) {
		t.Fatalf("cancelled call: %v", err)
	}
	waitFile(t, marker, "cancelled")
	if _, err := sb.client.CallTool(context.Background(), "ts", "echo", map[string]string{"text": "still here"}); err != nil {
		t.Errorf("call after a cancelled one: %v", err)
	}
	// An already cancelled context runs nothing.
	if _, err := sb.client.ListTools(ctx, "ts"); !errors.Is(err, context.Canceled) {
		t.Errorf("call with a cancelled context: %v", err)
	}
}

// A run function that ignores its context does not hold up a cancelled call.
func TestCancelWithRunIgnoringContext(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(context.Background(), testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	run, inFlight := entered(sb.dir, "/tools/slow")
	stubborn := func(_ context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		return run(context.Background(), command, stdin)
	}
	c, err := mcpgw.NewClient(mcpgw.Exec(stubborn, nil, true), mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancelCall := context.WithCancel(context.Background())
	go func() {
		<-inFlight
		cancelCall()
	}()
	// The slow call takes 3 s; the cancelled one returns before it ends.
	_, err = c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 3})
	if !errors.Is(err, context.Canceled) || !errors.Is(err, mcpgw.ErrCancelled) {
		t.Fatalf("cancelled call: %v", err)
	}
}

// The run function's failures and panics: ErrExecFailed wrapping its error; its panic raised
// again in the caller; the client usable after both.
func TestRunFunctionFailureAndPanic(t *testing.T) {
	t.Parallel()
	gone := errors.New("sandbox deleted")
	var mode struct {
		sync.Mutex
		fail, panic bool
	}
	flaky := func(dir string) mcpgw.Backend {
		run := shRun(dir, nil)
		return mcpgw.Exec(func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
			mode.Lock()
			fail, panics := mode.fail, mode.panic
			mode.Unlock()
			if panics {
				panic(gone)
			}
			if fail {
				return mcpgw.ExecResult{}, gone
			}
			return run(ctx, command, stdin)
		}, nil, false)
	}
	c, _ := newClient(t, flaky)
	ctx := context.Background()

	mode.fail = true
	_, err := c.StartGateway(ctx)
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.Is(err, gone) || !strings.Contains(err.Error(), "sandbox deleted") {
		t.Fatalf("StartGateway with a failing run function: %v", err)
	}

	mode.fail, mode.panic = false, true
	func() {
		defer func() {
			if v := recover(); v != gone {
				t.Fatalf("recovered %v, want the run function's panic value", v)
			}
		}()
		_, _ = c.StartGateway(ctx)
		t.Fatal("StartGateway returned although the run function panicked")
	}()

	// Neither left the client in a bad state.
	mode.panic = false
	info, err := c.StartGateway(ctx)
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	if err := c.StopGateway(ctx); err != nil {
		t.Fatalf("StopGateway: %v", err)
	}
	waitGone(t, "the gateway", info.PID)
}

// A body over the command limit arrives whole: on stdin in one command when the exec passes
// stdin, staged in pieces otherwise.
func TestLargeArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t, mcpgw.WithMaxCommandBytes(8192))
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("0123456789'\"$`\\ ", 20_000) // 320 KB
	for _, passesStdin := range []bool{true, false} {
		t.Run(fmt.Sprintf("stdin=%v", passesStdin), func(t *testing.T) {
			backend, commands := counting(sb.dir, passesStdin)
			c, err := mcpgw.NewClient(backend, mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile),
				mcpgw.WithMaxCommandBytes(8192), mcpgw.WithTransport(mcpgw.TransportCurl))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": text})
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if chunk.Text() != text {
				t.Errorf("echo of %d bytes came back as %d bytes", len(text), len(chunk.Text()))
			}
			n := commands.Load()
			t.Logf("a %d KB body took %d commands", len(text)/1000, n)
			if passesStdin && n != 1 || !passesStdin && n < 10 {
				t.Errorf("the call took %d commands", n)
			}
		})
	}
}

// counting is an Exec backend running commands locally in dir that counts them and passes stdin
// or not.
func counting(dir string, passesStdin bool) (mcpgw.Backend, *atomic.Int32) {
	var n atomic.Int32
	run := shRun(dir, func(string) { n.Add(1) })
	return mcpgw.Exec(run, nil, passesStdin), &n
}

// Without curl, requests go through the gateway's built-in client.
func TestBuiltinTransport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t, mcpgw.WithTransport(mcpgw.TransportBuiltIn))
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": "built in"}); err != nil || chunk.Text() != "built in" {
		t.Fatalf("CallTool: %v, %v", chunk, err)
	}
}

// A gateway binary is installed into the sandbox, checked, and launched from there: in one
// command with the binary on stdin when the exec passes stdin, in pieces otherwise. The binary
// is a script that starts the real gateway, padded to take several pieces: the real one (120 MB
// in a debug build) would only make the test slow.
func TestEnsureGatewayBinary(t *testing.T) {
	t.Parallel()
	launcher := filepath.Join(t.TempDir(), "launcher")
	script := "#!/bin/sh\n# " + strings.Repeat("padding ", 40_000) + "\nexec '" + gatewayBin + "' \"$@\"\n"
	if err := os.WriteFile(launcher, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, passesStdin := range []bool{true, false} {
		t.Run(fmt.Sprintf("stdin=%v", passesStdin), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dir := t.TempDir()
			installed := filepath.Join(dir, "bin", "mcpgw-gateway")
			if err := os.Mkdir(filepath.Dir(installed), 0o755); err != nil {
				t.Fatal(err)
			}
			backend, commands := counting(dir, passesStdin)
			c, err := mcpgw.NewClient(backend, mcpgw.WithGatewayPath(installed), mcpgw.WithStateDir(filepath.Join(dir, "state")))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			st, err := c.EnsureGatewayBinary(ctx, launcher)
			if err != nil || !st.Uploaded || st.Path != installed || len(st.SHA256) != 64 {
				t.Fatalf("EnsureGatewayBinary = %+v, %v", st, err)
			}
			// With stdin: a check and the upload. Without: a check, at least three pieces, the install.
			n := commands.Load()
			t.Logf("a %d KB binary took %d commands", len(script)/1000, n)
			if passesStdin && n > 2 || !passesStdin && n < 5 {
				t.Errorf("the upload took %d commands", n)
			}
			if got, err := os.ReadFile(installed); err != nil || string(got) != script {
				t.Fatalf("the installed file differs from the original (%v)", err)
			}
			if st, err := c.EnsureGatewayBinary(ctx, launcher); err != nil || st.Uploaded {
				t.Errorf("second EnsureGatewayBinary = %+v, %v", st, err)
			}
			info, err := c.StartGateway(ctx)
			if err != nil {
				t.Fatalf("StartGateway from the installed binary: %v", err)
			}
			if err := c.StopGateway(ctx); err != nil {
				t.Fatal(err)
			}
			waitGone(t, "the gateway", info.PID)
			if _, err := c.EnsureGatewayBinary(ctx, filepath.Join(dir, "missing")); !errors.Is(err, mcpgw.ErrHostIO) {
				t.Errorf("missing host file: %v", err)
			}
		})
	}
}

// An HTTP MCP server gets its configured headers and runtime headers, which
// SetRuntimeHeaders replaces without reconnecting.
func TestHTTPMCPAndRuntimeHeaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)

	url := startHTTPTestServer(t)
	spec := mcpgw.HTTPSpec("web", url)
	spec.MCPConfig.Headers = map[string]string{"X-Static": "configured"}
	spec.RuntimeHeaders = map[string]string{"X-Run": "first"}
	if err := sb.client.AddMCP(ctx, spec); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	headers := func() map[string]string {
		t.Helper()
		chunk, err := sb.client.CallTool(ctx, "web", "headers", nil)
		if err != nil {
			t.Fatalf("CallTool headers: %v", err)
		}
		var h map[string]string
		if err := json.Unmarshal(chunk.StructuredContent(), &h); err != nil {
			t.Fatalf("headers: %s: %v", chunk.StructuredContent(), err)
		}
		return h
	}
	if h := headers(); h["x-static"] != "configured" || h["x-run"] != "first" {
		t.Errorf("headers at registration: %v", h)
	}
	if err := sb.client.SetRuntimeHeaders(ctx, "web", map[string]string{"X-Run": "second"}); err != nil {
		t.Fatalf("SetRuntimeHeaders: %v", err)
	}
	if h := headers(); h["x-static"] != "configured" || h["x-run"] != "second" {
		t.Errorf("headers after SetRuntimeHeaders: %v", h)
	}
	if err := sb.client.SetRuntimeHeaders(ctx, "web", nil); err != nil {
		t.Fatalf("SetRuntimeHeaders(nil): %v", err)
	}
	if h := headers(); h["x-run"] != "" {
		t.Errorf("runtime headers after clearing them: %v", h)
	}
	specs, err := sb.client.ListMCPs(ctx)
	if err != nil || len(specs) != 1 || specs[0].MCPConfig.Type != mcpgw.ConfigHTTP || specs[0].MCPConfig.URL != url ||
		specs[0].RuntimeHeaders != nil {
		t.Errorf("ListMCPs = %+v, %v", specs, err)
	}
}

// startHTTPTestServer runs the test server over streamable HTTP on this machine and returns its
// URL; it is stopped when the test ends.
func startHTTPTestServer(t *testing.T) string {
	t.Helper()
	server := exec.Command(testServerBin, "http", "--port", "0")
	stdout, err := server.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("test server: %q, %v", line, err)
	}
	return url
}

// WithTimeout of one call is its deadline at the gateway, without a context deadline.
func TestCallTimeout(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	ctx := context.Background()
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	_, err := sb.client.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 30}, mcpgw.WithTimeout(time.Second))
	if e := asError(t, err); !errors.Is(err, mcpgw.ErrDeadline) || errors.Is(err, context.DeadlineExceeded) || e.HTTPStatus != 504 {
		t.Errorf("a call with a 1 s timeout: %v", err)
	}
	if _, err := sb.client.ListMCPs(ctx, mcpgw.WithTimeout(0)); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("a zero timeout: %v", err)
	}
	if _, err := sb.client.ListMCPs(ctx, nil); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("a nil option: %v", err)
	}
}
