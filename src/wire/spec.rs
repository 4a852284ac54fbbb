//! An MCP server registration (`POST /mcps`): AgentScope's `MCPClient.model_dump()`, its
//! defaults, and the one validator the gateway and the library both apply.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::JsonObject;

/// What every MCP name must match.
pub const NAME_PATTERN: &str = "[A-Za-z0-9_-]+";

/// The longest MCP name, in bytes: a name travels in every request path, which must stay well
/// inside what HTTP servers and clients accept.
pub const MAX_NAME_BYTES: usize = 128;

/// The longest deadline anything on the wire may set, in seconds (one day): `execution_timeout`,
/// an HTTP MCP's `timeout` and a call's `?timeout`.
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;

/// Whether `name` matches [`NAME_PATTERN`] and fits [`MAX_NAME_BYTES`].
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Why `name` is not a valid MCP name, naming the rule it breaks.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("name required".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "MCP name must be at most {MAX_NAME_BYTES} bytes, not {}",
            name.len()
        ));
    }
    if !is_valid_name(name) {
        return Err(format!("MCP name {name:?} must match {NAME_PATTERN}"));
    }
    Ok(())
}

/// A deadline in seconds as a [`Duration`]: positive, finite and at most [`MAX_TIMEOUT_SECS`];
/// the message names `what`.
pub fn timeout_secs(what: &str, secs: f64) -> Result<Duration, String> {
    if secs.is_finite() && secs > 0.0 && secs <= MAX_TIMEOUT_SECS {
        // In range, so the conversion cannot fail; a sub-nanosecond value rounds up.
        Ok(Duration::from_secs_f64(secs).max(Duration::from_nanos(1)))
    } else {
        Err(format!(
            "{what} must be a number of seconds greater than 0 and at most {MAX_TIMEOUT_SECS}, not {secs}"
        ))
    }
}

/// An MCP server registration: AgentScope's `MCPClient.model_dump()`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpSpec {
    /// The MCP's name, unique within a scope; matches [`NAME_PATTERN`].
    // The schema's bounds are literals; a test holds them to the constants.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_-]+$", min_length = 1, max_length = 128)
    )]
    pub name: String,
    /// Whether the gateway keeps one session open (stdio MCPs must be stateful); a stateless HTTP
    /// MCP gets a fresh session for every operation.
    #[serde(default = "default_true")]
    #[cfg_attr(feature = "openapi", schema(default = true))]
    pub is_stateful: bool,
    /// How to reach the server.
    pub mcp_config: McpConfig,
    /// When set, only these tools are listed; a call of any other is refused (HTTP 403, or
    /// JSON-RPC error -32003 over an MCP connection).
    #[serde(default)]
    pub enable_tools: Option<Vec<String>>,
    /// When set, these tools are not listed and a call of one is refused (HTTP 403, or
    /// JSON-RPC error -32003 over an MCP connection). It must not name a tool `enable_tools`
    /// names.
    #[serde(default)]
    pub disable_tools: Option<Vec<String>>,
    /// Seconds each tool call of this MCP may take (at most [`MAX_TIMEOUT_SECS`]).
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 86400))]
    pub execution_timeout: Option<f64>,
    /// AgentScope's local streaming switch; the gateway keeps and echoes it.
    #[serde(default)]
    pub stream_progress: bool,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub extra: JsonObject,
}

fn default_true() -> bool {
    true
}

/// How the gateway reaches an MCP server.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StdioConfig {
    /// The program, looked up on `PATH` when it has no slash.
    #[cfg_attr(
        feature = "openapi",
        schema(min_length = 1, pattern = "^[^\\x00]*[^\\s\\x00][^\\x00]*$")
    )]
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
    /// Variables added to the gateway's environment for the child: text, or a secret the host
    /// resolves ([`SpecValue::Secret`]).
    #[serde(default)]
    pub env: Option<BTreeMap<String, SpecValue>>,
    /// The child's working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// What to do with bytes that are not UTF-8 on the child's stdout.
    #[serde(default)]
    pub encoding_error_handler: EncodingErrorHandler,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub extra: JsonObject,
}

/// Python's codec error handlers, as AgentScope names them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpConfig {
    /// The endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[Hh][Tt][Tt][Pp][Ss]?://"))]
    pub url: String,
    /// Headers sent with every request: text, or a secret the host resolves
    /// ([`SpecValue::Secret`]).
    #[serde(default)]
    pub headers: Option<BTreeMap<String, SpecValue>>,
    /// Seconds one HTTP request may take (AgentScope's default: 30; at most
    /// [`MAX_TIMEOUT_SECS`]).
    #[serde(default = "default_http_timeout")]
    #[cfg_attr(
        feature = "openapi",
        schema(default = 30, exclusive_minimum = 0, maximum = 86400)
    )]
    pub timeout: Option<f64>,
    /// Fields this version does not know, kept and echoed.
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
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

    /// Whether runtime headers can be set on this MCP: only streamable HTTP carries them.
    pub fn takes_runtime_headers(&self) -> bool {
        !self.is_legacy_sse()
    }
}

/// Why runtime headers are refused for an MCP that is not streamable HTTP (AgentScope's words).
pub const RUNTIME_HEADERS_NEED_HTTP: &str = "Runtime headers require a Streamable HTTP MCP client.";

impl McpSpec {
    /// Checks what serde cannot: the name, the stdio/stateful rule, the tool filters, the
    /// timeouts and the headers. The message names the offending field.
    pub fn validate(&self) -> Result<(), String> {
        check_name(&self.name)?;
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
                if let Some(env) = &stdio.env {
                    texts(env, "mcp_config.env")?;
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
                if let Some(t) = http.timeout {
                    timeout_secs("mcp_config.timeout", t)?;
                }
                if let Some(headers) = &http.headers {
                    let texts = texts(headers, "mcp_config.headers")?;
                    validate_headers(&texts).map_err(|e| format!("mcp_config.headers: {e}"))?;
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
        if let Some(t) = self.execution_timeout {
            timeout_secs("execution_timeout", t)?;
        }
        Ok(())
    }

    /// Checks runtime headers given for this MCP, at registration or later: only a streamable
    /// HTTP MCP takes them, and each must be a valid header the HTTP layer does not own.
    pub fn check_runtime_headers(&self, headers: &BTreeMap<String, String>) -> Result<(), String> {
        match &self.mcp_config {
            McpConfig::Http(c) if c.takes_runtime_headers() => validate_headers(headers),
            _ => Err(RUNTIME_HEADERS_NEED_HTTP.into()),
        }
    }

    /// The deadline of this MCP's tool calls, when it sets one.
    pub fn execution_timeout(&self) -> Option<Duration> {
        self.execution_timeout
            .and_then(|t| timeout_secs("execution_timeout", t).ok())
    }

    /// Whether `tool` is listed (and may be called) under the spec's `enable_tools` /
    /// `disable_tools` filters.
    pub fn lists_tool(&self, tool: &str) -> bool {
        self.tool_excluded_by(tool).is_none()
    }

    /// Whether the spec filters its tools at all (`enable_tools` or `disable_tools` set).
    pub fn filters_tools(&self) -> bool {
        self.enable_tools.is_some() || self.disable_tools.is_some()
    }

    /// The filter that keeps `tool` from being listed and called: [`DISABLED_BY_DISABLE`]
    /// when `disable_tools` names it, else [`DISABLED_BY_ENABLE`] when `enable_tools` is set
    /// and does not name it; `None` when the tool is listed.
    pub fn tool_excluded_by(&self, tool: &str) -> Option<&'static str> {
        if self
            .disable_tools
            .as_ref()
            .is_some_and(|d| d.iter().any(|t| t == tool))
        {
            return Some(DISABLED_BY_DISABLE);
        }
        if self
            .enable_tools
            .as_ref()
            .is_some_and(|e| !e.iter().any(|t| t == tool))
        {
            return Some(DISABLED_BY_ENABLE);
        }
        None
    }

    /// Why a call of `tool` is refused, when the spec's filters exclude it (see
    /// [`disabled_tool_message`]).
    pub fn tool_refusal(&self, tool: &str) -> Option<String> {
        self.tool_excluded_by(tool)
            .map(|rule| disabled_tool_message(tool, &self.name, rule))
    }
}

/// The rule [`McpSpec::tool_excluded_by`] names for a tool `disable_tools` names.
pub const DISABLED_BY_DISABLE: &str = "disable_tools";

/// The rule [`McpSpec::tool_excluded_by`] names for a tool `enable_tools` leaves out.
pub const DISABLED_BY_ENABLE: &str = "not in enable_tools";

/// What the caller of a tool the spec's filters exclude is told: the tool, the MCP and the
/// rule, e.g. `tool "echo" of MCP "fs" is disabled by its spec (disable_tools)`.
pub fn disabled_tool_message(tool: &str, mcp: &str, rule: &str) -> String {
    format!("tool {tool:?} of MCP {mcp:?} is disabled by its spec ({rule})")
}

/// The longest secret name, in bytes.
pub const MAX_SECRET_NAME_BYTES: usize = 128;

/// The shortest secret value, in bytes: a shorter one would be replaced wherever its text
/// happens to occur in what comes back from the sandbox.
pub const MIN_SECRET_BYTES: usize = 8;

/// A value of a spec's `env` or `headers`: text, or a secret.
///
/// A secret is written `{"secret": "NAME"}`: the host (its environment, or what its program gave
/// it) resolves NAME and sends `{"secret": "NAME", "value": "..."}` to the gateway, over the
/// session channel only. The gateway uses the value and never shows it: `GET /mcps` echoes
/// `{"secret": "NAME"}`, and `Debug` prints `[secret:NAME]`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SpecValue {
    /// A value given as it is.
    Text(String),
    /// A secret, named.
    Secret(SecretRef),
}

/// A secret a spec names, with its value once the host resolved it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, PartialEq, Serialize)]
pub struct SecretRef {
    /// The secret's name on the host.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[A-Za-z0-9_.-]+$", min_length = 1, max_length = 128)
    )]
    pub secret: String,
    /// Its value: set by the host on the way to the gateway, absent in every echo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl SpecValue {
    /// The text the server gets: the value itself, or the secret's resolved value.
    pub fn text(&self) -> Option<&str> {
        match self {
            SpecValue::Text(t) => Some(t),
            SpecValue::Secret(s) => s.value.as_deref(),
        }
    }

    /// The value as it may be shown: a secret without its value.
    pub fn masked(&self) -> SpecValue {
        match self {
            SpecValue::Text(t) => SpecValue::Text(t.clone()),
            SpecValue::Secret(s) => SpecValue::Secret(SecretRef {
                secret: s.secret.clone(),
                value: None,
            }),
        }
    }
}

impl std::fmt::Debug for SpecValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecValue::Text(t) => t.fmt(f),
            SpecValue::Secret(s) => write!(f, "[secret:{}]", s.secret),
        }
    }
}

impl std::fmt::Debug for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[secret:{}]", self.secret)
    }
}

impl<'de> Deserialize<'de> for SpecValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(t) => Ok(SpecValue::Text(t)),
            serde_json::Value::Object(mut o) => {
                let secret = match o.remove("secret") {
                    Some(serde_json::Value::String(s)) => s,
                    _ => return Err(D::Error::custom(SPEC_VALUE_SHAPE)),
                };
                let value = match o.remove("value") {
                    None => None,
                    Some(serde_json::Value::String(v)) => Some(v),
                    Some(_) => {
                        return Err(D::Error::custom(format!(
                            "the value of secret {secret:?} must be a string"
                        )));
                    }
                };
                if let Some(k) = o.keys().next() {
                    return Err(D::Error::custom(format!(
                        "a secret takes the fields secret and value, not {k:?}"
                    )));
                }
                check_secret_name(&secret).map_err(D::Error::custom)?;
                Ok(SpecValue::Secret(SecretRef { secret, value }))
            }
            _ => Err(D::Error::custom(SPEC_VALUE_SHAPE)),
        }
    }
}

const SPEC_VALUE_SHAPE: &str = "a value must be a string or {\"secret\": \"NAME\"}";

/// Why `name` cannot name a secret: 1 to [`MAX_SECRET_NAME_BYTES`] letters, digits, `_`, `.`
/// and `-` (it appears in `[secret:NAME]`, inside JSON text).
pub fn check_secret_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= MAX_SECRET_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "secret name {name:?} must be 1 to {MAX_SECRET_NAME_BYTES} letters, digits, '_', '.' or '-'"
        ))
    }
}

/// The text of each value of `map`; a secret without its value is an error naming `what`.
pub fn texts(
    map: &BTreeMap<String, SpecValue>,
    what: &str,
) -> Result<BTreeMap<String, String>, String> {
    map.iter()
        .map(|(k, v)| match v.text() {
            Some(t) => Ok((k.clone(), t.to_owned())),
            None => Err(format!(
                "{what}.{k} names secret {:?} without its value: a secret is resolved by the host \
                 (mcpgw's host driver or mcpgw mcp) and sent over the session channel",
                match v {
                    SpecValue::Secret(s) => s.secret.as_str(),
                    SpecValue::Text(_) => "",
                }
            )),
        })
        .collect()
}

impl McpSpec {
    /// The spec as it may be shown: every secret without its value.
    pub fn masked(&self) -> McpSpec {
        let mut spec = self.clone();
        let mask = |m: &mut Option<BTreeMap<String, SpecValue>>| {
            for v in m.iter_mut().flat_map(|m| m.values_mut()) {
                *v = v.masked();
            }
        };
        match &mut spec.mcp_config {
            McpConfig::Stdio(s) => mask(&mut s.env),
            McpConfig::Http(h) => mask(&mut h.headers),
        }
        spec
    }
}

/// Header names the HTTP layer and the MCP transport own; a spec or runtime header may not set
/// them.
pub const RESERVED_HEADERS: [&str; 11] = [
    "connection",
    "content-length",
    "host",
    "transfer-encoding",
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-method",
    "mcp-name",
];

/// The characters of a header name besides letters and digits (RFC 9110 `tchar`).
const TOKEN_EXTRA: &[u8] = b"!#$%&'*+-.^_`|~";

/// What a header name must match (an RFC 9110 token), as [`validate_headers`] checks it.
pub const HEADER_NAME_PATTERN: &str = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

/// What a header value must match (visible ASCII, space and tab), as [`validate_headers`]
/// checks it.
pub const HEADER_VALUE_PATTERN: &str = "^[\\t\\x20-\\x7e]*$";

/// What an `http_mcp` URL of a legacy SSE server matches, as [`HttpConfig::is_legacy_sse`]
/// decides it: after the scheme, the path (from the first `/`, up to a `?` or `#`) ends in
/// `/sse` or `/messages/`.
pub const LEGACY_SSE_URL_PATTERN: &str =
    "^[Hh][Tt][Tt][Pp][Ss]?://[^/]*(/[^?#]*)?/(sse|messages/)([?#][\\s\\S]*)?$";

/// Checks header names (RFC 9110 tokens) and values (visible ASCII, space and tab), and refuses
/// the headers the HTTP layer and the MCP transport own.
pub fn validate_headers(headers: &BTreeMap<String, String>) -> Result<(), String> {
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
            return Err(format!(
                "header {name:?} is owned by the HTTP layer or the MCP transport"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
