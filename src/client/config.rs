//! How a client reaches its gateway, and the options of one call.

use std::time::Duration;

use crate::command::Transport;
use crate::error::Error;
use crate::quote::quote;

/// The default limit of one command's text: under the kernel's 128 KiB per argv string, with
/// room left for backends that wrap the command.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 120 * 1024;

/// The smallest command limit accepted: every fixed part of a command must fit.
pub const MIN_MAX_COMMAND_BYTES: usize = 4096;

/// How a [`crate::Client`] reaches its gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The gateway binary inside the sandbox; a bare name is looked up on `PATH`.
    /// `ensure_gateway_binary` needs an absolute path.
    pub gateway_path: String,
    /// The loopback address the gateway listens on.
    pub host: String,
    /// The gateway's port: 0 lets `start_gateway` pick a free one; non-zero with `token_file`
    /// attaches to a gateway that is already running.
    pub port: u16,
    /// The token file inside the sandbox; by default `<state_dir>/token`.
    pub token_file: Option<String>,
    /// The per-launch directory for token file and log; by default `/tmp/mcpgw-<16 hex>`.
    pub state_dir: Option<String>,
    /// The nonce of an already running gateway, checked by `health`.
    pub instance_nonce: Option<String>,
    /// curl or the built-in client; `None` detects curl once and falls back to the built-in one.
    pub transport: Option<Transport>,
    /// The timeout of a call that sets none.
    pub timeout: Duration,
    /// Where large bodies are staged; by default the state directory, else `/tmp`.
    pub staging_dir: Option<String>,
    /// The longest command text handed to the exec backend; larger bodies are staged (or, with
    /// `exec_stdin`, passed on stdin).
    pub max_command_bytes: usize,
    /// Whether the exec backend passes a command's standard input ([`crate::Command::stdin`]):
    /// `docker exec -i`, `kubectl exec -i`, a local shell. Then the gateway binary and bodies
    /// too large for one command travel on stdin in one exec instead of staged pieces.
    pub exec_stdin: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            gateway_path: "mcpgw-gateway".into(),
            host: "127.0.0.1".into(),
            port: 0,
            token_file: None,
            state_dir: None,
            instance_nonce: None,
            transport: None,
            timeout: Duration::from_secs(60),
            staging_dir: None,
            max_command_bytes: DEFAULT_MAX_COMMAND_BYTES,
            exec_stdin: false,
        }
    }
}

fn check_path(what: &str, path: &str) -> Result<(), Error> {
    if path.is_empty() {
        return Err(Error::invalid_argument(format!("{what} must not be empty")));
    }
    quote(path).map(|_| ())
}

impl Config {
    /// Checks every value; the message names the one that is unusable.
    pub fn validate(&self) -> Result<(), Error> {
        check_path("the gateway path", &self.gateway_path)?;
        check_path("the gateway host", &self.host)?;
        for (what, v) in [
            ("the token file", &self.token_file),
            ("the state directory", &self.state_dir),
            ("the staging directory", &self.staging_dir),
            ("the instance nonce", &self.instance_nonce),
        ] {
            if let Some(v) = v {
                check_path(what, v)?;
            }
        }
        if self.max_command_bytes < MIN_MAX_COMMAND_BYTES {
            return Err(Error::invalid_argument(format!(
                "the command size limit must be at least {MIN_MAX_COMMAND_BYTES} bytes"
            )));
        }
        if self.timeout.is_zero() {
            return Err(Error::invalid_argument(
                "the default timeout must not be zero",
            ));
        }
        Ok(())
    }
}

/// Per-call options: the scope the MCPs live in, and a timeout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// The agent part of the scope (`""` by default).
    pub agent_id: String,
    /// The session part of the scope (`""` by default).
    pub session_id: String,
    /// Bounds each command of the call; the client's default when `None`. A tool call passes it
    /// to the gateway as the call's deadline.
    pub timeout: Option<Duration>,
}
