package mcpgw_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"syscall"
	"testing"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
)

// The Exec backend, as an E2B or Daytona SDK would use it: one-shot commands through the run
// function, the session channel through the open function; a channel that dies is opened again
// through it.
func TestExecBackendSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var commands []string
	opener := &shOpener{}
	c, dir := newClient(t, func(dir string) mcpgw.Backend {
		opener.dir = dir
		return mcpgw.Exec(shRun(dir, func(command string) {
			mu.Lock()
			commands = append(commands, command)
			mu.Unlock()
		}), opener.open, true)
	})
	info, err := c.StartGateway(ctx)
	if err != nil {
		t.Fatalf("StartGateway: %v", err)
	}
	defer func() {
		if err := c.StopGateway(ctx); err != nil {
			t.Errorf("StopGateway: %v", err)
		}
		waitGone(t, "the gateway", info.PID)
	}()
	if err := c.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	hello, err := c.OpenSession(ctx)
	if err != nil {
		t.Fatalf("OpenSession: %v", err)
	}
	mu.Lock()
	before := len(commands)
	mu.Unlock()
	var progress int
	chunk, err := c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": 0.3, "steps": 3},
		mcpgw.WithProgress(func(mcpgw.ToolChunk) { progress++ }))
	if err != nil || progress != 3 || !strings.HasPrefix(chunk.Text(), "done") {
		t.Fatalf("a call over the exec channel: %v, %d progress chunks, %v", chunk, progress, err)
	}
	mu.Lock()
	if len(commands) != before {
		t.Errorf("%d commands ran one-shot over the session", len(commands)-before)
	}
	mu.Unlock()

	// The channel's process dies under a call: a new channel is opened; the call resumes on it
	// when the gateway keeps calls (the hello's retention_ms), else it is lost.
	var killed sync.Once
	seconds := 30.0
	if hello.RetentionMS > 0 {
		seconds = 1
	}
	chunk, err = c.CallTool(ctx, "ts", "slow", map[string]any{"seconds": seconds, "steps": 10},
		mcpgw.WithProgress(func(mcpgw.ToolChunk) {
			killed.Do(func() {
				opener.mu.Lock()
				cmd := opener.cmds[len(opener.cmds)-1]
				opener.mu.Unlock()
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			})
		}))
	if hello.RetentionMS > 0 {
		if err != nil || !strings.HasPrefix(chunk.Text(), "done") {
			t.Fatalf("a call resumed on a new channel: %v, %v", chunk, err)
		}
	} else if !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Fatalf("a call on a killed channel: %v", err)
	}
	if chunk, err := c.CallTool(ctx, "ts", "echo", map[string]string{"text": "again"}); err != nil || chunk.Text() != "again" {
		t.Fatalf("a call after the loss: %v, %v", chunk, err)
	}
	if n := opener.count(); n != 2 {
		t.Errorf("%d channels were opened", n)
	}
	if err := c.CloseSession(ctx); err != nil {
		t.Fatal(err)
	}
	if procs := attachProcesses(dir); len(procs) != 0 {
		t.Errorf("attach processes left: %v", procs)
	}
}

// Without an open function there are no sessions; an open function's error is the open's
// failure.
func TestExecBackendOpenFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _ := newClient(t, func(dir string) mcpgw.Backend { return mcpgw.Exec(shRun(dir, nil), nil, false) })
	if _, err := c.OpenSession(ctx); err == nil || !strings.Contains(err.Error(), "open function") {
		t.Errorf("OpenSession without an open function: %v", err)
	}
	refused := errors.New("the sandbox refuses background commands")
	c, _ = newClient(t, func(dir string) mcpgw.Backend {
		return mcpgw.Exec(shRun(dir, nil), func(context.Context, string) (*mcpgw.Channel, error) { return nil, refused }, false)
	})
	_, err := c.OpenSession(ctx)
	if err == nil || !strings.Contains(err.Error(), refused.Error()) {
		t.Errorf("OpenSession with a failing open function: %v", err)
	}
	t.Logf("OpenSession with a failing open function: %v", err)
	if c.Session() != nil {
		t.Error("a session is open")
	}
}

// A virtual MCP connection needs a session; over one, the gateway opens it, or refuses it with
// the kind of its refusal (ErrNotFound for an MCP the scope does not have).
func TestConnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := startSandbox(t)
	if err := sb.client.AddMCP(ctx, testServerSpec("ts")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.client.Connect(ctx, "ts"); !errors.Is(err, mcpgw.ErrInvalidState) {
		t.Errorf("Connect without a session: %v", err)
	}
	if _, err := sb.client.OpenSession(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.client.Connect(ctx, "a/b"); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("Connect to an invalid name: %v", err)
	}
	if _, err := sb.client.Connect(ctx, "nope"); !errors.Is(err, mcpgw.ErrNotFound) || asError(t, err).HTTPStatus != 404 {
		t.Errorf("Connect to an MCP the scope does not have: %v", err)
	}
	conn, err := sb.client.Connect(ctx, "ts")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "go", "version": "0"},
	}}); err != nil {
		t.Fatal(err)
	}
	raw, err := conn.Recv(ctx)
	var answer struct {
		ID     int `json:"id"`
		Result struct {
			ServerInfo struct{ Name string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err != nil || json.Unmarshal(raw, &answer) != nil || answer.ID != 1 || answer.Result.ServerInfo.Name == "" {
		t.Fatalf("initialize over a virtual connection: %s, %v", raw, err)
	}
	if err := conn.Send(func() {}); !errors.Is(err, mcpgw.ErrInvalidArgument) {
		t.Errorf("a message that is not JSON: %v", err)
	}
	conn.Close()
	if _, err := conn.Recv(ctx); err != io.EOF {
		t.Errorf("Recv after Close: %v", err)
	}
	err = conn.Send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "ping"})
	if !errors.Is(err, mcpgw.ErrInvalidState) || !errors.Is(err, io.EOF) || !strings.Contains(err.Error(), "send: the connection is closed") {
		t.Errorf("Send after Close: %v", err)
	}
}
