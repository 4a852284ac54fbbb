package mcpgw

// #include <stdlib.h>
// #include <mcpgw.h>
import "C"

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Client is a client of one gateway in one sandbox: it launches and stops the gateway, and
// registers, lists and calls MCP servers through it, running every request as a command
// through its Exec function.
//
// A Client is safe for concurrent use by many goroutines; each call is independent of the
// others. Its MCP methods act in the client's default scope (see WithScope); Scope gives
// views on other scopes of the same gateway.
//
// Close releases it. Close does not stop the gateway, which may outlive the client (another
// client can attach to it with WithPort and WithTokenFile): call StopGateway first to end it.
type Client struct {
	exec Exec
	// The default scope. Not a *Scope: that points back at the client, and a cycle through
	// an object with a finalizer may never be collected.
	agentID, sessionID string
	// timeout is the time limit of calls whose context has no deadline.
	timeout time.Duration

	// mu keeps Close from freeing the handle while a call is preparing an operation.
	mu  sync.RWMutex
	ptr *C.mcpgw_client

	// slotMu guards the session: the opener given to OpenSession (nil: none wanted) and the
	// session it opened last (which may be lost; the next call then opens a new one).
	slotMu  sync.Mutex
	opener  Opener
	current *session
}

// defaultTimeout is the time limit of calls whose context has no deadline, unless WithTimeout
// sets another (libmcpgw's default too).
const defaultTimeout = 60 * time.Second

// Transport says how requests reach the gateway inside the sandbox.
type Transport int

// The transports.
const (
	// TransportAuto uses curl when the sandbox has it (detected once per client), else the
	// gateway binary's built-in client.
	TransportAuto Transport = C.MCPGW_TRANSPORT_AUTO
	// TransportCurl always uses curl.
	TransportCurl Transport = C.MCPGW_TRANSPORT_CURL
	// TransportBuiltin always uses `mcpgw-gateway request`.
	TransportBuiltin Transport = C.MCPGW_TRANSPORT_BUILTIN
)

// Option configures a Client in NewClient.
type Option func(*config)

type config struct {
	gatewayPath, host, tokenFile, stateDir, instanceNonce, stagingDir *string
	port                                                              *int
	transport                                                         *Transport
	timeout                                                           *time.Duration
	maxCommandBytes                                                   *int
	agentID, sessionID                                                string
}

// WithGatewayPath sets the gateway binary inside the sandbox (default "mcpgw-gateway",
// looked up on PATH; EnsureGatewayBinary needs an absolute path).
func WithGatewayPath(path string) Option { return func(c *config) { c.gatewayPath = &path } }

// WithHost sets the loopback address the gateway listens on (default "127.0.0.1").
func WithHost(host string) Option { return func(c *config) { c.host = &host } }

// WithPort attaches the client to a gateway that already listens on port (give its token
// file with WithTokenFile). By default StartGateway picks a free port.
func WithPort(port int) Option { return func(c *config) { c.port = &port } }

// WithTokenFile sets the gateway's token file inside the sandbox (default
// "<state dir>/token").
func WithTokenFile(path string) Option { return func(c *config) { c.tokenFile = &path } }

// WithStateDir sets the per-launch directory inside the sandbox that holds the token file and
// the gateway's log (default /tmp/mcpgw-<16 hex digits of the launch nonce>).
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = &dir } }

// WithInstanceNonce sets the launch nonce of an already running gateway, which Health then
// checks.
func WithInstanceNonce(nonce string) Option { return func(c *config) { c.instanceNonce = &nonce } }

// WithStagingDir sets where request bodies too large for one command are staged inside the
// sandbox (default the state directory, else /tmp).
func WithStagingDir(dir string) Option { return func(c *config) { c.stagingDir = &dir } }

// WithTransport sets how requests reach the gateway (default TransportAuto).
func WithTransport(t Transport) Option { return func(c *config) { c.transport = &t } }

// WithTimeout sets the time limit of calls whose context has no deadline (default 60 s;
// at least a millisecond).
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = &d } }

// WithMaxCommandBytes sets the longest command text handed to the Exec function (at least
// 4096; default 120 KiB, under Linux's 128 KiB limit for one argument); larger request bodies
// are staged in a file over several commands.
func WithMaxCommandBytes(n int) Option { return func(c *config) { c.maxCommandBytes = &n } }

// WithScope sets the client's default scope: the agent and session the MCPs of the Client's
// own MCP methods live in (default "" and "").
func WithScope(agentID, sessionID string) Option {
	return func(c *config) { c.agentID, c.sessionID = agentID, sessionID }
}

// NewClient creates a client that runs its commands through exec (and passes them stdin when
// exec.PassesStdin says so). It runs nothing yet: call StartGateway (or OpenSession) to launch a
// gateway, or attach to a running one with WithPort and WithTokenFile.
func NewClient(exec Exec, opts ...Option) (*Client, error) {
	const op = "new_client"
	if abiError != nil {
		return nil, abiError
	}
	if exec == nil {
		return nil, invalidArgument(op, "the exec is nil", nil)
	}
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	var cc *C.mcpgw_client_config
	if rc := Code(C.mcpgw_client_config_new(&cc)); rc != CodeOK {
		return nil, errorFromC(op, rc, nil)
	}
	defer C.mcpgw_client_config_free(cc)
	if err := cfg.apply(op, cc); err != nil {
		return nil, err
	}
	if err := check(op, C.mcpgw_client_config_set_exec_stdin(cc, C.bool(exec.PassesStdin()))); err != nil {
		return nil, err
	}
	c := &Client{exec: exec, agentID: cfg.agentID, sessionID: cfg.sessionID, timeout: defaultTimeout}
	if cfg.timeout != nil {
		c.timeout = *cfg.timeout
	}
	var cerr *C.mcpgw_error
	// No exec callback crosses into C: every call drives an operation in sans-IO form and
	// runs its commands here, in Go.
	if rc := Code(C.mcpgw_client_new(cc, nil, nil, nil, &c.ptr, &cerr)); rc != CodeOK {
		defer C.mcpgw_error_free(cerr)
		return nil, errorFromC(op, rc, cerr)
	}
	// Only a backstop: a forgotten Close leaks nothing.
	runtime.SetFinalizer(c, (*Client).Close)
	return c, nil
}

// apply sets every option given on the C configuration.
func (cfg *config) apply(op string, cc *C.mcpgw_client_config) error {
	setString := func(what string, v *string, set func(*C.char) C.mcpgw_result) error {
		if v == nil {
			return nil
		}
		s, err := cString(op, what, *v)
		if err != nil {
			return err
		}
		defer C.free(unsafe.Pointer(s))
		return check(op, set(s))
	}
	fields := []struct {
		what string
		v    *string
		set  func(*C.char) C.mcpgw_result
	}{
		{"gateway path", cfg.gatewayPath, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_gateway_path(cc, s) }},
		{"host", cfg.host, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_host(cc, s) }},
		{"token file", cfg.tokenFile, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_token_file(cc, s) }},
		{"state directory", cfg.stateDir, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_state_dir(cc, s) }},
		{"instance nonce", cfg.instanceNonce, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_instance_nonce(cc, s) }},
		{"staging directory", cfg.stagingDir, func(s *C.char) C.mcpgw_result { return C.mcpgw_client_config_set_staging_dir(cc, s) }},
	}
	for _, s := range fields {
		if err := setString(s.what, s.v, s.set); err != nil {
			return err
		}
	}
	if cfg.port != nil {
		if *cfg.port < 0 || *cfg.port > math.MaxUint16 {
			return invalidArgument(op, fmt.Sprintf("port %d is out of range", *cfg.port), nil)
		}
		if err := check(op, C.mcpgw_client_config_set_port(cc, C.uint16_t(*cfg.port))); err != nil {
			return err
		}
	}
	if cfg.transport != nil {
		if *cfg.transport < 0 {
			return invalidArgument(op, fmt.Sprintf("unknown transport %d", *cfg.transport), nil)
		}
		if err := check(op, C.mcpgw_client_config_set_transport(cc, C.uint32_t(*cfg.transport))); err != nil {
			return err
		}
	}
	if cfg.timeout != nil {
		ms := cfg.timeout.Milliseconds()
		if ms < 1 || ms > math.MaxUint32 {
			return invalidArgument(op, fmt.Sprintf("timeout %v is out of range", *cfg.timeout), nil)
		}
		if err := check(op, C.mcpgw_client_config_set_timeout_ms(cc, C.uint32_t(ms))); err != nil {
			return err
		}
	}
	if cfg.maxCommandBytes != nil {
		if *cfg.maxCommandBytes < 0 {
			return invalidArgument(op, fmt.Sprintf("max command bytes %d is negative", *cfg.maxCommandBytes), nil)
		}
		if err := check(op, C.mcpgw_client_config_set_max_command_bytes(cc, C.size_t(*cfg.maxCommandBytes))); err != nil {
			return err
		}
	}
	return nil
}

// check turns a failed configuration call into an *Error (the setters have no error object).
func check(op string, rc C.mcpgw_result) error {
	if Code(rc) == CodeOK {
		return nil
	}
	return errorFromC(op, Code(rc), nil)
}

// cString copies s for C; a NUL byte would silently cut it short there, so it is refused.
// The caller frees the result.
func cString(op, what, s string) (*C.char, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, invalidArgument(op, what+" contains a NUL byte", nil)
	}
	return C.CString(s), nil
}

// Close releases the client and closes its session, if it has one (calls in flight over it fail
// with ErrSessionLost). It is idempotent, and one-shot calls still running finish normally;
// later calls fail with ErrClosed. It does not stop the gateway: call StopGateway first for
// that. It always returns nil.
func (c *Client) Close() error {
	c.CloseSession()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr != nil {
		C.mcpgw_client_free(c.ptr)
		c.ptr = nil
		runtime.SetFinalizer(c, nil)
	}
	return nil
}

// Port is the gateway's port once it is known (configured, or learned by StartGateway); 0
// before.
func (c *Client) Port() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ptr == nil {
		return 0
	}
	port := int(C.mcpgw_client_port(c.ptr))
	runtime.KeepAlive(c)
	return port
}

// Scope is a view of the client's gateway in the scope (agentID, sessionID): the MCPs of each
// scope are isolated from those of every other. The view shares the client: it needs no Close,
// and stops working when the client is closed.
func (c *Client) Scope(agentID, sessionID string) *Scope {
	return &Scope{c: c, agentID: agentID, sessionID: sessionID}
}

func (c *Client) defaultScope() *Scope { return c.Scope(c.agentID, c.sessionID) }

// StartGateway launches the gateway inside the sandbox with one command (it mints its token
// into a 0600 file there, so the token never reaches the host), then confirms with a health
// check that this very launch answers. On failure the error (ErrStartFailed) carries the
// gateway's reason and the tail of its log.
func (c *Client) StartGateway(ctx context.Context) (*GatewayInfo, error) {
	var info GatewayInfo
	err := c.run(ctx, "start_gateway", c.defaultScope(), &info, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_start_gateway(cl, o, op)
	})
	if err != nil {
		return nil, err
	}
	return &info, nil
}

// StopGateway stops the gateway this client launched: SIGTERM, a wait (up to the call's time
// limit) for it to close its MCP servers and exit, SIGKILL after that (then it fails with
// ErrCommandFailed); then its state directory is removed. It succeeds when the gateway had
// already exited, and fails with ErrGatewayNotRunning when this client has not launched one (or
// has stopped it already). It closes the client's session first (a session opened later
// launches a new gateway).
func (c *Client) StopGateway(ctx context.Context) error {
	c.CloseSession()
	return c.run(ctx, "stop_gateway", c.defaultScope(), nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_stop_gateway(cl, o, op)
	})
}

// Health asks the gateway whether it is up, and checks its instance nonce when the client
// knows it (ErrGatewayNotRunning when another gateway answers).
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	err := c.runREST(ctx, "health", c.defaultScope(), &h, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_health(cl, o, op)
	})
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// EnsureGatewayBinary makes sure the sandbox holds the gateway binary read from hostPath on
// this machine at the client's gateway path (which must be absolute): when it is missing or
// its SHA-256 differs, it is uploaded, verified and renamed into place. With an Exec that passes
// stdin the upload is one command with the binary on its stdin; otherwise it takes one command
// per piece of about 90 KiB. The sandbox needs sha256sum (and, without stdin, base64).
func (c *Client) EnsureGatewayBinary(ctx context.Context, hostPath string) (*BinaryStatus, error) {
	const name = "ensure_gateway_binary"
	path, err := cString(name, "host path", hostPath)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(path))
	var st BinaryStatus
	err = c.run(ctx, name, c.defaultScope(), &st, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_ensure_gateway_binary(cl, o, path, op)
	})
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// AddMCP registers an MCP server in the client's default scope; see Scope.AddMCP.
func (c *Client) AddMCP(ctx context.Context, spec MCPSpec) error {
	return c.defaultScope().AddMCP(ctx, spec)
}

// RemoveMCP removes an MCP server from the client's default scope; see Scope.RemoveMCP.
func (c *Client) RemoveMCP(ctx context.Context, name string) error {
	return c.defaultScope().RemoveMCP(ctx, name)
}

// ListMCPs lists the MCP servers of the client's default scope; see Scope.ListMCPs.
func (c *Client) ListMCPs(ctx context.Context) ([]MCPSpec, error) {
	return c.defaultScope().ListMCPs(ctx)
}

// ListTools lists the tools of an MCP server in the client's default scope; see
// Scope.ListTools.
func (c *Client) ListTools(ctx context.Context, mcp string) ([]Tool, error) {
	return c.defaultScope().ListTools(ctx, mcp)
}

// CallTool calls a tool of an MCP server in the client's default scope; see Scope.CallTool.
func (c *Client) CallTool(ctx context.Context, mcp, tool string, args any, opts ...CallOption) (*ToolChunk, error) {
	return c.defaultScope().CallTool(ctx, mcp, tool, args, opts...)
}

// SetRuntimeHeaders replaces the runtime headers of an HTTP MCP server in the client's
// default scope; see Scope.SetRuntimeHeaders.
func (c *Client) SetRuntimeHeaders(ctx context.Context, mcp string, headers map[string]string) error {
	return c.defaultScope().SetRuntimeHeaders(ctx, mcp, headers)
}

// CallOption configures one CallTool call.
type CallOption func(*callSettings)

type callSettings struct {
	progress func(ToolChunk)
}

// WithProgress makes the call stream: f receives each progress chunk (IsLast false, its
// Progress in metadata.mcp_progress) in order, as the MCP server reports it, on the calling
// goroutine, before CallTool returns the last chunk. Streaming needs a session (OpenSession):
// a call made one-shot still returns its result, but f is not called. A panic in f cancels the
// call and goes on in the caller.
func WithProgress(f func(ToolChunk)) CallOption {
	return func(s *callSettings) { s.progress = f }
}

// Scope is the client's gateway seen from one scope, an (agent id, session id) pair. Get one
// from Client.Scope; it is safe for concurrent use like its client.
type Scope struct {
	c                  *Client
	agentID, sessionID string
}

// AgentID is the agent part of the scope.
func (s *Scope) AgentID() string { return s.agentID }

// SessionID is the session part of the scope.
func (s *Scope) SessionID() string { return s.sessionID }

// AddMCP registers an MCP server in the scope. It returns once the gateway has connected to
// it, initialized it and listed its tools; ErrConflict when the scope has an MCP of that
// name, ErrUpstreamError when the server cannot be reached.
func (s *Scope) AddMCP(ctx context.Context, spec MCPSpec) error {
	const name = "add_mcp"
	spec.Status = nil
	body, err := json.Marshal(spec)
	if err != nil {
		return invalidArgument(name, "the spec cannot be encoded as JSON: "+err.Error(), err)
	}
	text, err := cString(name, "the spec", string(body))
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(text))
	return s.c.runREST(ctx, name, s, nil, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_add_mcp(cl, o, text, op)
	})
}

// RemoveMCP removes the MCP server name from the scope; the gateway closes it and ends its
// processes. ErrNotFound when the scope has no such MCP.
func (s *Scope) RemoveMCP(ctx context.Context, name string) error {
	const opName = "remove_mcp"
	text, err := cString(opName, "the MCP name", name)
	if err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(text))
	return s.c.runREST(ctx, opName, s, nil, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_remove_mcp(cl, o, text, op)
	})
}

// ListMCPs lists the MCP servers registered in the scope, as registered, each with the
// gateway's Status (MCPStatus: its MCPState, process id, restarts, last error, calls).
func (s *Scope) ListMCPs(ctx context.Context) ([]MCPSpec, error) {
	var specs []MCPSpec
	err := s.c.runREST(ctx, "list_mcps", s, &specs, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_list_mcps(cl, o, op)
	})
	return specs, err
}

// ListTools lists the tools of the MCP server mcp, as the server describes them (unfiltered by
// anything but the spec's EnableTools and DisableTools).
func (s *Scope) ListTools(ctx context.Context, mcp string) ([]Tool, error) {
	const name = "list_tools"
	text, err := cString(name, "the MCP name", mcp)
	if err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(text))
	var tools []Tool
	err = s.c.runREST(ctx, name, s, &tools, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_list_tools(cl, o, text, op)
	})
	return tools, err
}

// CallTool calls the tool tool of the MCP server mcp with args, which encoding/json must turn
// into a JSON object (a struct, a map, a json.RawMessage) or which is nil for none.
//
// The context's deadline, shortened by a tenth (at most a second) so that the answer can
// still travel back, is the call's deadline at the gateway; past it the gateway cancels the
// call upstream and CallTool fails with ErrDeadline. Without a deadline the client's timeout
// applies. Cancelling the context abandons the call at once.
//
// Over a session, cancelling the context sends a cancel frame: the gateway cancels the call
// upstream (notifications/cancelled) at once, and CallTool fails with ErrCancelled. With
// WithProgress the call streams: the function receives each progress chunk as it happens.
//
// A tool that reports an error is not a failed call: the chunk's State is StateError and its
// text says why. Call failures are *Error values: ErrNotFound for an unknown MCP or tool,
// ErrUpstreamError when the server fails, ErrDeadline, ErrSessionLost, ...
func (s *Scope) CallTool(ctx context.Context, mcp, tool string, args any, opts ...CallOption) (*ToolChunk, error) {
	const name = "call_tool"
	var settings callSettings
	for _, o := range opts {
		o(&settings)
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return nil, invalidArgument(name, "the arguments cannot be encoded as JSON: "+err.Error(), err)
	}
	var texts [3]*C.char
	for i, v := range [3][2]string{{"the MCP name", mcp}, {"the tool name", tool}, {"the arguments", string(argsJSON)}} {
		if texts[i], err = cString(name, v[0], v[1]); err != nil {
			for _, t := range texts[:i] {
				C.free(unsafe.Pointer(t))
			}
			return nil, err
		}
	}
	defer func() {
		for _, t := range texts {
			C.free(unsafe.Pointer(t))
		}
	}()
	var chunk ToolChunk
	err = s.c.runREST(ctx, name, s, &chunk, settings.progress, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_call_tool(cl, o, texts[0], texts[1], texts[2], op)
	})
	if err != nil {
		return nil, err
	}
	return &chunk, nil
}

// SetRuntimeHeaders replaces the runtime headers of the HTTP MCP server mcp with headers (an
// empty map clears them), without reconnecting it.
func (s *Scope) SetRuntimeHeaders(ctx context.Context, mcp string, headers map[string]string) error {
	const name = "set_runtime_headers"
	if headers == nil {
		headers = map[string]string{}
	}
	body, err := json.Marshal(headers)
	if err != nil {
		return invalidArgument(name, "the headers cannot be encoded as JSON: "+err.Error(), err)
	}
	texts := [2]*C.char{}
	if texts[0], err = cString(name, "the MCP name", mcp); err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(texts[0]))
	if texts[1], err = cString(name, "the headers", string(body)); err != nil {
		return err
	}
	defer C.free(unsafe.Pointer(texts[1]))
	return s.c.runREST(ctx, name, s, nil, nil, func(cl *cClient, o *cOptions, op **cOp) C.mcpgw_result {
		return C.mcpgw_client_prepare_set_runtime_headers(cl, o, texts[0], texts[1], op)
	})
}

// OpenSession opens a session channel with open (LocalSession, DockerSession, KubectlSession,
// or an Opener of your own) and waits for it to answer; from then on every REST method of the
// client and its scopes (Health, AddMCP, RemoveMCP, ListMCPs, ListTools, CallTool,
// SetRuntimeHeaders) goes over it: one long-lived exec in the sandbox instead of one exec per
// call, many calls at once, live progress (WithProgress) and real cancellation. StartGateway,
// StopGateway and EnsureGatewayBinary still run one-shot through the Exec.
//
// When the client knows no gateway yet (no StartGateway, WithPort), opening the session
// launches one first, in the same exec (SessionInfo.Launched); StopGateway stops it.
//
// A session that is lost (the channel's process died, the sandbox was killed) fails the calls
// it carried with ErrSessionLost, within the time it takes the backend to report the end of the
// channel; they are never replayed, since a tool call may have had effects. Calls it had not
// sent yet go one-shot. The next call then opens a new session with the same Opener (the
// client keeps it until CloseSession or StopGateway), and goes one-shot if that fails. Calls
// made while a session opens wait in it and are sent once it answers.
//
// Opening another session replaces the current one (which is closed).
func (c *Client) OpenSession(ctx context.Context, open Opener) (*SessionInfo, error) {
	const name = "open_session"
	if open == nil {
		return nil, invalidArgument(name, "the opener is nil", nil)
	}
	if err := ctx.Err(); err != nil {
		return nil, contextError(name, err)
	}
	c.slotMu.Lock()
	if c.current != nil {
		c.current.close()
		c.current = nil
	}
	s, err := c.startSession(ctx, name, open)
	if err != nil {
		c.opener = nil
		c.slotMu.Unlock()
		return nil, err
	}
	c.current, c.opener = s, open
	c.slotMu.Unlock()

	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if _, has := ctx.Deadline(); !has {
		waitCtx, cancel = context.WithTimeout(ctx, c.timeout)
	}
	defer cancel()
	info, err := s.waitOpened(waitCtx, name)
	if err != nil {
		c.slotMu.Lock()
		if c.current == s {
			c.current, c.opener = nil, nil
		}
		c.slotMu.Unlock()
		s.close()
		return nil, err
	}
	return info, nil
}

// CloseSession closes the client's session, if it has one: calls in flight over it fail with
// ErrSessionLost, the channel's stdin is closed (attach cancels what it carried in the gateway
// and exits), and its process is waited for. Later calls go one-shot until OpenSession. It is
// idempotent and always returns nil.
func (c *Client) CloseSession() error {
	c.slotMu.Lock()
	s := c.current
	c.current, c.opener = nil, nil
	c.slotMu.Unlock()
	if s != nil {
		s.close()
	}
	return nil
}

// Session is what the client's session said when it opened, or nil when the client has no
// session open (none was opened, it was closed, or it is lost and not reopened yet).
func (c *Client) Session() *SessionInfo {
	c.slotMu.Lock()
	s := c.current
	c.slotMu.Unlock()
	if s == nil || s.isLost() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info == nil {
		return nil
	}
	info := *s.info
	return &info
}

// session is the session calls should go over: the current one, or, when it is lost, a new one
// opened with the same opener; nil when there is none (or it cannot be opened: the call then
// goes one-shot, which says what is wrong).
func (c *Client) session(ctx context.Context) *session {
	c.slotMu.Lock()
	defer c.slotMu.Unlock()
	if c.opener == nil {
		return nil
	}
	if c.current != nil && !c.current.isLost() {
		return c.current
	}
	if c.current != nil {
		go c.current.close()
		c.current = nil
	}
	s, err := c.startSession(ctx, "open_session", c.opener)
	if err != nil {
		return nil
	}
	c.current = s
	return s
}

// startSession opens a session of the client with open, unless the client is closed.
func (c *Client) startSession(ctx context.Context, name string, open Opener) (*session, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ptr == nil {
		return nil, closedError(name)
	}
	s, err := startSession(ctx, name, c.ptr, open)
	runtime.KeepAlive(c)
	return s, err
}
