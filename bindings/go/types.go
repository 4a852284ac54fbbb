package mcpgw

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The Go types of this file round-trip the gateway's JSON: a value decoded from what the
// gateway sent marshals back to the same JSON value. Members the wire writes as null are
// pointers (or slices and maps, whose nil is null), members it may leave out are omitted only
// when they are absent, and members this version does not know are kept in Extra.

// The mcp_config types of an MCPSpec.
const (
	// ConfigStdio is a child process speaking MCP over stdin/stdout, spawned by the gateway.
	ConfigStdio = "stdio_mcp"
	// ConfigHTTP is a server reached over streamable HTTP, or legacy SSE when the URL path
	// ends in /sse or /messages/.
	ConfigHTTP = "http_mcp"
)

// MCPSpec registers an MCP server with the gateway: AgentScope's MCPClient dump. Build one
// with StdioSpec or HTTPSpec, or as a literal. ListMCPs gives the specs as registered, each with
// its Status; such a spec can be registered again as it is (AddMCP ignores Status).
type MCPSpec struct {
	// Name is unique within a scope, matches [A-Za-z0-9_-]+ and has at most 128 bytes.
	Name string `json:"name"`
	// IsStateful says whether the gateway keeps one session open; nil (left out on the wire)
	// means true, the gateway's default. A stdio MCP must be stateful; a stateless HTTP MCP gets
	// a fresh session for every operation.
	IsStateful *bool `json:"is_stateful,omitempty"`
	// MCPConfig says how the gateway reaches the server.
	MCPConfig MCPConfig `json:"mcp_config"`
	// EnableTools, when not nil, lists the only tools that are listed and may be called (a call
	// of another fails with ErrPolicyDenied).
	EnableTools []string `json:"enable_tools"`
	// DisableTools, when not nil, lists tools that are neither listed nor callable (a call fails
	// with ErrPolicyDenied).
	DisableTools []string `json:"disable_tools"`
	// ExecutionTimeout bounds each tool call of this MCP, in seconds (at most 86400); nil for no
	// bound of its own (each call still has its context's deadline or the client's timeout).
	ExecutionTimeout *float64 `json:"execution_timeout"`
	// StreamProgress is AgentScope's streaming switch; the gateway keeps and echoes it.
	StreamProgress bool `json:"stream_progress"`
	// RuntimeHeaders are extra headers for an HTTP MCP, sent on registration and never
	// echoed back (see SetRuntimeHeaders).
	RuntimeHeaders map[string]string `json:"runtime_headers,omitempty"`
	// Status is the gateway's view of the MCP, filled in by ListMCPs; AddMCP leaves it out.
	Status *MCPStatus `json:"status,omitempty"`
	// Extra holds members this version does not know; the gateway keeps and echoes them.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainSpec MCPSpec

// MarshalJSON writes the spec with its Extra members.
func (s MCPSpec) MarshalJSON() ([]byte, error) {
	return marshalWithExtra(plainSpec(s), s.Extra)
}

// UnmarshalJSON reads a spec, keeping unknown members in Extra.
func (s *MCPSpec) UnmarshalJSON(data []byte) error {
	var p plainSpec
	extra, err := unmarshalWithExtra(data, &p)
	if err != nil {
		return err
	}
	p.Extra = extra
	*s = MCPSpec(p)
	return nil
}

// MCPConfig is the mcp_config of an MCPSpec: a stdio server (Type ConfigStdio, with Command,
// Args, Env, Cwd, EncodingErrorHandler) or an HTTP server (Type ConfigHTTP, with URL, Headers,
// Timeout). Only the members of its type are written.
type MCPConfig struct {
	// Type is ConfigStdio or ConfigHTTP.
	Type string `json:"type"`
	// Command is the program of a stdio server, looked up on PATH when it has no slash.
	Command string `json:"command,omitempty"`
	// Args are its arguments (nil: null, none).
	Args []string `json:"args,omitempty"`
	// Env holds variables added to the gateway's environment for the child (nil: null).
	Env map[string]string `json:"-"`
	// SecretEnv holds variables of the child whose value is a secret of the host, by the
	// secret's name (see WithSecrets): the value crosses into the sandbox in one session frame,
	// the gateway echoes the name alone, and answers show "[secret:NAME]" in its place.
	SecretEnv map[string]string `json:"-"`
	// Cwd is the child's working directory (nil: null, the gateway's).
	Cwd *string `json:"cwd,omitempty"`
	// EncodingErrorHandler says what to do with stdout bytes that are not UTF-8: "strict"
	// (the default, also when ""), "ignore" or "replace".
	EncodingErrorHandler string `json:"encoding_error_handler,omitempty"`
	// URL is the endpoint of an HTTP server, e.g. http://127.0.0.1:8000/mcp.
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to an HTTP server (nil: null).
	Headers map[string]string `json:"-"`
	// SecretHeaders are headers whose value is a secret of the host, by the secret's name (as
	// SecretEnv).
	SecretHeaders map[string]string `json:"-"`
	// Timeout bounds how long a connection to an HTTP server may take to open, in seconds.
	// nil is written as null, which means no bound; HTTPSpec sets AgentScope's default, 30.
	Timeout *float64 `json:"timeout,omitempty"`
	// Extra holds members this version does not know; the gateway keeps and echoes them.
	Extra map[string]json.RawMessage `json:"-"`
}

type plainConfig MCPConfig

// MarshalJSON writes the members of the config's type, as the gateway does.
func (c MCPConfig) MarshalJSON() ([]byte, error) {
	w := newObject()
	w.add("type", c.Type)
	switch c.Type {
	case ConfigStdio:
		w.add("command", c.Command)
		w.add("args", c.Args)
		w.add("env", settings(c.Env, c.SecretEnv))
		w.add("cwd", c.Cwd)
		if c.EncodingErrorHandler != "" {
			w.add("encoding_error_handler", c.EncodingErrorHandler)
		}
	case ConfigHTTP:
		w.add("url", c.URL)
		w.add("headers", settings(c.Headers, c.SecretHeaders))
		w.add("timeout", c.Timeout)
	default:
		// A type this version does not know: whatever is set.
		b, err := json.Marshal(plainConfig(c))
		if err != nil {
			return nil, err
		}
		extra := map[string]json.RawMessage{}
		for k, v := range c.Extra {
			extra[k] = v
		}
		for key, m := range map[string]map[string]any{
			"env":     settings(c.Env, c.SecretEnv),
			"headers": settings(c.Headers, c.SecretHeaders),
		} {
			if m != nil {
				raw, err := json.Marshal(m)
				if err != nil {
					return nil, err
				}
				extra[key] = raw
			}
		}
		return withExtra(b, extra)
	}
	w.extra(c.Extra)
	return w.bytes()
}

// UnmarshalJSON reads a config, keeping unknown members in Extra.
func (c *MCPConfig) UnmarshalJSON(data []byte) error {
	var p plainConfig
	extra, err := unmarshalWithExtra(data, &p)
	if err != nil {
		return err
	}
	for key, into := range map[string][2]*map[string]string{
		"env":     {&p.Env, &p.SecretEnv},
		"headers": {&p.Headers, &p.SecretHeaders},
	} {
		raw, ok := extra[key]
		if !ok {
			continue
		}
		delete(extra, key)
		if err := splitSettings(raw, into[0], into[1]); err != nil {
			return fmt.Errorf("mcp_config.%s: %w", key, err)
		}
	}
	if len(extra) == 0 {
		extra = nil
	}
	p.Extra = extra
	*c = MCPConfig(p)
	return nil
}

// settings is an env or headers object: text values, and {"secret": NAME} for the secret ones;
// nil when both are nil.
func settings(text, secret map[string]string) map[string]any {
	if text == nil && secret == nil {
		return nil
	}
	m := make(map[string]any, len(text)+len(secret))
	for k, v := range text {
		m[k] = v
	}
	for k, name := range secret {
		m[k] = map[string]string{"secret": name}
	}
	return m
}

// splitSettings reads an env or headers object (or null) into its text and secret values.
func splitSettings(raw json.RawMessage, text, secret *map[string]string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	if m == nil {
		return nil
	}
	for k, v := range m {
		var t string
		if json.Unmarshal(v, &t) == nil {
			if *text == nil {
				*text = map[string]string{}
			}
			(*text)[k] = t
			continue
		}
		var s struct {
			Secret string `json:"secret"`
		}
		if err := json.Unmarshal(v, &s); err != nil || s.Secret == "" {
			return fmt.Errorf("%s: a value must be a string or {\"secret\": NAME}, not %s", k, v)
		}
		if *secret == nil {
			*secret = map[string]string{}
		}
		(*secret)[k] = s.Secret
	}
	if *text == nil && *secret == nil {
		*text = map[string]string{}
	}
	return nil
}

// MCPState is the state of a registered MCP (MCPStatus.State); the constants MCPStateConnecting,
// ... are generated from the gateway's own list, with its documentation.
type MCPState string

// MCPStates returns every state the gateway reports, in its order.
func MCPStates() []MCPState { return append([]MCPState(nil), mcpStates...) }

// MCPStatus is how the gateway sees a registered MCP.
type MCPStatus struct {
	// State is one of the MCPState constants.
	State MCPState `json:"state"`
	// PID is the process id of a stdio server that runs, nil otherwise.
	PID *int `json:"pid"`
	// Restarts counts how often a stdio server was started again after dying.
	Restarts uint64 `json:"restarts"`
	// LastError is why the upstream last failed, nil when it has not.
	LastError *string `json:"last_error"`
	// Calls counts the tool calls made.
	Calls uint64 `json:"calls"`
	// Errors counts the tool calls that ended in an error status.
	Errors uint64 `json:"errors"`
}

// StdioSpec is the spec of a stdio MCP server: the gateway spawns command with args inside
// the sandbox and speaks MCP over its stdin and stdout.
func StdioSpec(name, command string, args ...string) MCPSpec {
	return MCPSpec{Name: name, MCPConfig: MCPConfig{Type: ConfigStdio, Command: command, Args: args}}
}

// HTTPSpec is the spec of an MCP server the gateway reaches at url (streamable HTTP, or legacy
// SSE when the path ends in /sse or /messages/), with AgentScope's connection timeout of 30 s.
func HTTPSpec(name, url string) MCPSpec {
	timeout := 30.0
	return MCPSpec{Name: name, MCPConfig: MCPConfig{Type: ConfigHTTP, URL: url, Timeout: &timeout}}
}

// Tool is an MCP tool as its server describes it (the MCP Tool object, camelCase).
type Tool struct {
	// Name is the tool's name on its server, as CallTool takes it.
	Name string `json:"name"`
	// Title is a display name, nil when the server gave none.
	Title *string `json:"title,omitempty"`
	// Description says what the tool does, nil when the server gave nothing.
	Description *string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of its arguments.
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is the JSON Schema of its structured output, nil when it has none.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations holds hints such as readOnlyHint, nil when there are none.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Extra holds every other member the server sent (_meta, icons, execution, ...).
	Extra map[string]json.RawMessage `json:"-"`
}

type plainTool Tool

// MarshalJSON writes the tool with its Extra members.
func (t Tool) MarshalJSON() ([]byte, error) {
	return marshalWithExtra(plainTool(t), t.Extra)
}

// UnmarshalJSON reads a tool, keeping the members it has no field for in Extra.
func (t *Tool) UnmarshalJSON(data []byte) error {
	var p plainTool
	extra, err := unmarshalWithExtra(data, &p)
	if err != nil {
		return err
	}
	p.Extra = extra
	*t = Tool(p)
	return nil
}

// ToolState is AgentScope's state of a tool execution.
type ToolState string

// The states of a ToolChunk.
const (
	// StateRunning: under way, or a successful MCP result (AgentScope marks those running
	// with IsLast set).
	StateRunning ToolState = "running"
	// StateSuccess: finished successfully.
	StateSuccess ToolState = "success"
	// StateError: the tool reported an error (the MCP result had isError).
	StateError ToolState = "error"
	// StateInterrupted: stopped before it finished.
	StateInterrupted ToolState = "interrupted"
	// StateDenied: refused by a permission check.
	StateDenied ToolState = "denied"
)

// The metadata keys of a ToolChunk that mcpgw fills in.
const (
	// MetadataStructuredContent holds the MCP result's structuredContent.
	MetadataStructuredContent = "structured_content"
	// MetadataProgress holds the progress of a progress chunk (AgentScope's reserved key).
	MetadataProgress = "mcp_progress"
	// MetadataError holds {"status", "detail"} on the last chunk of a streamed call that failed
	// after progress was sent.
	MetadataError = "error"
)

// ToolChunk is the result of a tool call, or one progress report of a streamed call (IsLast
// false), in AgentScope's shape. It marshals back to the JSON the gateway sent.
type ToolChunk struct {
	// Content holds the text and data blocks, in the upstream's order.
	Content []Block `json:"content"`
	// State is how the execution stands; StateError when the tool reported an error.
	State ToolState `json:"state"`
	// IsLast says whether this is the call's last chunk.
	IsLast bool `json:"is_last"`
	// Metadata holds side information: MetadataStructuredContent, MetadataProgress, ...
	Metadata map[string]json.RawMessage `json:"metadata"`
	// ID is 32 lowercase hex digits.
	ID string `json:"id"`
}

// Text is the text of the chunk's text blocks, joined by newlines.
func (c *ToolChunk) Text() string {
	var parts []string
	for _, b := range c.Content {
		if b.Type == BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// StructuredContent is the MCP result's structuredContent as JSON, or nil when it had none.
func (c *ToolChunk) StructuredContent() json.RawMessage {
	return c.Metadata[MetadataStructuredContent]
}

// Progress is the progress a progress chunk reports (metadata.mcp_progress), or nil for a chunk
// that reports none.
func (c *ToolChunk) Progress() *Progress {
	raw, ok := c.Metadata[MetadataProgress]
	if !ok {
		return nil
	}
	var p Progress
	if json.Unmarshal(raw, &p) != nil {
		return nil
	}
	return &p
}

// Progress is one progress report of a tool call, as the MCP server sent it.
type Progress struct {
	// Progress is how far the call is; it increases with every report.
	Progress float64 `json:"progress"`
	// Total is what Progress counts up to, nil when the server does not know.
	Total *float64 `json:"total"`
	// Message describes the step, nil when there is none.
	Message *string `json:"message"`
}

// The block types of a ToolChunk.
const (
	// BlockText is a text block: Text.
	BlockText = "text"
	// BlockData is a data block: Source, with inline bytes or a URL.
	BlockData = "data"
)

// The source types of a data block.
const (
	// SourceBase64 holds the bytes inline (Source.Data; base64 on the wire).
	SourceBase64 = "base64"
	// SourceURL links to the bytes (Source.URL).
	SourceURL = "url"
)

// Block is one block of a ToolChunk: text (an MCP text content or embedded text resource) or
// data (an image, audio, embedded blob or resource link). Only the members of its type are
// written.
type Block struct {
	// Type is BlockText or BlockData.
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// Source says where a data block's bytes are.
	Source *Source `json:"source,omitempty"`
	// Name is a data block's name (e.g. of a linked resource), nil when it has none.
	Name *string `json:"name,omitempty"`
	// ID identifies the block.
	ID string `json:"id"`
	// CreatedAt is when the block was made (ISO 8601).
	CreatedAt string `json:"created_at"`
	// FinishedAt is when it was finished, nil while it is not.
	FinishedAt *string `json:"finished_at"`
}

type plainBlock Block

// MarshalJSON writes the members of the block's type, as the gateway does.
func (b Block) MarshalJSON() ([]byte, error) {
	w := newObject()
	w.add("type", b.Type)
	switch b.Type {
	case BlockText:
		w.add("text", b.Text)
	case BlockData:
		w.add("id", b.ID)
		w.add("source", b.Source)
		w.add("name", b.Name)
		w.add("created_at", b.CreatedAt)
		w.add("finished_at", b.FinishedAt)
		return w.bytes()
	default:
		return json.Marshal(plainBlock(b))
	}
	w.add("id", b.ID)
	w.add("created_at", b.CreatedAt)
	w.add("finished_at", b.FinishedAt)
	return w.bytes()
}

// Source is where a data block's bytes are: inline (SourceBase64, decoded into Data) or
// behind a URL (SourceURL). Only the members of its type are written.
type Source struct {
	// Type is SourceBase64 or SourceURL.
	Type string `json:"type"`
	// Data holds the decoded bytes of an inline source (base64 on the wire).
	Data []byte `json:"data,omitempty"`
	// URL is where a linked source's bytes are.
	URL string `json:"url,omitempty"`
	// MediaType is e.g. "image/png".
	MediaType string `json:"media_type"`
}

type plainSource Source

// MarshalJSON writes the members of the source's type, as the gateway does.
func (s Source) MarshalJSON() ([]byte, error) {
	w := newObject()
	w.add("type", s.Type)
	switch s.Type {
	case SourceBase64:
		if s.Data == nil {
			w.add("data", "")
		} else {
			w.add("data", s.Data)
		}
	case SourceURL:
		w.add("url", s.URL)
	default:
		return json.Marshal(plainSource(s))
	}
	w.add("media_type", s.MediaType)
	return w.bytes()
}

// GatewayInfo describes the gateway StartGateway launched. It names the token file, never
// the token.
type GatewayInfo struct {
	// Port is the gateway's port on the sandbox's loopback.
	Port int `json:"port"`
	// PID is the gateway's process id inside the sandbox.
	PID int `json:"pid"`
	// TokenFile is the gateway's 0600 token file inside the sandbox.
	TokenFile string `json:"token_file"`
	// InstanceNonce identifies this launch; Health checks it.
	InstanceNonce string `json:"instance_nonce"`
	// StateDir holds the token file and the gateway's log; StopGateway removes it.
	StateDir string `json:"state_dir"`
}

// Health is the gateway's answer to a health check.
type Health struct {
	// Status is "ok".
	Status string `json:"status"`
	// InstanceNonce is the gateway's launch nonce, nil when it was launched without one.
	InstanceNonce *string `json:"instance_nonce,omitempty"`
}

// BinaryStatus is what EnsureGatewayBinary found or did.
type BinaryStatus struct {
	// Uploaded says whether the binary was uploaded (false: it was there, identical).
	Uploaded bool `json:"uploaded"`
	// SHA256 is its SHA-256, lowercase hex.
	SHA256 string `json:"sha256"`
	// Path is where it is in the sandbox.
	Path string `json:"path"`
}

// SessionInfo is what a session channel says when it opens (its hello frame).
type SessionInfo struct {
	// V is the frame format version.
	V int `json:"v"`
	// Version is the gateway binary's version.
	Version string `json:"version"`
	// Port is the port of the gateway the channel relays to.
	Port int `json:"port"`
	// PID is the gateway's process id inside the sandbox.
	PID int `json:"pid"`
	// InstanceNonce is the gateway's launch nonce, nil when it has none.
	InstanceNonce *string `json:"instance_nonce"`
	// TokenFile is the gateway's token file (the token never crosses the channel), nil when
	// it has none.
	TokenFile *string `json:"token_file"`
	// Launched says whether opening the session launched the gateway (the client knew none).
	Launched bool `json:"launched"`
	// MaxFrameBytes is the longest frame the channel takes; larger requests go one-shot.
	MaxFrameBytes uint64 `json:"max_frame_bytes"`
	// HeartbeatMS is how often attach pings when it has nothing else to send; 0: never.
	HeartbeatMS uint64 `json:"heartbeat_ms"`
	// RetentionMS is how long the gateway keeps a tool call's outcome once its channel is lost,
	// for a new channel to resume it; 0: calls end with their channel.
	RetentionMS uint64 `json:"retention_ms"`
}
