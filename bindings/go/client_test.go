package mcpgw_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	// A tool the spec disables is refused on call (403), as well as not listed.
	off := testServerSpec("off")
	off.DisableTools = []string{"echo"}
	if err := c.AddMCP(ctx, off); err != nil {
		t.Fatalf("AddMCP: %v", err)
	}
	_, err = c.CallTool(ctx, "off", "echo", map[string]string{"text": "x"})
	if e := asError(t, err); !errors.Is(err, mcpgw.ErrPolicyDenied) || e.HTTPStatus != 403 || !strings.Contains(e.Detail, "disable_tools") {
		t.Errorf("a disabled tool: %+v", e)
	}
	if tools, err := c.ListTools(ctx, "off"); err != nil || len(tools) == 0 {
		t.Errorf("ListTools: %v %v", tools, err)
	} else {
		for _, tool := range tools {
			if tool.Name == "echo" {
				t.Errorf("a disabled tool is listed")
			}
		}
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
	intruder, err := mcpgw.NewClient(mcpgw.Local(sb.dir), mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(wrong))
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
}

// A value libmcpgw cannot use is refused when the client is made, with a message naming it;
// nothing runs.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	for _, bad := range []struct {
		what    string
		backend mcpgw.Backend
		opts    []mcpgw.Option
		says    string
	}{
		{"no backend", mcpgw.Backend{}, nil, "backend is empty"},
		{"an empty container", mcpgw.Docker(""), nil, "must not be empty"},
		{"a container read as an option", mcpgw.Podman("-rm"), nil, "starts with '-'"},
		{"a container with shell text", mcpgw.Docker("box;rm -rf /"), nil, "holds ';'"},
		{"a pod with shell text", mcpgw.Kubectl("pod$(x)"), nil, "holds '$'"},
		{"a namespace with a space", mcpgw.Kubectl("pod", mcpgw.PodOptions{Namespace: "a b"}), nil, "holds ' '"},
		{"two option sets", mcpgw.Docker("box", mcpgw.ContainerOptions{}, mcpgw.ContainerOptions{}), nil, "at most one"},
		{"an empty prefix", mcpgw.Argv(nil, false), nil, "must name a program"},
		{"a NUL in a prefix", mcpgw.Argv([]string{"ssh", "bo\x00x"}, true), nil, "NUL"},
		{"no run function", mcpgw.Exec(nil, nil, false), nil, "run function"},
		{"too small a command limit", mcpgw.Local(""), []mcpgw.Option{mcpgw.WithMaxCommandBytes(10)}, "at least 4096"},
		{"a negative timeout", mcpgw.Local(""), []mcpgw.Option{mcpgw.WithTimeout(-time.Second)}, "timeout"},
		{"a zero open timeout", mcpgw.Local(""), []mcpgw.Option{mcpgw.WithOpenTimeout(0)}, "open_timeout_ms"},
		{"a port out of range", mcpgw.Local(""), []mcpgw.Option{mcpgw.WithPort(70000)}, "port"},
		{"a nil option", mcpgw.Local(""), []mcpgw.Option{nil}, "nil"},
	} {
		c, err := mcpgw.NewClient(bad.backend, bad.opts...)
		if !errors.Is(err, mcpgw.ErrInvalidArgument) || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("%s: %v, want ErrInvalidArgument saying %q", bad.what, err, bad.says)
		}
		if c != nil {
			t.Errorf("%s: a client was made", bad.what)
		}
	}
}

// The MCPs of each scope are isolated; the default scope is the client's.
func TestScopes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	c := sb.client
	alice, bob := mcpgw.WithScope("agent-a", "session 1"), mcpgw.WithScope("agent-b", "session&1=2")
	for _, s := range []mcpgw.Setting{alice, bob} {
		if err := c.AddMCP(ctx, testServerSpec("ts"), s); err != nil {
			t.Fatalf("AddMCP in a scope: %v", err)
		}
	}
	if specs, err := c.ListMCPs(ctx); err != nil || len(specs) != 0 {
		t.Errorf("default scope = %v, %v", specs, err)
	}
	if err := c.RemoveMCP(ctx, "ts", alice); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "x"}, alice); !errors.Is(err, mcpgw.ErrNotFound) {
		t.Errorf("alice's removed MCP: %v", err)
	}
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "bob"}, bob); err != nil || chunk.Text() != "bob" {
		t.Errorf("bob's MCP: %v, %v", chunk, err)
	}

	// A client whose default scope is bob's sees bob's MCP, and alice's when told.
	c, err := mcpgw.NewClient(mcpgw.Local(sb.dir), mcpgw.WithPort(sb.info.Port),
		mcpgw.WithTokenFile(sb.info.TokenFile), mcpgw.WithScope("agent-b", "session&1=2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if specs, err := c.ListMCPs(ctx); err != nil || len(specs) != 1 || specs[0].Name != "ts" {
		t.Errorf("bob's scope through WithScope = %v, %v", specs, err)
	}
	if specs, err := c.ListMCPs(ctx, alice); err != nil || len(specs) != 0 {
		t.Errorf("alice's scope from bob's client = %v, %v", specs, err)
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
	c, err := mcpgw.NewClient(mcpgw.Exec(run, nil, true), mcpgw.WithPort(sb.info.Port), mcpgw.WithTokenFile(sb.info.TokenFile))
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
