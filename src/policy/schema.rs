//! The JSON Schemas a policy holds a tool's arguments to: the subset of JSON Schema (2020-12)
//! that constrains values, checked when the policy is read, so that a schema the host cannot
//! enforce is refused there rather than ignored at a call.
//!
//! Keywords enforced: `type` (a name or a list), `enum`, `const`, `properties`, `required`,
//! `additionalProperties` (a boolean or a schema), `minProperties`, `maxProperties`, `items`
//! (one schema for every item), `minItems`, `maxItems`, `uniqueItems`, `minLength`,
//! `maxLength` (in characters), `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
//! `multipleOf`, `allOf`, `anyOf`, `oneOf`, `not`. Annotations are allowed and ignored:
//! `$schema`, `$id`, `$comment`, `title`, `description`, `default`, `examples`, `format`,
//! `deprecated`, `readOnly`, `writeOnly`. Any other keyword (`pattern`, `$ref`, `if`, ...) is
//! refused by name. `true` and `false` are schemas too.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

const ENFORCED: &[&str] = &[
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "maxProperties",
    "items",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
];

const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "format",
    "deprecated",
    "readOnly",
    "writeOnly",
];

const TYPES: &[&str] = &[
    "null", "boolean", "object", "array", "number", "integer", "string",
];

/// A schema a tool's arguments must satisfy; reading one checks that every keyword is
/// enforced (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ArgumentSchema(Value);

impl<'de> Deserialize<'de> for ArgumentSchema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        check(&value, "").map_err(serde::de::Error::custom)?;
        Ok(ArgumentSchema(value))
    }
}

impl ArgumentSchema {
    /// Why `value` does not satisfy the schema: the first failure, with the path to the value
    /// that fails (`arguments.path.to[2]`).
    pub fn violation(&self, value: &Value) -> Option<String> {
        violation(&self.0, value, "arguments")
    }
}

fn check(schema: &Value, at: &str) -> Result<(), String> {
    let here = |k: &str| format!("{at}/{k}");
    let object = match schema {
        Value::Bool(_) => return Ok(()),
        Value::Object(o) => o,
        other => {
            return Err(format!(
                "a schema must be an object or a boolean, not {other} (at {at:?})"
            ));
        }
    };
    for (k, v) in object {
        if ANNOTATIONS.contains(&k.as_str()) {
            continue;
        }
        if !ENFORCED.contains(&k.as_str()) {
            return Err(format!(
                "the JSON Schema keyword {k:?} (at {:?}) is not one the host's policy enforces; it enforces {}",
                here(k),
                ENFORCED.join(", ")
            ));
        }
        let bad = |what: &str| Err(format!("{:?} must be {what}", here(k)));
        match k.as_str() {
            "type" => {
                let names: Vec<&Value> = match v {
                    Value::Array(a) => a.iter().collect(),
                    one => vec![one],
                };
                if names.is_empty()
                    || !names
                        .iter()
                        .all(|n| n.as_str().is_some_and(|n| TYPES.contains(&n)))
                {
                    return bad(&format!("one of {} or a list of them", TYPES.join(", ")));
                }
            }
            "enum" if !v.is_array() => return bad("an array"),
            "properties" => {
                let Some(props) = v.as_object() else {
                    return bad("an object of schemas");
                };
                for (name, s) in props {
                    check(s, &format!("{}/{name}", here(k)))?;
                }
            }
            "required" if !v.as_array().is_some_and(|a| a.iter().all(Value::is_string)) => {
                return bad("an array of names");
            }
            "additionalProperties" | "items" | "not" => check(v, &here(k))?,
            "allOf" | "anyOf" | "oneOf" => {
                let Some(list) = v.as_array().filter(|a| !a.is_empty()) else {
                    return bad("a non-empty array of schemas");
                };
                for (i, s) in list.iter().enumerate() {
                    check(s, &format!("{}/{i}", here(k)))?;
                }
            }
            "minProperties" | "maxProperties" | "minItems" | "maxItems" | "minLength"
            | "maxLength"
                if v.as_u64().is_none() =>
            {
                return bad("a non-negative integer");
            }
            "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" if !v.is_number() => {
                return bad("a number");
            }
            "multipleOf" if !v.as_f64().is_some_and(|m| m > 0.0) => {
                return bad("a number greater than 0");
            }
            "uniqueItems" if !v.is_boolean() => return bad("a boolean"),
            _ => {}
        }
    }
    Ok(())
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::Number(_) => "number",
        Value::String(_) => "string",
    }
}

fn is_type(v: &Value, name: &str) -> bool {
    match name {
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        "number" => v.is_number(),
        other => type_name(v) == other,
    }
}

fn violation(schema: &Value, value: &Value, at: &str) -> Option<String> {
    let s: &Map<String, Value> = match schema {
        Value::Bool(true) => return None,
        Value::Bool(false) => return Some(format!("{at} is not allowed")),
        Value::Object(s) => s,
        _ => return None,
    };
    let own = match value {
        Value::Object(o) => object_violation(s, o, at),
        Value::Array(items) => array_violation(s, items, at),
        Value::String(text) => string_violation(s, text).map(|why| format!("{at} {why}")),
        Value::Number(num) => number_violation(s, num).map(|why| format!("{at} {why}")),
        _ => None,
    };
    value_violation(s, value)
        .map(|why| format!("{at} {why}"))
        .or(own)
        .or_else(|| combined_violation(s, value, at))
}

/// What `type`, `enum` and `const` say of `value`.
fn value_violation(s: &Map<String, Value>, value: &Value) -> Option<String> {
    if let Some(t) = s.get("type") {
        let names: Vec<&str> = match t {
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            one => one.as_str().into_iter().collect(),
        };
        if !names.iter().any(|n| is_type(value, n)) {
            return Some(format!(
                "must be {}, not {}",
                names.join(" or "),
                type_name(value)
            ));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        return Some(format!("must be one of {}", Value::Array(options.clone())));
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        return Some(format!("must be {c}"));
    }
    None
}

/// An object's `required`, `properties`, `additionalProperties`, `minProperties` and
/// `maxProperties`.
fn object_violation(s: &Map<String, Value>, o: &Map<String, Value>, at: &str) -> Option<String> {
    let fail = |why: String| Some(format!("{at} {why}"));
    for name in s
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(name) = name.as_str()
            && !o.contains_key(name)
        {
            return fail(format!("lacks the required member {name:?}"));
        }
    }
    let props = s.get("properties").and_then(Value::as_object);
    for (k, v) in o {
        let path = format!("{at}.{k}");
        let member = props
            .and_then(|p| p.get(k))
            .or_else(|| s.get("additionalProperties"));
        if let Some(why) = member.and_then(|m| violation(m, v, &path)) {
            return Some(why);
        }
    }
    let n = o.len() as u64;
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && n < min
    {
        return fail(format!("must have at least {min} members"));
    }
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && n > max
    {
        return fail(format!("must have at most {max} members"));
    }
    None
}

/// An array's `items`, `minItems`, `maxItems` and `uniqueItems`.
fn array_violation(s: &Map<String, Value>, items: &[Value], at: &str) -> Option<String> {
    let fail = |why: String| Some(format!("{at} {why}"));
    if let Some(each) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            if let Some(why) = violation(each, item, &format!("{at}[{i}]")) {
                return Some(why);
            }
        }
    }
    let n = items.len() as u64;
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        return fail(format!("must have at least {min} items"));
    }
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        return fail(format!("must have at most {max} items"));
    }
    if s.get("uniqueItems") == Some(&Value::Bool(true))
        && items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].contains(a))
    {
        return fail("must not repeat an item".into());
    }
    None
}

/// A string's `minLength` and `maxLength`.
fn string_violation(s: &Map<String, Value>, text: &str) -> Option<String> {
    let n = text.chars().count() as u64;
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && n < min
    {
        return Some(format!("must be at least {min} characters long"));
    }
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && n > max
    {
        return Some(format!("must be at most {max} characters long"));
    }
    None
}

/// A number's bounds and `multipleOf`.
fn number_violation(s: &Map<String, Value>, num: &serde_json::Number) -> Option<String> {
    let x = num.as_f64().unwrap_or(f64::NAN);
    let bound = |k: &str| s.get(k).and_then(Value::as_f64);
    if let Some(m) = bound("minimum")
        && x < m
    {
        return Some(format!("must be at least {m}"));
    }
    if let Some(m) = bound("maximum")
        && x > m
    {
        return Some(format!("must be at most {m}"));
    }
    if let Some(m) = bound("exclusiveMinimum")
        && x <= m
    {
        return Some(format!("must be greater than {m}"));
    }
    if let Some(m) = bound("exclusiveMaximum")
        && x >= m
    {
        return Some(format!("must be less than {m}"));
    }
    if let Some(m) = bound("multipleOf")
        && ((x / m) - (x / m).round()).abs() > 1e-9
    {
        return Some(format!("must be a multiple of {m}"));
    }
    None
}

/// `allOf`, `anyOf`, `oneOf` and `not`.
fn combined_violation(s: &Map<String, Value>, value: &Value, at: &str) -> Option<String> {
    let fail = |why: String| Some(format!("{at} {why}"));
    if let Some(Value::Array(all)) = s.get("allOf") {
        for sub in all {
            if let Some(why) = violation(sub, value, at) {
                return Some(why);
            }
        }
    }
    if let Some(Value::Array(any)) = s.get("anyOf")
        && any.iter().all(|sub| violation(sub, value, at).is_some())
    {
        return fail("matches none of anyOf".into());
    }
    if let Some(Value::Array(one)) = s.get("oneOf") {
        let matching = one
            .iter()
            .filter(|sub| violation(sub, value, at).is_none())
            .count();
        if matching != 1 {
            return fail(format!("must match exactly one of oneOf, not {matching}"));
        }
    }
    if let Some(not) = s.get("not")
        && violation(not, value, at).is_none()
    {
        return fail("matches what not forbids".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> ArgumentSchema {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn values_are_held_to_the_keywords_with_the_failing_path_named() {
        let s = schema(json!({
            "type": "object",
            "required": ["path"],
            "properties": {
                "path": {"type": "string", "minLength": 1, "maxLength": 8},
                "mode": {"enum": ["r", "w"]},
                "n": {"type": "integer", "minimum": 1, "exclusiveMaximum": 10},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2, "uniqueItems": true},
                "either": {"anyOf": [{"type": "null"}, {"const": 3}]},
                "not5": {"not": {"const": 5}}
            },
            "additionalProperties": false
        }));
        assert_eq!(s.violation(&json!({"path": "/a"})), None);
        assert_eq!(s.violation(&json!({"path": "/a", "n": 3.0})), None);
        for (value, says) in [
            (json!([]), "arguments must be object, not array"),
            (json!({}), "arguments lacks the required member \"path\""),
            (
                json!({"path": ""}),
                "arguments.path must be at least 1 characters long",
            ),
            (
                json!({"path": "/a/b/c/d/e"}),
                "arguments.path must be at most 8 characters long",
            ),
            (
                json!({"path": "/a", "mode": "x"}),
                "arguments.mode must be one of [\"r\",\"w\"]",
            ),
            (
                json!({"path": "/a", "n": 10}),
                "arguments.n must be less than 10",
            ),
            (
                json!({"path": "/a", "n": 1.5}),
                "arguments.n must be integer, not number",
            ),
            (
                json!({"path": "/a", "tags": ["x", 1]}),
                "arguments.tags[1] must be string, not number",
            ),
            (
                json!({"path": "/a", "tags": ["x", "x"]}),
                "arguments.tags must not repeat an item",
            ),
            (
                json!({"path": "/a", "either": 4}),
                "arguments.either matches none of anyOf",
            ),
            (
                json!({"path": "/a", "not5": 5}),
                "arguments.not5 matches what not forbids",
            ),
            (
                json!({"path": "/a", "other": 1}),
                "arguments.other is not allowed",
            ),
        ] {
            assert_eq!(s.violation(&value).as_deref(), Some(says), "{value}");
        }
    }

    #[test]
    fn a_keyword_the_host_cannot_enforce_is_refused_when_read() {
        for (v, says) in [
            (
                json!({"pattern": "^a"}),
                "keyword \"pattern\" (at \"/pattern\")",
            ),
            (
                json!({"properties": {"a": {"$ref": "#/x"}}}),
                "keyword \"$ref\" (at \"/properties/a/$ref\")",
            ),
            (json!({"type": "text"}), "\"/type\" must be one of null"),
            (
                json!({"maxLength": -1}),
                "\"/maxLength\" must be a non-negative integer",
            ),
            (
                json!({"anyOf": []}),
                "\"/anyOf\" must be a non-empty array of schemas",
            ),
            (json!(3), "a schema must be an object or a boolean"),
        ] {
            let e = serde_json::from_value::<ArgumentSchema>(v.clone())
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{v}: {e}");
        }
        let annotated = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
                               "title": "t", "description": "d", "format": "uri"});
        assert!(serde_json::from_value::<ArgumentSchema>(annotated).is_ok());
    }
}
