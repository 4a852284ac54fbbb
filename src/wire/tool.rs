//! An MCP tool as its server describes it.

use serde::{Deserialize, Serialize};

use super::JsonObject;

/// An MCP tool as its server describes it (the MCP `Tool` object, camelCase).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The tool's name on its server.
    pub name: String,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub input_schema: JsonObject,
    /// The JSON Schema of its structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub output_schema: Option<JsonObject>,
    /// Hints such as `readOnlyHint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub annotations: Option<JsonObject>,
    /// Everything else the server sent (`icons`, `_meta`, `execution`, ...).
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub extra: JsonObject,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_keeps_what_the_server_sent() {
        let raw =
            json!({"name": "t", "inputSchema": {"type": "object"}, "icons": [], "_meta": {"k": 1}});
        let tool: Tool = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(serde_json::to_value(&tool).unwrap(), raw);
    }
}
