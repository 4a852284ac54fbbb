//! MCP `CallToolResult` -> AgentScope `ToolChunk`, working on the JSON the upstream sent, so the
//! mapping follows the MCP spec rather than one SDK's types.

use std::time::SystemTime;

use mcpgw::random::uuid4_hex;
use mcpgw::wire::chunk::{ERROR_KEY, PROGRESS_KEY, STRUCTURED_CONTENT_KEY};
use mcpgw::wire::{Block, DataBlock, JsonObject, Source, TextBlock, ToolChunk, ToolState};
use serde_json::{Value, json};

/// Maps one `CallToolResult`:
/// - text -> text block; image and audio -> base64 data block;
/// - embedded text resource -> text block holding the resource as indented JSON (as AgentScope
///   writes it); embedded blob resource -> base64 data block (AgentScope drops it);
/// - resource link -> URL data block carrying the link's name;
/// - `isError` -> state `error`, otherwise `running` with `is_last: true` (AgentScope's choice);
/// - `structuredContent` -> `metadata.structured_content`, and as a text block when the result
///   has no text (AgentScope's fallback, so a structured-only tool still says something).
pub fn from_call_result(mut result: Value) -> ToolChunk {
    let now = timestamp();
    let mut content = Vec::new();
    if let Some(Value::Array(items)) = result.get_mut("content").map(Value::take) {
        content.extend(
            items
                .into_iter()
                .filter_map(|item| block_from_content(item, &now)),
        );
    }
    let mut metadata = JsonObject::new();
    if let Some(structured) = result
        .get_mut("structuredContent")
        .map(Value::take)
        .filter(|v| !v.is_null())
    {
        if !content.iter().any(|b| matches!(b, Block::Text(_))) {
            content.push(text_block(python_json(&structured), &now));
        }
        metadata.insert(STRUCTURED_CONTENT_KEY.into(), structured);
    }
    let is_error = result
        .get("isError")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    ToolChunk {
        content,
        state: if is_error {
            ToolState::Error
        } else {
            ToolState::Running
        },
        is_last: true,
        metadata,
        id: uuid4_hex(),
    }
}

/// The chunk of a `CallToolResult` as the upstream sent it (the call checked it is a JSON
/// object).
pub fn from_raw_result(raw: &serde_json::value::RawValue) -> ToolChunk {
    from_call_result(serde_json::from_str(raw.get()).unwrap_or_default())
}

/// A progress chunk of a streamed call: no content, `is_last: false`, and the progress under
/// AgentScope's reserved `mcp_progress` key, which its `ToolResponse` does not accumulate.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) -> ToolChunk {
    let mut metadata = JsonObject::new();
    metadata.insert(
        PROGRESS_KEY.into(),
        json!({"progress": progress, "total": total, "message": message}),
    );
    ToolChunk {
        content: Vec::new(),
        state: ToolState::Running,
        is_last: false,
        metadata,
        id: uuid4_hex(),
    }
}

/// The progress chunk of an upstream progress notification.
pub fn progress_of(p: &crate::upstream::hub::Progress) -> ToolChunk {
    progress(p.progress, p.total, p.message.as_deref())
}

/// A chunk as one NDJSON line.
pub fn ndjson(chunk: &ToolChunk) -> bytes::Bytes {
    let mut line = serde_json::to_vec(chunk).expect("wire types serialize");
    line.push(b'\n');
    line.into()
}

/// The last chunk of a streamed call that failed after progress was sent: state `error`, the
/// detail as text, and `{"status", "detail"}` under `metadata.error`.
pub fn failure(status: u16, detail: &str) -> ToolChunk {
    let mut metadata = JsonObject::new();
    metadata.insert(
        ERROR_KEY.into(),
        json!({"status": status, "detail": detail}),
    );
    ToolChunk {
        content: vec![text_block(detail.to_string(), &timestamp())],
        state: ToolState::Error,
        is_last: true,
        metadata,
        id: uuid4_hex(),
    }
}

fn text_block(text: String, now: &str) -> Block {
    Block::Text(TextBlock {
        text,
        id: uuid4_hex(),
        created_at: now.to_string(),
        finished_at: None,
    })
}

fn data_block(source: Source, name: Option<String>, now: &str) -> Block {
    Block::Data(DataBlock {
        id: uuid4_hex(),
        source,
        name,
        created_at: now.to_string(),
        finished_at: None,
    })
}

/// Moves a string field out of `v` (results can be megabytes: they are not copied).
fn take_str(v: &mut Value, key: &str) -> Option<String> {
    match v.get_mut(key).map(Value::take) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

fn media_type(v: &mut Value) -> String {
    take_str(v, "mimeType").unwrap_or_else(|| "application/octet-stream".into())
}

fn block_from_content(mut item: Value, now: &str) -> Option<Block> {
    match take_str(&mut item, "type")?.as_str() {
        "text" => Some(text_block(take_str(&mut item, "text")?, now)),
        "image" | "audio" => Some(data_block(
            Source::Base64 {
                data: take_str(&mut item, "data")?,
                media_type: media_type(&mut item),
            },
            None,
            now,
        )),
        "resource" => {
            let mut resource = item.get_mut("resource")?.take();
            if let Some(text) = take_str(&mut resource, "text") {
                // The field names and order of the Python SDK's model dump, which AgentScope
                // puts in the text.
                let field = |r: &mut Value, k: &str| r.get_mut(k).map_or(Value::Null, Value::take);
                let dump = json!({
                    "uri": field(&mut resource, "uri"),
                    "mime_type": field(&mut resource, "mimeType"),
                    "meta": field(&mut resource, "_meta"),
                    "text": text,
                });
                let pretty = serde_json::to_string_pretty(&dump).unwrap_or_default();
                Some(text_block(pretty, now))
            } else {
                Some(data_block(
                    Source::Base64 {
                        data: take_str(&mut resource, "blob")?,
                        media_type: media_type(&mut resource),
                    },
                    take_str(&mut resource, "uri"),
                    now,
                ))
            }
        }
        "resource_link" => Some(data_block(
            Source::Url {
                url: take_str(&mut item, "uri")?,
                media_type: media_type(&mut item),
            },
            take_str(&mut item, "name"),
            now,
        )),
        other => {
            tracing::warn!("skipping MCP content of unknown type {other:?}");
            None
        }
    }
}

/// JSON text as Python's `json.dumps(value, ensure_ascii=False)` writes it (`", "` and `": "`
/// separators), so the fallback text is the same bytes AgentScope would produce.
fn python_json(value: &Value) -> String {
    struct PythonFormatter;
    impl serde_json::ser::Formatter for PythonFormatter {
        fn begin_array_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_key<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
            first: bool,
        ) -> std::io::Result<()> {
            if first { Ok(()) } else { w.write_all(b", ") }
        }
        fn begin_object_value<W: ?Sized + std::io::Write>(
            &mut self,
            w: &mut W,
        ) -> std::io::Result<()> {
            w.write_all(b": ")
        }
    }
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    serde::Serialize::serialize(value, &mut ser).expect("a JSON value always serializes");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.ffffff`, the shape of Python's
/// `datetime.isoformat()` that AgentScope stamps blocks with.
pub fn timestamp() -> String {
    timestamp_of(SystemTime::now())
}

fn timestamp_of(time: SystemTime) -> String {
    let (text, micros) = mcpgw::civil::utc(time);
    format!("{text}.{micros:06}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_match_python_isoformat() {
        let at = |secs: u64, micros: u64| {
            timestamp_of(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_micros(micros))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000000");
        assert_eq!(at(1_798_680_225, 123_456), "2026-12-31T01:23:45.123456");
        assert_eq!(at(951_782_400, 1), "2000-02-29T00:00:00.000001");
    }

    #[test]
    fn maps_every_content_kind() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "iVBO", "mimeType": "image/png"},
                {"type": "audio", "data": "UklG", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "hi"}},
                {"type": "resource", "resource": {"uri": "test://b", "mimeType": "application/x", "blob": "AAE="}},
                {"type": "resource_link", "uri": "test://l", "name": "linked", "mimeType": "text/plain"},
                {"type": "hologram"}
            ],
            "structuredContent": {"sum": 3}
        });
        let chunk = from_call_result(result);
        assert_eq!(chunk.state, ToolState::Running);
        assert!(chunk.is_last);
        assert_eq!(chunk.content.len(), 6);
        assert_eq!(chunk.metadata["structured_content"], json!({"sum": 3}));
        let Block::Text(t) = &chunk.content[3] else {
            panic!()
        };
        assert_eq!(
            t.text,
            "{\n  \"uri\": \"test://t\",\n  \"mime_type\": \"text/plain\",\n  \"meta\": null,\n  \"text\": \"hi\"\n}"
        );
        let Block::Data(b) = &chunk.content[4] else {
            panic!()
        };
        assert_eq!(
            b.source,
            Source::Base64 {
                data: "AAE=".into(),
                media_type: "application/x".into()
            }
        );
        let Block::Data(l) = &chunk.content[5] else {
            panic!()
        };
        assert_eq!(l.name.as_deref(), Some("linked"));
        assert!(matches!(&l.source, Source::Url { url, .. } if url == "test://l"));
    }

    #[test]
    fn errors_and_structured_only_results() {
        let chunk = from_call_result(
            json!({"content": [{"type": "text", "text": "bad"}], "isError": true}),
        );
        assert_eq!(chunk.state, ToolState::Error);
        let chunk = from_call_result(json!({"content": [], "structuredContent": {"a": [1]}}));
        let Block::Text(t) = &chunk.content[0] else {
            panic!()
        };
        assert_eq!(t.text, r#"{"a": [1]}"#);
        let nested = json!({"k": {"x": [1, "é", null]}, "z": true});
        assert_eq!(
            python_json(&nested),
            r#"{"k": {"x": [1, "é", null]}, "z": true}"#
        );
        let chunk = from_call_result(json!({"content": [], "structuredContent": null}));
        assert!(chunk.content.is_empty() && chunk.metadata.is_empty());
    }
}
