//! mcpgw: the host side of the mcpgw gateway.
//!
//! The gateway (`mcpgw-gateway`) runs inside a sandbox and owns the MCP sessions; this crate builds
//! every gateway request as a POSIX shell command for the host's "exec in sandbox" channel and
//! decodes what comes back. It does no I/O of its own: [`client::Operation`] is a sans-IO state
//! machine, and [`exec::run`] drives one through any [`exec::Exec`]. The C ABI lives in `ffi`.

pub mod client;
pub mod command;
pub mod error;
pub mod exec;
pub mod ffi;
pub mod quote;
pub mod random;
pub mod response;
mod staging;
pub mod wire;

pub use client::{CallOptions, Client, Command, Config, ExecOutput, ExecResult, Operation, Output};
pub use command::Transport;
pub use error::{Error, ErrorKind};
pub use exec::{Exec, LocalShell, run};
