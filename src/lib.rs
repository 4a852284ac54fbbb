//! mcpgw: the host side of the mcpgw gateway.
//!
//! The gateway (`mcpgw-gateway`) runs inside a sandbox and owns the MCP sessions; this crate builds
//! every gateway request as a POSIX shell command for the host's "exec in sandbox" channel, or as
//! a frame for a long-lived session channel, and decodes what comes back. It does no I/O of its
//! own: an [`Operation`] and a [`session::Session`] are sans-IO state machines, and the host
//! driver ([`driver::Host`]) decides over them, for one sandbox, what to run, what goes over the
//! session and what to reopen or resume. [`exec::run`] drives an [`Operation`] through any
//! [`Exec`]; the `mcpgw-runner` crate drives a [`driver::Host`] on tokio; the C ABI (the separate
//! crate in `src/ffi`) hands it to any event loop.
#![forbid(unsafe_code)]

pub mod civil;
pub mod client;
pub mod command;
pub mod driver;
pub mod error;
pub mod exec;
pub mod local;
pub mod policy;
pub mod quote;
pub mod random;
pub mod secret;
pub mod session;
pub mod wire;

pub use client::{
    BinaryStatus, CallOptions, Client, Config, ExecOutput, ExecResult, GatewayInfo, Operation,
    Output,
};
pub use command::{Command, Transport};
pub use error::{Error, ErrorKind};
pub use exec::{Exec, run};
pub use local::LocalShell;
