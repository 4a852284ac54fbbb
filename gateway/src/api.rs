//! The REST surface: small handlers that parse, call one method of the registry or an upstream,
//! and answer; every error goes through [`ApiError`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use futures::StreamExt;
use mcpgw::wire::{CallToolAnswer, CallToolBody, Health, McpSpec, RuntimeHeaders};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::{Token, constant_time_eq};
use crate::chunk;
use crate::error::ApiError;
use crate::registry::{Registry, Scope};

/// What the handlers share.
pub struct AppState {
    /// The registered MCPs.
    pub registry: Registry,
    /// The bearer token, when auth is on.
    pub token: Option<Token>,
    /// Reported by `/health`.
    pub instance_nonce: Option<String>,
}

type Shared = State<Arc<AppState>>;

/// The router with auth and the body limit applied.
pub fn router(state: Arc<AppState>, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/mcps", get(list_mcps).post(add_mcp))
        .route("/mcps/{name}", axum::routing::delete(remove_mcp))
        .route("/mcps/{name}/runtime-headers", put(set_runtime_headers))
        .route("/mcps/{name}/tools", get(list_tools))
        .route("/mcps/{name}/tools/{tool}", post(call_tool))
        .fallback(|| async { ApiError::not_found("Not Found") })
        .method_not_allowed_fallback(|| async {
            ApiError::with_status(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed")
        })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), require_token))
        .with_state(state)
}

async fn require_token(State(state): Shared, request: Request, next: Next) -> Response {
    if request.uri().path() == "/health" {
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
                "invalid gateway token",
            )
                .into_response();
        }
    }
    next.run(request).await
}

/// The query parameters every endpoint takes; unknown ones are ignored.
#[derive(Deserialize, Default)]
struct Query {
    #[serde(default)]
    agent_id: String,
    #[serde(default)]
    session_id: String,
    timeout: Option<String>,
}

fn query(raw: Option<String>) -> Result<Query, ApiError> {
    serde_urlencoded::from_str(raw.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))
}

impl Query {
    fn scope(&self) -> Scope {
        Scope {
            agent_id: self.agent_id.clone(),
            session_id: self.session_id.clone(),
        }
    }

    fn timeout(&self) -> Result<Option<Duration>, ApiError> {
        let Some(raw) = &self.timeout else {
            return Ok(None);
        };
        match raw.trim().parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
            _ => Err(ApiError::bad_request(format!(
                "timeout must be a positive number of seconds, not {raw:?}"
            ))),
        }
    }
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response {
    let bytes = serde_json::to_vec(body).expect("wire types serialize");
    (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn ok() -> Response {
    json_response(StatusCode::OK, &mcpgw::wire::Ok::TRUE)
}

/// The body as a JSON object; an empty body counts as `{}` when `empty_ok`.
fn json_object(
    body: Result<Bytes, BytesRejection>,
    empty_ok: bool,
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let body = body.map_err(|r| {
        let status = r.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::with_status(status, "request body too large")
        } else {
            ApiError::with_status(status, format!("cannot read the request body: {r}"))
        }
    })?;
    if empty_ok && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(ApiError::bad_request(format!(
            "the body must be a JSON object, not {}",
            kind(&other)
        ))),
        Err(e) => Err(ApiError::bad_request(format!(
            "the body is not valid JSON: {e}"
        ))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Deserializes with the path of the offending field in the message; `at` is where `value`
/// sits in the body (`""` for the whole body).
fn typed<T: serde::de::DeserializeOwned>(
    value: Value,
    what: &str,
    at: &str,
) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let path = match (at, path.as_str()) {
            ("", ".") => String::new(),
            ("", p) => format!("{p}: "),
            (at, ".") => format!("{at}: "),
            (at, p) => format!("{at}.{p}: "),
        };
        ApiError::bad_request(format!("invalid {what}: {path}{inner}"))
    })
}

/// Checks `mcp_config` on its own first: inside the tagged spec serde loses the path to a bad
/// field, here it names it (`mcp_config.args[0]: ...`).
fn check_mcp_config(config: Option<&Value>) -> Result<(), ApiError> {
    let Some(config) = config else {
        return Err(ApiError::bad_request(
            "invalid MCP spec: missing field `mcp_config`",
        ));
    };
    let (what, at) = ("MCP spec", "mcp_config");
    match config.get("type").and_then(Value::as_str) {
        Some("stdio_mcp") => typed::<mcpgw::wire::StdioConfig>(config.clone(), what, at).map(drop),
        Some("http_mcp") => typed::<mcpgw::wire::HttpConfig>(config.clone(), what, at).map(drop),
        Some(other) => Err(ApiError::bad_request(format!(
            "invalid MCP spec: mcp_config.type must be \"stdio_mcp\" or \"http_mcp\", not {other:?}"
        ))),
        None if config.is_object() => Err(ApiError::bad_request(
            "invalid MCP spec: mcp_config.type is required (\"stdio_mcp\" or \"http_mcp\")",
        )),
        None => Err(ApiError::bad_request(format!(
            "invalid MCP spec: mcp_config must be an object, not {}",
            kind(config)
        ))),
    }
}

async fn health(State(state): Shared) -> Response {
    match &state.instance_nonce {
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
    }
}

async fn metrics(State(state): Shared) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::metrics::render(&state.registry),
    )
        .into_response()
}

/// The OpenAPI 3.1 description of this surface.
const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

async fn list_mcps(State(state): Shared, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let q = query(raw)?;
    Ok(json_response(
        StatusCode::OK,
        &state.registry.list(&q.scope()),
    ))
}

async fn add_mcp(
    State(state): Shared,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let mut body = json_object(body, false)?;
    let runtime_headers = match body.remove("runtime_headers") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(v) => typed::<BTreeMap<String, String>>(v, "runtime_headers", "")?,
    };
    if body
        .get("name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        return Err(ApiError::bad_request("name required"));
    }
    check_mcp_config(body.get("mcp_config"))?;
    let spec: McpSpec = typed(Value::Object(body), "MCP spec", "")?;
    spec.validate().map_err(ApiError::bad_request)?;
    if !runtime_headers.is_empty() {
        match &spec.mcp_config {
            mcpgw::wire::McpConfig::Http(c) if !c.is_legacy_sse() => {
                mcpgw::wire::validate_headers(&runtime_headers)
                    .map_err(|e| ApiError::bad_request(format!("runtime_headers: {e}")))?
            }
            _ => {
                return Err(ApiError::bad_request(
                    "Runtime headers require a Streamable HTTP MCP client.",
                ));
            }
        }
    }
    state
        .registry
        .add(&q.scope(), spec, runtime_headers)
        .await?;
    Ok(ok())
}

async fn remove_mcp(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    state.registry.remove(&q.scope(), &name).await?;
    Ok(ok())
}

async fn set_runtime_headers(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let body = json_object(body, false)?;
    if !body.get("headers").is_some_and(Value::is_object) {
        return Err(ApiError::bad_request("headers must be a JSON object"));
    }
    let RuntimeHeaders { headers } = typed(Value::Object(body), "runtime headers", "")?;
    let upstream = state.registry.get(&q.scope(), &name)?;
    upstream.set_runtime_headers(&headers)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn list_tools(
    State(state): Shared,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let upstream = state.registry.get(&q.scope(), &name)?;
    let tools = upstream.list_tools().await?;
    Ok(json_response(StatusCode::OK, &tools))
}

async fn call_tool(
    State(state): Shared,
    Path((name, tool)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let deadline = q.timeout()?;
    let body = json_object(body, true)?;
    if let Some(args) = body.get("arguments")
        && !(args.is_object() || args.is_null())
    {
        return Err(ApiError::bad_request(format!(
            "arguments must be a JSON object, not {}",
            kind(args)
        )));
    }
    let CallToolBody { arguments } = typed(Value::Object(body), "call body", "")?;
    let upstream = state.registry.get(&q.scope(), &name)?;
    let streaming = headers
        .get_all(header::ACCEPT)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.contains(NDJSON)));
    if streaming {
        return stream_call(upstream, tool, arguments, deadline).await;
    }
    let result = upstream.call(&tool, arguments, deadline, None).await?;
    Ok(json_response(
        StatusCode::OK,
        &CallToolAnswer {
            chunk: chunk::from_call_result(result),
        },
    ))
}

const NDJSON: &str = "application/x-ndjson";

fn ndjson_line(chunk: &mcpgw::wire::ToolChunk) -> Bytes {
    let mut line = serde_json::to_vec(chunk).expect("wire types serialize");
    line.push(b'\n');
    Bytes::from(line)
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
) -> Result<Response, ApiError> {
    let (line_tx, mut line_rx) = tokio::sync::mpsc::channel::<Result<Bytes, ApiError>>(64);
    tokio::spawn(async move {
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::channel(1024);
        let call = upstream.call(&tool, arguments, deadline, Some(progress_tx));
        tokio::pin!(call);
        let progress_line = |p: rmcp::model::ProgressNotificationParam| {
            Ok(ndjson_line(&chunk::progress(
                p.progress,
                p.total,
                p.message.as_deref(),
            )))
        };
        loop {
            tokio::select! {
                biased;
                Some(p) = progress_rx.recv() => {
                    if line_tx.send(progress_line(p)).await.is_err() {
                        return;
                    }
                }
                result = &mut call => {
                    while let Ok(p) = progress_rx.try_recv() {
                        let _ = line_tx.send(progress_line(p)).await;
                    }
                    let _ = line_tx.send(result.map(|r| ndjson_line(&chunk::from_call_result(r)))).await;
                    return;
                }
                // The caller went away: dropping `call` cancels it upstream.
                () = line_tx.closed() => return,
            }
        }
    });
    let first = match line_rx.recv().await {
        Some(Ok(line)) => line,
        Some(Err(e)) => return Err(e),
        None => return Err(ApiError::internal("the call ended without an answer")),
    };
    let rest = futures::stream::unfold(line_rx, |mut rx| async move {
        let item = rx.recv().await?;
        let line =
            item.unwrap_or_else(|e| ndjson_line(&chunk::failure(e.status.as_u16(), &e.detail)));
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
