//! Decoding the REST surface's requests: the query string and each JSON body, with messages that
//! name the offending field. The gateway answers `400` with these messages; the fuzz targets
//! run them on any input.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::spec::{RUNTIME_HEADERS_NEED_HTTP, check_name};
use super::{
    CallQuery, CallToolBody, HttpConfig, JsonObject, McpSpec, Query, RuntimeHeaders, StdioConfig,
};

/// A `POST /mcps` body: the spec and the runtime headers it carried (never echoed).
#[derive(Debug, Clone, PartialEq)]
pub struct Registration {
    /// The spec, validated.
    pub spec: McpSpec,
    /// The runtime headers, validated for this spec (empty when none were given).
    pub runtime_headers: BTreeMap<String, String>,
}

/// The query string (without `?`) of any endpoint.
pub fn query(raw: &str) -> Result<Query, String> {
    serde_urlencoded::from_str(raw).map_err(|e| format!("invalid query string: {e}"))
}

/// The query string (without `?`) of `/calls/{id}`.
pub fn call_query(raw: &str) -> Result<CallQuery, String> {
    serde_urlencoded::from_str(raw).map_err(|e| format!("invalid query string: {e}"))
}

/// What kind of JSON value `v` is, for messages.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The body as a JSON object; an empty body counts as `{}` when `empty_ok`.
pub fn json_object(body: &[u8], empty_ok: bool) -> Result<Map<String, Value>, String> {
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the body must be a JSON object, not {}",
            kind(&other)
        )),
        Err(e) => Err(format!("the body is not valid JSON: {e}")),
    }
}

/// Deserializes with the path of the offending field in the message; `at` is where `value` sits
/// in the body (`""` for the whole body).
fn typed<T: serde::de::DeserializeOwned>(value: Value, what: &str, at: &str) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let path = match (at, path.as_str()) {
            ("", ".") => String::new(),
            ("", p) => format!("{p}: "),
            (at, ".") => format!("{at}: "),
            (at, p) => format!("{at}.{p}: "),
        };
        format!("invalid {what}: {path}{inner}")
    })
}

/// Checks `mcp_config` on its own first: inside the tagged spec serde loses the path to a bad
/// field, here it names it (`mcp_config.args[0]: ...`).
fn check_mcp_config(config: Option<&Value>) -> Result<(), String> {
    let Some(config) = config else {
        return Err("invalid MCP spec: missing field `mcp_config`".into());
    };
    let (what, at) = ("MCP spec", "mcp_config");
    match config.get("type").and_then(Value::as_str) {
        Some("stdio_mcp") => typed::<StdioConfig>(config.clone(), what, at).map(drop),
        Some("http_mcp") => typed::<HttpConfig>(config.clone(), what, at).map(drop),
        Some(other) => Err(format!(
            "invalid MCP spec: mcp_config.type must be \"stdio_mcp\" or \"http_mcp\", not {other:?}"
        )),
        None if config.is_object() => Err(
            "invalid MCP spec: mcp_config.type is required (\"stdio_mcp\" or \"http_mcp\")".into(),
        ),
        None => Err(format!(
            "invalid MCP spec: mcp_config must be an object, not {}",
            kind(config)
        )),
    }
}

/// A `POST /mcps` body, checked by the one registration validator ([`McpSpec::validate`] and
/// [`McpSpec::check_runtime_headers`]).
pub fn registration(body: &[u8]) -> Result<Registration, String> {
    let mut body = json_object(body, false)?;
    let runtime_headers = match body.remove("runtime_headers") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => typed::<BTreeMap<String, String>>(v, "runtime_headers", "")?,
    };
    // The name first, then the config on its own (its errors name the field's path), then the
    // whole spec: serde alone would report whichever field it met first.
    check_name(body.get("name").and_then(Value::as_str).unwrap_or(""))?;
    check_mcp_config(body.get("mcp_config"))?;
    let spec: McpSpec = typed(Value::Object(body), "MCP spec", "")?;
    spec.validate()?;
    if !runtime_headers.is_empty() {
        spec.check_runtime_headers(&runtime_headers)
            .map_err(|e| match e.as_str() {
                RUNTIME_HEADERS_NEED_HTTP => e,
                _ => format!("runtime_headers: {e}"),
            })?;
    }
    Ok(Registration {
        spec,
        runtime_headers,
    })
}

/// A `PUT /mcps/{name}/runtime-headers` body (the headers are checked against the MCP's spec
/// by [`McpSpec::check_runtime_headers`] once the MCP is known).
pub fn runtime_headers(body: &[u8]) -> Result<BTreeMap<String, String>, String> {
    let body = json_object(body, false)?;
    if !body.get("headers").is_some_and(Value::is_object) {
        return Err("headers must be a JSON object".into());
    }
    let RuntimeHeaders { headers } = typed(Value::Object(body), "runtime headers", "")?;
    Ok(headers)
}

/// A `POST /mcps/{name}/tools/{tool}` body: the arguments (an empty body means none).
pub fn call_body(body: &[u8]) -> Result<Option<JsonObject>, String> {
    let body = json_object(body, true)?;
    if let Some(args) = body.get("arguments")
        && !(args.is_object() || args.is_null())
    {
        return Err(format!(
            "arguments must be a JSON object, not {}",
            kind(args)
        ));
    }
    let CallToolBody { arguments } = typed(Value::Object(body), "call body", "")?;
    Ok(arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_field() {
        let e = |body: &str| registration(body.as_bytes()).unwrap_err();
        assert_eq!(e(r#"{"mcp_config":{}}"#), "name required");
        assert!(
            e(r#"{"name":"x","mcp_config":{"type":"stdio_mcp","command":"c","args":[1]}}"#)
                .contains("mcp_config.args[0]")
        );
        assert!(e(r#"{"name":"x","mcp_config":{"type":"ftp"}}"#).contains("must be \"stdio_mcp\""));
        assert!(e(r#"{"name":"x","mcp_config":{"type":"stdio_mcp","command":"c"},"runtime_headers":{"A":"b"}}"#)
            .contains("Streamable HTTP"));
        assert_eq!(e("[]"), "the body must be a JSON object, not an array");
        let ok = registration(
            br#"{"name":"h","mcp_config":{"type":"http_mcp","url":"http://x/mcp"},"runtime_headers":{"X-K":"v"}}"#,
        )
        .unwrap();
        assert_eq!(ok.runtime_headers["X-K"], "v");
        assert!(!ok.spec.extra.contains_key("runtime_headers"));
        assert_eq!(call_body(b"").unwrap(), None);
        assert!(
            call_body(br#"{"arguments":[1]}"#)
                .unwrap_err()
                .contains("an array")
        );
        assert!(runtime_headers(br#"{"headers":1}"#).is_err());
        assert_eq!(query("agent_id=a%20b&x=1").unwrap().agent_id, "a b");
        assert!(query("agent_id=%ZZ&agent_id=").is_err() || query("agent_id=%ZZ").is_ok());
    }
}
