//! Tool parameters carried in HTTP headers (SEP-2243, 2026-07-28): a property of a tool's
//! `inputSchema` with `"x-mcp-header": "Region"` travels, besides the body, as
//! `Mcp-Param-Region`, its value plain when it is visible ASCII without spaces at its ends and
//! `=?base64?...?=` otherwise. A server checks the header against the body (else 400 with
//! `HeaderMismatch`); a client writes it from the body.
//!
//! The gateway does both: it writes the headers of its `tools/call` to an HTTP upstream of
//! 2026-07-28, and it checks those the host endpoint took from its client (handed over in the
//! request's `_meta`, [`jsonrpc::META_PARAM_HEADERS`]) before the call goes on, whatever the
//! upstream's transport.

use mcpgw::wire::Tool;
use mcpgw::wire::jsonrpc;
use serde_json::{Map, Value};

/// The prefix of a parameter's header name.
pub const PREFIX: &str = "Mcp-Param-";

/// The parameters of `tool` that travel in headers: (parameter, header name suffix).
pub fn declared(tool: &Tool) -> impl Iterator<Item = (&str, &str)> {
    tool.input_schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(param, schema)| Some((param.as_str(), schema.get("x-mcp-header")?.as_str()?)))
}

/// An argument's value as its header carries it (before encoding): a string as it is, a
/// number or boolean as JSON writes it; `None` for anything else (no header).
pub fn text_of(arg: &Value) -> Option<String> {
    match arg {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Checks the `Mcp-Param-*` headers `given` (lowercase name suffix → value as sent) of a
/// `tools/call` whose params are `params` against the tool's declared parameters in `tools`:
/// why they do not match the body, if they do not. A tool the list does not have is not
/// checked (the upstream answers for it).
pub fn check(
    tools: &[Tool],
    params: &Map<String, Value>,
    given: &Map<String, Value>,
) -> Result<(), String> {
    let Some(tool) = called(tools, params) else {
        return Ok(());
    };
    let arguments = params.get("arguments").and_then(Value::as_object);
    for (param, suffix) in declared(tool) {
        let body = arguments.and_then(|a| a.get(param)).and_then(text_of);
        let header = given
            .get(&suffix.to_ascii_lowercase())
            .and_then(Value::as_str);
        let header = match header.map(|h| jsonrpc::header_text(h.trim())).transpose() {
            Ok(h) => h,
            Err(why) => return Err(format!("header mismatch: {PREFIX}{suffix}: {why}")),
        };
        match (body, header) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(format!(
                    "header mismatch: missing {PREFIX}{suffix} header for parameter {param:?}"
                ));
            }
            (None, Some(_)) => {
                return Err(format!(
                    "header mismatch: {PREFIX}{suffix} given, but the body has no parameter {param:?}"
                ));
            }
            (Some(b), Some(h)) if b != h => {
                return Err(format!(
                    "header mismatch: {PREFIX}{suffix} does not match the body's parameter {param:?}"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}

/// The headers (suffix, argument text) a `tools/call` with `params` carries for the tool's
/// declared parameters, as a client writes them.
pub fn for_call(tools: &[Tool], params: &Map<String, Value>) -> Vec<(String, String)> {
    let Some(tool) = called(tools, params) else {
        return Vec::new();
    };
    let arguments = params.get("arguments").and_then(Value::as_object);
    declared(tool)
        .filter_map(|(param, suffix)| {
            let text = text_of(arguments?.get(param)?)?;
            Some((format!("{PREFIX}{suffix}"), text))
        })
        .collect()
}

/// The tool a `tools/call` with `params` names, when `tools` has it.
fn called<'a>(tools: &'a [Tool], params: &Map<String, Value>) -> Option<&'a Tool> {
    let name = params.get("name").and_then(Value::as_str)?;
    tools.iter().find(|t| t.name == name)
}

/// Takes the endpoint's [`jsonrpc::META_PARAM_HEADERS`] off a request's `params`.
pub fn take_given(params: &mut Map<String, Value>) -> Option<Map<String, Value>> {
    let meta = params.get_mut("_meta")?.as_object_mut()?;
    match meta.remove(jsonrpc::META_PARAM_HEADERS)? {
        Value::Object(given) => Some(given),
        _ => Some(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Tool> {
        serde_json::from_value(json!([{
            "name": "t",
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "n": {"type": "integer", "x-mcp-header": "N"},
                "other": {"type": "string"}
            }}
        }]))
        .unwrap()
    }

    fn call(args: Value) -> Map<String, Value> {
        json!({"name": "t", "arguments": args})
            .as_object()
            .unwrap()
            .clone()
    }

    fn given(h: Value) -> Map<String, Value> {
        h.as_object().unwrap().clone()
    }

    #[test]
    fn headers_are_checked_against_the_body() {
        let t = tools();
        let body = call(json!({"region": "Hello", "n": 3}));
        for (h, ok) in [
            (json!({"region": "Hello", "n": "3"}), true),
            (json!({"region": "=?base64?SGVsbG8=?=", "n": "3"}), true),
            (json!({"region": "=?base64?SGVsbG8?=", "n": "3"}), false),
            (json!({"region": "=?base64?SGVs!!!bG8=?=", "n": "3"}), false),
            (json!({"region": "Hallo", "n": "3"}), false),
            (json!({"n": "3"}), false),
            (json!({"region": "Hello"}), false),
        ] {
            assert_eq!(check(&t, &body, &given(h.clone())).is_ok(), ok, "{h}");
        }
        // Without the wrapper's both ends, a value is its own text.
        let body = call(json!({"region": "=?base64?SGVsbG8=", "n": 3}));
        assert!(
            check(
                &t,
                &body,
                &given(json!({"region": "=?base64?SGVsbG8=", "n": "3"}))
            )
            .is_ok()
        );
        // A header for a parameter the body lacks.
        let body = call(json!({"n": 3}));
        assert!(check(&t, &body, &given(json!({"region": "x", "n": "3"}))).is_err());
        // A tool the list does not have is the upstream's to judge.
        let other = json!({"name": "u", "arguments": {}})
            .as_object()
            .unwrap()
            .clone();
        assert!(check(&t, &other, &Map::new()).is_ok());
    }

    #[test]
    fn a_call_writes_the_headers_of_its_declared_parameters() {
        let mut got = for_call(
            &tools(),
            &call(json!({"region": "Hello", "n": 3, "other": "x"})),
        );
        got.sort();
        assert_eq!(
            got,
            [
                ("Mcp-Param-N".to_string(), "3".to_string()),
                ("Mcp-Param-Region".to_string(), "Hello".to_string())
            ]
        );
    }
}
