//! Tool definitions and the transport-independent parts of the tools.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{ContentBlock, JsonObject, Resource, ResourceContents, Tool};
use serde_json::{Map, Number, Value, json};

/// Largest result `big` produces, so a typo cannot exhaust the machine.
pub const BIG_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// What `big` repeats; a result of n bytes is this pattern cut at n.
pub const BIG_PATTERN: &str = "0123456789abcdef";

/// A 1x1 RGBA PNG (one half-transparent green pixel), base64.
pub const TINY_PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// The line `garbage` puts on stdout between two JSON-RPC messages.
pub const GARBAGE_LINE: &str = "this is not json {{{\n";

/// URI of `media`'s embedded text resource.
pub const TEXT_RESOURCE_URI: &str = "test://resource/text";
/// URI of `media`'s embedded blob resource.
pub const BLOB_RESOURCE_URI: &str = "test://resource/blob";
/// URI of `media`'s resource link.
pub const LINK_RESOURCE_URI: &str = "test://resource/link";

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("tool schemas are JSON objects"),
    }
}

fn no_arguments() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}, "additionalProperties": false}))
}

/// The tools `tools/list` returns; `extra` only while it is enabled.
pub fn tool_list(extra: bool) -> Vec<Tool> {
    let mut tools = vec![
        Tool::new(
            "echo",
            "Returns `text` unchanged as one text content.",
            schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string", "description": "Text to return"}},
                "required": ["text"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "echo_json",
            "Returns the arguments object as compact JSON text and as structuredContent, \
             to check that arguments arrive byte for byte.",
            schema(json!({"type": "object", "additionalProperties": true})),
        ),
        Tool::new(
            "add",
            "Adds and multiplies two numbers; the result is structured ({sum, product}) and also given as JSON text.",
            schema(json!({
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First operand"},
                    "b": {"type": "number", "description": "Second operand"}
                },
                "required": ["a", "b"],
                "additionalProperties": false
            })),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "sum": {"type": "number", "description": "a + b"},
                "product": {"type": "number", "description": "a * b"}
            },
            "required": ["sum", "product"],
            "additionalProperties": false
        }))),
        Tool::new(
            "media",
            "Returns, in order: a PNG image, a WAV audio clip, an embedded text resource, \
             an embedded blob resource (bytes 0..=255) and a resource link.",
            no_arguments(),
        ),
        Tool::new(
            "fail",
            "Returns a tool error (isError: true) whose only content is `message`.",
            schema(json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "Error text", "default": "tool failed"}
                },
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "slow",
            "Sleeps `seconds`, sending `steps` progress notifications evenly spread when the request \
             has a progressToken. Stops at once on notifications/cancelled, logs it to stderr and \
             writes `cancelled` into `cancel_marker` when given.",
            schema(json!({
                "type": "object",
                "properties": {
                    "seconds": {"type": "number", "minimum": 0, "maximum": 3600, "description": "Total duration"},
                    "steps": {"type": "integer", "minimum": 0, "maximum": 10000, "default": 5, "description": "Number of progress steps"},
                    "cancel_marker": {"type": "string", "description": "File created (text `cancelled`) when the call is cancelled"}
                },
                "required": ["seconds"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "change_tools",
            "Toggles the tool `extra` on or off and sends notifications/tools/list_changed.",
            no_arguments(),
        ),
        Tool::new(
            "big",
            "Returns one text content of exactly `bytes` bytes (`0123456789abcdef` repeated, cut to length), at most 64 MiB.",
            schema(json!({
                "type": "object",
                "properties": {
                    "bytes": {"type": "integer", "minimum": 0, "maximum": BIG_MAX_BYTES, "description": "Length of the text"}
                },
                "required": ["bytes"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "crash",
            "Writes `message` to stderr and exits the process with `code`, without answering.",
            schema(json!({
                "type": "object",
                "properties": {
                    "code": {"type": "integer", "minimum": 0, "maximum": 255, "default": 3, "description": "Exit code"},
                    "message": {"type": "string", "default": "crashing on purpose", "description": "Written to stderr"}
                },
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "garbage",
            "Over stdio, writes a line that is not JSON to stdout before answering `ok after garbage`.",
            no_arguments(),
        ),
        Tool::new(
            "info",
            "Returns {pid, cwd, env (only MCPGW_TEST_* variables), args} of the server process.",
            no_arguments(),
        ),
        Tool::new(
            "headers",
            "Returns the HTTP request headers of this call (lowercased names); {} over stdio.",
            no_arguments(),
        ),
        Tool::new(
            "confirm",
            "2026-07-28 multi round-trip: answers input_required asking `confirm` (a form \
             elicitation of {ok}) and `summary` (a sampling), then `roots` (roots/list), then \
             {action, confirmed: true, answer, summary, roots}; {action, confirmed: false} when \
             the elicitation is not accepted.",
            schema(json!({
                "type": "object",
                "properties": {"action": {"type": "string", "description": "What to confirm"}},
                "required": ["action"],
                "additionalProperties": false
            })),
        ),
        Tool::new(
            "task",
            "Returns `text` after `ms`: as a task (tasks/get, tasks/cancel) when the request \
             declared the io.modelcontextprotocol/tasks extension, else inline.",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0, "maximum": 600000, "default": 0, "description": "How long it works"},
                    "text": {"type": "string", "default": "done", "description": "The result's text"}
                },
                "additionalProperties": false
            })),
        ),
    ];
    if extra {
        tools.push(Tool::new(
            "extra",
            "Present only after change_tools enabled it; returns `extra`.",
            no_arguments(),
        ));
    }
    tools
}

/// A tool's arguments, with typed accessors whose errors name the argument.
pub struct Args<'a>(pub &'a Map<String, Value>);

impl Args<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// An optional string argument.
    pub fn str(&self, name: &str) -> Result<Option<&str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("argument `{name}` must be a string")),
        }
    }

    /// An optional number argument.
    pub fn number(&self, name: &str) -> Result<Option<&Number>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(Some(n)),
            Some(_) => Err(format!("argument `{name}` must be a number")),
        }
    }

    /// An optional integer argument within `min..=max`.
    pub fn integer(&self, name: &str, min: i64, max: i64) -> Result<Option<i64>, String> {
        let Some(n) = self.number(name)? else {
            return Ok(None);
        };
        // Accept 5.0 as well as 5: JSON does not tell them apart.
        let value = n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9e15)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| format!("argument `{name}` must be an integer"))?;
        if !(min..=max).contains(&value) {
            return Err(format!("argument `{name}` must be between {min} and {max}"));
        }
        Ok(Some(value))
    }

    /// Turns an absent argument into an error naming it.
    pub fn required<T>(value: Result<Option<T>, String>, name: &str) -> Result<T, String> {
        value?.ok_or_else(|| format!("missing required argument `{name}`"))
    }
}

/// `{"sum": a+b, "product": a*b}`, as integers when both operands are integers and the results fit.
pub fn add(a: &Number, b: &Number) -> Result<Value, String> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64())
        && let (Some(sum), Some(product)) = (x.checked_add(y), x.checked_mul(y))
    {
        return Ok(json!({"sum": sum, "product": product}));
    }
    let (x, y) = (number_as_f64(a), number_as_f64(b));
    let finite = |v: f64, what: &str| {
        Number::from_f64(v).ok_or_else(|| format!("the {what} is not a finite number"))
    };
    Ok(json!({"sum": finite(x + y, "sum")?, "product": finite(x * y, "product")?}))
}

fn number_as_f64(n: &Number) -> f64 {
    n.as_f64().unwrap_or(f64::NAN)
}

/// Exactly `len` bytes of the repeating pattern.
pub fn big_text(len: usize) -> String {
    let mut text = BIG_PATTERN.repeat(len / BIG_PATTERN.len() + 1);
    text.truncate(len);
    text
}

/// A valid 8 kHz mono 8-bit PCM WAV file, 16 samples of a square wave.
pub fn tiny_wav() -> Vec<u8> {
    let samples: Vec<u8> = (0..16)
        .map(|i| if i % 4 < 2 { 0xC0 } else { 0x40 })
        .collect();
    let sample_rate: u32 = 8000;
    let (channels, bits): (u16, u16) = (1, 8);
    let block_align = channels * bits / 8;
    let byte_rate = sample_rate * u32::from(block_align);
    let data_len = samples.len() as u32;
    let mut wav = Vec::with_capacity(44 + samples.len());
    wav.extend_from_slice(b"RIFF");
    wav.extend_from_slice(&(36 + data_len).to_le_bytes());
    wav.extend_from_slice(b"WAVEfmt ");
    wav.extend_from_slice(&16u32.to_le_bytes());
    wav.extend_from_slice(&1u16.to_le_bytes()); // PCM
    wav.extend_from_slice(&channels.to_le_bytes());
    wav.extend_from_slice(&sample_rate.to_le_bytes());
    wav.extend_from_slice(&byte_rate.to_le_bytes());
    wav.extend_from_slice(&block_align.to_le_bytes());
    wav.extend_from_slice(&bits.to_le_bytes());
    wav.extend_from_slice(b"data");
    wav.extend_from_slice(&data_len.to_le_bytes());
    wav.extend_from_slice(&samples);
    wav
}

/// Bytes 0..=255, the payload of the blob resource.
pub fn blob_bytes() -> Vec<u8> {
    (0..=255u8).collect()
}

/// The content of `media`, in the documented order.
pub fn media_content() -> Vec<ContentBlock> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    vec![
        ContentBlock::image(TINY_PNG_BASE64, "image/png"),
        ContentBlock::audio(b64.encode(tiny_wav()), "audio/wav"),
        ContentBlock::resource(ResourceContents::text("hello resource", TEXT_RESOURCE_URI)),
        ContentBlock::resource(
            ResourceContents::blob(b64.encode(blob_bytes()), BLOB_RESOURCE_URI)
                .with_mime_type("application/octet-stream"),
        ),
        ContentBlock::resource_link(
            Resource::new(LINK_RESOURCE_URI, "linked").with_mime_type("text/plain"),
        ),
    ]
}

/// `info`'s answer: `env` holds only variables whose name starts with `MCPGW_TEST_`.
pub fn process_info() -> Value {
    let env: Map<String, Value> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            k.starts_with("MCPGW_TEST_")
                .then(|| (k, Value::String(v.to_string_lossy().into_owned())))
        })
        .collect();
    let cwd = std::env::current_dir()
        .map(|p| Value::String(p.to_string_lossy().into_owned()))
        .unwrap_or(Value::Null);
    let args: Vec<Value> = std::env::args_os()
        .map(|a| Value::String(a.to_string_lossy().into_owned()))
        .collect();
    json!({"pid": std::process::id(), "cwd": cwd, "env": env, "args": args})
}

/// HTTP headers as a JSON object; a repeated header's values are joined with `, `.
pub fn headers_json(headers: &http::HeaderMap) -> Value {
    let mut out = Map::new();
    for name in headers.keys() {
        let joined = headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", ");
        out.insert(name.as_str().to_owned(), Value::String(joined));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    #[test]
    fn png_is_well_formed() {
        let png = base64::engine::general_purpose::STANDARD
            .decode(TINY_PNG_BASE64)
            .unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let mut at = 8;
        let mut kinds = Vec::new();
        while at < png.len() {
            let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
            let kind_and_body = &png[at + 4..at + 8 + len];
            let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
            assert_eq!(crc, crc32(kind_and_body), "chunk CRC");
            kinds.push(String::from_utf8(kind_and_body[..4].to_vec()).unwrap());
            at += 12 + len;
        }
        assert_eq!(at, png.len());
        assert_eq!(kinds, ["IHDR", "IDAT", "IEND"]);
        // IHDR: 1x1, 8-bit RGBA.
        assert_eq!(&png[16..26], &[0, 0, 0, 1, 0, 0, 0, 1, 8, 6]);
    }

    #[test]
    fn wav_header_is_consistent() {
        let wav = tiny_wav();
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(
            u32::from_le_bytes(wav[4..8].try_into().unwrap()) as usize,
            wav.len() - 8
        );
        assert_eq!(&wav[8..16], b"WAVEfmt ");
        assert_eq!(&wav[36..40], b"data");
        assert_eq!(
            u32::from_le_bytes(wav[40..44].try_into().unwrap()) as usize,
            wav.len() - 44
        );
    }

    #[test]
    fn big_text_has_exact_length() {
        for len in [0, 1, 15, 16, 17, 1000, 1 << 20] {
            let text = big_text(len);
            assert_eq!(text.len(), len);
            assert_eq!(text, "0123456789abcdef".repeat(len / 16 + 1)[..len]);
        }
    }

    #[test]
    fn add_keeps_integers_integral() {
        let n = |v: Value| match v {
            Value::Number(n) => n,
            _ => unreachable!(),
        };
        assert_eq!(
            add(&n(json!(2)), &n(json!(3))).unwrap(),
            json!({"sum": 5, "product": 6})
        );
        assert_eq!(
            add(&n(json!(1.5)), &n(json!(2))).unwrap(),
            json!({"sum": 3.5, "product": 3.0})
        );
        // i64 overflow falls back to floating point instead of wrapping.
        let sum = add(&n(json!(i64::MAX)), &n(json!(1))).unwrap();
        assert!(sum["sum"].is_f64());
        assert!(add(&n(json!(1e308)), &n(json!(1e308))).is_err());
    }

    #[test]
    fn integer_arguments() {
        let map = json!({"a": 5, "b": 5.0, "c": 5.5, "d": "5", "e": -1, "n": null});
        let Value::Object(map) = map else {
            unreachable!()
        };
        let args = Args(&map);
        assert_eq!(args.integer("a", 0, 10), Ok(Some(5)));
        assert_eq!(args.integer("b", 0, 10), Ok(Some(5)));
        assert!(args.integer("c", 0, 10).is_err());
        assert!(args.integer("d", 0, 10).is_err());
        assert!(args.integer("e", 0, 10).is_err());
        assert_eq!(args.integer("n", 0, 10), Ok(None));
        assert_eq!(args.integer("missing", 0, 10), Ok(None));
        assert!(Args::required(args.integer("missing", 0, 10), "missing").is_err());
    }

    #[test]
    fn media_order_and_payloads() {
        let content = serde_json::to_value(media_content()).unwrap();
        let kinds: Vec<&str> = content
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["image", "audio", "resource", "resource", "resource_link"]
        );
        assert_eq!(content[2]["resource"]["text"], "hello resource");
        assert_eq!(content[2]["resource"]["mimeType"], "text/plain");
        let blob = content[3]["resource"]["blob"].as_str().unwrap();
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(blob)
                .unwrap(),
            blob_bytes()
        );
        assert_eq!(content[4]["name"], "linked");
    }

    #[test]
    fn tool_names() {
        let names = |extra| -> Vec<String> {
            tool_list(extra)
                .into_iter()
                .map(|t| t.name.into_owned())
                .collect()
        };
        assert_eq!(names(false).len(), 14);
        assert_eq!(names(true).last().unwrap(), "extra");
        assert!(tool_list(false).iter().all(|t| t.description.is_some()));
    }

    #[test]
    fn repeated_headers_are_joined() {
        let mut headers = http::HeaderMap::new();
        headers.append("x-a", "1".parse().unwrap());
        headers.append("x-a", "2".parse().unwrap());
        headers.append("X-B", "b".parse().unwrap());
        assert_eq!(headers_json(&headers), json!({"x-a": "1, 2", "x-b": "b"}));
    }
}
