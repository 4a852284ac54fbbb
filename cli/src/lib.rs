//! The `mcpgw` command: `mcpgw mcp`, an MCP server on the host for a server inside a sandbox
//! (over stdio, or streamable HTTP on loopback), on the host driver's tokio runner
//! (`mcpgw-runner`). The policy of reaching the sandbox is the driver's; this crate holds the
//! endpoint's: one JSON-RPC message read once and relayed, the handshake replayed on a new
//! connection, the HTTP rules of each revision, the N-to-1 prefixed aggregate.

#![forbid(unsafe_code)]

pub mod aggregate;
pub mod cli;
pub mod endpoint;
pub mod http;
pub mod link;
pub mod relay;
pub mod sandbox;
