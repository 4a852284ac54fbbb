//! `GET /openapi.json`: the OpenAPI 3.1 document of the REST surface, generated rather than
//! written: the schemas come from the wire types' `ToSchema` derives (with the validator's bounds
//! on their fields), the paths from the wire contract's routes, and each endpoint's error
//! statuses from the errors it can return, passed through the gateway's one error mapping.

use std::collections::BTreeMap;

use mcpgw::wire::rest::{HEALTH_OK, NDJSON, header, route};
use mcpgw::wire::spec::{
    HEADER_NAME_PATTERN, HEADER_VALUE_PATTERN, LEGACY_SSE_URL_PATTERN, RESERVED_HEADERS,
};
use mcpgw::wire::{
    AckCalls, CallQuery, CallToolAnswer, CallToolBody, ErrorBody, GetPromptBody, Health, McpEntry,
    McpSpec, Ok, Query, ReadResourceBody, RuntimeHeaders, Tool, ToolChunk,
};
use serde_json::{Value, json};
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApiBuilder, Paths, Ref, RefOr, Required,
    ResponseBuilder,
};
use utoipa::{IntoParams, ToSchema};

use crate::error::{DeadlineSource, Error};
use crate::scope::Scope;

/// The text of `401`, the one answer not in the JSON error shape (AgentScope's).
pub const UNAUTHORIZED: &str = "invalid gateway token";

/// One endpoint as the document describes it (the router serves the same list: `api.rs`).
pub struct Endpoint {
    /// Its method.
    pub method: HttpMethod,
    /// Its route, in the router's `{param}` syntax.
    pub route: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Whether it needs the bearer token.
    pub auth: bool,
    /// Whether it takes the scope query (`agent_id`, `session_id`) and, for calls, `timeout`.
    pub query: Params,
    /// The JSON request body's schema, whether it is required, and what it is.
    pub body: Option<(RefOr<Schema>, bool, &'static str)>,
    /// The success status, what it means, and its content (media type, schema).
    pub success: (u16, &'static str, Vec<(&'static str, RefOr<Schema>)>),
    /// Errors it can return, each with when.
    pub errors: Vec<(Error, &'static str)>,
}

/// The query parameters an endpoint takes.
#[derive(Clone, Copy, PartialEq)]
pub enum Params {
    /// None.
    None,
    /// `agent_id` and `session_id`.
    Scope,
    /// The scope and a call's `timeout`.
    ScopeAndTimeout,
    /// `after` and `ack` of `/calls/{id}`.
    Call,
}

/// A reference to a component schema.
pub fn schema_ref(name: &str) -> RefOr<Schema> {
    Ref::from_schema_name(name).into()
}

/// An array of a component schema.
pub fn array_of(name: &str) -> RefOr<Schema> {
    ArrayBuilder::new().items(schema_ref(name)).build().into()
}

/// A plain string.
pub fn string_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .build()
        .into()
}

/// Adds `T` and every schema it refers to.
fn register<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
}

/// The scope the document's sample errors name.
pub fn sample_scope() -> Scope {
    Scope::default_scope()
}

/// The MCP name the document's sample errors name.
pub fn name() -> String {
    "fs".into()
}

/// Errors every MCP lookup can return.
pub fn lookup_errors() -> Vec<(Error, &'static str)> {
    vec![
        (
            Error::NotFound {
                name: name(),
                scope: sample_scope(),
            },
            "no MCP of that name in the scope",
        ),
        (
            Error::StillConnecting { name: name() },
            "its registration is still connecting",
        ),
    ]
}

/// The call id the document's samples name.
pub fn call_id() -> String {
    "0123456789abcdef0123456789abcdef".into()
}

/// What a tool call answers, on its own request or resumed.
pub fn call_success() -> (u16, &'static str, Vec<(&'static str, RefOr<Schema>)>) {
    (
        200,
        "the tool's result",
        vec![
            ("application/json", schema_ref("CallToolAnswer")),
            (NDJSON, schema_ref("ToolChunk")),
        ],
    )
}

/// Errors that end a call once it runs (the same whether answered on its own request or
/// resumed).
pub fn outcome_errors() -> Vec<(Error, &'static str)> {
    vec![
        (
            Error::Died {
                mcp: name(),
                tool: "read".into(),
                report: "exited (exit status 1)".into(),
            },
            "the upstream died during the call (it is not retried)",
        ),
        (
            Error::ReplyTooLarge {
                mcp: name(),
                tool: "read".into(),
                bytes: 1 << 30,
                limit: 64 << 20,
            },
            "the reply was larger than --max-reply-bytes",
        ),
        (
            Error::Rpc {
                mcp: name(),
                code: -32602,
                message: "...".into(),
            },
            "the upstream answered with a JSON-RPC error",
        ),
        (
            Error::Deadline {
                tool: "read".into(),
                mcp: name(),
                limit: std::time::Duration::from_secs(30),
                source: DeadlineSource::ExecutionTimeout,
            },
            "the call passed its deadline; the upstream was told to cancel it",
        ),
        (
            Error::Internal("the call ended without an answer".into()),
            "the call ended without an answer",
        ),
        (
            Error::CallGone {
                id: call_id(),
                why: "it was cancelled (DELETE /calls/...)".into(),
            },
            "a resumable call was cancelled while it ran",
        ),
    ]
}

/// Errors of finding a resumable call.
pub fn call_errors() -> Vec<(Error, &'static str)> {
    vec![
        (
            Error::CallUnknown { id: call_id() },
            "no call has that id here",
        ),
        (
            Error::CallGone {
                id: call_id(),
                why: "it ended more than 600s ago (--call-retention)".into(),
            },
            "the call is no longer kept: acknowledged, cancelled, past --call-retention, or dropped for --call-retention-bytes",
        ),
    ]
}

/// A tool the MCP does not have.
pub fn tool_not_found() -> (Error, &'static str) {
    (
        Error::ToolNotFound {
            tool: "read".into(),
            mcp: name(),
        },
        "the MCP has no such tool",
    )
}

/// A tool the MCP's spec filters out.
pub fn tool_disabled() -> (Error, &'static str) {
    (
        Error::ToolDisabled {
            tool: "write".into(),
            mcp: name(),
            rule: mcpgw::wire::spec::DISABLED_BY_DISABLE,
        },
        "the MCP's enable_tools / disable_tools do not list the tool: it is not called",
    )
}

/// Errors of an operation that needs a live upstream session.
pub fn session_errors() -> Vec<(Error, &'static str)> {
    vec![
        (
            Error::Removed { name: name() },
            "it was removed while the request ran",
        ),
        (
            Error::SessionFailed {
                mcp: name(),
                reason: "...".into(),
            },
            "a stateless MCP's session could not be opened",
        ),
        (
            Error::RestartFailed {
                mcp: name(),
                reason: "...".into(),
            },
            "a dead upstream could not be started again",
        ),
        (
            Error::Crashing {
                mcp: name(),
                restarts: 5,
                window: std::time::Duration::from_secs(60),
                last_error: None,
            },
            "it died too often within a minute",
        ),
        (
            Error::Upstream("listing the tools of 'fs' failed: ...".into()),
            "the upstream failed",
        ),
        (
            Error::SetupTimeout {
                what: "listing the tools of 'fs'".into(),
                limit: std::time::Duration::from_secs(30),
            },
            "listing its tools took too long",
        ),
    ]
}

/// `POST /mcps`'s body: a spec, plus runtime headers that are applied but never echoed (its
/// rules are added to the rendered document by [`add_registration_rules`]).
pub fn registration_body() -> RefOr<Schema> {
    schema_ref("McpSpec")
}

/// Headers of an endpoint's success answer beyond plain HTTP's: name and meaning.
fn success_headers(route: &str) -> &'static [(&'static str, &'static str)] {
    match route {
        route::HEALTH => &[
            (
                header::MAX_CONNECTIONS,
                "client connections the gateway serves at once (--max-connections, as it applies it)",
            ),
            (
                header::IDLE_TIMEOUT_MS,
                "how long it keeps an idle keep-alive connection, in milliseconds (--idle-timeout)",
            ),
            (
                header::CALL_RETENTION_MS,
                "how long it keeps a resumable call nobody follows or that ended, in milliseconds (--call-retention); absent when calls are not resumable",
            ),
        ],
        route::TOOL | route::CALL => &[(
            header::SEQ,
            "on the NDJSON answer of a resumable call: the number (1-based) of its first line in the call; the lines after it count up from there",
        )],
        _ => &[],
    }
}

/// What a call id is: 32 to 64 lowercase hex digits.
const CALL_ID_PATTERN: &str = "^[0-9a-f]{32,64}$";

/// A call id: 32 to 64 lowercase hex digits.
fn call_id_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(CALL_ID_PATTERN))
        .build()
        .into()
}

fn parameters(kind: Params, route: &str) -> Vec<Parameter> {
    let mut params: Vec<Parameter> = route
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            let schema = if name == "id" {
                call_id_schema()
            } else {
                string_schema()
            };
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(schema))
                .build()
        })
        .collect();
    match kind {
        Params::None => {}
        Params::Call => params.extend(CallQuery::into_params(|| Some(ParameterIn::Query))),
        Params::Scope | Params::ScopeAndTimeout => params.extend(
            Query::into_params(|| Some(ParameterIn::Query))
                .into_iter()
                .filter(|p| {
                    kind == Params::ScopeAndTimeout || (p.name != "timeout" && p.name != "format")
                }),
        ),
    }
    if route == route::TOOL {
        params.push(
            ParameterBuilder::new()
                .name(header::CALL_ID)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(
                    "makes the call resumable under this id: 32 to 64 lowercase hex digits, drawn at random (a call id is never used twice)",
                ))
                .schema(Some(call_id_schema()))
                .build(),
        );
    }
    params
}

/// The document, with the body limit the gateway was started with.
pub fn document(endpoints: impl IntoIterator<Item = Endpoint>, max_body_bytes: usize) -> Value {
    let mut schemas = Vec::new();
    register::<McpSpec>(&mut schemas);
    register::<McpEntry>(&mut schemas);
    register::<Tool>(&mut schemas);
    register::<ToolChunk>(&mut schemas);
    register::<CallToolBody>(&mut schemas);
    register::<AckCalls>(&mut schemas);
    register::<CallToolAnswer>(&mut schemas);
    register::<ReadResourceBody>(&mut schemas);
    register::<GetPromptBody>(&mut schemas);
    register::<RuntimeHeaders>(&mut schemas);
    register::<Health>(&mut schemas);
    register::<Ok>(&mut schemas);
    register::<ErrorBody>(&mut schemas);
    let components = ComponentsBuilder::new()
        .schemas_from_iter(schemas)
        .security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        )
        .build();

    let mut paths = Paths::new();
    for e in endpoints {
        let (route, method) = (e.route, e.method.clone());
        paths.add_path_operation(route, vec![method], operation(e, max_body_bytes));
    }

    let doc = OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("mcpgw-gateway")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(format!(
                    "The in-sandbox MCP gateway, wire-compatible with AgentScope 2.0's MCP gateway; \
                     streaming (Accept: {NDJSON}), per-call deadlines (timeout), supervision status, \
                     /metrics and this document are additions. MCPs live in scopes keyed by \
                     (agent_id, session_id). Errors are {{\"detail\": ...}}. `/health` answers \
                     `{HEALTH_OK}` without a nonce. Request bodies: at most {max_body_bytes} bytes."
                )))
                .build(),
        )
        .paths(paths)
        .components(Some(components))
        .security(Some(vec![SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]))
        .build();
    let mut doc = serde_json::to_value(doc).expect("the document serializes");
    add_registration_rules(&mut doc);
    doc
}

/// One endpoint's operation: its parameters, body, success and the errors it can answer,
/// grouped by status.
fn operation(e: Endpoint, max_body_bytes: usize) -> utoipa::openapi::path::Operation {
    let mut op = OperationBuilder::new()
        .summary(Some(e.summary))
        .parameters(Some(parameters(e.query, e.route)));
    if let Some((schema, required, what)) = e.body {
        op = op.request_body(Some(
            RequestBodyBuilder::new()
                .description(Some(format!(
                    "{what}; at most {max_body_bytes} bytes (--max-body-bytes), else 413"
                )))
                .required(Some(if required {
                    Required::True
                } else {
                    Required::False
                }))
                .content(
                    "application/json",
                    ContentBuilder::new().schema(Some(schema)).build(),
                )
                .build(),
        ));
    }
    if !e.auth {
        op = op.securities(Some(Vec::<SecurityRequirement>::new()));
    }
    let (status, what, contents) = e.success;
    let mut ok = ResponseBuilder::new().description(what);
    for (name, meaning) in success_headers(e.route) {
        let integer = ObjectBuilder::new().schema_type(Type::Integer).build();
        ok = ok.header(
            *name,
            utoipa::openapi::header::HeaderBuilder::new()
                .schema(integer)
                .description(Some(*meaning))
                .build(),
        );
    }
    for (media, schema) in contents {
        ok = ok.content(media, ContentBuilder::new().schema(Some(schema)).build());
    }
    op = op.response(status.to_string(), ok.build());
    if e.auth {
        op = op.response(
            "401",
            ResponseBuilder::new()
                .description(format!("missing or wrong bearer token: `{UNAUTHORIZED}`"))
                .content(
                    "text/plain",
                    ContentBuilder::new().schema(Some(string_schema())).build(),
                )
                .build(),
        );
    }
    // Errors grouped by the status the one mapping gives them.
    let mut by_status: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    for (error, when) in &e.errors {
        let (status, detail) = error.status_and_detail();
        let line = match error {
            Error::Invalid(_) => when.to_string(),
            _ => format!("{when} (\"{detail}\")"),
        };
        let lines = by_status.entry(status.as_u16()).or_default();
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    for (status, lines) in by_status {
        op = op.response(
            status.to_string(),
            ResponseBuilder::new()
                .description(lines.join("; "))
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(schema_ref("ErrorBody")))
                        .build(),
                )
                .build(),
        );
    }
    op.build()
}

/// A pattern matching `words` whatever their case (JSON Schema patterns have no flag for it).
fn any_case(words: &[&str]) -> String {
    let alternatives: Vec<String> = words
        .iter()
        .map(|w| {
            w.chars()
                .map(|c| match c {
                    c if c.is_ascii_alphabetic() => {
                        format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
                    }
                    c => c.to_string(),
                })
                .collect()
        })
        .collect();
    format!("^(?:{})$", alternatives.join("|"))
}

/// The rules of the registration validator (`McpSpec::validate`, `validate_headers`,
/// `check_runtime_headers`) that the derived schemas cannot state, so that a request the
/// document allows is one the gateway accepts: header names and values, the names the HTTP
/// layer and the MCP transport own, a stdio MCP being stateful, and runtime headers only for
/// streamable HTTP. (One rule no JSON Schema can state is only described: `enable_tools` and
/// `disable_tools` must not name the same tool.)
fn add_registration_rules(doc: &mut Value) {
    let schemas = &mut doc["components"]["schemas"];
    schemas["Headers"] = json!({
        "type": "object",
        "description": format!(
            "HTTP headers: names are RFC 9110 tokens other than the ones the HTTP layer and the \
             MCP transport set ({}), values are visible ASCII, space and tab.",
            RESERVED_HEADERS.join(", ")
        ),
        "propertyNames": {
            "pattern": HEADER_NAME_PATTERN,
            "not": {"pattern": any_case(&RESERVED_HEADERS)},
        },
        "additionalProperties": {"type": "string", "pattern": HEADER_VALUE_PATTERN},
    });
    let headers_ref = json!({"$ref": "#/components/schemas/Headers"});
    // A secret as a registration gives it (the host driver adds its value; an echo shows the
    // name alone).
    let given = |value: Value| {
        json!({
            "type": "object",
            "description": "A secret the host resolved: its name and value (GET /mcps shows the name alone).",
            "required": ["secret", "value"],
            "additionalProperties": false,
            "properties": {
                "secret": schemas["SecretRef"]["properties"]["secret"].clone(),
                "value": value,
            },
        })
    };
    let min = mcpgw::wire::spec::MIN_SECRET_BYTES;
    let header_secret = given(json!({"type": "string", "minLength": min,
                                     "pattern": HEADER_VALUE_PATTERN}));
    let env_secret = given(json!({"type": "string", "minLength": min}));
    let mut spec_headers = schemas["Headers"].clone();
    spec_headers["additionalProperties"] = json!({"anyOf": [
        {"type": "string", "pattern": HEADER_VALUE_PATTERN}, header_secret]});
    let http_headers = &mut schemas["HttpConfig"]["properties"]["headers"];
    *http_headers = json!({
        "description": http_headers["description"],
        "anyOf": [spec_headers, {"type": "null"}],
    });
    schemas["StdioConfig"]["properties"]["env"]["additionalProperties"] =
        json!({"anyOf": [{"type": "string"}, env_secret]});
    let runtime = &mut schemas["RuntimeHeaders"]["properties"]["headers"];
    *runtime = json!({
        "description": format!(
            "{} Only a streamable HTTP MCP takes them.",
            runtime["description"].as_str().unwrap_or_default()
        ),
        "allOf": [headers_ref],
    });
    schemas["StdioConfig"]["properties"]["args"]["items"]["pattern"] = json!("^[^\\x00]*$");
    let calls = &mut schemas["AckCalls"]["properties"]["calls"];
    calls["items"]["pattern"] = json!(CALL_ID_PATTERN);
    calls["maxItems"] = json!(mcpgw::wire::AckCalls::MAX);
    let stdio = json!({"properties": {"mcp_config": {"required": ["type"],
        "properties": {"type": {"const": "stdio_mcp"}}}}});
    let spec = &mut schemas["McpSpec"];
    spec["if"] = stdio;
    spec["then"] = json!({"properties": {"is_stateful": {"const": true}}});
    schemas["McpConfig"]["discriminator"] = json!({"propertyName": "type"});

    let body = &mut doc["paths"][route::MCPS]["post"]["requestBody"]["content"]["application/json"];
    body["schema"] = json!({
        "allOf": [{"$ref": "#/components/schemas/McpSpec"}],
        "properties": {"runtime_headers": {
            "description": "Headers for a streamable HTTP MCP's requests; never echoed back.",
            "anyOf": [headers_ref, {"type": "null"}],
        }},
        "if": {"required": ["runtime_headers"],
               "properties": {"runtime_headers": {"type": "object", "minProperties": 1}}},
        "then": {"properties": {"mcp_config": {"required": ["type"], "properties": {
            "type": {"const": "http_mcp"},
            "url": {"not": {"pattern": LEGACY_SSE_URL_PATTERN}},
        }}}},
    });
}

#[cfg(test)]
mod tests;
