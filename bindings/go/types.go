package mcpgw

import (
	"encoding/json"
	"strings"
)

// The mcp_config types of an MCPSpec.
const (
	// ConfigStdio is a child process speaking MCP over stdin/stdout, spawned by the gateway.
	ConfigStdio = "stdio_mcp"
	// ConfigHTTP is a server reached over streamable HTTP, or legacy SSE when the URL path
	// ends in /sse or /messages/.
	ConfigHTTP = "http_mcp"
)

// MCPSpec registers an MCP server with the gateway: AgentScope's MCPClient dump. Build one
// with StdioSpec or HTTPSpec, or as a literal.
type MCPSpec struct {
	// Name is unique within a scope and matches [A-Za-z0-9_-]+.
	Name string `json:"name"`
	// IsStateful says whether the gateway keeps one session open; nil means true, the
	// gateway's default. A stdio MCP must be stateful; a stateless HTTP MCP gets a fresh
	// session for every operation.
	IsStateful *bool `json:"is_stateful,omitempty"`
	// MCPConfig says how the gateway reaches the server.
	MCPConfig MCPConfig `json:"mcp_config"`
	// EnableTools, when set, lists the only tools that are listed.
	EnableTools []string `json:"enable_tools,omitempty"`
	// DisableTools, when set, lists tools that are not listed.
	DisableTools []string `json:"disable_tools,omitempty"`
	// ExecutionTimeout bounds each tool call of this MCP, in seconds; 0 means no bound of its
	// own (each call still has its context's deadline or the client's timeout).
	ExecutionTimeout float64 `json:"execution_timeout,omitempty"`
	// StreamProgress is AgentScope's streaming switch; the gateway keeps and echoes it.
	StreamProgress bool `json:"stream_progress,omitempty"`
	// RuntimeHeaders are extra headers for an HTTP MCP, sent on registration and never
	// echoed back (see SetRuntimeHeaders).
	RuntimeHeaders map[string]string `json:"runtime_headers,omitempty"`
	// Status is the gateway's view of the MCP, filled in by ListMCPs; ignored by AddMCP.
	Status *MCPStatus `json:"status,omitempty"`
}

// MCPConfig is the mcp_config of an MCPSpec: a stdio server (Type ConfigStdio, with
// Command, Args, Env, Cwd) or an HTTP server (Type ConfigHTTP, with URL, Headers, Timeout).
type MCPConfig struct {
	// Type is ConfigStdio or ConfigHTTP.
	Type string `json:"type"`
	// Command is the program of a stdio server, looked up on PATH when it has no slash.
	Command string `json:"command,omitempty"`
	// Args are its arguments.
	Args []string `json:"args,omitempty"`
	// Env holds variables added to the gateway's environment for the child.
	Env map[string]string `json:"env,omitempty"`
	// Cwd is the child's working directory.
	Cwd string `json:"cwd,omitempty"`
	// EncodingErrorHandler says what to do with stdout bytes that are not UTF-8: "strict"
	// (the default), "ignore" or "replace".
	EncodingErrorHandler string `json:"encoding_error_handler,omitempty"`
	// URL is the endpoint of an HTTP server, e.g. http://127.0.0.1:8000/mcp.
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to an HTTP server.
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds one HTTP request, in seconds; 0 means the default (30).
	Timeout float64 `json:"timeout,omitempty"`
}

// MCPStatus is how the gateway sees a registered MCP.
type MCPStatus struct {
	// State is one of "connecting", "connected", "stateless" (an HTTP MCP without a
	// session), "exited", "restarting", "crashing", "failed" and "closed".
	State string `json:"state"`
	// PID is the process id of a stdio server inside the sandbox, or 0.
	PID int `json:"pid,omitempty"`
	// Restarts counts how often a stdio server was started again after dying.
	Restarts int `json:"restarts"`
	// LastError is the last failure of the upstream, or "".
	LastError string `json:"last_error,omitempty"`
	// Calls counts the tool calls made.
	Calls int `json:"calls"`
	// Errors counts the tool calls that failed.
	Errors int `json:"errors"`
}

// StdioSpec is the spec of a stdio MCP server: the gateway spawns command with args inside
// the sandbox and speaks MCP over its stdin and stdout.
func StdioSpec(name, command string, args ...string) MCPSpec {
	return MCPSpec{Name: name, MCPConfig: MCPConfig{Type: ConfigStdio, Command: command, Args: args}}
}

// HTTPSpec is the spec of an MCP server the gateway reaches at url (streamable HTTP, or legacy
// SSE when the path ends in /sse or /messages/).
func HTTPSpec(name, url string) MCPSpec {
	return MCPSpec{Name: name, MCPConfig: MCPConfig{Type: ConfigHTTP, URL: url}}
}

// Tool is an MCP tool as its server describes it (the MCP Tool object, camelCase).
type Tool struct {
	// Name is the tool's name on its server, as CallTool takes it.
	Name string `json:"name"`
	// Title is a display name, or "".
	Title string `json:"title,omitempty"`
	// Description says what the tool does.
	Description string `json:"description,omitempty"`
	// InputSchema is the JSON Schema of its arguments.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is the JSON Schema of its structured output, if it has one.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations holds hints such as readOnlyHint, if any.
	Annotations json.RawMessage `json:"annotations,omitempty"`
	// Meta is the tool's _meta object, if any.
	Meta json.RawMessage `json:"_meta,omitempty"`
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

// ToolChunk is the result of a tool call, in AgentScope's shape. It marshals back to the
// JSON the gateway sent.
type ToolChunk struct {
	// Content holds the text and data blocks, in the upstream's order.
	Content []Block `json:"content"`
	// State is how the execution stands; StateError when the tool reported an error.
	State ToolState `json:"state"`
	// IsLast says whether this is the call's last chunk.
	IsLast bool `json:"is_last"`
	// Metadata holds side information: structured_content (the MCP result's
	// structuredContent), progress, ...
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
	return c.Metadata["structured_content"]
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
// data (an image, audio, embedded blob or resource link).
type Block struct {
	// Type is BlockText or BlockData.
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// Source says where a data block's bytes are.
	Source *Source `json:"source,omitempty"`
	// Name is a data block's name (e.g. of a linked resource), or "".
	Name string `json:"name,omitempty"`
	// ID identifies the block.
	ID string `json:"id"`
	// CreatedAt is when the block was made (ISO 8601).
	CreatedAt string `json:"created_at,omitempty"`
	// FinishedAt is when it was finished, or "".
	FinishedAt string `json:"finished_at,omitempty"`
}

// Source is where a data block's bytes are: inline (SourceBase64, decoded into Data) or
// behind a URL (SourceURL).
type Source struct {
	// Type is SourceBase64 or SourceURL.
	Type string `json:"type"`
	// Data holds the decoded bytes of an inline source (base64 on the wire, which
	// encoding/json decodes and encodes).
	Data []byte `json:"data,omitempty"`
	// URL is where a linked source's bytes are.
	URL string `json:"url,omitempty"`
	// MediaType is e.g. "image/png".
	MediaType string `json:"media_type"`
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
	// InstanceNonce is the gateway's launch nonce, or "" when it was launched without one.
	InstanceNonce string `json:"instance_nonce,omitempty"`
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
