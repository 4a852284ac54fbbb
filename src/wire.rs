//! The wire types of the gateway's REST surface, defined once for the gateway and the host library.
//!
//! The shapes are those of AgentScope 2.0's MCP gateway: an MCP spec is an `MCPClient` dump, a tool
//! call answers with a `ToolChunk`. Unknown fields of a spec are kept and echoed back, so a newer
//! host never loses what it registered.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object.
pub type JsonObject = Map<String, Value>;

/// What every MCP name, tool name of a registration and scope-free identifier must match.
pub const NAME_PATTERN: &str = "[A-Za-z0-9_-]+";

/// Whether `name` matches [`NAME_PATTERN`].
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// An MCP server registration: AgentScope's `MCPClient.model_dump()`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpSpec {
    /// The MCP's name, unique within a scope; matches [`NAME_PATTERN`].
    pub name: String,
    /// Whether the gateway keeps one session open (stdio MCPs must be stateful); a stateless HTTP
    /// MCP gets a fresh session for every operation.
    #[serde(default = "default_true")]
    pub is_stateful: bool,
    /// How to reach the server.
    pub mcp_config: McpConfig,
    /// When set, only these tools are listed.
    #[serde(default)]
    pub enable_tools: Option<Vec<String>>,
    /// When set, these tools are not listed.
    #[serde(default)]
    pub disable_tools: Option<Vec<String>>,
    /// Seconds each tool call of this MCP may take.
    #[serde(default)]
    pub execution_timeout: Option<f64>,
    /// AgentScope's local streaming switch; the gateway keeps and echoes it.
    #[serde(default)]
    pub stream_progress: bool,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn default_true() -> bool {
    true
}

/// How the gateway reaches an MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum McpConfig {
    /// A child process speaking MCP over stdin/stdout.
    #[serde(rename = "stdio_mcp")]
    Stdio(StdioConfig),
    /// A server reached over streamable HTTP, or legacy SSE when the URL path ends in `/sse` or
    /// `/messages/`.
    #[serde(rename = "http_mcp")]
    Http(HttpConfig),
}

/// A stdio MCP server: the command the gateway spawns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StdioConfig {
    /// The program, looked up on `PATH` when it has no slash.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Variables added to the gateway's environment for the child.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// The child's working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// What to do with bytes that are not UTF-8 on the child's stdout.
    #[serde(default)]
    pub encoding_error_handler: EncodingErrorHandler,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Python's codec error handlers, as AgentScope names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EncodingErrorHandler {
    /// Invalid bytes are an error.
    #[default]
    Strict,
    /// Invalid bytes are dropped.
    Ignore,
    /// Invalid bytes become U+FFFD.
    Replace,
}

/// An HTTP MCP server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpConfig {
    /// The endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    pub url: String,
    /// Headers sent with every request.
    #[serde(default)]
    pub headers: Option<BTreeMap<String, String>>,
    /// Seconds one HTTP request may take (AgentScope's default: 30).
    #[serde(default = "default_http_timeout")]
    pub timeout: Option<f64>,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn default_http_timeout() -> Option<f64> {
    Some(30.0)
}

impl HttpConfig {
    /// Whether the URL names a legacy SSE endpoint: its path (not its query) ends in `/sse` or
    /// `/messages/`, as AgentScope decides it.
    pub fn is_legacy_sse(&self) -> bool {
        let rest = self
            .url
            .split_once("://")
            .map_or(self.url.as_str(), |(_, r)| r);
        let path_start = rest.find('/').unwrap_or(rest.len());
        let path = &rest[path_start..];
        let path = path.split(['?', '#']).next().unwrap_or("");
        path.ends_with("/sse") || path.ends_with("/messages/")
    }
}

impl McpSpec {
    /// Checks what serde cannot: the name, the stdio/stateful rule, the tool filters and the
    /// timeouts. The message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty() {
            return Err("name required".into());
        }
        if !is_valid_name(&self.name) {
            return Err(format!(
                "MCP name {:?} must match {NAME_PATTERN}",
                self.name
            ));
        }
        match &self.mcp_config {
            McpConfig::Stdio(stdio) => {
                if !self.is_stateful {
                    return Err("a stdio_mcp must be stateful (is_stateful: true)".into());
                }
                if stdio.command.trim().is_empty() {
                    return Err("mcp_config.command must not be empty".into());
                }
                if stdio.command.contains('\0')
                    || stdio.args.iter().flatten().any(|a| a.contains('\0'))
                {
                    return Err("mcp_config.command and args must not contain NUL".into());
                }
            }
            McpConfig::Http(http) => {
                let lower = http.url.to_ascii_lowercase();
                if !(lower.starts_with("http://") || lower.starts_with("https://")) {
                    return Err(format!(
                        "mcp_config.url {:?} must be an http:// or https:// URL",
                        http.url
                    ));
                }
                if let Some(t) = http.timeout
                    && !(t.is_finite() && t > 0.0)
                {
                    return Err("mcp_config.timeout must be a positive number of seconds".into());
                }
                if let Some(headers) = &http.headers {
                    validate_headers(headers).map_err(|e| format!("mcp_config.headers: {e}"))?;
                }
            }
        }
        if let (Some(enable), Some(disable)) = (&self.enable_tools, &self.disable_tools)
            && let Some(both) = enable.iter().find(|t| disable.contains(t))
        {
            return Err(format!(
                "enable_tools and disable_tools must not overlap, but both name {both:?}"
            ));
        }
        if let Some(t) = self.execution_timeout
            && !(t.is_finite() && t > 0.0)
        {
            return Err("execution_timeout must be a positive number of seconds".into());
        }
        Ok(())
    }

    /// Whether `tool` is listed under the spec's `enable_tools` / `disable_tools` filters.
    pub fn lists_tool(&self, tool: &str) -> bool {
        self.enable_tools
            .as_ref()
            .is_none_or(|e| e.iter().any(|t| t == tool))
            && self
                .disable_tools
                .as_ref()
                .is_none_or(|d| !d.iter().any(|t| t == tool))
    }
}

/// Header names the HTTP layer owns; a spec or runtime header may not set them.
pub const RESERVED_HEADERS: [&str; 4] =
    ["connection", "content-length", "host", "transfer-encoding"];

/// Checks header names (RFC 9110 tokens) and values (visible ASCII, space and tab), and refuses
/// the headers the HTTP layer owns.
pub fn validate_headers(headers: &BTreeMap<String, String>) -> Result<(), String> {
    const TOKEN_EXTRA: &[u8] = b"!#$%&'*+-.^_`|~";
    for (name, value) in headers {
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || TOKEN_EXTRA.contains(&b));
        let value_ok = value
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
        if !name_ok || !value_ok {
            return Err(format!("header {name:?} is invalid"));
        }
        if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(format!("header {name:?} is owned by the HTTP layer"));
        }
    }
    Ok(())
}

/// The body of `PUT /mcps/{name}/runtime-headers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeHeaders {
    /// The complete runtime header map; an empty map clears it.
    pub headers: BTreeMap<String, String>,
}

/// The body of `POST /mcps/{name}/tools/{tool}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallToolBody {
    /// The tool's arguments.
    #[serde(default)]
    pub arguments: Option<JsonObject>,
}

/// The answer of a tool call: `{"chunk": ToolChunk}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolAnswer {
    /// The tool's result.
    pub chunk: ToolChunk,
}

/// `{"ok": true}`, the answer of `POST /mcps` and `DELETE /mcps/{name}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ok {
    /// Always true.
    pub ok: bool,
}

/// Every gateway error body: `{"detail": "..."}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub detail: String,
}

/// The JSON form of `GET /health` when the gateway was launched with an instance nonce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Health {
    /// Always `"ok"`.
    pub status: String,
    /// The nonce the gateway was launched with.
    pub instance_nonce: String,
}

/// The one line `mcpgw-gateway --daemon` prints on stdout once the gateway listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonReady {
    /// The port it listens on (the one picked when launched with `--port 0`).
    pub port: u16,
    /// The gateway's process id.
    pub pid: u32,
    /// The token file it reads, when launched with one.
    #[serde(default)]
    pub token_file: Option<String>,
    /// The nonce it was launched with, if any.
    #[serde(default)]
    pub instance_nonce: Option<String>,
}

/// An MCP tool as its server describes it (the MCP `Tool` object, camelCase).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The tool's name on its server.
    pub name: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    pub input_schema: JsonObject,
    /// The JSON Schema of its structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Hints such as `readOnlyHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<JsonObject>,
    /// Everything else the server sent (`icons`, `_meta`, `execution`, ...).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result of a tool execution, in AgentScope's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChunk {
    /// Text and data blocks.
    pub content: Vec<Block>,
    /// How the execution stands.
    pub state: ToolState,
    /// Whether this is the last chunk of the call.
    pub is_last: bool,
    /// `structured_content`, `mcp_progress` and other side information.
    #[serde(default)]
    pub metadata: JsonObject,
    /// 32 lowercase hex digits.
    pub id: String,
}

/// AgentScope's `ToolResultState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolState {
    /// Under way, or a successful result (AgentScope marks MCP results `running`).
    Running,
    /// Finished successfully.
    Success,
    /// The tool reported an error.
    Error,
    /// Stopped before it finished.
    Interrupted,
    /// Refused by a permission check.
    Denied,
}

impl ToolState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolState::Running => "running",
            ToolState::Success => "success",
            ToolState::Error => "error",
            ToolState::Interrupted => "interrupted",
            ToolState::Denied => "denied",
        }
    }
}

/// One block of a [`ToolChunk`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Block {
    /// Text.
    Text(TextBlock),
    /// Binary data or a link to it.
    Data(DataBlock),
}

/// A text block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// The block's id.
    pub id: String,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// When it was finished, if it was.
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// A data block: inline base64 or a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataBlock {
    /// The block's id.
    pub id: String,
    /// Where the bytes are.
    pub source: Source,
    /// A name, e.g. of a linked resource.
    #[serde(default)]
    pub name: Option<String>,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// When it was finished, if it was.
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// Where a data block's bytes are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Source {
    /// Inline, base64-encoded.
    Base64 {
        /// The base64 text (standard alphabet, padded).
        data: String,
        /// E.g. `image/png`.
        media_type: String,
    },
    /// Behind a URL.
    Url {
        /// The URL.
        url: String,
        /// E.g. `text/plain`.
        media_type: String,
    },
}

impl Source {
    /// The media type.
    pub fn media_type(&self) -> &str {
        match self {
            Source::Base64 { media_type, .. } | Source::Url { media_type, .. } => media_type,
        }
    }

    /// The decoded bytes of an inline source (`None` for a URL), or why the base64 is invalid.
    pub fn decode(&self) -> Option<Result<Vec<u8>, String>> {
        use base64::Engine as _;
        match self {
            Source::Base64 { data, .. } => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| format!("invalid base64 in a data block: {e}")),
            ),
            Source::Url { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn spec_fills_agentscope_defaults_and_keeps_unknown_fields() {
        let spec: McpSpec = serde_json::from_value(json!({
            "name": "fs",
            "mcp_config": {"type": "stdio_mcp", "command": "npx", "future_knob": 1},
            "owner": "team-a"
        }))
        .unwrap();
        spec.validate().unwrap();
        let echoed = serde_json::to_value(&spec).unwrap();
        assert_eq!(
            echoed,
            json!({
                "name": "fs", "is_stateful": true,
                "mcp_config": {"type": "stdio_mcp", "command": "npx", "args": null, "env": null,
                               "cwd": null, "encoding_error_handler": "strict", "future_knob": 1},
                "enable_tools": null, "disable_tools": null, "execution_timeout": null,
                "stream_progress": false, "owner": "team-a"
            })
        );
    }

    #[test]
    fn http_spec_defaults_timeout_and_detects_sse() {
        let spec: McpSpec = serde_json::from_value(json!({
            "name": "h", "is_stateful": false,
            "mcp_config": {"type": "http_mcp", "url": "http://127.0.0.1:9/sse?key=1"}
        }))
        .unwrap();
        let McpConfig::Http(http) = &spec.mcp_config else {
            panic!("not http")
        };
        assert_eq!(http.timeout, Some(30.0));
        assert!(http.is_legacy_sse());
        for (url, sse) in [
            ("http://h/mcp", false),
            ("http://h/messages/", true),
            ("http://h/sse/x", false),
            ("https://h:1/a/sse#f", true),
            ("http://h", false),
        ] {
            let c = HttpConfig {
                url: url.into(),
                headers: None,
                timeout: None,
                extra: JsonObject::new(),
            };
            assert_eq!(c.is_legacy_sse(), sse, "{url}");
        }
    }

    #[test]
    fn validation_names_the_problem() {
        let base = json!({"name": "ok", "mcp_config": {"type": "stdio_mcp", "command": "x"}});
        let check = |patch: serde_json::Value| {
            let mut v = base.clone();
            for (k, val) in patch.as_object().unwrap() {
                v[k] = val.clone();
            }
            serde_json::from_value::<McpSpec>(v).unwrap().validate()
        };
        assert_eq!(check(json!({"name": ""})).unwrap_err(), "name required");
        assert!(
            check(json!({"name": "a b"}))
                .unwrap_err()
                .contains("must match")
        );
        assert!(
            check(json!({"is_stateful": false}))
                .unwrap_err()
                .contains("stateful")
        );
        assert!(
            check(json!({"enable_tools": ["a"], "disable_tools": ["a"]}))
                .unwrap_err()
                .contains("\"a\"")
        );
        assert!(
            check(json!({"execution_timeout": -1}))
                .unwrap_err()
                .contains("execution_timeout")
        );
        assert!(
            check(json!({"mcp_config": {"type": "http_mcp", "url": "ftp://x"}}))
                .unwrap_err()
                .contains("url")
        );
        assert!(
            check(json!({"mcp_config": {"type": "http_mcp", "url": "http://x", "headers": {"Host": "y"}}}))
                .unwrap_err()
                .contains("owned by the HTTP layer")
        );
    }

    #[test]
    fn tool_filters() {
        let mut spec: McpSpec = serde_json::from_value(
            json!({"name": "n", "mcp_config": {"type": "stdio_mcp", "command": "x"}}),
        )
        .unwrap();
        assert!(spec.lists_tool("a"));
        spec.enable_tools = Some(vec!["a".into(), "b".into()]);
        spec.disable_tools = Some(vec!["b".into()]);
        assert!(spec.lists_tool("a"));
        assert!(!spec.lists_tool("b"));
        assert!(!spec.lists_tool("c"));
    }

    #[test]
    fn chunk_round_trips_in_agentscope_field_order() {
        let chunk = ToolChunk {
            content: vec![
                Block::Text(TextBlock {
                    text: "hi".into(),
                    id: "b1".into(),
                    created_at: "2026-01-01T00:00:00.000000".into(),
                    finished_at: None,
                }),
                Block::Data(DataBlock {
                    id: "b2".into(),
                    source: Source::Base64 {
                        data: "AAE=".into(),
                        media_type: "image/png".into(),
                    },
                    name: None,
                    created_at: "t".into(),
                    finished_at: None,
                }),
            ],
            state: ToolState::Running,
            is_last: true,
            metadata: JsonObject::new(),
            id: "c".into(),
        };
        let text = serde_json::to_string(&chunk).unwrap();
        assert_eq!(
            text,
            r#"{"content":[{"type":"text","text":"hi","id":"b1","created_at":"2026-01-01T00:00:00.000000","finished_at":null},{"type":"data","id":"b2","source":{"type":"base64","data":"AAE=","media_type":"image/png"},"name":null,"created_at":"t","finished_at":null}],"state":"running","is_last":true,"metadata":{},"id":"c"}"#
        );
        assert_eq!(serde_json::from_str::<ToolChunk>(&text).unwrap(), chunk);
    }

    #[test]
    fn tool_keeps_what_the_server_sent() {
        let raw =
            json!({"name": "t", "inputSchema": {"type": "object"}, "icons": [], "_meta": {"k": 1}});
        let tool: Tool = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&tool).unwrap(), raw);
    }
}
