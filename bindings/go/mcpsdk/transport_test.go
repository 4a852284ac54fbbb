package mcpsdk_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	mcpgw "github.com/mcpgw/mcpgw/bindings/go"
	"github.com/mcpgw/mcpgw/bindings/go/mcpsdk"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var impl = &mcp.Implementation{Name: "mcpsdk-test", Version: "1.0.0"}

// connect connects an SDK client with opts to MCP name of sb over the transport; the session
// is closed when the test ends.
func connect(t *testing.T, sb *sandbox, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(impl, opts).Connect(context.Background(), mcpsdk.NewTransport(sb.client, name), nil)
	if err != nil {
		t.Fatalf("Connect to %s over the transport: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// echo calls the test server's echo tool with s over cs.
func echo(ctx context.Context, cs *mcp.ClientSession, s string) (*mcp.CallToolResult, error) {
	return cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": s}})
}

// rawConnection is a new transport's mcp.Connection to sb's "ts", with no SDK client on it.
func rawConnection(t *testing.T, ctx context.Context, sb *sandbox) mcp.Connection {
	t.Helper()
	conn, err := mcpsdk.NewTransport(sb.client, "ts").Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func text(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("content %v", r.Content)
	}
	c, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T", r.Content[0])
	}
	return c.Text
}

// The SDK's client on the project's test server: initialize, tools/list, tools/call (text,
// structured, a tool error), progress, and a tools/list_changed notification.
func TestSDKClientOnTheTestServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	changed := make(chan struct{}, 1)
	progress := make(chan float64, 16)
	cs := connect(t, sb, "ts", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Progress
		},
	})
	if init := cs.InitializeResult(); init.ServerInfo.Name == "" || init.Capabilities.Tools == nil {
		t.Errorf("initialize: %+v", init)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 || tools.Tools[0].Name != "echo" {
		t.Fatalf("tools/list: %v, %v", tools, err)
	}
	r, err := echo(ctx, cs, "hello")
	if err != nil || r.IsError || text(t, r) != "hello" {
		t.Errorf("echo: %+v, %v", r, err)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 2, "b": 3}})
	if sum, _ := r.StructuredContent.(map[string]any); err != nil || sum["sum"] != 5.0 || sum["product"] != 6.0 {
		t.Errorf("add: %+v, %v", r, err)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"message": "no"}})
	if err != nil || !r.IsError || text(t, r) != "no" {
		t.Errorf("fail: %+v, %v", r, err)
	}
	slow := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 0.2, "steps": 3}}
	slow.SetProgressToken("p")
	if _, err := cs.CallTool(ctx, slow); err != nil {
		t.Errorf("slow: %v", err)
	}
	if p := <-progress; p <= 0 {
		t.Errorf("the first progress: %v", p)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "change_tools"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(30 * time.Second):
		t.Fatal("no tools/list_changed within 30 s")
	}
	tools, err = cs.ListTools(ctx, nil)
	if err != nil || tools.Tools[len(tools.Tools)-1].Name != "extra" {
		t.Errorf("tools/list after the change: %v, %v", tools, err)
	}
}

// The sandboxed server's own requests reach the SDK's handlers: server-everything asks for
// sampling, elicitation and the roots, and gets the SDK client's answers.
func TestServerRequestsAnsweredByTheSDKHandlers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	client := mcp.NewClient(impl, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			asked := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Model: "host", Role: "assistant",
				Content: &mcp.TextContent{Text: "sampled: " + asked}}, nil
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
	cs, err := client.Connect(ctx, mcpsdk.NewTransport(sb.client, "ev"), &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, c := range []struct{ tool, want string }{
		{"trigger-sampling-request", "sampled: Resource trigger-sampling-request context: hello"},
		{"trigger-elicitation-request", "decline"},
		{"get-roots-list", "file:///work"},
	} {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: map[string]any{"prompt": "hello"}})
		if err != nil {
			t.Errorf("%s: %v", c.tool, err)
			continue
		}
		var all []string
		for _, block := range r.Content {
			if tc, ok := block.(*mcp.TextContent); ok {
				all = append(all, tc.Text)
			}
		}
		if got := strings.Join(all, "\n"); r.IsError || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q (isError %v), want it to contain %q", c.tool, got, r.IsError, c.want)
		}
	}
}

// Closing the SDK's session closes the connection, not the client's session: the client goes
// on, and another SDK client connects over the same session.
func TestClosingTheSDKSessionKeepsTheClientSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	first := connect(t, sb, "ts", nil)
	if err := first.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := first.Wait(); err != nil {
		t.Errorf("Wait after Close: %v", err)
	}
	_, err := echo(ctx, first, "x")
	if !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("a call after Close: %v", err)
	}
	if sb.client.Session() == nil {
		t.Fatal("closing the SDK session closed the client's session")
	}
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": "still"}); err != nil || chunk.Text() != "still" {
		t.Errorf("the client after the SDK session closed: %v, %v", chunk, err)
	}
	second := connect(t, sb, "ts", nil)
	if r, err := echo(ctx, second, "again"); err != nil || text(t, r) != "again" {
		t.Errorf("a second SDK session: %v, %v", r, err)
	}
}

// The raw mcp.Connection: a write after Close fails with both the SDK's and the binding's error,
// a read after Close returns io.EOF, and Close is idempotent.
func TestConnectionAfterClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	conn := rawConnection(t, ctx, sb)
	ping := &jsonrpc.Request{ID: mustID(t, 1), Method: "ping"}
	if err := conn.Write(ctx, ping); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("Close again: %v", err)
	}
	err := conn.Write(ctx, ping)
	var e *mcpgw.Error
	if !errors.Is(err, mcp.ErrConnectionClosed) || !errors.Is(err, mcpgw.ErrInvalidState) || !errors.As(err, &e) ||
		!strings.Contains(err.Error(), "the connection is closed") {
		t.Errorf("a write after Close: %v", err)
	}
	t.Logf("a write after Close: %v", err)
	if _, err := conn.Read(ctx); !errors.Is(err, io.EOF) {
		t.Errorf("a read after Close: %v", err)
	}
}

func mustID(t *testing.T, v any) jsonrpc.ID {
	t.Helper()
	id, err := jsonrpc.MakeID(float64(v.(int)))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A transport on an unknown MCP, an invalid name, a client without a session or a closed client:
// the SDK's Connect fails with the binding's typed error, and nothing is left open.
func TestConnectFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	sdk := mcp.NewClient(impl, nil)
	for _, c := range []struct {
		name string
		want error
		says string
	}{
		{"no-such-mcp", mcpgw.ErrNotFound, "no-such-mcp"},
		{"a/b", mcpgw.ErrInvalidArgument, "a/b"},
	} {
		cs, err := sdk.Connect(ctx, mcpsdk.NewTransport(sb.client, c.name), nil)
		var e *mcpgw.Error
		if cs != nil || !errors.Is(err, c.want) || !errors.As(err, &e) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Connect to %q: %v", c.name, err)
		}
		t.Logf("Connect to %q: %v", c.name, err)
	}
	if _, err := sdk.Connect(ctx, &mcpsdk.Transport{}, nil); err == nil || !strings.Contains(err.Error(), "NewTransport") {
		t.Errorf("Connect over a zero Transport: %v", err)
	}

	dir := t.TempDir()
	idle, err := mcpgw.NewClient(mcpgw.Local(dir), mcpgw.WithGatewayPath(gatewayBin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Connect(ctx, mcpsdk.NewTransport(idle, "ts"), nil); !errors.Is(err, mcpgw.ErrInvalidState) ||
		!strings.Contains(err.Error(), "open a session") {
		t.Errorf("Connect without a session: %v", err)
	}
	idle.Close()
	if _, err := sdk.Connect(ctx, mcpsdk.NewTransport(idle, "ts"), nil); !errors.Is(err, mcpgw.ErrClosed) ||
		!errors.Is(err, mcpgw.ErrInvalidState) {
		t.Errorf("Connect on a closed client: %v", err)
	}
	// The session carries on.
	if chunk, err := sb.client.CallTool(ctx, "ts", "echo", map[string]string{"text": "ok"}); err != nil || chunk.Text() != "ok" {
		t.Errorf("a call after the failures: %v, %v", chunk, err)
	}
}

// A lost channel (its attach process killed) under a call in flight: the call and
// ClientSession.Wait fail with the binding's ErrSessionLost, naming the loss; the client opens
// its session again and a new SDK session works.
func TestLostChannelEndsTheSDKSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	started := make(chan struct{}, 1)
	cs := connect(t, sb, "ts", &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			select {
			case started <- struct{}{}:
			default:
			}
		},
	})
	slow := &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"seconds": 60, "steps": 600}}
	slow.SetProgressToken("p")
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, slow)
		done <- err
	}()
	<-started
	sb.killAttach(t)
	err := <-done
	if !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Errorf("the call in flight: %v", err)
	}
	t.Logf("the call in flight: %v", err)
	if err := cs.Wait(); !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Errorf("Wait: %v", err)
	}
	if _, err := cs.ListTools(ctx, nil); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("a request after the loss: %v", err)
	}
	again := connect(t, sb, "ts", nil)
	if r, err := echo(ctx, again, "back"); err != nil || text(t, r) != "back" {
		t.Errorf("a new SDK session after the channel was opened again: %v, %v", r, err)
	}
}

// Stopping the gateway under an SDK session ends the session with the binding's error (the
// client closes its session first); its raw connection then refuses a write, saying why.
func TestStoppedGatewayEndsTheSDKSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sb := openSandbox(t)
	conn := rawConnection(t, ctx, sb)
	cs := connect(t, sb, "ts", nil)
	sb.stopped = true
	if err := sb.client.StopGateway(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cs.Wait(); !errors.Is(err, mcpgw.ErrSessionLost) {
		t.Errorf("Wait: %v", err)
	}
	if _, err := echo(ctx, cs, "x"); !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("a call after the gateway stopped: %v", err)
	}
	err := conn.Write(ctx, &jsonrpc.Request{ID: mustID(t, 1), Method: "ping"})
	if !errors.Is(err, mcp.ErrConnectionClosed) || !errors.Is(err, mcpgw.ErrSessionLost) || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("a write after the gateway stopped: %v", err)
	}
	t.Logf("a write after the gateway stopped: %v", err)
}

// killAttach kills the attach process of the sandbox's session channel.
func (sb *sandbox) killAttach(t *testing.T) {
	t.Helper()
	for _, p := range sb.processes() {
		pid, line, _ := strings.Cut(p, " ")
		if !strings.Contains(line, " attach ") {
			continue
		}
		n, _ := strconv.Atoi(pid)
		if err := syscall.Kill(n, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no attach process among %q", sb.processes())
}
