//! The result of a tool call in AgentScope's `ToolChunk` shape, and the metadata keys mcpgw
//! adds to it.

use serde::{Deserialize, Serialize};

use super::JsonObject;

/// `metadata` key of a progress chunk of a streamed call: `{"progress", "total", "message"}`.
/// AgentScope reserves it and does not accumulate it into its `ToolResponse`.
pub const PROGRESS_KEY: &str = "mcp_progress";

/// `metadata` key holding the MCP result's `structuredContent`.
pub const STRUCTURED_CONTENT_KEY: &str = "structured_content";

/// `metadata` key of the last chunk of a streamed call that failed after progress was sent:
/// `{"status", "detail"}`, the HTTP status and detail the call would have answered with.
pub const ERROR_KEY: &str = "error";

/// The result of a tool execution, in AgentScope's shape.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolChunk {
    /// Text and data blocks.
    pub content: Vec<Block>,
    /// How the execution stands.
    pub state: ToolState,
    /// Whether this is the last chunk of the call.
    pub is_last: bool,
    /// `structured_content`, `mcp_progress` and other side information.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: JsonObject,
    /// 32 lowercase hex digits.
    pub id: String,
}

/// AgentScope's `ToolResultState`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolState {
    /// Under way, or a successful result (AgentScope marks MCP results `running`).
    Running,
    /// Finished successfully.
    Success,
    /// The tool reported an error.
    Error,
    /// Stopped before it finished.
    Interrupted,
    /// Refused by a permission check.
    Denied,
}

impl ToolState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolState::Running => "running",
            ToolState::Success => "success",
            ToolState::Error => "error",
            ToolState::Interrupted => "interrupted",
            ToolState::Denied => "denied",
        }
    }
}

/// One block of a [`ToolChunk`].
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Block {
    /// Text.
    Text(TextBlock),
    /// Binary data or a link to it.
    Data(DataBlock),
}

/// A text block.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextBlock {
    /// The text.
    pub text: String,
    /// The block's id.
    pub id: String,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// When it was finished, if it was.
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// A data block: inline base64 or a URL.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DataBlock {
    /// The block's id.
    pub id: String,
    /// Where the bytes are.
    pub source: Source,
    /// A name, e.g. of a linked resource.
    #[serde(default)]
    pub name: Option<String>,
    /// When it was made (ISO 8601).
    pub created_at: String,
    /// When it was finished, if it was.
    #[serde(default)]
    pub finished_at: Option<String>,
}

/// Where a data block's bytes are.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Source {
    /// Inline, base64-encoded.
    Base64 {
        /// The base64 text (standard alphabet, padded).
        data: String,
        /// E.g. `image/png`.
        media_type: String,
    },
    /// Behind a URL.
    Url {
        /// The URL.
        url: String,
        /// E.g. `text/plain`.
        media_type: String,
    },
}

impl Source {
    /// The media type.
    pub fn media_type(&self) -> &str {
        match self {
            Source::Base64 { media_type, .. } | Source::Url { media_type, .. } => media_type,
        }
    }

    /// The decoded bytes of an inline source (`None` for a URL), or why the base64 is invalid.
    pub fn decode(&self) -> Option<Result<Vec<u8>, String>> {
        use base64::Engine as _;
        match self {
            Source::Base64 { data, .. } => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .map_err(|e| format!("invalid base64 in a data block: {e}")),
            ),
            Source::Url { .. } => None,
        }
    }
}

impl ToolChunk {
    /// The progress of a progress chunk (`metadata.mcp_progress`).
    pub fn progress(&self) -> Option<&serde_json::Value> {
        self.metadata.get(PROGRESS_KEY)
    }

    /// The `(status, detail)` of the failure a streamed call ended with, when this is such a
    /// last chunk (`metadata.error`).
    pub fn stream_failure(&self) -> Option<(u16, String)> {
        let error = self.metadata.get(ERROR_KEY)?;
        let status = u16::try_from(error.get("status")?.as_u64()?).ok()?;
        let detail = error.get("detail")?.as_str()?.to_owned();
        Some((status, detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn chunk_round_trips_in_agentscope_field_order() {
        let chunk = ToolChunk {
            content: vec![
                Block::Text(TextBlock {
                    text: "hi".into(),
                    id: "b1".into(),
                    created_at: "2026-01-01T00:00:00.000000".into(),
                    finished_at: None,
                }),
                Block::Data(DataBlock {
                    id: "b2".into(),
                    source: Source::Base64 {
                        data: "AAE=".into(),
                        media_type: "image/png".into(),
                    },
                    name: None,
                    created_at: "t".into(),
                    finished_at: None,
                }),
            ],
            state: ToolState::Running,
            is_last: true,
            metadata: JsonObject::new(),
            id: "c".into(),
        };
        let text = serde_json::to_string(&chunk).unwrap();
        assert_eq!(
            text,
            r#"{"content":[{"type":"text","text":"hi","id":"b1","created_at":"2026-01-01T00:00:00.000000","finished_at":null},{"type":"data","id":"b2","source":{"type":"base64","data":"AAE=","media_type":"image/png"},"name":null,"created_at":"t","finished_at":null}],"state":"running","is_last":true,"metadata":{},"id":"c"}"#
        );
        assert_eq!(serde_json::from_str::<ToolChunk>(&text).unwrap(), chunk);
    }
}
