package mcpgw_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
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

// The whole cycle against one gateway: launch, add, list, every kind of call, remove, stop.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	c := sb.client

	if sb.info.Port <= 0 || sb.info.PID <= 0 || len(sb.info.InstanceNonce) == 0 {
		t.Fatalf("StartGateway info: %+v", sb.info)
	}
	if !strings.HasPrefix(sb.info.TokenFile, sb.dir) {
		t.Errorf("token file %q is outside the sandbox %q", sb.info.TokenFile, sb.dir)
	}
	if c.Port() != sb.info.Port {
		t.Errorf("Port() = %d, want %d", c.Port(), sb.info.Port)
	}
	h, err := c.Health(ctx)
	if err != nil || h.Status != "ok" || h.InstanceNonce == nil || *h.InstanceNonce != sb.info.InstanceNonce {
		t.Fatalf("Health = %+v, %v", h, err)
	}

	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	specs, err := c.ListMCPs(ctx)
	if err != nil {
		t.Fatalf("ListMCPs: %v", err)
	}
	if len(specs) != 1 || specs[0].Name != "ts" || specs[0].MCPConfig.Command != testServerBin ||
		specs[0].MCPConfig.Type != mcpgw.ConfigStdio || specs[0].Status == nil || specs[0].Status.State != mcpgw.MCPStateConnected {
		t.Fatalf("ListMCPs = %+v", specs)
	}
	tools, err := c.ListTools(ctx, "ts")
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	byName := map[string]mcpgw.Tool{}
	for _, tool := range tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"echo", "add", "media", "fail", "slow", "info"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("ListTools lacks %q: %v", name, tools)
		}
	}
	var schema struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(byName["add"].InputSchema, &schema); err != nil || len(schema.Required) != 2 ||
		len(byName["add"].OutputSchema) == 0 || byName["add"].Description == nil {
		t.Errorf("tool add = %+v (%v)", byName["add"], err)
	}

	t.Run("text", func(t *testing.T) {
		// Quotes, $() and backquotes must reach the server as they are, not run by a shell.
		text := "hello from Go: it's $(not) `run` \"quoted\" \\ ünïcödé"
		chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": text})
		if err != nil {
			t.Fatalf("CallTool echo: %v", err)
		}
		if chunk.State != mcpgw.StateRunning || !chunk.IsLast || len(chunk.ID) != 32 ||
			len(chunk.Content) != 1 || chunk.Content[0].Type != mcpgw.BlockText || chunk.Text() != text {
			t.Fatalf("echo chunk = %+v", chunk)
		}
	})

	t.Run("media", func(t *testing.T) {
		chunk, err := c.CallTool(ctx, "ts", "media", nil)
		if err != nil {
			t.Fatalf("CallTool media: %v", err)
		}
		if len(chunk.Content) != 5 {
			t.Fatalf("media gave %d blocks: %+v", len(chunk.Content), chunk.Content)
		}
		img, audio, text, blob, link := chunk.Content[0], chunk.Content[1], chunk.Content[2], chunk.Content[3], chunk.Content[4]

		if img.Type != mcpgw.BlockData || img.Source == nil || img.Source.Type != mcpgw.SourceBase64 || img.Source.MediaType != "image/png" {
			t.Fatalf("image block = %+v", img)
		}
		decoded, err := png.Decode(bytes.NewReader(img.Source.Data))
		if err != nil || decoded.Bounds().Dx() != 1 || decoded.Bounds().Dy() != 1 {
			t.Errorf("PNG: %v, %v", decoded, err)
		}

		if audio.Source == nil || audio.Source.MediaType != "audio/wav" {
			t.Fatalf("audio block = %+v", audio)
		}
		wav := audio.Source.Data
		if len(wav) != 44+16 || string(wav[0:4]) != "RIFF" || string(wav[8:16]) != "WAVEfmt " ||
			binary.LittleEndian.Uint32(wav[24:28]) != 8000 || string(wav[36:40]) != "data" ||
			binary.LittleEndian.Uint32(wav[40:44]) != 16 {
			t.Errorf("WAV bytes: % x", wav)
		}

		if text.Type != mcpgw.BlockText || !strings.Contains(text.Text, "hello resource") {
			t.Errorf("embedded text resource block = %+v", text)
		}
		if blob.Source == nil || len(blob.Source.Data) != 256 || blob.Source.Data[0] != 0 || blob.Source.Data[255] != 255 {
			t.Errorf("embedded blob block = %+v", blob)
		}
		if link.Source == nil || link.Source.Type != mcpgw.SourceURL || link.Source.URL != "test://resource/link" ||
			link.Source.MediaType != "text/plain" || link.Name == nil || *link.Name != "linked" || len(link.Source.Data) != 0 {
			t.Errorf("resource link block = %+v", link)
		}

		// The chunk marshals back to the wire form: base64 again for inline data.
		wire, err := json.Marshal(chunk)
		if err != nil || !bytes.Contains(wire, []byte(`"data":"iVBORw0KGgo`)) {
			t.Errorf("marshalled chunk: %s (%v)", wire, err)
		}
	})

	t.Run("structured", func(t *testing.T) {
		chunk, err := c.CallTool(ctx, "ts", "add", json.RawMessage(`{"a": 2.5, "b": 4}`))
		if err != nil {
			t.Fatalf("CallTool add: %v", err)
		}
		var got struct{ Sum, Product float64 }
		if err := json.Unmarshal(chunk.StructuredContent(), &got); err != nil || got.Sum != 6.5 || got.Product != 10 {
			t.Fatalf("structured content %s = %+v (%v)", chunk.StructuredContent(), got, err)
		}
	})

	t.Run("tool error", func(t *testing.T) {
		chunk, err := c.CallTool(ctx, "ts", "fail", map[string]any{"message": "disk on fire"})
		if err != nil {
			t.Fatalf("a tool error is a result, not a failed call: %v", err)
		}
		if chunk.State != mcpgw.StateError || chunk.Text() != "disk on fire" {
			t.Fatalf("fail chunk = %+v", chunk)
		}
	})

	t.Run("remove", func(t *testing.T) {
		info, err := c.CallTool(ctx, "ts", "info", nil)
		if err != nil {
			t.Fatalf("CallTool info: %v", err)
		}
		var proc struct{ PID int }
		if err := json.Unmarshal(info.StructuredContent(), &proc); err != nil || proc.PID <= 0 {
			t.Fatalf("info: %s (%v)", info.StructuredContent(), err)
		}
		if err := c.RemoveMCP(ctx, "ts"); err != nil {
			t.Fatalf("RemoveMCP: %v", err)
		}
		waitGone(t, "the removed MCP server", proc.PID)
		if specs, err := c.ListMCPs(ctx); err != nil || len(specs) != 0 {
			t.Errorf("ListMCPs after remove = %v, %v", specs, err)
		}
		_, err = c.CallTool(ctx, "ts", "echo", map[string]string{"text": "x"})
		if !errors.Is(err, mcpgw.ErrNotFound) {
			t.Errorf("call after remove: %v", err)
		}
	})

	t.Run("stop", func(t *testing.T) {
		if err := c.AddMCP(ctx, testServerSpec("again")); err != nil {
			t.Fatalf("AddMCP: %v", err)
		}
		info, err := c.CallTool(ctx, "again", "info", nil)
		if err != nil {
			t.Fatalf("CallTool info: %v", err)
		}
		var proc struct{ PID int }
		_ = json.Unmarshal(info.StructuredContent(), &proc)
		if err := c.StopGateway(ctx); err != nil {
			t.Fatalf("StopGateway: %v", err)
		}
		sb.stopped = true
		waitGone(t, "the gateway", sb.info.PID)
		waitGone(t, "the MCP server of the stopped gateway", proc.PID)
		if _, err := os.Stat(sb.info.StateDir); !os.IsNotExist(err) {
			t.Errorf("state dir %s is left behind (%v)", sb.info.StateDir, err)
		}
		if err := c.StopGateway(ctx); !errors.Is(err, mcpgw.ErrGatewayNotRunning) {
			t.Errorf("StopGateway again: %v", err)
		}
		if _, err := c.Health(ctx); !errors.Is(err, mcpgw.ErrGatewayNotRunning) {
			t.Errorf("Health after stop: %v", err)
		}
	})
}

// 64 goroutines share one client and call at once; every answer belongs to its request.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	t.Logf("64 concurrent calls took %v", concurrentCalls(ctx, t, sb.client, 64))
}

// concurrentCalls makes calls 0 to n-1 of concurrentCall at once, each from its own goroutine,
// reports every failure, and returns how long they took together.
func concurrentCalls(ctx context.Context, t *testing.T, c *mcpgw.Client, n int) time.Duration {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- concurrentCall(ctx, c, i)
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	return time.Since(began)
}

// concurrentCall makes call number i: an echo of its own text, an add of its own numbers, or
// a tool listing, and checks the answer.
func concurrentCall(ctx context.Context, c *mcpgw.Client, i int) error {
	switch i % 3 {
	case 0:
		want := fmt.Sprintf("request %d: %s", i, strings.Repeat("x", i))
		chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": want})
		if err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		if got := chunk.Text(); got != want {
			return fmt.Errorf("call %d got %q, want %q", i, got, want)
		}
	case 1:
		chunk, err := c.CallTool(ctx, "ts", "add", map[string]int{"a": i, "b": 1000})
		if err != nil {
			return fmt.Errorf("call %d: %w", i, err)
		}
		var got struct{ Sum, Product int }
		if err := json.Unmarshal(chunk.StructuredContent(), &got); err != nil || got.Sum != i+1000 || got.Product != i*1000 {
			return fmt.Errorf("call %d got %s (%v)", i, chunk.StructuredContent(), err)
		}
	default:
		tools, err := c.ListTools(ctx, "ts")
		if err != nil || len(tools) == 0 {
			return fmt.Errorf("list %d: %v, %v", i, tools, err)
		}
	}
	return nil
}

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
	if took < 7*time.Second || took > 9*time.Second {
		t.Errorf("the call returned after %v", took)
	}
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
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the cancelled call returned after %v", took)
	}
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

// An exec function that ignores its context does not hold up a cancelled call.
func TestCancelWithExecIgnoringContext(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(context.Background(), testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	run, inFlight := entered(sb.dir, "/tools/slow")
	stubborn := mcpgw.StdinExecFunc(func(_ context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
		return run.Exec(context.Background(), command, stdin)
	})
	c, err := mcpgw.NewClient(stubborn, mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancelCall := context.WithCancel(context.Background())
	go func() {
		<-inFlight
		cancelCall()
	}()
	began := time.Now()
	_, err = c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 3})
	if took := time.Since(began); !errors.Is(err, context.Canceled) || took > 2500*time.Millisecond {
		t.Fatalf("cancelled call: %v after %v", err, took)
	}
}

// The exec function's failures and panics.
func TestExecFailureAndPanic(t *testing.T) {
	t.Parallel()
	gone := errors.New("sandbox deleted")
	var mode struct {
		sync.Mutex
		fail, panic bool
	}
	flaky := func(dir string) mcpgw.Exec {
		run := mcpgw.LocalExec(dir)
		return mcpgw.ExecFunc(func(ctx context.Context, command string) (mcpgw.ExecResult, error) {
			mode.Lock()
			fail, panics := mode.fail, mode.panic
			mode.Unlock()
			if panics {
				panic(gone)
			}
			if fail {
				return mcpgw.ExecResult{}, gone
			}
			return run(ctx, command, nil)
		})
	}
	c, _ := newClient(t, flaky)
	ctx := context.Background()

	mode.fail = true
	_, err := c.StartGateway(ctx)
	if !errors.Is(err, mcpgw.ErrExecFailed) || !errors.Is(err, gone) || !strings.Contains(err.Error(), "sandbox deleted") {
		t.Fatalf("StartGateway with a failing exec: %v", err)
	}

	mode.fail, mode.panic = false, true
	func() {
		defer func() {
			if v := recover(); v != gone {
				t.Fatalf("recovered %v, want the exec function's panic value", v)
			}
		}()
		_, _ = c.StartGateway(ctx)
		t.Fatal("StartGateway returned although the exec function panicked")
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

// Failures are typed, carry the gateway's status and detail, and never the token.
func TestErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	c := sb.client
	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}

	_, err := c.CallTool(ctx, "nope", "echo", nil)
	if e := asError(t, err); !errors.Is(err, mcpgw.ErrNotFound) || e.HTTPStatus != 404 || e.Detail == "" || e.Op != "call_tool" {
		t.Errorf("unknown MCP: %+v", e)
	}
	if _, err := c.CallTool(ctx, "ts", "no_such_tool", nil); !errors.Is(err, mcpgw.ErrNotFound) {
		t.Errorf("unknown tool: %v", err)
	}
	if err := c.AddMCP(ctx, testServerSpec("ts")); !errors.Is(err, mcpgw.ErrConflict) || asError(t, err).HTTPStatus != 409 {
		t.Errorf("duplicate MCP: %v", err)
	}
	if err := c.AddMCP(ctx, mcpgw.StdioSpec("broken", "/nonexistent/server")); !errors.Is(err, mcpgw.ErrUpstreamError) {
		t.Errorf("MCP server that cannot start: %v", err)
	}
	if err := c.RemoveMCP(ctx, "nope"); !errors.Is(err, mcpgw.ErrNotFound) {
		t.Errorf("removing an unknown MCP: %v", err)
	}
	for _, bad := range []struct {
		name string
		call func() error
	}{
		{"arguments that are not an object", func() error { _, err := c.CallTool(ctx, "ts", "echo", []int{1}); return err }},
		{"arguments that cannot be encoded", func() error { _, err := c.CallTool(ctx, "ts", "echo", map[string]any{"f": func() {}}); return err }},
		{"a NUL in a name", func() error { _, err := c.CallTool(ctx, "ts\x00x", "echo", nil); return err }},
		{"an invalid MCP name", func() error { _, err := c.ListTools(ctx, "a/b"); return err }},
		{"a spec without a name", func() error { return c.AddMCP(ctx, testServerSpec("")) }},
		{"an invalid header", func() error { return c.SetRuntimeHeaders(ctx, "ts", map[string]string{"bad header": "x"}) }},
	} {
		if err := bad.call(); !errors.Is(err, mcpgw.ErrInvalidArgument) {
			t.Errorf("%s: %v", bad.name, err)
		}
	}

	// A client with a wrong token: 401, and no token in any message.
	token, err := os.ReadFile(sb.info.TokenFile)
	if err != nil || len(bytes.TrimSpace(token)) < 16 {
		t.Fatalf("token file: %v", err)
	}
	wrong := filepath.Join(sb.dir, "wrong-token")
	if err := os.WriteFile(wrong, []byte(strings.Repeat("0", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	intruder, err := mcpgw.NewClient(mcpgw.LocalExec(sb.dir), mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(wrong))
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Close()
	_, err = intruder.ListMCPs(ctx)
	if e := asError(t, err); !errors.Is(err, mcpgw.ErrUnauthorized) || e.HTTPStatus != 401 {
		t.Errorf("wrong token: %+v", e)
	}
	for _, err := range []error{err} {
		e := asError(t, err)
		for _, s := range []string{err.Error(), e.Detail, e.Message} {
			if strings.Contains(s, strings.TrimSpace(string(token))) {
				t.Errorf("an error message contains the token")
			}
		}
	}

	// A client that knows no gateway.
	lost, _ := newClient(t, nil)
	if _, err := lost.ListMCPs(ctx); !errors.Is(err, mcpgw.ErrGatewayNotRunning) {
		t.Errorf("no gateway: %v", err)
	}
	if _, err := mcpgw.NewClient(nil); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("nil exec: %v", err)
	}
	if _, err := mcpgw.NewClient(mcpgw.LocalExec(""), mcpgw.WithMaxCommandBytes(10)); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("too small a command limit: %v", err)
	}
}

// The MCPs of each scope are isolated; the default scope is the client's.
func TestScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	alice, bob := sb.client.Scope("agent-a", "session 1"), sb.client.Scope("agent-b", "session&1=2")
	for _, s := range []*mcpgw.Scope{alice, bob} {
		if err := s.AddMCP(ctx, testServerSpec("ts")); err != nil {
			t.Fatalf("AddMCP in %s/%s: %v", s.AgentID(), s.SessionID(), err)
		}
	}
	if specs, err := sb.client.ListMCPs(ctx); err != nil || len(specs) != 0 {
		t.Errorf("default scope = %v, %v", specs, err)
	}
	if err := alice.RemoveMCP(ctx, "ts"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.CallTool(ctx, "ts", "echo", map[string]string{"text": "x"}); !errors.Is(err, mcpgw.ErrNotFound) {
		t.Errorf("alice's removed MCP: %v", err)
	}
	if chunk, err := bob.CallTool(ctx, "ts", "echo", map[string]string{"text": "bob"}); err != nil || chunk.Text() != "bob" {
		t.Errorf("bob's MCP: %v, %v", chunk, err)
	}

	// A client whose default scope is bob's sees bob's MCP.
	c, err := mcpgw.NewClient(mcpgw.LocalExec(sb.dir), mcpgw.WithPort(sb.info.Port),
		mcpgw.WithTokenFile(sb.info.TokenFile), mcpgw.WithScope("agent-b", "session&1=2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if specs, err := c.ListMCPs(ctx); err != nil || len(specs) != 1 || specs[0].Name != "ts" {
		t.Errorf("bob's scope through WithScope = %v, %v", specs, err)
	}
}

// Close is idempotent, lets running calls finish and fails later ones.
func TestClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	run, inFlight := entered(sb.dir, "/tools/slow")
	c, err := mcpgw.NewClient(run, mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		chunk, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 1, "steps": 0})
		if err == nil && !strings.HasPrefix(chunk.Text(), "done") {
			err = fmt.Errorf("slow answered %q", chunk.Text())
		}
		done <- err
	}()
	<-inFlight
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Errorf("the call running during Close: %v", err)
	}
	_, err = c.ListMCPs(ctx)
	if !errors.Is(err, mcpgw.ErrClosed) || !errors.Is(err, mcpgw.ErrInvalidState) {
		t.Errorf("call after Close: %v", err)
	}
	if c.Port() != 0 {
		t.Errorf("Port after Close = %d", c.Port())
	}
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
			exec, commands := counting(sb.dir, passesStdin)
			c, err := mcpgw.NewClient(exec, mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile),
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

// counting is a local Exec that counts its commands and passes stdin or not.
func counting(dir string, passesStdin bool) (mcpgw.Exec, *atomic.Int32) {
	run := mcpgw.LocalExec(dir)
	var n atomic.Int32
	if passesStdin {
		return mcpgw.StdinExecFunc(func(ctx context.Context, command string, stdin []byte) (mcpgw.ExecResult, error) {
			n.Add(1)
			return run(ctx, command, stdin)
		}), &n
	}
	return mcpgw.ExecFunc(func(ctx context.Context, command string) (mcpgw.ExecResult, error) {
		n.Add(1)
		return run(ctx, command, nil)
	}), &n
}

// Without curl, requests go through the gateway's built-in client.
func TestBuiltinTransport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t, mcpgw.WithTransport(mcpgw.TransportBuiltin))
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
			exec, commands := counting(dir, passesStdin)
			c, err := mcpgw.NewClient(exec, mcpgw.WithGatewayPath(installed), mcpgw.WithStateDir(filepath.Join(dir, "state")))
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
