//! Every `sh -c` text the library hands to an exec backend: gateway requests (curl or the
//! built-in client), the launch, stop and session commands, the binary install, and the staging
//! of bodies too large for one command. All of it is built with [`crate::quote::quote`]; no other
//! module writes shell text.

pub mod gateway;
pub mod install;
pub mod request;
pub mod staging;

use std::sync::Arc;
use std::time::Duration;

pub use request::{Body, Request, Target};

/// A command to run in the sandbox with `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The `sh -c` text.
    pub text: String,
    /// How long the backend should let it run before giving up.
    pub timeout: Duration,
    /// Bytes to pass on the command's standard input: only set for clients configured with an
    /// exec that passes stdin (see [`crate::Config::exec_stdin`]).
    pub stdin: Option<Arc<[u8]>>,
}

impl Command {
    /// A command without standard input.
    pub fn new(text: impl Into<String>, timeout: Duration) -> Command {
        Command {
            text: text.into(),
            timeout,
            stdin: None,
        }
    }

    /// The command with `bytes` on its standard input.
    pub fn with_stdin(mut self, bytes: Arc<[u8]>) -> Command {
        self.stdin = Some(bytes);
        self
    }
}

/// How requests reach the gateway inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// `curl`, when the sandbox has it.
    Curl,
    /// `mcpgw-gateway request`, the gateway binary's own client.
    BuiltIn,
}

/// An HTTP method of the gateway's REST surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}
