//! The REST surface: small handlers that parse, call one method of the registry or an upstream,
//! and answer; every error goes through [`Error`].

use mcpgw::wire::jsonrpc::method;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use mcpgw::wire::frame::CallId;
use mcpgw::wire::request;
use mcpgw::wire::rest::{NDJSON, header as mcpgw_header, route};
use mcpgw::wire::{CallToolAnswer, Health, Query};

use crate::auth::{Token, constant_time_eq};
use crate::error::Error;
use crate::registry::Registry;
use crate::rest::calls::{Answer, Calls};
use crate::rest::chunk;
use crate::scope::Scope;

mod surface;
pub use surface::surface;

/// What the handlers share.
pub struct AppState {
    /// The registered MCPs.
    pub registry: Registry,
    /// The bearer token, when auth is on.
    pub token: Option<Token>,
    /// Reported by `/health`.
    pub instance_nonce: Option<String>,
    /// The limits `/health` announces in its headers, for `attach` to fit.
    pub health_headers: HeaderMap,
    /// Resumable calls.
    pub calls: Arc<Calls>,
    /// `/openapi.json`, rendered once.
    pub openapi: Bytes,
    /// The virtual MCP connections open.
    pub connections: Arc<crate::mcp::Registry>,
    /// Their bounds.
    pub connection_limits: crate::mcp::Limits,
}

type Shared = State<Arc<AppState>>;

/// The router with auth and the body limit applied.
pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    surface()
        .into_iter()
        .fold(Router::new(), |router, r| {
            router.route(r.doc.route, r.handler)
        })
        .fallback(|| async { Error::NoRoute })
        .method_not_allowed_fallback(|| async { Error::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            refuse_declared_oversize(max_body_bytes, request, next)
        }))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

/// `router` as hyper's service, for a connection hyper serves (the TCP listener's, or an
/// in-memory one a handed-off session opens).
pub fn hyper_service(
    router: Router,
) -> impl hyper::service::Service<
    hyper::Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future: Send + 'static,
> + Clone
+ Send
+ Sync
+ 'static {
    hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let mut router = router.clone();
        tower_service::Service::call(&mut router, request.map(axum::body::Body::new))
    })
}

/// `413` at once for a body whose `Content-Length` is over the limit, without waiting for a
/// body that may never come.
async fn refuse_declared_oversize(max: usize, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Error::PayloadTooLarge.into_response();
    }
    next.run(request).await
}

async fn require_token(State(state): Shared, request: Request, next: Next) -> Response {
    if request.uri().path() == route::HEALTH {
        return next.run(request).await;
    }
    if let Some(token) = &state.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if !constant_time_eq(given, token.header_value().as_bytes()) {
            return (
                StatusCode::UNAUTHORIZED,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                crate::rest::openapi::UNAUTHORIZED,
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// The query every endpoint takes (the scope, and a call's timeout); unknown parameters are
/// ignored.
fn query(raw: Option<String>) -> Result<Query, Error> {
    request::query(raw.as_deref().unwrap_or("")).map_err(Error::Invalid)
}

/// The body's bytes, or why they could not be read.
fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, Error> {
    body.map_err(|r| {
        if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Error::PayloadTooLarge
        } else {
            Error::Invalid(format!("cannot read the request body: {r}"))
        }
    })
}

fn scope(q: &Query) -> Scope {
    Scope {
        agent_id: q.agent_id.clone(),
        session_id: q.session_id.clone(),
    }
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(body).expect("wire types serialize");
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn ok() -> Response {
    json_response(StatusCode::OK, &mcpgw::wire::Ok::TRUE)
}

/// The headers of `/health` that announce the gateway's limits.
pub fn health_headers(limits: &mcpgw_net::conn::Limits, call_retention: Duration) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(mcpgw_header::MAX_CONNECTIONS, limits.max_connections.into());
    headers.insert(
        mcpgw_header::IDLE_TIMEOUT_MS,
        (limits.idle_timeout.as_millis() as u64).into(),
    );
    if !call_retention.is_zero() {
        headers.insert(
            mcpgw_header::CALL_RETENTION_MS,
            (call_retention.as_millis() as u64).into(),
        );
    }
    headers
}

async fn health(State(state): Shared) -> Response {
    let mut response = match &state.instance_nonce {
        Some(nonce) => json_response(
            StatusCode::OK,
            &Health {
                status: mcpgw::wire::rest::HEALTH_OK.into(),
                instance_nonce: Some(nonce.clone()),
            },
        ),
        None => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            mcpgw::wire::rest::HEALTH_OK,
        )
            .into_response(),
    };
    response.headers_mut().extend(state.health_headers.clone());
    response
}

async fn metrics(State(state): Shared) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::rest::metrics::render(&state.registry),
    )
        .into_response()
}

async fn openapi(State(state): Shared) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        state.openapi.clone(),
    )
        .into_response()
}

async fn list_mcps(State(state): Shared, RawQuery(raw): RawQuery) -> Result<Response, Error> {
    let q = query(raw)?;
    Ok(json_response(
        StatusCode::OK,
        &state.registry.list(&scope(&q)),
    ))
}

async fn add_mcp(
    State(state): Shared,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let request::Registration {
        spec,
        runtime_headers,
    } = request::registration(&body_bytes(body)?).map_err(Error::Invalid)?;
    state
        .registry
        .add(&scope(&q), spec, runtime_headers)
        .await?;
    Ok(ok())
}

async fn remove_mcp(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    let q = query(raw)?;
    state.registry.remove(&scope(&q), &name).await?;
    Ok(ok())
}

async fn set_runtime_headers(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let headers = request::runtime_headers(&body_bytes(body)?).map_err(Error::Invalid)?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    upstream.set_runtime_headers(&headers)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_tools(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    let tools = upstream.list_tools().await?;
    Ok(json_response(StatusCode::OK, &tools))
}

async fn call_tool(
    State(state): Shared,
    Path((name, tool)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let deadline = q.timeout().map_err(Error::Invalid)?;
    let arguments = request::call_body(&body_bytes(body)?).map_err(Error::Invalid)?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    let raw = match q.format.as_deref() {
        None => false,
        Some(mcpgw::wire::rest::FORMAT_MCP) => true,
        Some(other) => {
            return Err(Error::Invalid(format!(
                "format must be {:?} (the upstream's CallToolResult), not {other:?}",
                mcpgw::wire::rest::FORMAT_MCP
            )));
        }
    };
    if raw {
        let result = upstream.call(&tool, arguments, deadline, None).await?;
        return Ok(raw_json(result.get().as_bytes().to_vec()));
    }
    let streaming = wants_ndjson(&headers);
    if let Some(id) = resumable(&headers, &state.calls)? {
        let record = state.calls.start(id, upstream, tool, arguments, deadline)?;
        return Ok(answer(state.calls.answer(record, 0, streaming).await?));
    }
    if streaming {
        return stream_call(upstream, tool, arguments, deadline).await;
    }
    let result = upstream.call(&tool, arguments, deadline, None).await?;
    Ok(json_response(
        StatusCode::OK,
        &CallToolAnswer {
            chunk: chunk::from_raw_result(&result),
        },
    ))
}

/// A JSON body as it was written (by the upstream, or kept for a resumable call).
fn raw_json(body: impl Into<axum::body::Body>) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.into(),
    )
        .into_response()
}

/// A body of type `T`, or why it is not one.
fn typed_body<T: serde::de::DeserializeOwned>(
    body: Result<Bytes, BytesRejection>,
    what: &str,
) -> Result<T, Error> {
    let bytes = body_bytes(body)?;
    let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    serde_json::from_slice(bytes).map_err(|e| Error::Invalid(format!("invalid {what}: {e}")))
}

/// `GET` of a list: every page's items, as the upstream described them.
async fn list_of(
    state: &AppState,
    name: &str,
    raw: Option<String>,
    method: &str,
    key: &str,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let upstream = state.registry.get(&scope(&q), name)?;
    let items = upstream.list_all(method, key).await?;
    Ok(json_response(StatusCode::OK, &items))
}

async fn list_resources(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    list_of(&state, &name, raw, method::RESOURCES_LIST, "resources").await
}

async fn list_resource_templates(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    list_of(
        &state,
        &name,
        raw,
        method::RESOURCE_TEMPLATES_LIST,
        "resourceTemplates",
    )
    .await
}

async fn list_prompts(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    list_of(&state, &name, raw, method::PROMPTS_LIST, "prompts").await
}

async fn read_resource(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let mcpgw::wire::ReadResourceBody { uri } = typed_body(body, "read body")?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    let mut params = serde_json::Map::new();
    params.insert("uri".into(), serde_json::json!(uri));
    let result = upstream.ask(method::RESOURCES_READ, params).await?;
    Ok(raw_json(result.get().as_bytes().to_vec()))
}

async fn get_prompt(
    State(state): Shared,
    Path((name, prompt)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let q = query(raw)?;
    let mcpgw::wire::GetPromptBody { arguments } = typed_body(body, "prompt body")?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    let mut params = serde_json::Map::new();
    params.insert("name".into(), serde_json::json!(prompt));
    if let Some(arguments) = arguments {
        params.insert("arguments".into(), serde_json::json!(arguments));
    }
    let result = upstream.ask(method::PROMPTS_GET, params).await?;
    Ok(raw_json(result.get().as_bytes().to_vec()))
}

/// Opens a virtual MCP connection (see [`crate::mcp`]): refused before the upgrade
/// when the MCP is not there or too many connections are open; the upstream session is
/// chosen once the host's first message says what it can do.
async fn open_connection(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
    mut request: Request,
) -> Result<Response, Error> {
    let own =
        mcpgw::wire::rest::upstream_own(raw.as_deref().unwrap_or("")).map_err(Error::Invalid)?;
    let q = query(raw)?;
    let upstream = state.registry.get(&scope(&q), &name)?;
    let has = |name: header::HeaderName, token: &str| {
        request.headers().get_all(name).iter().any(|v| {
            v.to_str()
                .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        })
    };
    if !has(header::CONNECTION, "upgrade") || !has(header::UPGRADE, mcpgw::wire::rest::UPGRADE) {
        return Err(Error::UpgradeRequired);
    }
    let limits = state.connection_limits;
    let slot =
        state
            .connections
            .reserve(limits.max_connections)
            .ok_or(Error::TooManyConnections {
                max: limits.max_connections,
            })?;
    let upgrade = hyper::upgrade::on(&mut request);
    let registry = state.connections.clone();
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => {
                let io = hyper_util::rt::TokioIo::new(io);
                crate::mcp::serve(io, upstream, own, limits, slot, registry).await;
            }
            Err(e) => tracing::debug!("an MCP connection's upgrade failed: {e}"),
        }
    });
    Ok((
        StatusCode::SWITCHING_PROTOCOLS,
        [
            (header::CONNECTION, "upgrade"),
            (header::UPGRADE, mcpgw::wire::rest::UPGRADE),
        ],
    )
        .into_response())
}

fn wants_ndjson(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(NDJSON)))
}

fn parse_call_id(text: &str) -> Result<CallId, Error> {
    CallId::parse(text).map_err(Error::Invalid)
}

/// The call id a tool call carries, when resumable calls are kept.
fn resumable(headers: &HeaderMap, calls: &Calls) -> Result<Option<CallId>, Error> {
    let Some(value) = headers.get(mcpgw_header::CALL_ID) else {
        return Ok(None);
    };
    if calls.retention().is_zero() {
        return Ok(None);
    }
    let text = value
        .to_str()
        .map_err(|_| Error::Invalid(format!("{} must be hex digits", mcpgw_header::CALL_ID)))?;
    parse_call_id(text).map(Some)
}

/// The HTTP answer of a resumable call.
fn answer(answer: Answer) -> Response {
    match answer {
        Answer::Json(body) => raw_json(body),
        Answer::Lines { seq, lines } => (
            StatusCode::OK,
            [
                (header::CONTENT_TYPE, NDJSON.to_string()),
                (
                    header::HeaderName::from_static(mcpgw_header::SEQ),
                    seq.to_string(),
                ),
            ],
            axum::body::Body::from_stream(lines),
        )
            .into_response(),
    }
}

/// `GET /calls/{id}`: a resumable call answered again, from chunk `after` on when streamed.
async fn resume_call(
    State(state): Shared,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
) -> Result<Response, Error> {
    let id = parse_call_id(&id)?;
    let q = request::call_query(raw.as_deref().unwrap_or("")).map_err(Error::Invalid)?;
    let record = state.calls.find(&id)?;
    let after = q.after.unwrap_or(0);
    Ok(answer(
        state
            .calls
            .answer(record, after, wants_ndjson(&headers))
            .await?,
    ))
}

/// `DELETE /calls/{id}`: cancels a running call, forgets a finished one (`ack=true`: only a
/// finished one).
async fn delete_call(
    State(state): Shared,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, Error> {
    let id = parse_call_id(&id)?;
    let q = request::call_query(raw.as_deref().unwrap_or("")).map_err(Error::Invalid)?;
    state.calls.delete(&id, q.ack.unwrap_or(false))?;
    Ok(ok())
}

/// `POST /calls/ack`: forgets each finished call of the list, as `DELETE /calls/{id}?ack=true`
/// would; a call still running goes on, and one not kept is passed over.
async fn ack_calls(
    State(state): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Error> {
    let mcpgw::wire::AckCalls { calls } = typed_body(body, "acknowledgement body")?;
    if calls.len() > mcpgw::wire::AckCalls::MAX {
        return Err(Error::Invalid(format!(
            "at most {} calls are acknowledged at once, not {}",
            mcpgw::wire::AckCalls::MAX,
            calls.len()
        )));
    }
    let ids = calls
        .iter()
        .map(|id| parse_call_id(id))
        .collect::<Result<Vec<_>, _>>()?;
    for id in &ids {
        // Running, unknown or gone: nothing to forget, as for one acknowledgement.
        let _ = state.calls.delete(id, true);
    }
    Ok(ok())
}

/// A call answered as NDJSON: a `ToolChunk` per upstream progress notification
/// (`is_last: false`), then the result chunk. The status line waits for the first line, so a
/// call that fails before any progress still answers with its own status and detail; a failure
/// after progress has been sent becomes a last chunk in state `error` whose metadata carries
/// `{"error": {"status", "detail"}}`. A caller that disconnects cancels the call upstream.
async fn stream_call(
    upstream: Arc<crate::upstream::Upstream>,
    tool: String,
    arguments: Option<mcpgw::wire::JsonObject>,
    deadline: Option<Duration>,
) -> Result<Response, Error> {
    let (line_tx, mut line_rx) = tokio::sync::mpsc::channel::<Result<Bytes, Error>>(64);
    tokio::spawn(async move {
        // The caller went away: dropping the call cancels it upstream.
        let result = upstream
            .call_with_progress(
                &tool,
                arguments,
                deadline,
                |p| {
                    let line_tx = &line_tx;
                    async move {
                        line_tx
                            .send(Ok(chunk::ndjson(&chunk::progress_of(&p))))
                            .await
                            .is_ok()
                    }
                },
                line_tx.closed(),
            )
            .await;
        if let Some(result) = result {
            let _ = line_tx
                .send(result.map(|r| chunk::ndjson(&chunk::from_raw_result(&r))))
                .await;
        }
    });
    let first = match line_rx.recv().await {
        Some(Ok(line)) => line,
        Some(Err(e)) => return Err(e),
        None => {
            return Err(Error::Internal("the call ended without an answer".into()));
        }
    };
    let rest = futures::stream::unfold(line_rx, |mut rx| async move {
        let item = rx.recv().await?;
        let line = item.unwrap_or_else(|e| {
            let (status, detail) = e.status_and_detail();
            chunk::ndjson(&chunk::failure(status.as_u16(), &detail))
        });
        Some((Ok::<_, std::convert::Infallible>(line), rx))
    });
    let body = futures::stream::once(async move { Ok(first) }).chain(rest);
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, NDJSON)],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}
