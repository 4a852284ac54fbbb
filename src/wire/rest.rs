//! The REST surface's routes, query parameters and bodies, other than the spec, the tool and
//! the ToolChunk.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{JsonObject, McpSpec, ToolChunk, spec};

/// The routes, in the router's `{param}` syntax; [`path`] fills them in.
pub mod route {
    /// `GET`: liveness, without auth.
    pub const HEALTH: &str = "/health";
    /// `GET`: Prometheus metrics.
    pub const METRICS: &str = "/metrics";
    /// `GET`: the OpenAPI document.
    pub const OPENAPI: &str = "/openapi.json";
    /// `GET` lists the scope's MCPs, `POST` registers one.
    pub const MCPS: &str = "/mcps";
    /// `DELETE` unregisters an MCP.
    pub const MCP: &str = "/mcps/{name}";
    /// `PUT` replaces an HTTP MCP's runtime headers.
    pub const RUNTIME_HEADERS: &str = "/mcps/{name}/runtime-headers";
    /// `GET` lists an MCP's tools.
    pub const TOOLS: &str = "/mcps/{name}/tools";
    /// `POST` calls a tool.
    pub const TOOL: &str = "/mcps/{name}/tools/{tool}";
    /// `GET` lists an MCP's resources (all pages, as the upstream described them).
    pub const RESOURCES: &str = "/mcps/{name}/resources";
    /// `GET` lists an MCP's resource templates.
    pub const RESOURCE_TEMPLATES: &str = "/mcps/{name}/resource-templates";
    /// `POST` reads a resource: `{"uri": ...}`, answered with the upstream's
    /// `ReadResourceResult`.
    pub const RESOURCE_READ: &str = "/mcps/{name}/resources/read";
    /// `GET` lists an MCP's prompts.
    pub const PROMPTS: &str = "/mcps/{name}/prompts";
    /// `POST` gets a prompt: `{"arguments": {...}}`, answered with the upstream's
    /// `GetPromptResult`.
    pub const PROMPT: &str = "/mcps/{name}/prompts/{prompt}";
    /// `GET` with an HTTP/1.1 upgrade: a virtual MCP connection (one JSON-RPC message a line,
    /// both ways).
    pub const CONNECTION: &str = "/mcps/{name}/connection";
    /// `GET` resumes a resumable call, `DELETE` cancels or forgets it.
    pub const CALL: &str = "/calls/{id}";
    /// `POST` acknowledges many finished calls at once.
    pub const CALLS_ACK: &str = "/calls/ack";
}

/// Headers of the REST surface beyond plain HTTP's (names in lowercase, as HTTP/2 writes them;
/// HTTP/1.1 compares them without case).
pub mod header {
    /// On a tool call: makes it resumable under this [`crate::wire::frame::CallId`]: it runs on
    /// when its caller goes away, and `GET /calls/{id}` answers it again.
    pub const CALL_ID: &str = "mcpgw-call-id";
    /// On the NDJSON answer of a resumable call: the 1-based index in the call of the answer's
    /// first line; the lines after it count up from there.
    pub const SEQ: &str = "mcpgw-seq";
    /// On `/health`: the gateway's `--max-connections` (as it applies it).
    pub const MAX_CONNECTIONS: &str = "mcpgw-max-connections";
    /// On `/health`: the gateway's `--idle-timeout` in milliseconds.
    pub const IDLE_TIMEOUT_MS: &str = "mcpgw-idle-timeout-ms";
    /// On `/health`: how long the gateway keeps a resumable call once nobody follows it or it
    /// ended (`--call-retention`), in milliseconds; absent when it keeps none.
    pub const CALL_RETENTION_MS: &str = "mcpgw-call-retention-ms";
    /// On `/health`: the abstract unix socket on which the gateway takes over a session's
    /// channel from `mcpgw-gateway attach`; absent when it does not.
    pub const ATTACH_SOCKET: &str = "mcpgw-attach-socket";
}

/// Request paths with their parameters percent-encoded, as clients send them.
pub mod path {
    use super::percent_encode;

    /// `/mcps/{name}`.
    pub fn mcp(name: &str) -> String {
        format!("/mcps/{}", percent_encode(name))
    }

    /// `/mcps/{name}/runtime-headers`.
    pub fn runtime_headers(name: &str) -> String {
        format!("/mcps/{}/runtime-headers", percent_encode(name))
    }

    /// `/mcps/{name}/tools`.
    pub fn tools(name: &str) -> String {
        format!("/mcps/{}/tools", percent_encode(name))
    }

    /// `/mcps/{name}/connection`.
    pub fn connection(name: &str) -> String {
        format!("/mcps/{}/connection", percent_encode(name))
    }

    /// `/mcps/{name}/tools/{tool}`.
    pub fn tool(name: &str, tool: &str) -> String {
        format!(
            "/mcps/{}/tools/{}",
            percent_encode(name),
            percent_encode(tool)
        )
    }

    /// `/calls/{id}` (a call id is hex digits: nothing to encode).
    pub fn call(id: &crate::wire::frame::CallId) -> String {
        format!("/calls/{id}")
    }
}

/// The media type of a streamed tool call (`Accept` and `Content-Type`): one ToolChunk a line.
pub const NDJSON: &str = "application/x-ndjson";

/// The text `GET /health` answers when the gateway was launched without an instance nonce.
pub const HEALTH_OK: &str = "ok";

/// Percent-encodes `value` for a URL path segment or query value: every byte outside RFC 3986's
/// unreserved set is escaped, so nothing can change the URL's structure.
pub fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The query parameters every endpoint takes: the scope (`agent_id`, `session_id`, both `""` by
/// default) and, on a tool call, the call's `timeout` in seconds. Unknown parameters are ignored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct Query {
    /// The agent part of the scope.
    #[serde(default)]
    pub agent_id: String,
    /// The session part of the scope.
    #[serde(default)]
    pub session_id: String,
    /// A tool call's deadline in seconds; it can only shorten the MCP's `execution_timeout`.
    /// Kept as text so that a bad value is reported as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        param(value_type = Option<f64>, exclusive_minimum = 0, maximum = 86400)
    )]
    pub timeout: Option<String>,
    /// A tool call's answer: `mcp` for the upstream's `CallToolResult` as it sent it, instead
    /// of a ToolChunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", param(value_type = Option<String>, pattern = "^mcp$"))]
    pub format: Option<String>,
}

/// The value of `format` that asks for the upstream's own `CallToolResult`.
pub const FORMAT_MCP: &str = "mcp";

/// The HTTP upgrade token of `/mcps/{name}/connection`: after the upgrade the stream carries
/// one JSON-RPC message a line both ways.
pub const UPGRADE: &str = "mcpgw-jsonrpc";

/// The gateway's last line on a virtual MCP connection before it closes it:
/// `{"mcpgw":"closed","reason":...}` (every other line is a JSON-RPC message, `{"jsonrpc":...`).
pub fn closed_line(reason: &str) -> String {
    serde_json::json!({"mcpgw": "closed", "reason": reason}).to_string()
}

/// The reason a [`closed_line`] gives; `None` for a line that is not one.
pub fn closed_reason(line: &str) -> Option<String> {
    if !line.starts_with("{\"mcpgw\":") {
        return None;
    }
    let control: serde_json::Value = serde_json::from_str(line).ok()?;
    (control["mcpgw"] == "closed").then(|| control["reason"].as_str().unwrap_or_default().into())
}

/// The query parameter of `/mcps/{name}/connection` that gives the connection an upstream
/// session of its own (`upstream=own`): opened with its host's own handshake (its revision,
/// capabilities and name), carrying what that session sends to it alone, closed with it; the
/// host meets the server as a client of its own would. Without it, connections share the
/// registered MCP's session.
pub const UPSTREAM_OWN: &str = "upstream=own";

/// Whether a connection's query string (without `?`) asks for [`UPSTREAM_OWN`]; an
/// `upstream` of another value is an error naming it.
pub fn upstream_own(raw: &str) -> Result<bool, String> {
    let mut own = false;
    for pair in raw.split('&') {
        match pair.split_once('=') {
            Some(("upstream", "own")) => own = true,
            Some(("upstream", other)) => {
                return Err(format!(
                    "upstream must be \"own\" (a session of the connection's own) or absent, not {other:?}"
                ));
            }
            _ => {}
        }
    }
    Ok(own)
}

impl Query {
    /// The query of a scope, without a timeout.
    pub fn scope(agent_id: &str, session_id: &str) -> Query {
        Query {
            agent_id: agent_id.to_owned(),
            session_id: session_id.to_owned(),
            timeout: None,
            format: None,
        }
    }

    /// The query string (without `?`), percent-encoded.
    pub fn to_query_string(&self) -> String {
        let mut q = format!(
            "agent_id={}&session_id={}",
            percent_encode(&self.agent_id),
            percent_encode(&self.session_id)
        );
        if let Some(t) = &self.timeout {
            let _ = write!(q, "&timeout={}", percent_encode(t));
        }
        q
    }

    /// The call deadline, when one was given; the message says what is wrong with a bad one.
    pub fn timeout(&self) -> Result<Option<Duration>, String> {
        let Some(raw) = &self.timeout else {
            return Ok(None);
        };
        match raw.trim().parse::<f64>() {
            Ok(secs) => spec::timeout_secs("timeout", secs).map(Some),
            Err(_) => Err(format!(
                "timeout must be a number of seconds greater than 0 and at most {}, not {raw:?}",
                spec::MAX_TIMEOUT_SECS
            )),
        }
    }
}

/// The query of `/calls/{id}` (unknown parameters, the scope's among them, are ignored: a call
/// is found by its id alone).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[cfg_attr(feature = "openapi", into_params(parameter_in = Query))]
pub struct CallQuery {
    /// `GET`, streamed: how many of the call's chunks the caller has already; they are not
    /// sent again.
    #[serde(default)]
    pub after: Option<u64>,
    /// `DELETE`: acknowledge a finished call (a running one is left running, and `409` says
    /// so), rather than cancel whatever the call is doing.
    #[serde(default)]
    pub ack: Option<bool>,
}

/// The body of `PUT /mcps/{name}/runtime-headers`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeHeaders {
    /// The complete runtime header map; an empty map clears it.
    pub headers: BTreeMap<String, String>,
}

/// The body of `POST /mcps/{name}/tools/{tool}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallToolBody {
    /// The tool's arguments.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub arguments: Option<JsonObject>,
}

/// The body of `POST /mcps/{name}/resources/read`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceBody {
    /// The resource's URI.
    pub uri: String,
}

/// The body of `POST /mcps/{name}/prompts/{prompt}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GetPromptBody {
    /// The prompt's arguments.
    #[serde(default)]
    pub arguments: Option<BTreeMap<String, String>>,
}

/// The answer of a tool call: `{"chunk": ToolChunk}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolAnswer {
    /// The tool's result.
    pub chunk: ToolChunk,
}

/// The body of `POST /calls/ack`: the calls whose final answers the caller has.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AckCalls {
    /// Call ids (32 to 64 lowercase hex digits), at most [`AckCalls::MAX`].
    pub calls: Vec<String>,
}

impl AckCalls {
    /// The most call ids one request acknowledges.
    pub const MAX: usize = 1024;
}

/// `{"ok": true}`, the answer of `POST /mcps` and `DELETE /mcps/{name}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ok {
    /// Always true.
    pub ok: bool,
}

impl Ok {
    /// The one value.
    pub const TRUE: Ok = Ok { ok: true };
}

/// Every gateway error body: `{"detail": "..."}`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub detail: String,
}

/// `GET /health`: `{"status":"ok","instance_nonce":N}` when the gateway was launched with a
/// nonce, else the plain text [`HEALTH_OK`] (AgentScope's form).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Always `"ok"`.
    pub status: String,
    /// The nonce the gateway was launched with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_nonce: Option<String>,
}

impl Health {
    /// Reads either form of the answer; `None` when it is neither.
    pub fn parse(body: &[u8]) -> Option<Health> {
        let body = body.trim_ascii();
        if body == HEALTH_OK.as_bytes() || body == b"\"ok\"" {
            return Some(Health {
                status: HEALTH_OK.into(),
                instance_nonce: None,
            });
        }
        serde_json::from_slice(body).ok()
    }
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

/// One entry of `GET /mcps`: the spec as registered, with the gateway's view of its health.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpEntry {
    /// The spec as registered (normalised; runtime headers are never echoed).
    #[serde(flatten)]
    pub spec: McpSpec,
    /// How the upstream stands; absent from gateways that do not report it (AgentScope's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<McpStatus>,
}

/// How a registered upstream stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpStatus {
    /// Its state.
    pub state: McpState,
    /// The process id of a stdio upstream that runs.
    pub pid: Option<u32>,
    /// How many times it was started again after dying.
    pub restarts: u64,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// Tool calls made.
    pub calls: u64,
    /// Tool calls that ended in an error status.
    pub errors: u64,
}

/// The state of a registered upstream.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpState {
    /// Connecting for the first time.
    Connecting,
    /// Its session is up.
    Connected,
    /// A stateless HTTP MCP: every operation opens a session of its own.
    Stateless,
    /// Its session died; the next call starts it again.
    Exited,
    /// Being started again after dying.
    Restarting,
    /// The last restart failed; the next call tries again after a backoff.
    Failed,
    /// It died too often in a short time; calls fail until the window has passed.
    Crashing,
    /// Unregistered, or the gateway is shutting down.
    Closed,
}

impl McpState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            McpState::Connecting => "connecting",
            McpState::Connected => "connected",
            McpState::Stateless => "stateless",
            McpState::Exited => "exited",
            McpState::Restarting => "restarting",
            McpState::Failed => "failed",
            McpState::Crashing => "crashing",
            McpState::Closed => "closed",
        }
    }

    /// Every state, in declaration order.
    pub const ALL: [McpState; 8] = [
        McpState::Connecting,
        McpState::Connected,
        McpState::Stateless,
        McpState::Exited,
        McpState::Restarting,
        McpState::Failed,
        McpState::Crashing,
        McpState::Closed,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_and_queries_are_encoded() {
        assert_eq!(path::tool("fs", "read file"), "/mcps/fs/tools/read%20file");
        assert_eq!(percent_encode("a-b_c.d~e"), "a-b_c.d~e");
        assert_eq!(
            percent_encode("a b&c=d/é?#%"),
            "a%20b%26c%3Dd%2F%C3%A9%3F%23%25"
        );
        let mut q = Query::scope("a b", "s&x=1");
        q.timeout = Some("1.5".into());
        assert_eq!(
            q.to_query_string(),
            "agent_id=a%20b&session_id=s%26x%3D1&timeout=1.5"
        );
        assert_eq!(q.timeout().unwrap(), Some(Duration::from_millis(1500)));
        for bad in ["0", "-1", "nan", "1e20", "x", "86400.1"] {
            q.timeout = Some(bad.into());
            assert!(q.timeout().unwrap_err().contains("timeout"), "{bad}");
        }
    }

    #[test]
    fn routes_and_paths_agree() {
        let filled = route::TOOL.replace("{name}", "m").replace("{tool}", "t");
        assert_eq!(filled, path::tool("m", "t"));
        assert_eq!(route::TOOLS.replace("{name}", "m"), path::tools("m"));
        assert_eq!(route::MCP.replace("{name}", "m"), path::mcp("m"));
        assert_eq!(
            route::RUNTIME_HEADERS.replace("{name}", "m"),
            path::runtime_headers("m")
        );
    }

    #[test]
    fn health_reads_both_forms() {
        assert_eq!(Health::parse(b"ok").unwrap().instance_nonce, None);
        let h = Health::parse(br#"{"status":"ok","instance_nonce":"n"}"#).unwrap();
        assert_eq!(h.instance_nonce.as_deref(), Some("n"));
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"{"status":"ok","instance_nonce":"n"}"#
        );
        assert!(Health::parse(b"<html>").is_none());
    }

    #[test]
    fn entries_carry_spec_and_status() {
        let raw = json!({
            "name": "m", "is_stateful": true,
            "mcp_config": {"type": "stdio_mcp", "command": "x", "args": null, "env": null,
                           "cwd": null, "encoding_error_handler": "strict"},
            "enable_tools": null, "disable_tools": null, "execution_timeout": null,
            "stream_progress": false,
            "status": {"state": "crashing", "pid": null, "restarts": 5,
                       "last_error": "exit status 1", "calls": 9, "errors": 6}
        });
        let entry: McpEntry = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(entry.status.as_ref().unwrap().state, McpState::Crashing);
        assert!(entry.spec.extra.is_empty());
        assert_eq!(serde_json::to_value(&entry).unwrap(), raw);
        for s in McpState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), json!(s.as_str()));
        }
    }
}
