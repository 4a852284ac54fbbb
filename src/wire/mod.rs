//! The wire contract between hosts and the gateway, defined once: the gateway, the library and
//! the bindings' documentation all use these types and constants.
//!
//! - [`spec`]: an MCP registration (AgentScope's `MCPClient` dump), its limits and its validator;
//! - [`tool`] and [`chunk`]: an MCP tool, and a call's result as AgentScope's `ToolChunk`;
//! - [`rest`]: routes, query, bodies, health, the status of a registered MCP;
//! - [`request`]: decoding the REST requests' query and bodies, with messages naming the field;
//! - [`output`]: what a request command prints and exits with (the status trailer, curl's codes);
//! - [`frame`]: the session channel's frames;
//! - [`jsonrpc`]: JSON-RPC messages read and written without touching what they carry;
//! - [`lines`]: input cut into lines with bounded memory.
//!
//! Unknown fields of a spec are kept and echoed back, so a newer host never loses what it
//! registered.

pub mod chunk;
pub mod frame;
pub mod jsonrpc;
pub mod lines;
pub mod output;
pub mod request;
pub mod rest;
pub mod spec;
pub mod tool;

use serde_json::{Map, Value};

/// A JSON object.
pub type JsonObject = Map<String, Value>;

pub use chunk::{Block, DataBlock, Source, TextBlock, ToolChunk, ToolState};
pub use rest::{
    AckCalls, CallQuery, CallToolAnswer, CallToolBody, DaemonReady, ErrorBody, GetPromptBody,
    Health, McpEntry, McpState, McpStatus, Ok, Query, ReadResourceBody, RuntimeHeaders,
};
pub use spec::{
    EncodingErrorHandler, HttpConfig, McpConfig, McpSpec, SecretRef, SpecValue, StdioConfig,
    is_valid_name, validate_headers,
};
pub use tool::Tool;
