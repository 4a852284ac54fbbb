//! What a host driver is given: its configuration and the operations submitted to it, both also
//! as JSON (the C ABI and the bindings pass them so), with one set of names for every language.

use crate::policy::Policy;
use crate::secret::SecretValues;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::backend::Backend;
use crate::client::{CallOptions, Client, Config, Operation, Output};
use crate::command::Transport;
use crate::error::Error;

fn default_gateway_path() -> String {
    Config::default().gateway_path
}

fn default_host() -> String {
    Config::default().host
}

const fn ms(n: u64) -> u64 {
    n
}

fn default_timeout_ms() -> u64 {
    ms(60_000)
}
fn default_open_timeout_ms() -> u64 {
    ms(60_000)
}
fn default_answer_grace_ms() -> u64 {
    ms(5_000)
}
fn default_close_grace_ms() -> u64 {
    ms(5_000)
}
fn default_reopen_attempts() -> u32 {
    5
}
fn default_true() -> bool {
    true
}

/// The configuration of a [`super::Host`]: its sandbox backend, its gateway, and the session
/// policy's timers. JSON keys are the field names; every field but `backend` has a default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// How commands and channels reach the sandbox.
    pub backend: Backend,
    /// The gateway binary inside the sandbox; a bare name is looked up on `PATH`.
    #[serde(default = "default_gateway_path")]
    pub gateway_path: String,
    /// The loopback address the gateway listens on.
    #[serde(default = "default_host")]
    pub host: String,
    /// The port of a running gateway to use (with `token_file`), or 0 to launch one.
    #[serde(default)]
    pub port: u16,
    /// The token file inside the sandbox of a running gateway, or of the one to launch.
    #[serde(default)]
    pub token_file: Option<String>,
    /// The per-launch state directory; by default `/tmp/mcpgw-<16 hex>`.
    #[serde(default)]
    pub state_dir: Option<String>,
    /// The instance nonce of a running gateway.
    #[serde(default)]
    pub instance_nonce: Option<String>,
    /// `"curl"` or `"built_in"`; detected once when absent.
    #[serde(default)]
    pub transport: Option<TransportName>,
    /// Where large bodies are staged; by default the state directory, else `/tmp`.
    #[serde(default)]
    pub staging_dir: Option<String>,
    /// The longest command text handed to the backend.
    #[serde(default)]
    pub max_command_bytes: Option<usize>,
    /// The time limit of an operation that sets none, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// How long a session channel may take to say hello (a launch included), in milliseconds.
    #[serde(default = "default_open_timeout_ms")]
    pub open_timeout_ms: u64,
    /// How long an answer over a session may take beyond its operation's own limit.
    #[serde(default = "default_answer_grace_ms")]
    pub answer_grace_ms: u64,
    /// How long a closed channel's process may take to exit before it is killed.
    #[serde(default = "default_close_grace_ms")]
    pub close_grace_ms: u64,
    /// Whether a lost session channel is opened again (and its resumable calls resumed).
    #[serde(default = "default_true")]
    pub reopen: bool,
    /// How many times in a row opening the channel may fail before the session gives up.
    #[serde(default = "default_reopen_attempts")]
    pub reopen_attempts: u32,
    /// How often attach should ping when idle, in milliseconds (0: attach's default).
    #[serde(default)]
    pub heartbeat_ms: u64,
    /// How long the channel may stay silent before it is declared lost, in milliseconds (0:
    /// three times the heartbeat interval the hello announces, and none when it announces none).
    #[serde(default)]
    pub heartbeat_timeout_ms: u64,
    /// The host's rules for what its calls and connections may reach (see
    /// [`crate::policy`]); none by default.
    #[serde(default, skip_serializing_if = "Policy::is_empty")]
    pub policy: Policy,
    /// Whether each call's end makes an audit record ([`super::Action::Audit`]).
    #[serde(default)]
    pub audit: bool,
    /// Whether audit records hold the arguments themselves (secrets redacted), not only their
    /// digest and size.
    #[serde(default)]
    pub audit_arguments: bool,
    /// Secret values by name, which specs' `{"secret": NAME}` resolve to before the host's
    /// environment variable NAME (see [`crate::secret`]). Never serialized back; `Debug` shows
    /// the names alone.
    #[serde(default, skip_serializing)]
    pub secrets: SecretValues,
}

/// A transport's name in a [`HostConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransportName {
    /// curl.
    Curl,
    /// `mcpgw-gateway request`.
    BuiltIn,
}

impl HostConfig {
    /// A configuration with `backend` and every default.
    pub fn new(backend: Backend) -> HostConfig {
        serde_json::from_value(serde_json::json!({ "backend": backend }))
            .expect("the defaults make a configuration")
    }

    /// Reads a configuration from JSON; the error names the field that is wrong.
    pub fn from_json(text: &str) -> Result<HostConfig, Error> {
        let config: HostConfig = one_document(text, "the host configuration")?;
        config.validate()?;
        Ok(config)
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<(), Error> {
        self.backend.validate()?;
        self.client_config().validate()?;
        if self.open_timeout_ms == 0 {
            return Err(Error::invalid_argument("open_timeout_ms must not be zero"));
        }
        self.secrets.secrets()?;
        Ok(())
    }

    /// The client configuration this describes.
    pub fn client_config(&self) -> Config {
        let d = Config::default();
        Config {
            gateway_path: self.gateway_path.clone(),
            host: self.host.clone(),
            port: self.port,
            token_file: self.token_file.clone(),
            state_dir: self.state_dir.clone(),
            instance_nonce: self.instance_nonce.clone(),
            transport: self.transport.map(|t| match t {
                TransportName::Curl => Transport::Curl,
                TransportName::BuiltIn => Transport::BuiltIn,
            }),
            timeout: Duration::from_millis(self.timeout_ms),
            staging_dir: self.staging_dir.clone(),
            max_command_bytes: self.max_command_bytes.unwrap_or(d.max_command_bytes),
            exec_stdin: self.backend.passes_stdin(),
        }
    }
}

/// Reads exactly one JSON document of type `T` from `text` (only whitespace may follow it); the
/// error names `what` and the field at fault.
fn one_document<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, Error> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut *de)
        .map_err(|e| Error::invalid_argument(format!("{what} is invalid: {e}")))?;
    de.end().map_err(|e| {
        Error::invalid_argument(format!(
            "{what} is invalid: something follows its JSON document ({e})"
        ))
    })?;
    Ok(value)
}

/// One operation for a host, in the one vocabulary every binding shares (JSON: `{"op":
/// "call_tool", "mcp": ..., "tool": ..., "arguments": {...}, "agent_id": ..., "timeout_ms": ...,
/// "stream": true}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Submit {
    /// What to do.
    #[serde(flatten)]
    pub op: Op,
    /// The agent part of the scope.
    #[serde(default)]
    pub agent_id: String,
    /// The session part of the scope.
    #[serde(default)]
    pub session_id: String,
    /// The operation's time limit in milliseconds (the host's default when absent); a tool
    /// call's deadline in the gateway too.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Whether a tool call reports its progress as it happens.
    #[serde(default)]
    pub stream: bool,
}

/// The operations, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Op {
    /// Launch a gateway (one command; the gateway mints its token in the sandbox).
    StartGateway {},
    /// Stop the gateway this host launched.
    StopGateway {},
    /// Install the gateway binary read from `binary_path` on the host, unless an identical one
    /// is at the configured gateway path.
    EnsureGatewayBinary {
        /// The static gateway binary on the host.
        binary_path: String,
    },
    /// `GET /health`.
    Health {},
    /// `GET /mcps`.
    ListMcps {},
    /// `POST /mcps`.
    AddMcp {
        /// The MCP spec.
        spec: Value,
    },
    /// `DELETE /mcps/{name}`.
    RemoveMcp {
        /// The MCP's name.
        name: String,
    },
    /// `GET /mcps/{mcp}/tools`.
    ListTools {
        /// The MCP's name.
        mcp: String,
    },
    /// `POST /mcps/{mcp}/tools/{tool}`.
    CallTool {
        /// The MCP's name.
        mcp: String,
        /// The tool.
        tool: String,
        /// Its arguments (an object; absent or null: none).
        #[serde(default)]
        arguments: Value,
    },
    /// `PUT /mcps/{mcp}/runtime-headers`.
    SetRuntimeHeaders {
        /// The MCP's name.
        mcp: String,
        /// Header names to values.
        headers: Value,
    },
    /// Open the session channel: later REST operations go over it.
    OpenSession {},
    /// Close the session channel: later operations go one-shot.
    CloseSession {},
}

/// The operation names, for the bindings' vocabulary table.
pub const OP_NAMES: &[&str] = &[
    "start_gateway",
    "stop_gateway",
    "ensure_gateway_binary",
    "health",
    "list_mcps",
    "add_mcp",
    "remove_mcp",
    "list_tools",
    "call_tool",
    "set_runtime_headers",
    "open_session",
    "close_session",
];

impl Submit {
    /// An operation with the default scope and limit.
    pub fn new(op: Op) -> Submit {
        Submit {
            op,
            agent_id: String::new(),
            session_id: String::new(),
            timeout_ms: None,
            stream: false,
        }
    }

    /// Reads an operation from JSON; the error names what is wrong. `op` must be one of
    /// [`OP_NAMES`] as a string (serde would also take a variant's index).
    pub fn from_json(text: &str) -> Result<Submit, Error> {
        const WHAT: &str = "the operation";
        let fields: serde_json::Map<String, Value> = one_document(text, WHAT)?;
        match fields.get("op") {
            Some(Value::String(name)) if OP_NAMES.contains(&name.as_str()) => {}
            Some(Value::String(name)) => {
                return Err(Error::invalid_argument(format!(
                    "{WHAT} is invalid: op: unknown operation {name:?}, expected one of {}",
                    OP_NAMES.join(", ")
                )));
            }
            Some(other) => {
                return Err(Error::invalid_argument(format!(
                    "{WHAT} is invalid: op must be a string naming the operation, not {other}"
                )));
            }
            None => {
                return Err(Error::invalid_argument(format!(
                    "{WHAT} is invalid: it has no op (the operation's name)"
                )));
            }
        }
        serde_path_to_error::deserialize(Value::Object(fields))
            .map_err(|e| Error::invalid_argument(format!("{WHAT} is invalid: {e}")))
    }

    /// The call options it carries.
    pub fn options(&self) -> CallOptions {
        CallOptions {
            agent_id: self.agent_id.clone(),
            session_id: self.session_id.clone(),
            timeout: self
                .timeout_ms
                .filter(|t| *t > 0)
                .map(Duration::from_millis),
        }
    }

    /// The operation's name.
    pub fn name(&self) -> &'static str {
        match self.op {
            Op::StartGateway {} => "start_gateway",
            Op::StopGateway {} => "stop_gateway",
            Op::EnsureGatewayBinary { .. } => "ensure_gateway_binary",
            Op::Health {} => "health",
            Op::ListMcps {} => "list_mcps",
            Op::AddMcp { .. } => "add_mcp",
            Op::RemoveMcp { .. } => "remove_mcp",
            Op::ListTools { .. } => "list_tools",
            Op::CallTool { .. } => "call_tool",
            Op::SetRuntimeHeaders { .. } => "set_runtime_headers",
            Op::OpenSession {} => "open_session",
            Op::CloseSession {} => "close_session",
        }
    }

    /// Whether it is a request to the gateway's REST surface (it may travel over a session).
    pub fn is_rest(&self) -> bool {
        !matches!(
            self.op,
            Op::StartGateway {}
                | Op::StopGateway {}
                | Op::EnsureGatewayBinary { .. }
                | Op::OpenSession {}
                | Op::CloseSession {}
        )
    }

    /// The client operation it is, or `None` for the session's own (open, close).
    pub(crate) fn prepare(&self, client: &Client) -> Option<Operation<Output>> {
        let o = &self.options();
        Some(match &self.op {
            Op::StartGateway {} => client.prepare_start_gateway(o).erase(),
            Op::StopGateway {} => client.prepare_stop_gateway(o).erase(),
            Op::EnsureGatewayBinary { binary_path } => {
                match crate::exec::read_host_file(std::path::Path::new(binary_path)) {
                    Ok(bytes) => client.prepare_ensure_gateway_binary(o, bytes).erase(),
                    Err(e) => client.failed_operation("ensure_gateway_binary", e),
                }
            }
            Op::Health {} => client.prepare_health(o).erase(),
            Op::ListMcps {} => client.prepare_list_mcps(o).erase(),
            Op::AddMcp { spec } => client.prepare_add_mcp(o, &spec.to_string()).erase(),
            Op::RemoveMcp { name } => client.prepare_remove_mcp(o, name).erase(),
            Op::ListTools { mcp } => client.prepare_list_tools(o, mcp).erase(),
            Op::CallTool {
                mcp,
                tool,
                arguments,
            } => {
                let args = if arguments.is_null() {
                    String::new()
                } else {
                    arguments.to_string()
                };
                client.prepare_call_tool(o, mcp, tool, &args).erase()
            }
            Op::SetRuntimeHeaders { mcp, headers } => client
                .prepare_set_runtime_headers(o, mcp, &headers.to_string())
                .erase(),
            Op::OpenSession {} | Op::CloseSession {} => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_and_operations_read_from_json_with_named_errors() {
        let c = HostConfig::from_json(
            r#"{"backend":{"kind":"docker","container":"box"},"timeout_ms":5000}"#,
        )
        .unwrap();
        assert_eq!(c.timeout_ms, 5000);
        assert!(c.reopen);
        assert!(c.client_config().exec_stdin);
        for (text, says) in [
            (
                r#"{"backend":{"kind":"docker","container":""}}"#,
                "must not be empty",
            ),
            (r#"{"backend":{"kind":"ftp"}}"#, "backend"),
            (
                r#"{"backend":{"kind":"local"},"timeout":5}"#,
                "unknown field",
            ),
            (
                r#"{"backend":{"kind":"local"},"open_timeout_ms":0}"#,
                "open_timeout_ms",
            ),
            (
                r#"{"backend":{"kind":"local"}} {"backend":{"kind":"local"}}"#,
                "follows its JSON document",
            ),
            (
                r#"{"backend":{"kind":"e2b","sandbox":""}}"#,
                "must not be empty",
            ),
        ] {
            let e = HostConfig::from_json(text).unwrap_err();
            assert!(e.message().contains(says), "{text}: {e}");
        }
        let s = Submit::from_json(
            r#"{"op":"call_tool","mcp":"ts","tool":"echo","arguments":{"text":"hi"},"stream":true,"timeout_ms":100}"#,
        )
        .unwrap();
        assert_eq!(s.name(), "call_tool");
        assert_eq!(s.options().timeout, Some(Duration::from_millis(100)));
        for (text, says) in [
            (r#"{"op":"brew"}"#, "unknown operation \"brew\""),
            (r#"{"op":"call_tool","mcp":"ts"}"#, "tool"),
            (r#"{"op":"health","extra":1}"#, "unknown field"),
            (r#"{"op":0}"#, "op must be a string"),
            (
                r#"{"op":"health"}{"op":"stop_gateway"}"#,
                "follows its JSON document",
            ),
            (r#"{"op":"health"} ]"#, "follows its JSON document"),
            (r#"["health"]"#, "invalid"),
        ] {
            let e = Submit::from_json(text).unwrap_err();
            assert!(e.message().contains(says), "{text}: {e}");
        }
        for name in OP_NAMES {
            let text = match *name {
                "ensure_gateway_binary" => format!(r#"{{"op":"{name}","binary_path":"/x"}}"#),
                "add_mcp" => format!(r#"{{"op":"{name}","spec":{{}}}}"#),
                "remove_mcp" => format!(r#"{{"op":"{name}","name":"x"}}"#),
                "list_tools" => format!(r#"{{"op":"{name}","mcp":"x"}}"#),
                "call_tool" => format!(r#"{{"op":"{name}","mcp":"x","tool":"t"}}"#),
                "set_runtime_headers" => format!(r#"{{"op":"{name}","mcp":"x","headers":{{}}}}"#),
                _ => format!(r#"{{"op":"{name}"}}"#),
            };
            assert_eq!(Submit::from_json(&text).unwrap().name(), *name);
        }
    }
}
