//! Every endpoint of the REST surface, with what the OpenAPI document says of it: the router serves
//! this list and the document describes it.

use axum::handler::Handler;
use axum::routing::{MethodFilter, MethodRouter, on};
use utoipa::openapi::path::HttpMethod;
use utoipa::openapi::schema::ObjectBuilder;

use super::*;
use crate::rest::openapi::{
    Endpoint, Params, array_of, call_errors, call_id, call_success, lookup_errors, name,
    outcome_errors, registration_body, sample_scope, schema_ref, session_errors, string_schema,
    tool_disabled, tool_not_found,
};

/// One endpoint: what the document says of it, and the handler that serves it.
pub struct Route {
    /// Its description.
    pub doc: Endpoint,
    pub(super) handler: MethodRouter<Arc<AppState>>,
}

/// `handler` serves `doc`'s method on `doc`'s route.
pub(super) fn route<H, T>(handler: H, doc: Endpoint) -> Route
where
    H: Handler<T, Arc<AppState>>,
    T: 'static,
{
    let filter = match doc.method {
        HttpMethod::Get => MethodFilter::GET,
        HttpMethod::Post => MethodFilter::POST,
        HttpMethod::Put => MethodFilter::PUT,
        HttpMethod::Delete => MethodFilter::DELETE,
        _ => unreachable!("every endpoint is GET, POST, PUT or DELETE"),
    };
    Route {
        handler: on(filter, handler),
        doc,
    }
}

/// Every endpoint: the router serves this list and the OpenAPI document describes it.
pub fn surface() -> Vec<Route> {
    let invalid = |why| (Error::Invalid("...".into()), why);
    let json = |schema| vec![("application/json", schema)];
    let mut endpoints = vec![
        route(
            health,
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
        ),
        route(
            metrics,
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
        ),
        route(
            openapi,
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
        ),
        route(
            list_mcps,
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
        ),
        route(
            add_mcp,
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
        ),
        route(
            remove_mcp,
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
        ),
        route(
            set_runtime_headers,
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
        ),
        route(
            list_tools,
            Endpoint {
                method: HttpMethod::Get,
                route: route::TOOLS,
                summary: "The MCP's tools as its server describes them, filtered by enable_tools/disable_tools (a tool filtered out is not listed, and a call of it is refused with 403).",
                auth: true,
                query: Params::Scope,
                body: None,
                success: (200, "the tools", json(array_of("Tool"))),
                errors: lookup_errors()
                    .into_iter()
                    .chain(session_errors())
                    .collect(),
            },
        ),
        route(
            call_tool,
            Endpoint {
                method: HttpMethod::Post,
                route: route::TOOL,
                summary: "Calls a tool. A tool the MCP's enable_tools/disable_tools filter out is refused with 403 and never reaches the server. With `Accept: application/x-ndjson` the answer is one ToolChunk a line: progress chunks, then the result. With `?format=mcp` it is the upstream's CallToolResult exactly as it sent it (content of every type with annotations and _meta, structuredContent, isError). With the header `mcpgw-call-id` (and no `format`) the call is resumable: it runs on when its caller goes away, and `GET /calls/{id}` answers it again.",
                auth: true,
                query: Params::ScopeAndTimeout,
                body: Some((schema_ref("CallToolBody"), false, "the tool's arguments")),
                success: call_success(),
                errors: [invalid("invalid arguments, timeout, format or call id")]
                    .into_iter()
                    .chain(lookup_errors())
                    .chain([tool_disabled(), tool_not_found()])
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
        ),
        route(
            resume_call,
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
                    .chain([tool_disabled(), tool_not_found()])
                    .chain(session_errors())
                    .chain(outcome_errors())
                    .collect(),
            },
        ),
        route(
            delete_call,
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
        ),
        route(
            ack_calls,
            Endpoint {
                method: HttpMethod::Post,
                route: route::CALLS_ACK,
                summary: "Forgets each finished call of the list, as `DELETE /calls/{id}?ack=true` would, in one request; a call still running goes on, and one the gateway no longer keeps is passed over.",
                auth: true,
                query: Params::None,
                body: Some((schema_ref("AckCalls"), true, "the call ids")),
                success: (200, "acknowledged", json(schema_ref("Ok"))),
                errors: [invalid("an invalid call id, or too many")]
                    .into_iter()
                    .collect(),
            },
        ),
        route(
            list_resources,
            Endpoint {
                method: HttpMethod::Get,
                route: route::RESOURCES,
                summary: "The MCP's resources (every page), as its server describes them.",
                auth: true,
                query: Params::Scope,
                body: None,
                success: (200, "the resources", json(any_array())),
                errors: lookup_errors()
                    .into_iter()
                    .chain(pass_through_errors())
                    .collect(),
            },
        ),
        route(
            list_resource_templates,
            Endpoint {
                method: HttpMethod::Get,
                route: route::RESOURCE_TEMPLATES,
                summary: "The MCP's resource templates (every page), as its server describes them.",
                auth: true,
                query: Params::Scope,
                body: None,
                success: (200, "the resource templates", json(any_array())),
                errors: lookup_errors()
                    .into_iter()
                    .chain(pass_through_errors())
                    .collect(),
            },
        ),
        route(
            read_resource,
            Endpoint {
                method: HttpMethod::Post,
                route: route::RESOURCE_READ,
                summary: "Reads a resource: the upstream's ReadResourceResult exactly as it sent it.",
                auth: true,
                query: Params::Scope,
                body: Some((schema_ref("ReadResourceBody"), true, "the resource's URI")),
                success: (200, "the upstream's ReadResourceResult", json(any_object())),
                errors: [invalid("not a read body")]
                    .into_iter()
                    .chain(lookup_errors())
                    .chain(pass_through_errors())
                    .collect(),
            },
        ),
        route(
            list_prompts,
            Endpoint {
                method: HttpMethod::Get,
                route: route::PROMPTS,
                summary: "The MCP's prompts (every page), as its server describes them.",
                auth: true,
                query: Params::Scope,
                body: None,
                success: (200, "the prompts", json(any_array())),
                errors: lookup_errors()
                    .into_iter()
                    .chain(pass_through_errors())
                    .collect(),
            },
        ),
        route(
            get_prompt,
            Endpoint {
                method: HttpMethod::Post,
                route: route::PROMPT,
                summary: "Gets a prompt with its arguments: the upstream's GetPromptResult exactly as it sent it.",
                auth: true,
                query: Params::Scope,
                body: Some((schema_ref("GetPromptBody"), false, "the prompt's arguments")),
                success: (200, "the upstream's GetPromptResult", json(any_object())),
                errors: [invalid("not a prompt body")]
                    .into_iter()
                    .chain(lookup_errors())
                    .chain(pass_through_errors())
                    .collect(),
            },
        ),
        route(
            open_connection,
            Endpoint {
                method: HttpMethod::Get,
                route: route::CONNECTION,
                summary: "Opens a virtual MCP connection: an HTTP/1.1 upgrade (Connection: Upgrade, Upgrade: mcpgw-jsonrpc) after which the stream carries one JSON-RPC message a line both ways, the gateway being the MCP server of the MCP registered under the name. Its last line before it closes is {\"mcpgw\":\"closed\",\"reason\":...}. mcpgw-gateway attach carries it as open, msg and close frames. With upstream=own in the query the connection gets an upstream session of its own, opened with its host's handshake and closed with it; without it, connections share the MCP's session. Tools the MCP's enable_tools/disable_tools filter out are left out of tools/list, and a tools/call of one is answered by the gateway with JSON-RPC error -32003.",
                auth: true,
                query: Params::Scope,
                body: None,
                success: (101, "switching to the connection's JSON-RPC stream", vec![]),
                errors: lookup_errors()
                    .into_iter()
                    .chain([
                        (
                            Error::UpgradeRequired,
                            "the request is not an upgrade to mcpgw-jsonrpc",
                        ),
                        (
                            Error::TooManyConnections { max: 256 },
                            "as many MCP connections as allowed are open",
                        ),
                    ])
                    .chain(session_errors())
                    .collect(),
            },
        ),
    ];
    // What every endpoint with a query or a body can answer besides.
    for e in endpoints.iter_mut().map(|r| &mut r.doc) {
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

/// Any JSON object.
pub(super) fn any_object() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::Object)
        .build()
        .into()
}

/// An array of JSON objects.
pub(super) fn any_array() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(any_object())
        .build()
        .into()
}

/// What a request passed through to the upstream can answer besides.
pub(super) fn pass_through_errors() -> Vec<(Error, &'static str)> {
    session_errors()
        .into_iter()
        .chain([
            (
                Error::Rpc {
                    mcp: name(),
                    code: -32602,
                    message: "...".into(),
                },
                "the upstream answered with a JSON-RPC error",
            ),
            (
                Error::SetupTimeout {
                    what: "resources/read of 'fs'".into(),
                    limit: Duration::from_secs(600),
                },
                "the upstream did not answer within the MCP's deadline",
            ),
        ])
        .collect()
}
