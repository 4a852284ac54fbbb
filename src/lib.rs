//! mcpgw: the host side of the mcpgw gateway.
//!
//! The gateway (`mcpgw-gateway`) runs inside a sandbox and owns the MCP sessions; this crate builds
//! every gateway request as a POSIX shell command for the host's "exec in sandbox" channel and
//! decodes what comes back. It does no I/O of its own.

pub mod random;
pub mod wire;
