//! `GET /openapi.json`: the OpenAPI 3.1 document of the REST surface, generated rather than
//! written: the schemas come from the wire types' `ToSchema` derives (with the validator's bounds
//! on their fields), the paths from the wire contract's routes, and each endpoint's error
//! statuses from the errors it can return, passed through the gateway's one error mapping.

use std::collections::BTreeMap;

use mcpgw::wire::rest::{HEALTH_OK, NDJSON, header, route};
use mcpgw::wire::{
    CallQuery, CallToolAnswer, CallToolBody, ErrorBody, Health, McpEntry, McpSpec, Ok, Query,
    RuntimeHeaders, Tool, ToolChunk,
};
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, Parameter, ParameterBuilder, ParameterIn,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Paths, Ref, RefOr,
    Required, ResponseBuilder,
};
use utoipa::{IntoParams, ToSchema};

use crate::error::{DeadlineSource, Error};
use crate::registry::Scope;

/// The text of `401`, the one answer not in the JSON error shape (AgentScope's).
pub const UNAUTHORIZED: &str = "invalid gateway token";

/// One endpoint as the document describes it.
struct Endpoint {
    method: HttpMethod,
    route: &'static str,
    summary: &'static str,
    /// Whether it needs the bearer token.
    auth: bool,
    /// Whether it takes the scope query (`agent_id`, `session_id`) and, for calls, `timeout`.
    query: Params,
    /// The JSON request body's schema, and whether it is required.
    body: Option<(RefOr<Schema>, bool, &'static str)>,
    /// The success status, what it means, and its content (media type, schema).
    success: (u16, &'static str, Vec<(&'static str, RefOr<Schema>)>),
    /// Errors it can return, each with when.
    errors: Vec<(Error, &'static str)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Params {
    None,
    Scope,
    ScopeAndTimeout,
    /// `after` and `ack` of `/calls/{id}`.
    Call,
}

fn schema_ref(name: &str) -> RefOr<Schema> {
    Ref::from_schema_name(name).into()
}

fn array_of(name: &str) -> RefOr<Schema> {
    ArrayBuilder::new().items(schema_ref(name)).build().into()
}

fn string_schema() -> RefOr<Schema> {
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

fn sample_scope() -> Scope {
    Scope::default_scope()
}

fn name() -> String {
    "fs".into()
}

/// Errors every MCP lookup can return.
fn lookup_errors() -> Vec<(Error, &'static str)> {
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

fn call_id() -> String {
    "0123456789abcdef0123456789abcdef".into()
}

/// What a tool call answers, on its own request or resumed.
fn call_success() -> (u16, &'static str, Vec<(&'static str, RefOr<Schema>)>) {
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
fn outcome_errors() -> Vec<(Error, &'static str)> {
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
fn call_errors() -> Vec<(Error, &'static str)> {
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

/// Errors of an operation that needs a live upstream session.
fn session_errors() -> Vec<(Error, &'static str)> {
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

fn endpoints() -> Vec<Endpoint> {
    let invalid = |why| (Error::Invalid("...".into()), why);
    let json = |schema| vec![("application/json", schema)];
    let mut endpoints = vec![
        Endpoint {
            method: HttpMethod::Get,
            route: route::HEALTH,
            summary: "Liveness; needs no token. Plain `ok`, or JSON with the instance nonce when the gateway was launched with one.",
            auth: false,
            query: Params::None,
            body: None,
            success: (
                200,
                "serving",
                vec![
                    ("text/plain", string_schema()),
                    ("application/json", schema_ref("Health")),
                ],
            ),
            errors: vec![],
        },
        Endpoint {
            method: HttpMethod::Get,
            route: route::METRICS,
            summary: "Prometheus text: calls, errors, latency, restarts and state per MCP.",
            auth: true,
            query: Params::None,
            body: None,
            success: (200, "the metrics", vec![("text/plain", string_schema())]),
            errors: vec![],
        },
        Endpoint {
            method: HttpMethod::Get,
            route: route::OPENAPI,
            summary: "This document.",
            auth: true,
            query: Params::None,
            body: None,
            success: (
                200,
                "OpenAPI 3.1",
                json(ObjectBuilder::new().build().into()),
            ),
            errors: vec![],
        },
        Endpoint {
            method: HttpMethod::Get,
            route: route::MCPS,
            summary: "The scope's MCPs as registered, each with its status.",
            auth: true,
            query: Params::Scope,
            body: None,
            success: (200, "the MCPs", json(array_of("McpEntry"))),
            errors: vec![],
        },
        Endpoint {
            method: HttpMethod::Post,
            route: route::MCPS,
            summary: "Registers an MCP; answers once it is connected, initialized and its tools listed. A registration that does not finish leaves nothing behind.",
            auth: true,
            query: Params::Scope,
            body: Some((registration_body(), true, "an MCP spec")),
            success: (200, "registered", json(schema_ref("Ok"))),
            errors: vec![
                invalid("the spec is invalid"),
                (
                    Error::Conflict {
                        name: name(),
                        scope: sample_scope(),
                    },
                    "the name is taken in the scope",
                ),
                (
                    Error::RemovedWhileConnecting { name: name() },
                    "the name was deleted while it connected",
                ),
                (
                    Error::ConnectFailed("...".into()),
                    "the upstream could not be started, reached or initialized",
                ),
            ],
        },
        Endpoint {
            method: HttpMethod::Delete,
            route: route::MCP,
            summary: "Unregisters an MCP; answers once its session is closed and its processes are gone. Cancels a registration still connecting.",
            auth: true,
            query: Params::Scope,
            body: None,
            success: (200, "removed", json(schema_ref("Ok"))),
            errors: vec![(
                Error::NotFound {
                    name: name(),
                    scope: sample_scope(),
                },
                "no MCP of that name in the scope",
            )],
        },
        Endpoint {
            method: HttpMethod::Put,
            route: route::RUNTIME_HEADERS,
            summary: "Replaces a streamable HTTP MCP's runtime headers; the next request carries them.",
            auth: true,
            query: Params::Scope,
            body: Some((
                schema_ref("RuntimeHeaders"),
                true,
                "the complete header map",
            )),
            success: (204, "replaced", vec![]),
            errors: [invalid("not a streamable HTTP MCP, or an invalid header")]
                .into_iter()
                .chain(lookup_errors())
                .collect(),
        },
        Endpoint {
            method: HttpMethod::Get,
            route: route::TOOLS,
            summary: "The MCP's tools as its server describes them, filtered by enable_tools/disable_tools.",
            auth: true,
            query: Params::Scope,
            body: None,
            success: (200, "the tools", json(array_of("Tool"))),
            errors: lookup_errors()
                .into_iter()
                .chain(session_errors())
                .collect(),
        },
        Endpoint {
            method: HttpMethod::Post,
            route: route::TOOL,
            summary: "Calls a tool. With `Accept: application/x-ndjson` the answer is one ToolChunk a line: progress chunks, then the result. With the header `mcpgw-call-id` the call is resumable: it runs on when its caller goes away, and `GET /calls/{id}` answers it again.",
            auth: true,
            query: Params::ScopeAndTimeout,
            body: Some((schema_ref("CallToolBody"), false, "the tool's arguments")),
            success: call_success(),
            errors: [invalid("invalid arguments, timeout or call id")]
                .into_iter()
                .chain(lookup_errors())
                .chain([(
                    Error::ToolNotFound {
                        tool: "read".into(),
                        mcp: name(),
                    },
                    "the MCP has no such tool",
                )])
                .chain(session_errors())
                .chain(outcome_errors())
                .chain([
                    (
                        Error::CallIdTaken { id: call_id() },
                        "a call with that call id ran here already",
                    ),
                    (
                        Error::CallsFull { budget: 64 << 20 },
                        "running resumable calls hold all the memory kept for them",
                    ),
                ])
                .collect(),
        },
        Endpoint {
            method: HttpMethod::Get,
            route: route::CALL,
            summary: "Answers a resumable call again, exactly as its own request would have (waiting while it runs): its JSON answer, or with `Accept: application/x-ndjson` the ToolChunks after the first `after`, then the last one. `mcpgw-seq` numbers the first line.",
            auth: true,
            query: Params::Call,
            body: None,
            success: call_success(),
            errors: [invalid("an invalid call id or query")]
                .into_iter()
                .chain(call_errors())
                .chain([(
                    Error::ToolNotFound {
                        tool: "read".into(),
                        mcp: name(),
                    },
                    "the MCP has no such tool",
                )])
                .chain(session_errors())
                .chain(outcome_errors())
                .collect(),
        },
        Endpoint {
            method: HttpMethod::Delete,
            route: route::CALL,
            summary: "Cancels a running resumable call (the upstream is sent `notifications/cancelled`) or forgets a finished one; with `ack=true` only forgets a finished one.",
            auth: true,
            query: Params::Call,
            body: None,
            success: (200, "cancelled or forgotten", json(schema_ref("Ok"))),
            errors: [invalid("an invalid call id or query")]
                .into_iter()
                .chain(call_errors())
                .chain([(
                    Error::CallRunning { id: call_id() },
                    "`ack=true` for a call still running (it goes on)",
                )])
                .collect(),
        },
    ];
    // What every endpoint with a query or a body can answer besides.
    for e in &mut endpoints {
        if e.query != Params::None {
            e.errors.push(invalid("the query string is invalid"));
        }
        if e.body.is_some() {
            e.errors.push(invalid("the body is not a JSON object"));
            e.errors.push((
                Error::PayloadTooLarge,
                "the body is larger than --max-body-bytes",
            ));
        }
    }
    endpoints
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

/// `POST /mcps`'s body: a spec, plus runtime headers that are applied but never echoed.
fn registration_body() -> RefOr<Schema> {
    let headers = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(ObjectBuilder::new().schema_type(Type::String)))
        .description(Some(
            "Headers for a streamable HTTP MCP's requests; never echoed back.",
        ));
    RefOr::T(Schema::AllOf(
        utoipa::openapi::schema::AllOfBuilder::new()
            .item(schema_ref("McpSpec"))
            .item(ObjectBuilder::new().property("runtime_headers", headers))
            .build(),
    ))
}

fn parameters(kind: Params, route: &str) -> Vec<Parameter> {
    let mut params: Vec<Parameter> = route
        .split('/')
        .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
        .map(|name| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .schema(Some(string_schema()))
                .build()
        })
        .collect();
    match kind {
        Params::None => {}
        Params::Call => params.extend(CallQuery::into_params(|| Some(ParameterIn::Query))),
        Params::Scope | Params::ScopeAndTimeout => params.extend(
            Query::into_params(|| Some(ParameterIn::Query))
                .into_iter()
                .filter(|p| kind == Params::ScopeAndTimeout || p.name != "timeout"),
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
                .schema(Some(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some("^[0-9a-f]{32,64}$"))
                        .build(),
                ))
                .build(),
        );
    }
    params
}

/// The document, with the body limit the gateway was started with.
pub fn document(max_body_bytes: usize) -> OpenApi {
    let mut schemas = Vec::new();
    register::<McpSpec>(&mut schemas);
    register::<McpEntry>(&mut schemas);
    register::<Tool>(&mut schemas);
    register::<ToolChunk>(&mut schemas);
    register::<CallToolBody>(&mut schemas);
    register::<CallToolAnswer>(&mut schemas);
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
    for e in endpoints() {
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
        paths.add_path_operation(e.route, vec![e.method], op.build());
    }

    OpenApiBuilder::new()
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
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw::wire::McpState;
    use mcpgw::wire::spec::{MAX_NAME_BYTES, MAX_TIMEOUT_SECS, NAME_PATTERN};
    use serde_json::{Value, json};
    use utoipa::PartialSchema;

    fn doc() -> Value {
        serde_json::to_value(document(1234)).unwrap()
    }

    #[test]
    fn schemas_are_the_wire_types() {
        let doc = doc();
        for (name, schema) in [
            ("McpSpec", McpSpec::schema()),
            ("McpEntry", McpEntry::schema()),
            ("Tool", Tool::schema()),
            ("ToolChunk", ToolChunk::schema()),
        ] {
            assert_eq!(
                doc["components"]["schemas"][name],
                serde_json::to_value(schema).unwrap(),
                "{name}"
            );
        }
    }

    #[test]
    fn the_validators_bounds_are_stated() {
        let doc = doc();
        let schemas = &doc["components"]["schemas"];
        let name = &schemas["McpSpec"]["properties"]["name"];
        assert_eq!(name["pattern"], format!("^{NAME_PATTERN}$"));
        assert_eq!(name["maxLength"], MAX_NAME_BYTES);
        assert_eq!(name["minLength"], 1);
        for timeout in [
            &schemas["McpSpec"]["properties"]["execution_timeout"],
            &schemas["HttpConfig"]["properties"]["timeout"],
        ] {
            assert_eq!(timeout["exclusiveMinimum"], 0.0, "{timeout}");
            assert_eq!(timeout["maximum"], MAX_TIMEOUT_SECS, "{timeout}");
        }
        assert_eq!(
            schemas["StdioConfig"]["properties"]["command"]["minLength"],
            1
        );
        let states: Vec<Value> = McpState::ALL.iter().map(|s| json!(s.as_str())).collect();
        assert_eq!(schemas["McpState"]["enum"], json!(states));
        let call = &doc["paths"][route::TOOL]["post"];
        let timeout = call["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "timeout")
            .unwrap();
        assert_eq!(timeout["schema"]["maximum"], MAX_TIMEOUT_SECS);
        assert!(
            call["requestBody"]["description"]
                .as_str()
                .unwrap()
                .contains("1234 bytes")
        );
    }

    #[test]
    fn every_route_and_its_statuses_are_documented() {
        let doc = doc();
        let statuses = |path: &str, method: &str| -> Vec<String> {
            doc["paths"][path][method]["responses"]
                .as_object()
                .unwrap_or_else(|| panic!("{method} {path} undocumented"))
                .keys()
                .cloned()
                .collect()
        };
        assert_eq!(statuses(route::HEALTH, "get"), ["200"]);
        assert_eq!(
            statuses(route::MCPS, "post"),
            ["200", "400", "401", "409", "413", "500"]
        );
        assert_eq!(statuses(route::MCP, "delete"), ["200", "400", "401", "404"]);
        assert_eq!(
            statuses(route::RUNTIME_HEADERS, "put"),
            ["204", "400", "401", "404", "413", "503"]
        );
        assert_eq!(
            statuses(route::TOOLS, "get"),
            ["200", "400", "401", "404", "502", "503", "504"]
        );
        assert_eq!(
            statuses(route::TOOL, "post"),
            [
                "200", "400", "401", "404", "409", "410", "413", "500", "502", "503", "504"
            ]
        );
        assert_eq!(
            statuses(route::CALL, "get"),
            ["200", "400", "401", "404", "410", "500", "502", "504"]
        );
        assert_eq!(
            statuses(route::CALL, "delete"),
            ["200", "400", "401", "404", "409", "410"]
        );
        for path in [route::METRICS, route::OPENAPI, route::MCPS] {
            assert!(statuses(path, "get").contains(&"401".to_string()));
        }
    }
}
