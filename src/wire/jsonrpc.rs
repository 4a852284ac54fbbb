//! JSON-RPC 2.0 messages as MCP carries them, read and written without touching what they
//! carry: a message is classified from its envelope (`id`, `method`, `result`, `error`) and
//! its `params`, `result` or `error` stay the exact bytes the peer sent. The gateway relays
//! virtual MCP connections with these (ids remapped, everything else as it came); the fuzz
//! targets run them on any input.
//!
//! Also the protocol revisions the gateway speaks and the `_meta` keys of the 2026-07-28
//! revision, which carry per request what earlier revisions negotiated once.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The newest revision: stateless, no `initialize` (every request carries its version and
/// capabilities in `_meta`), `server/discover`, multi round-trip requests.
pub const MODERN: &str = "2026-07-28";

/// Revisions with an `initialize` handshake, newest first.
pub const LEGACY: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Whether `version` names a revision this implementation speaks ([`MODERN`] or one of
/// [`LEGACY`]); a version header naming any other is refused (HTTP 400).
pub fn is_known_revision(version: &str) -> bool {
    version == MODERN || LEGACY.contains(&version)
}

/// Whether `version` is a revision without `initialize` (2026-07-28 or later; revisions
/// compare as their dates do).
pub fn is_modern(version: &str) -> bool {
    version >= MODERN
}

/// `_meta` key: the revision a request uses (2026-07-28).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for a request (2026-07-28).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's name and version (2026-07-28).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the log level a request asks for (2026-07-28).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: the `subscriptions/listen` request a notification belongs to (2026-07-28).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key: the server's name and version in a result (2026-07-28).
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key the host endpoint sets on a `tools/call` it took over HTTP without a session:
/// the request's `Mcp-Param-*` headers (SEP-2243), `{"<name, lowercase>": "<value as sent>"}`,
/// for the gateway to check against the tool's `x-mcp-header` parameters. The gateway takes it
/// off before the request goes on.
pub const META_PARAM_HEADERS: &str = "io.mcpgw/paramHeaders";
/// The key of the tasks extension (SEP-2663) in a capabilities' `extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// MCP's method names, one constant each: what the gateway and the endpoint match on and
/// write (as [`crate::wire::rest::route`] is for the REST paths).
pub mod method {
    /// The handshake of the revisions before 2026-07-28.
    pub const INITIALIZE: &str = "initialize";
    /// The client's answer to the handshake.
    pub const INITIALIZED: &str = "notifications/initialized";
    /// Liveness.
    pub const PING: &str = "ping";
    /// 2026-07-28: what a server offers, in place of the handshake.
    pub const DISCOVER: &str = "server/discover";
    /// The log level a client asks for.
    pub const SET_LEVEL: &str = "logging/setLevel";
    /// Tools.
    pub const TOOLS_LIST: &str = "tools/list";
    /// A tool call.
    pub const TOOLS_CALL: &str = "tools/call";
    /// Resources.
    pub const RESOURCES_LIST: &str = "resources/list";
    /// Resource templates.
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    /// A resource's contents.
    pub const RESOURCES_READ: &str = "resources/read";
    /// Updates of a resource, asked for.
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    /// Updates of a resource, no longer asked for.
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    /// Prompts.
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// A prompt.
    pub const PROMPTS_GET: &str = "prompts/get";
    /// Completions of an argument.
    pub const COMPLETE: &str = "completion/complete";
    /// 2026-07-28: the stream of a client's subscriptions.
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
    /// A task's state.
    pub const TASKS_GET: &str = "tasks/get";
    /// Input for a task.
    pub const TASKS_UPDATE: &str = "tasks/update";
    /// A task cancelled.
    pub const TASKS_CANCEL: &str = "tasks/cancel";
    /// A request cancelled.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// Progress of a request.
    pub const PROGRESS: &str = "notifications/progress";
    /// A log message of the server's.
    pub const MESSAGE: &str = "notifications/message";
    /// A subscribed resource changed.
    pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    /// The server's tools changed.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// The server's resources changed.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// The server's prompts changed.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// A server's request for a model's completion.
    pub const CREATE_MESSAGE: &str = "sampling/createMessage";
    /// A server's request for the user's input.
    pub const ELICIT: &str = "elicitation/create";
    /// A server's request for the client's roots.
    pub const ROOTS_LIST: &str = "roots/list";
}

/// The params member a 2026-07-28 request's `Mcp-Name` header carries, for the methods that
/// have one: the tool's or prompt's `name`, the resource's `uri`, the task's `taskId`.
pub fn mcp_name_member(method: &str) -> Option<&'static str> {
    match method {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE | method::RESOURCES_UNSUBSCRIBE => {
            Some("uri")
        }
        method::TASKS_GET | method::TASKS_UPDATE | method::TASKS_CANCEL => Some("taskId"),
        _ => None,
    }
}

/// The methods of the 2025 revisions that 2026-07-28 removed: a request of 2026-07-28 for one
/// is answered `METHOD_NOT_FOUND` (over HTTP with 404).
pub const REMOVED_IN_MODERN: [&str; 5] = [
    method::INITIALIZE,
    method::PING,
    method::SET_LEVEL,
    method::RESOURCES_SUBSCRIBE,
    method::RESOURCES_UNSUBSCRIBE,
];

/// A header value as 2026-07-28 carries names and tool parameters (`Mcp-Name`,
/// `Mcp-Param-*`): the text itself when it is visible ASCII without spaces at its ends (and
/// could not be read as the encoded form), else `=?base64?B64?=`, B64 the standard base64 of
/// its UTF-8.
pub fn header_value(text: &str) -> String {
    use base64::Engine as _;
    let plain = !text.is_empty()
        && text.trim() == text
        && !(text.starts_with("=?base64?") && text.ends_with("?="))
        && text
            .bytes()
            .all(|b| b == b'\t' || (0x20..0x7f).contains(&b));
    if plain {
        text.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }
}

/// The text a [`header_value`] carries: `=?base64?B64?=` decoded (padded standard base64 of
/// UTF-8 text), anything else as it is; `Err` naming what is wrong with an encoded form that
/// does not decode.
pub fn header_text(raw: &str) -> Result<String, String> {
    use base64::Engine as _;
    let Some(b64) = raw
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    else {
        return Ok(raw.to_string());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("its =?base64?...?= value is not valid base64 ({e})"))?;
    String::from_utf8(bytes).map_err(|_| "its base64 value is not UTF-8 text".to_string())
}

/// Every revision this implementation speaks, newest first: what `server/discover` lists and
/// what an `UNSUPPORTED_PROTOCOL_VERSION` error's `data.supported` names.
pub fn supported_revisions() -> Vec<&'static str> {
    let mut all = vec![MODERN];
    all.extend(LEGACY);
    all
}

/// JSON-RPC's error codes, and MCP's.
pub mod code {
    /// The text is not JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The receiver failed.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The host endpoint (`mcpgw mcp`): the endpoint or the sandbox failed the request (the
    /// sandbox cannot be reached, the server cannot start, the channel was lost), the message
    /// naming why.
    pub const SANDBOX_ERROR: i64 = -32000;
    /// The host endpoint over HTTP: no such session (it ended, or the endpoint restarted).
    pub const SESSION_NOT_FOUND: i64 = -32001;
    /// 2026-07-28 over HTTP: a request header (`MCP-Protocol-Version`, `Mcp-Method`,
    /// `Mcp-Name`) does not match the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// 2026-07-28: a capability the request needs was not declared.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// 2026-07-28: the requested revision is not supported.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A request id: a JSON number or string, as its sender wrote it.
pub type Id<'a> = &'a RawValue;

/// One JSON-RPC message, borrowed from its text.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    /// A request: an answer is expected under `id`.
    Request {
        /// Its id.
        id: Id<'a>,
        /// The method.
        method: &'a str,
        /// Its parameters, untouched.
        params: Option<&'a RawValue>,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: &'a str,
        /// Its parameters, untouched.
        params: Option<&'a RawValue>,
    },
    /// The answer to request `id`.
    Response {
        /// The request's id.
        id: Id<'a>,
        /// `result` (Ok) or `error` (Err), untouched.
        outcome: Result<&'a RawValue, &'a RawValue>,
    },
}

/// Why a text is not a JSON-RPC message: the JSON-RPC error to answer it with, and the id it
/// carried when that could be read.
#[derive(Debug, Clone)]
pub struct Invalid<'a> {
    /// The request's id, when it had a valid one.
    pub id: Option<Id<'a>>,
    /// [`code::PARSE_ERROR`] or [`code::INVALID_REQUEST`].
    pub code: i64,
    /// What is wrong.
    pub message: String,
}

impl Invalid<'_> {
    /// The error response that answers the text: to its id when it had one, else to `null`.
    pub fn answer(&self) -> String {
        error_response(self.id.map(RawValue::get), self.code, &self.message)
    }
}

/// The text an id or a progress token is known by: as its sender wrote it, unless a string
/// with escapes (which a peer that reads and writes it again writes without them).
pub fn id_key(raw: &RawValue) -> Cow<'_, str> {
    let text = raw.get();
    if !text.contains('\\') {
        return Cow::Borrowed(text);
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => Cow::Owned(v.to_string()),
        Err(_) => Cow::Borrowed(text),
    }
}

#[derive(Deserialize)]
struct Token<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    token: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct WithMeta<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Token<'a>>,
}

/// The `progressToken` a request's `params._meta` carries, as written.
pub fn request_progress_token(params: Option<&RawValue>) -> Option<&RawValue> {
    serde_json::from_str::<WithMeta<'_>>(params?.get())
        .ok()?
        .meta?
        .token
}

/// The `progressToken` of a `notifications/progress`'s `params`, as written.
pub fn progress_token(params: Option<&RawValue>) -> Option<&RawValue> {
    serde_json::from_str::<Token<'_>>(params?.get()).ok()?.token
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow)]
    method: Option<&'a RawValue>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default, borrow)]
    result: Option<&'a RawValue>,
    #[serde(default, borrow)]
    error: Option<&'a RawValue>,
}

/// A member that is there, even as `null` (which `Option` alone would read as absent).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

fn valid_id(raw: &RawValue) -> bool {
    let text = raw.get();
    text.starts_with('"') || text.starts_with('-') || text.as_bytes()[0].is_ascii_digit()
}

/// Reads one message (a JSON object; batches are not part of MCP).
pub fn parse(text: &str) -> Result<Message<'_>, Invalid<'_>> {
    let text = text.trim_end_matches(['\n', '\r']);
    let envelope: Envelope<'_> = match serde_json::from_str(text) {
        Ok(e) => e,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err(Invalid {
                id: None,
                code: code::PARSE_ERROR,
                message: format!("not JSON: {e}"),
            });
        }
        Err(e) => {
            return Err(Invalid {
                id: None,
                code: code::INVALID_REQUEST,
                message: format!("not a JSON-RPC message (one JSON object): {e}"),
            });
        }
    };
    let id = envelope.id.filter(|id| valid_id(id));
    let invalid = |message: String| Invalid {
        id,
        code: code::INVALID_REQUEST,
        message,
    };
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\"".into()));
    }
    if let Some(raw) = envelope.id
        && !valid_id(raw)
    {
        return Err(invalid(format!(
            "an id must be a number or a string, not {}",
            crate::wire::frame::quoted(raw.get())
        )));
    }
    if let Some(params) = envelope.params
        && !(params.get().starts_with('{') || params.get().starts_with('['))
    {
        return Err(invalid("\"params\" must be an object or an array".into()));
    }
    match (envelope.method, envelope.result, envelope.error) {
        (Some(method), None, None) => {
            let method: &str = match serde_json::from_str::<&str>(method.get()) {
                Ok(m) => m,
                // A method name with escapes is not one MCP defines.
                Err(_) => return Err(invalid("\"method\" must be a plain string".into())),
            };
            Ok(match id {
                Some(id) => Message::Request {
                    id,
                    method,
                    params: envelope.params,
                },
                None => Message::Notification {
                    method,
                    params: envelope.params,
                },
            })
        }
        (None, Some(result), None) => match id {
            Some(id) => Ok(Message::Response {
                id,
                outcome: Ok(result),
            }),
            None => Err(invalid("a response needs the id of its request".into())),
        },
        (None, None, Some(error)) => match id {
            Some(id) => Ok(Message::Response {
                id,
                outcome: Err(error),
            }),
            // An error about a message whose id could not be read answers no request.
            None => Err(invalid(
                "an error response without an id answers nothing".into(),
            )),
        },
        _ => Err(invalid(
            "a message has a \"method\" (request, notification), a \"result\" or an \"error\" \
             (response), and only one of them"
                .into(),
        )),
    }
}

/// The error object `{"code":..,"message":..}` (with `data` when given) as JSON text.
pub fn error_object(code: i64, message: &str, data: Option<&serde_json::Value>) -> Box<RawValue> {
    let value = match data {
        Some(data) => serde_json::json!({"code": code, "message": message, "data": data}),
        None => serde_json::json!({"code": code, "message": message}),
    };
    serde_json::value::to_raw_value(&value).expect("an error object serializes")
}

/// The `code` and `message` of an error object, as far as they can be read.
pub fn error_parts(error: &RawValue) -> (i64, String) {
    #[derive(Deserialize)]
    struct Parts {
        #[serde(default)]
        code: i64,
        #[serde(default)]
        message: String,
    }
    serde_json::from_str::<Parts>(error.get())
        .map_or_else(|_| (0, error.get().to_string()), |p| (p.code, p.message))
}

/// Appends `"{key}":` to a JSON object being written.
fn key(out: &mut Vec<u8>, name: &str) {
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// A request as one JSON text (no newline).
pub fn request(id: &str, method: &str, params: Option<&str>) -> String {
    call(Some(id), method, params)
}

/// A notification as one JSON text (no newline).
pub fn notification(method: &str, params: Option<&str>) -> String {
    call(None, method, params)
}

/// A request (with an id) or a notification.
fn call(id: Option<&str>, method: &str, params: Option<&str>) -> String {
    let mut out = Vec::with_capacity(64 + params.map_or(0, str::len));
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",");
    if let Some(id) = id {
        key(&mut out, "id");
        out.extend_from_slice(id.as_bytes());
        out.push(b',');
    }
    key(&mut out, "method");
    serde_json::to_writer(&mut out, method).expect("a string serializes");
    if let Some(params) = params {
        out.push(b',');
        key(&mut out, "params");
        out.extend_from_slice(params.as_bytes());
    }
    out.push(b'}');
    text(out)
}

/// The bytes written here, all of them from `&str`s and JSON serializations: UTF-8.
fn text(out: Vec<u8>) -> String {
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A response as one JSON text (no newline): `outcome` is the `result` (Ok) or the `error`
/// (Err), written as given. `id` is `null` only for an error about a message whose id could
/// not be read.
pub fn response(id: Option<&str>, outcome: Result<&str, &str>) -> String {
    let body = match outcome {
        Ok(b) | Err(b) => b,
    };
    let mut out = Vec::with_capacity(48 + body.len());
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",");
    key(&mut out, "id");
    out.extend_from_slice(id.unwrap_or("null").as_bytes());
    out.push(b',');
    key(&mut out, if outcome.is_ok() { "result" } else { "error" });
    out.extend_from_slice(body.as_bytes());
    out.push(b'}');
    text(out)
}

/// An error response as one JSON text.
pub fn error_response(id: Option<&str>, code: i64, message: &str) -> String {
    response(id, Err(error_object(code, message, None).get()))
}

/// The refusal of a request whose id (`id`, its JSON text) is already in flight on the same
/// connection: `INVALID_REQUEST`, under that id; the request that has it goes on.
pub fn id_in_flight(id: &str) -> String {
    error_response(
        Some(id),
        code::INVALID_REQUEST,
        &format!("request id {id} is already in flight: this request was refused"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_in_flight_is_refused_under_that_id() {
        let answer: serde_json::Value = serde_json::from_str(&id_in_flight(r#""a\"b""#)).unwrap();
        assert_eq!(answer["id"], "a\"b");
        assert_eq!(answer["error"]["code"], code::INVALID_REQUEST);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains("already in flight"), "{message}");
    }

    #[test]
    fn messages_are_classified_and_keep_their_bytes() {
        let text = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"n":1.50}}}"#;
        let Message::Request { id, method, params } = parse(text).unwrap() else {
            panic!("not a request")
        };
        assert_eq!((id.get(), method), ("7", "tools/call"));
        assert_eq!(
            params.unwrap().get(),
            r#"{"name":"x","arguments":{"n":1.50}}"#
        );
        let again = request("\"g-1\"", method, params.map(RawValue::get));
        let Message::Request { id, params: p2, .. } = parse(&again).unwrap() else {
            panic!()
        };
        assert_eq!(id.get(), "\"g-1\"");
        assert_eq!(p2.unwrap().get(), params.unwrap().get());

        let Message::Response { id, outcome } =
            parse(r#"{"result":{"a":[1,2]},"jsonrpc":"2.0","id":"s"}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (id.get(), outcome.unwrap().get()),
            ("\"s\"", r#"{"a":[1,2]}"#)
        );
        assert!(matches!(
            parse(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#),
            Ok(Message::Notification {
                method: "notifications/progress",
                ..
            })
        ));
        let err = response(Some("3"), Err(r#"{"code":-1,"message":"m"}"#));
        assert_eq!(
            err,
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-1,"message":"m"}}"#
        );
    }

    #[test]
    fn bad_messages_get_the_right_error_and_keep_a_readable_id() {
        for (text, code, id) in [
            ("nope", code::PARSE_ERROR, None),
            ("{\"jsonrpc\":\"2.0\",", code::PARSE_ERROR, None),
            ("[1,2]", code::INVALID_REQUEST, None),
            (r#"{"id":1,"method":"x"}"#, code::INVALID_REQUEST, Some("1")),
            (
                r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#,
                code::INVALID_REQUEST,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#,
                code::INVALID_REQUEST,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":7}"#,
                code::INVALID_REQUEST,
                Some("2"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"x","params":3}"#,
                code::INVALID_REQUEST,
                Some("2"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":4,"method":"x","result":{}}"#,
                code::INVALID_REQUEST,
                Some("4"),
            ),
            (
                r#"{"jsonrpc":"2.0","result":{}}"#,
                code::INVALID_REQUEST,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5}"#,
                code::INVALID_REQUEST,
                Some("5"),
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.code, code, "{text}: {}", e.message);
            assert_eq!(e.id.map(RawValue::get), id, "{text}");
        }
    }

    #[test]
    fn ids_and_tokens_are_known_by_their_text_without_escapes() {
        fn raw(t: &str) -> &RawValue {
            serde_json::from_str(t).unwrap()
        }
        assert_eq!(id_key(raw("7")), "7");
        assert_eq!(id_key(raw(r#""a-1""#)), r#""a-1""#);
        assert_eq!(id_key(raw(r#""\u0041b""#)), r#""Ab""#);
        assert_eq!(id_key(raw(r#""a\"b""#)), r#""a\"b""#);
        let params = raw(r#"{"name":"x","_meta":{"progressToken":"t\u0031"}}"#);
        let token = request_progress_token(Some(params)).unwrap();
        assert_eq!(id_key(token), r#""t1""#);
        assert!(request_progress_token(Some(raw(r#"{"_meta":{}}"#))).is_none());
        assert!(request_progress_token(None).is_none());
        let note = raw(r#"{"progressToken":5,"progress":1}"#);
        assert_eq!(progress_token(Some(note)).unwrap().get(), "5");
    }

    #[test]
    fn an_invalid_message_is_answered_to_its_id() {
        let answer = parse(r#"{"jsonrpc":"1.0","id":"q","method":"x"}"#)
            .unwrap_err()
            .answer();
        let Message::Response { id, outcome } = parse(&answer).unwrap() else {
            panic!("{answer}")
        };
        assert_eq!(id.get(), r#""q""#);
        assert_eq!(error_parts(outcome.unwrap_err()).0, code::INVALID_REQUEST);
        let answer = parse("nope").unwrap_err().answer();
        assert!(answer.contains(r#""id":null"#), "{answer}");
    }

    #[test]
    fn header_values_carry_any_text_and_read_back() {
        assert_eq!(header_value("eu-west 1"), "eu-west 1");
        for text in [
            "eu-west 1",
            " lead",
            "trail ",
            "ünï",
            "=?base64?x?=",
            "",
            "a\nb",
        ] {
            let value = header_value(text);
            assert!(
                value.bytes().all(|b| (0x20..0x7f).contains(&b)),
                "{value:?}"
            );
            assert_eq!(header_text(&value).as_deref(), Ok(text));
        }
        assert!(header_text("=?base64?!!?=").is_err());
        assert_eq!(header_text("=?base64").as_deref(), Ok("=?base64"));
    }

    #[test]
    fn revisions_compare_by_date() {
        assert!(is_modern(MODERN));
        assert!(LEGACY.iter().all(|v| !is_modern(v)));
        assert!(is_modern("2027-01-01"));
        assert!(LEGACY.iter().all(|v| is_known_revision(v)) && is_known_revision(MODERN));
        for unknown in ["garbage", "2099-01-01", "2027-01-01", "", "2025-11-25 "] {
            assert!(!is_known_revision(unknown), "{unknown:?}");
        }
    }
}
