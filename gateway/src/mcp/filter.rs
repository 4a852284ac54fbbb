//! The spec's tool filters (`enable_tools` / `disable_tools`) on a connection, as on the REST
//! surface: a `tools/call` of a tool they exclude is answered by the gateway with
//! [`TOOL_DISABLED`] and never reaches the upstream, and each `tools/list` result (every page)
//! reaches the host without the tools they exclude. Nothing more is parsed for an MCP whose
//! spec has no filter.

use mcpgw::wire::jsonrpc::method;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Connection;

/// The JSON-RPC error code of a `tools/call` the spec's filters refuse: the host policy's.
pub const TOOL_DISABLED: i64 = mcpgw::policy::DENIED_CODE;

impl Connection {
    /// Why the host's request `method` (its `params` parsed) is refused by the spec's filters:
    /// it calls a tool they exclude.
    pub(super) fn refused_by_filters(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Option<String> {
        let spec = &self.upstream.spec;
        if method != method::TOOLS_CALL || !spec.filters_tools() {
            return None;
        }
        spec.tool_refusal(params.get("name")?.as_str()?)
    }

    /// The upstream's `result` of request `method` as the host gets it when the spec's
    /// filters change it: a `tools/list` page without the tools they exclude. `None` when it
    /// goes as the upstream wrote it.
    pub(super) fn filtered_result(&self, method: &str, result: &RawValue) -> Option<String> {
        let spec = &self.upstream.spec;
        if method != method::TOOLS_LIST || !spec.filters_tools() {
            return None;
        }
        let mut page: Map<String, Value> = serde_json::from_str(result.get()).ok()?;
        let Some(Value::Array(tools)) = page.get_mut("tools") else {
            return None;
        };
        let before = tools.len();
        tools.retain(|t| t["name"].as_str().is_none_or(|name| spec.lists_tool(name)));
        (tools.len() != before).then(|| Value::Object(page).to_string())
    }
}
