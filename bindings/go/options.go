package mcpgw

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Option configures a Client (NewClient). Every option but WithScope and WithTimeout sets a key
// of libmcpgw's host configuration, which checks it; unset keys keep libmcpgw's defaults.
type Option interface{ applyClient(*clientConfig) }

// CallOption configures one operation.
type CallOption interface{ applyCall(*callConfig) }

// Setting is an option of both kinds: given to NewClient it is the client's default, given to an
// operation it holds for that operation.
type Setting struct {
	client func(*clientConfig)
	call   func(*callConfig)
}

func (s Setting) applyClient(c *clientConfig) { s.client(c) }
func (s Setting) applyCall(c *callConfig)     { s.call(c) }

type clientOption func(*clientConfig)

func (o clientOption) applyClient(c *clientConfig) { o(c) }

type callOption func(*callConfig)

func (o callOption) applyCall(c *callConfig) { o(c) }

// clientConfig is what the options of NewClient set: the host configuration's keys, and the
// defaults of every call.
type clientConfig struct {
	keys     map[string]any
	err      error
	defaults callConfig
	audit    func(json.RawMessage)
	secretOf func(string) (string, error)
}

// callConfig is what the options of one operation set.
type callConfig struct {
	agentID, sessionID string
	timeout            time.Duration // 0: the client's
	progress           func(ToolChunk)
	err                error
}

func (c *clientConfig) set(key string, v any) {
	if c.keys == nil {
		c.keys = map[string]any{}
	}
	c.keys[key] = v
}

// setDuration sets key to d in milliseconds; what is negative or beyond a uint32 of them is an
// error.
func (c *clientConfig) setDuration(key string, d time.Duration) {
	ms, err := millis(d)
	if err != nil {
		c.err = fmt.Errorf("%s: %w", key, err)
		return
	}
	c.set(key, ms)
}

// millis is d in whole milliseconds, rounded up (a microsecond is a millisecond, not none).
func millis(d time.Duration) (uint64, error) {
	if d < 0 || d > math.MaxUint32*time.Millisecond {
		return 0, fmt.Errorf("the duration %v is out of range", d)
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond), nil
}

func textOption(key string) func(string) Option {
	return func(v string) Option { return clientOption(func(c *clientConfig) { c.set(key, v) }) }
}

func durationOption(key string) func(time.Duration) Option {
	return func(d time.Duration) Option { return clientOption(func(c *clientConfig) { c.setDuration(key, d) }) }
}

var (
	// WithGatewayPath sets the gateway binary inside the sandbox (default "mcpgw-gateway", looked
	// up on PATH; EnsureGatewayBinary needs an absolute path).
	WithGatewayPath = textOption("gateway_path")
	// WithHost sets the loopback address the gateway listens on (default "127.0.0.1").
	WithHost = textOption("host")
	// WithTokenFile sets the token file inside the sandbox of a running gateway (with WithPort),
	// or of the one to launch (default "<state dir>/token").
	WithTokenFile = textOption("token_file")
	// WithStateDir sets the per-launch directory inside the sandbox that holds the token file and
	// the gateway's log (default /tmp/mcpgw-<16 hex digits>).
	WithStateDir = textOption("state_dir")
	// WithInstanceNonce sets the launch nonce of a running gateway, which Health then checks.
	WithInstanceNonce = textOption("instance_nonce")
	// WithStagingDir sets where request bodies too large for one command are staged inside the
	// sandbox (default the state directory, else /tmp).
	WithStagingDir = textOption("staging_dir")
	// WithOpenTimeout sets how long a session channel may take to say hello, a launch included
	// (default 60 s).
	WithOpenTimeout = durationOption("open_timeout_ms")
	// WithAnswerGrace sets how long an answer over a session may take beyond its operation's own
	// time limit (default 5 s).
	WithAnswerGrace = durationOption("answer_grace_ms")
	// WithCloseGrace sets how long a closed channel's process may take to exit before it is
	// killed (default 5 s).
	WithCloseGrace = durationOption("close_grace_ms")
	// WithHeartbeat sets how often attach pings when idle (default: attach's own).
	WithHeartbeat = durationOption("heartbeat_ms")
	// WithHeartbeatTimeout sets how long the channel may stay silent before it counts as lost
	// (default three heartbeats, when attach announces one).
	WithHeartbeatTimeout = durationOption("heartbeat_timeout_ms")
)

// WithPolicy sets the host's rules: which tools, prompts and resources of which servers the
// client's calls and connections may reach, per agent scope (the structure of `mcpgw mcp
// --policy`'s file, given as any value encoding/json writes as that object, or as
// json.RawMessage). What they refuse fails with ErrPolicyDenied, naming the rule, and is not
// listed. libmcpgw checks the rules when the client is made.
func WithPolicy(policy any) Option {
	return clientOption(func(c *clientConfig) {
		raw, err := json.Marshal(policy)
		if err != nil {
			c.err = fmt.Errorf("the policy cannot be encoded as JSON: %w", err)
			return
		}
		c.set("policy", json.RawMessage(raw))
	})
}

// WithAudit turns the audit on: f gets each call's record (JSON: time, scope, server, method,
// name, a digest and size of the arguments, outcome, duration, result size) when the call ends,
// in order, on a goroutine of the client's (it may use the client).
func WithAudit(f func(record json.RawMessage)) Option {
	return clientOption(func(c *clientConfig) {
		if f == nil {
			c.err = fmt.Errorf("the audit function is nil")
			return
		}
		c.audit = f
		c.set("audit", true)
	})
}

// WithAuditArguments has the audit records (WithAudit) hold the arguments themselves, secrets
// shown by name, not only their digest and size.
func WithAuditArguments() Option {
	return clientOption(func(c *clientConfig) { c.set("audit_arguments", true) })
}

// WithSecrets gives secret values by name, which an MCPConfig's SecretEnv and SecretHeaders
// resolve to (else the process's environment variable of that name). A value crosses into the
// sandbox in one session frame only, and answers show "[secret:NAME]" in its place. Values must
// be at least 8 bytes.
func WithSecrets(secrets map[string]string) Option {
	return clientOption(func(c *clientConfig) {
		copied := make(map[string]string, len(secrets))
		for k, v := range secrets {
			copied[k] = v
		}
		c.set("secrets", copied)
	})
}

// WithSecretFunc has AddMCP ask f for the value of each secret a spec's SecretEnv and
// SecretHeaders name (before libmcpgw's own WithSecrets values and the environment); an error of
// f fails AddMCP with ErrInvalidArgument naming the secret.
func WithSecretFunc(f func(name string) (string, error)) Option {
	return clientOption(func(c *clientConfig) {
		if f == nil {
			c.err = fmt.Errorf("the secret function is nil")
			return
		}
		c.secretOf = f
	})
}

// WithPort attaches the client to a gateway that already listens on port (give its token file
// with WithTokenFile). By default StartGateway (or OpenSession) launches one on a free port.
func WithPort(port int) Option {
	return clientOption(func(c *clientConfig) {
		if port < 0 || port > math.MaxUint16 {
			c.err = fmt.Errorf("port %d is out of range", port)
			return
		}
		c.set("port", port)
	})
}

// Transport says how requests reach the gateway inside the sandbox.
type Transport string

// The transports.
const (
	// TransportAuto uses curl when the sandbox has it (detected once), else the gateway binary's
	// built-in client.
	TransportAuto Transport = ""
	// TransportCurl always uses curl.
	TransportCurl Transport = "curl"
	// TransportBuiltIn always uses `mcpgw-gateway request`.
	TransportBuiltIn Transport = "built_in"
)

// WithTransport sets how requests reach the gateway (default TransportAuto).
func WithTransport(t Transport) Option {
	return clientOption(func(c *clientConfig) {
		if t != TransportAuto {
			c.set("transport", string(t))
		}
	})
}

// WithMaxCommandBytes sets the longest command text handed to the backend (at least 4096; default
// 120 KiB, under Linux's 128 KiB limit for one argument); larger request bodies are staged in a
// file, on stdin in one command when the backend passes stdin, else over several commands.
func WithMaxCommandBytes(n int) Option {
	return clientOption(func(c *clientConfig) {
		if n < 0 {
			c.err = fmt.Errorf("max command bytes %d is negative", n)
			return
		}
		c.set("max_command_bytes", n)
	})
}

// WithReopen sets whether a lost session channel is opened again, and its resumable calls
// resumed (default true).
func WithReopen(reopen bool) Option {
	return clientOption(func(c *clientConfig) { c.set("reopen", reopen) })
}

// WithReopenAttempts sets how many times in a row opening the channel again may fail before the
// session gives up and operations go one-shot (default 5).
func WithReopenAttempts(n int) Option {
	return clientOption(func(c *clientConfig) {
		if n < 0 || n > math.MaxUint32 {
			c.err = fmt.Errorf("reopen attempts %d is out of range", n)
			return
		}
		c.set("reopen_attempts", n)
	})
}

// WithScope sets the scope, the (agent id, session id) pair whose MCPs an operation acts on: the
// gateway keeps the MCPs of each scope apart. Given to NewClient it is the client's default scope
// ("" and "" unless set).
func WithScope(agentID, sessionID string) Setting {
	set := func(c *callConfig) { c.agentID, c.sessionID = agentID, sessionID }
	return Setting{client: func(c *clientConfig) { set(&c.defaults) }, call: set}
}

// WithTimeout sets the time limit of an operation whose context has no deadline (default 60 s);
// a tool call's deadline in the gateway too. Given to NewClient it is the client's default.
func WithTimeout(d time.Duration) Setting {
	set := func(c *callConfig) {
		if d <= 0 {
			c.err = fmt.Errorf("the timeout %v is not positive", d)
			return
		}
		c.timeout = d
	}
	return Setting{client: func(c *clientConfig) {
		if d <= 0 {
			c.err = fmt.Errorf("the timeout %v is not positive", d)
			return
		}
		c.setDuration("timeout_ms", d)
	}, call: set}
}

// WithProgress makes a tool call stream: f receives each progress chunk (IsLast false, its
// Progress in metadata.mcp_progress) in order, as the MCP server reports it, on the calling
// goroutine, before CallTool returns the last chunk. Streaming needs a session: a call made
// one-shot still returns its result, but f is not called. A panic in f cancels the call and goes
// on in the caller. CallToolStream gives the same chunks as an iterator.
func WithProgress(f func(ToolChunk)) CallOption {
	return callOption(func(c *callConfig) { c.progress = f })
}

// callTimeout is the time limit libmcpgw gets for an operation (0: the client's): the context's
// deadline less a tenth of the time left (at most a second), so that a deadline the gateway
// reports (504) can travel back while the context still waits for it, else the call's own
// WithTimeout. fromCtx says that the context's deadline set it; ok is false when it has passed.
func callTimeout(ctx context.Context, own time.Duration) (ms uint64, fromCtx, ok bool) {
	deadline, has := ctx.Deadline()
	if !has {
		ms, _ := millis(own)
		return ms, false, true
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, true, false
	}
	left -= min(left/10, time.Second)
	if own > 0 && own < left {
		ms, _ := millis(own)
		return ms, false, true
	}
	ms, _ = millis(min(left, math.MaxUint32*time.Millisecond))
	return max(ms, 1), true, true
}
