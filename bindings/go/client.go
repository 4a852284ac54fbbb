package mcpgw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"runtime"
)

// Client is a client of one gateway in one sandbox: it launches and stops the gateway, and
// registers, lists and calls MCP servers through it, one-shot (a command in the sandbox per
// request) or over a session channel (OpenSession: one long-lived exec for every request).
//
// libmcpgw's host driver makes every decision (session or one-shot, the fallback of a request
// the channel refused or never sent, reopening a lost channel, every timer, the backend's
// failures); the Client runs the processes it asks for, moves their bytes and keeps its timer.
// It is safe for concurrent use by many goroutines, and holds no thread per session.
//
// Close releases it; it does not stop the gateway, which may outlive the client (another client
// can attach to it with WithPort and WithTokenFile): call StopGateway first to end it.
type Client struct {
	h        *host
	defaults callConfig
	port     int                          // as configured
	secretOf func(string) (string, error) // WithSecretFunc's
}

// NewClient makes a client that reaches the sandbox through backend. It runs nothing yet: call
// StartGateway or OpenSession to launch a gateway, or attach to a running one with WithPort and
// WithTokenFile. A value libmcpgw cannot use (an empty container name, one starting with "-", a
// pod name with shell metacharacters, an unknown option value) is ErrInvalidArgument, naming it.
func NewClient(backend Backend, opts ...Option) (*Client, error) {
	const name = "new_client"
	if abiError != nil {
		return nil, abiError
	}
	if backend.spec == nil {
		return nil, invalidArgument(name, "the backend is empty: make one with Local, Docker, Podman, Kubectl, Argv or Exec", nil)
	}
	if backend.err != nil {
		return nil, invalidArgument(name, backend.err.Error(), backend.err)
	}
	var cfg clientConfig
	for _, o := range opts {
		if o == nil {
			return nil, invalidArgument(name, "an option is nil", nil)
		}
		o.applyClient(&cfg)
	}
	if cfg.err != nil {
		return nil, invalidArgument(name, cfg.err.Error(), cfg.err)
	}
	if cfg.defaults.err != nil {
		return nil, invalidArgument(name, cfg.defaults.err.Error(), cfg.defaults.err)
	}
	keys := map[string]any{"backend": backend.spec}
	for k, v := range cfg.keys {
		keys[k] = v
	}
	text, err := json.Marshal(keys)
	if err != nil {
		return nil, invalidArgument(name, "the configuration cannot be encoded as JSON: "+err.Error(), err)
	}
	h, err := newHost(text, backend, cfg.audit)
	if err != nil {
		return nil, err
	}
	c := &Client{h: h, defaults: cfg.defaults, secretOf: cfg.secretOf}
	if p, ok := cfg.keys["port"].(int); ok {
		c.port = p
	}
	// Only a backstop: a forgotten Close leaks nothing. Not waiting in the finalizer goroutine.
	runtime.SetFinalizer(c, func(c *Client) { go c.h.close() })
	return c, nil
}

// Close closes the client's session, if it has one (operations in flight over it fail with
// ErrSessionLost), and waits for the channel's process to exit. One-shot operations still
// running finish normally; later operations fail with ErrClosed. It is idempotent, does not stop
// the gateway (call StopGateway first for that), and always returns nil.
func (c *Client) Close() error {
	runtime.SetFinalizer(c, nil)
	c.h.close()
	runtime.KeepAlive(c)
	return nil
}

// close closes the session, waits for the channels' processes, and frees the driver once nothing
// is under way.
func (h *host) close() {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return
	}
	h.closing = true
	h.mu.Unlock()
	// The driver closes the channel's input, and kills it after its close grace.
	if _, p, err := h.submit("close_session", []byte(`{"op":"close_session"}`), true); err == nil {
		<-p.signal
	}
	for _, p := range h.runningChannels() {
		<-p.ended()
	}
	h.mu.Lock()
	h.freeIfIdleLocked()
	h.mu.Unlock()
}

// Port is the gateway's port once it is known (configured, launched, or announced by a
// session); 0 before.
func (c *Client) Port() int {
	var s struct {
		Gateway *struct{ Port int } `json:"gateway"`
		Hello   *struct{ Port int } `json:"hello"`
	}
	if st := c.h.state(); st == nil || json.Unmarshal(st, &s) != nil {
		return 0
	}
	switch {
	case s.Gateway != nil:
		return s.Gateway.Port
	case s.Hello != nil:
		return s.Hello.Port
	}
	return c.port
}

// Session is what the client's session channel said when it opened, or nil while the client
// has no session open (none was opened, it was closed, or it is being opened again).
func (c *Client) Session() *SessionInfo {
	var s struct {
		Session string       `json:"session"`
		Hello   *SessionInfo `json:"hello"`
	}
	if st := c.h.state(); st == nil || json.Unmarshal(st, &s) != nil || s.Session != "open" {
		return nil
	}
	return s.Hello
}

// StartGateway launches the gateway inside the sandbox with one command (it mints its token
// into a 0600 file there, so the token never reaches the host), then confirms with a health
// check that this very launch answers. On failure the error (ErrStartFailed) carries the
// gateway's reason and the tail of its log.
func (c *Client) StartGateway(ctx context.Context, opts ...CallOption) (*GatewayInfo, error) {
	return call[GatewayInfo](ctx, c, "start_gateway", nil, opts)
}

// StopGateway stops the gateway this client launched: its session, if one is open, is closed
// first (as CloseSession does), then SIGTERM, a wait for it to close its MCP servers and exit,
// SIGKILL after the time limit (then it fails with ErrCommandFailed); then its state directory is
// removed. It succeeds when the gateway had already exited, and fails with ErrGatewayNotRunning
// when this client has not launched one (or has stopped it already).
func (c *Client) StopGateway(ctx context.Context, opts ...CallOption) error {
	_, err := call[json.RawMessage](ctx, c, "stop_gateway", nil, opts)
	if werr := c.awaitChannels(ctx, "stop_gateway"); err == nil {
		err = werr
	}
	return err
}

// EnsureGatewayBinary makes sure the sandbox holds the gateway binary read from hostPath on this
// machine at the client's gateway path (which must be absolute): when it is missing or its
// SHA-256 differs, it is uploaded, verified and renamed into place, in one command with the
// binary on stdin when the backend passes stdin, else in pieces of about 90 KiB. The sandbox
// needs sha256sum (and, without stdin, base64). ErrHostIO when hostPath cannot be read.
func (c *Client) EnsureGatewayBinary(ctx context.Context, hostPath string, opts ...CallOption) (*BinaryStatus, error) {
	return call[BinaryStatus](ctx, c, "ensure_gateway_binary", map[string]any{"binary_path": hostPath}, opts)
}

// Health asks the gateway whether it is up, and checks its instance nonce when the client knows
// it (ErrGatewayNotRunning when another gateway answers).
func (c *Client) Health(ctx context.Context, opts ...CallOption) (*Health, error) {
	return call[Health](ctx, c, "health", nil, opts)
}

// ListMCPs lists the MCP servers registered in the scope, as registered, each with the gateway's
// Status (MCPStatus: its MCPState, process id, restarts, last error, calls).
func (c *Client) ListMCPs(ctx context.Context, opts ...CallOption) ([]MCPSpec, error) {
	specs, err := call[[]MCPSpec](ctx, c, "list_mcps", nil, opts)
	if err != nil {
		return nil, err
	}
	return *specs, nil
}

// AddMCP registers an MCP server in the scope. It returns once the gateway has connected to it,
// initialized it and listed its tools; ErrConflict when the scope has an MCP of that name,
// ErrUpstreamError when the server cannot be reached. Status is not sent.
func (c *Client) AddMCP(ctx context.Context, spec MCPSpec, opts ...CallOption) error {
	spec.Status = nil
	if c.secretOf == nil || (len(spec.MCPConfig.SecretEnv) == 0 && len(spec.MCPConfig.SecretHeaders) == 0) {
		return done(call[json.RawMessage](ctx, c, "add_mcp", map[string]any{"spec": spec}, opts))
	}
	resolved, err := c.withSecrets(spec)
	if err != nil {
		return err
	}
	return done(call[json.RawMessage](ctx, c, "add_mcp", map[string]any{"spec": resolved}, opts))
}

// withSecrets is spec as JSON with each secret of its SecretEnv and SecretHeaders given the
// value WithSecretFunc's function returns for it (libmcpgw uses it, covers it, and sends it
// over the session only).
func (c *Client) withSecrets(spec MCPSpec) (json.RawMessage, error) {
	text, err := json.Marshal(spec)
	if err != nil {
		return nil, invalidArgument("add_mcp", "the spec cannot be encoded as JSON: "+err.Error(), err)
	}
	var doc map[string]any
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, invalidArgument("add_mcp", err.Error(), err)
	}
	config, _ := doc["mcp_config"].(map[string]any)
	for field, secrets := range map[string]map[string]string{
		"env":     spec.MCPConfig.SecretEnv,
		"headers": spec.MCPConfig.SecretHeaders,
	} {
		values, _ := config[field].(map[string]any)
		for key, name := range secrets {
			value, err := c.secretOf(name)
			if err != nil {
				return nil, invalidArgument("add_mcp", fmt.Sprintf("mcp_config.%s.%s: secret %q: %v", field, key, name, err), err)
			}
			values[key] = map[string]string{"secret": name, "value": value}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, invalidArgument("add_mcp", err.Error(), err)
	}
	return out, nil
}

// RemoveMCP removes the MCP server name from the scope; the gateway closes it and ends its
// processes. ErrNotFound when the scope has no such MCP.
func (c *Client) RemoveMCP(ctx context.Context, name string, opts ...CallOption) error {
	return done(call[json.RawMessage](ctx, c, "remove_mcp", map[string]any{"name": name}, opts))
}

// ListTools lists the tools of the MCP server mcp, as the server describes them (filtered only
// by the spec's EnableTools and DisableTools).
func (c *Client) ListTools(ctx context.Context, mcp string, opts ...CallOption) ([]Tool, error) {
	tools, err := call[[]Tool](ctx, c, "list_tools", map[string]any{"mcp": mcp}, opts)
	if err != nil {
		return nil, err
	}
	return *tools, nil
}

// CallTool calls the tool tool of the MCP server mcp with args, which encoding/json must turn
// into a JSON object (a struct, a map, a json.RawMessage) or which is nil for none.
//
// The context's deadline, shortened by a tenth (at most a second) so that the answer can still
// travel back, is the call's deadline at the gateway; past it the gateway cancels the call
// upstream and CallTool fails with ErrDeadline (also context.DeadlineExceeded). Without one,
// WithTimeout or the client's timeout applies. Cancelling the context abandons the call at once
// (ErrCancelled, also context.Canceled): over a session the gateway cancels it upstream; one-shot,
// its command is killed, in the sandbox too. With WithProgress the call streams.
//
// A tool that reports an error is not a failed call: the chunk's State is StateError and its text
// says why. Failures are *Error values: ErrNotFound for an unknown MCP or tool, ErrUpstreamError
// when the server fails, ErrDeadline, ErrSessionLost, ...
func (c *Client) CallTool(ctx context.Context, mcp, tool string, args any, opts ...CallOption) (*ToolChunk, error) {
	return call[ToolChunk](ctx, c, "call_tool", toolCall(mcp, tool, args), opts)
}

// CallToolStream is CallTool as an iterator: it yields each progress chunk of the call as the
// MCP server reports it (over a session; one-shot there are none), then the result chunk; or,
// when the call fails, one zero chunk with the error. Stopping the iteration early cancels the
// call.
func (c *Client) CallToolStream(ctx context.Context, mcp, tool string, args any, opts ...CallOption) iter.Seq2[ToolChunk, error] {
	return func(yield func(ToolChunk, error) bool) {
		stopped := false
		raw, err := c.run(ctx, "call_tool", toolCall(mcp, tool, args), c.settings(opts), func(b []byte) bool {
			var chunk ToolChunk
			if json.Unmarshal(b, &chunk) == nil && !yield(chunk, nil) {
				stopped = true
			}
			return !stopped
		})
		if stopped {
			return
		}
		var chunk ToolChunk
		if err == nil {
			err = decode("call_tool", raw, &chunk)
		}
		yield(chunk, err)
	}
}

func toolCall(mcp, tool string, args any) map[string]any {
	return map[string]any{"mcp": mcp, "tool": tool, "arguments": args}
}

// SetRuntimeHeaders replaces the runtime headers of the HTTP MCP server mcp with headers (nil or
// empty clears them), without reconnecting it.
func (c *Client) SetRuntimeHeaders(ctx context.Context, mcp string, headers map[string]string, opts ...CallOption) error {
	if headers == nil {
		headers = map[string]string{}
	}
	return done(call[json.RawMessage](ctx, c, "set_runtime_headers", map[string]any{"mcp": mcp, "headers": headers}, opts))
}

// OpenSession opens the session channel and waits for its hello: one long-lived exec in the
// sandbox (`docker exec -i ... mcpgw-gateway attach`) that carries every REST operation from
// then on (Health, AddMCP, RemoveMCP, ListMCPs, ListTools, CallTool, SetRuntimeHeaders), many at
// once, with live progress and real cancellation. StartGateway, StopGateway and
// EnsureGatewayBinary stay one-shot, and so does a request the channel refuses (a body over its
// frame limit) or never sent (it died first).
//
// When the client knows no gateway yet (no StartGateway, no WithPort), opening the session
// launches one in the same exec (SessionInfo.Launched); StopGateway stops it.
//
// A channel that is lost (its process died, its heartbeat stopped) is opened again (WithReopen,
// WithReopenAttempts), unless the backend says the sandbox is gone; tool calls in flight are
// resumed on the new channel when the gateway keeps them (SessionInfo.RetentionMS), GETs are sent
// again, and anything else in flight fails with ErrSessionLost, since it may have had effects.
// Operations made while the channel opens wait for it.
func (c *Client) OpenSession(ctx context.Context, opts ...CallOption) (*SessionInfo, error) {
	return call[SessionInfo](ctx, c, "open_session", nil, opts)
}

// CloseSession closes the session channel: what it carries fails with ErrSessionLost, its input
// is closed (attach cancels what it relayed and exits), and CloseSession waits for its process
// to exit (it is killed after the close grace). Later operations go one-shot. Closing a client
// without a session does nothing.
func (c *Client) CloseSession(ctx context.Context, opts ...CallOption) error {
	if _, err := call[json.RawMessage](ctx, c, "close_session", nil, opts); err != nil {
		return err
	}
	return c.awaitChannels(ctx, "close_session")
}

// awaitChannels waits for the session channels' processes that have not exited yet (a closed
// channel's is killed after the close grace), or for the end of ctx.
func (c *Client) awaitChannels(ctx context.Context, name string) error {
	for _, p := range c.h.runningChannels() {
		select {
		case <-p.ended():
		case <-ctx.Done():
			return contextError(name, ctx.Err())
		}
	}
	return nil
}

// settings are the client's defaults with opts applied.
func (c *Client) settings(opts []CallOption) callConfig {
	cfg := c.defaults
	for _, o := range opts {
		if o == nil {
			cfg.err = errors.New("an option is nil")
			continue
		}
		o.applyCall(&cfg)
	}
	return cfg
}

// call performs operation name and decodes its result into a T.
func call[T any](ctx context.Context, c *Client, name string, fields map[string]any, opts []CallOption) (*T, error) {
	cfg := c.settings(opts)
	var onChunk func([]byte) bool
	if f := cfg.progress; f != nil {
		onChunk = func(b []byte) bool {
			var chunk ToolChunk
			if json.Unmarshal(b, &chunk) == nil {
				f(chunk)
			}
			return true
		}
	}
	raw, err := c.run(ctx, name, fields, cfg, onChunk)
	runtime.KeepAlive(c)
	if err != nil {
		return nil, err
	}
	var out T
	if err := decode(name, raw, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func done[T any](_ *T, err error) error { return err }

func decode(name string, raw []byte, out any) error {
	if err := json.Unmarshal(raw, out); err != nil {
		return &Error{Op: name, Code: CodeProtocolError, Message: name + ": cannot decode the result: " + err.Error(), Err: err}
	}
	return nil
}

// run submits operation name (its fields, the scope and time limit of cfg) and waits for its
// end. onChunk (nil: the operation does not stream) gets each progress chunk on this goroutine;
// when it returns false, or panics, or ctx ends first, the operation is cancelled.
func (c *Client) run(ctx context.Context, name string, fields map[string]any, cfg callConfig, onChunk func([]byte) bool) ([]byte, error) {
	if cfg.err != nil {
		return nil, invalidArgument(name, cfg.err.Error(), cfg.err)
	}
	if err := ctx.Err(); err != nil {
		return nil, contextError(name, err)
	}
	ms, fromCtx, ok := callTimeout(ctx, cfg.timeout)
	if !ok {
		return nil, contextError(name, context.DeadlineExceeded)
	}
	op := map[string]any{"op": name, "agent_id": cfg.agentID, "session_id": cfg.sessionID}
	for k, v := range fields {
		op[k] = v
	}
	if ms > 0 {
		op["timeout_ms"] = ms
	}
	if onChunk != nil {
		op["stream"] = true
	}
	text, err := json.Marshal(op)
	if err != nil {
		return nil, invalidArgument(name, "the operation cannot be encoded as JSON: "+err.Error(), err)
	}
	id, p, err := c.h.submit(name, text, false)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		if !finished {
			c.h.cancel(id)
		}
	}()
	for {
		select {
		case <-p.signal:
		case <-ctx.Done():
			return nil, contextError(name, ctx.Err())
		}
		chunks, end := p.take()
		for _, b := range chunks {
			if !onChunk(b) {
				return nil, contextError(name, context.Canceled)
			}
		}
		if end {
			finished = true
			return p.outcome(name, fromCtx)
		}
	}
}
