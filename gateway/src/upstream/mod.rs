//! One upstream MCP server: its session (a stdio child or an HTTP connection), its tool list, its
//! calls, its supervision and its shutdown.
//!
//! Calls take the current session without holding any lock across the call; rmcp multiplexes
//! concurrent requests on one session by JSON-RPC id. Only reconnecting is serialised, per
//! upstream, so a slow or crashing upstream never stalls another.

pub mod http;
pub mod progress;
pub mod sse;
pub mod stdio;
pub mod tls;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use mcpgw::wire::{JsonObject, McpConfig, McpSpec, Tool};
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientCapabilities,
    ClientConfig, ClientRequest, Implementation, ProgressToken, ServerResult,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService, ServiceError,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::error::{ApiError, py_repr};
use progress::{ProgressRoutes, ProgressSender, ProgressTap};
use stdio::ChildProcess;

/// Timeouts that apply to every upstream.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// A tool call's deadline when neither the MCP's `execution_timeout` nor the request sets one.
    pub call_timeout: Duration,
    /// How long spawning/connecting, initializing and the first tool listing may take.
    pub connect_timeout: Duration,
}

/// Restarts allowed within [`RESTART_WINDOW`] before an upstream is declared crashing.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// The tool list as last fetched.
#[derive(Default)]
struct ToolCache(RwLock<Arc<Vec<Tool>>>);

impl ToolCache {
    fn get(&self) -> Arc<Vec<Tool>> {
        self.0.read().unwrap().clone()
    }

    fn set(&self, tools: Vec<Tool>) {
        *self.0.write().unwrap() = Arc::new(tools);
    }
}

/// Receives what the upstream sends on its own: tool list changes, log messages. (Progress is
/// routed by the transport tap, in order.)
#[derive(Clone)]
struct Handler {
    name: Arc<str>,
    tools: Arc<ToolCache>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcpgw-gateway", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Refresh on a task of its own: awaiting a request from inside a notification handler
        // would hold up the session's message loop that must deliver the answer.
        let (name, tools, peer) = (self.name.clone(), self.tools.clone(), context.peer);
        tokio::spawn(async move {
            match fetch_tools(&peer).await {
                Ok(list) => {
                    tracing::info!(mcp = %name, tools = list.len(), "tool list changed upstream; refreshed");
                    tools.set(list);
                }
                Err(e) => tracing::warn!(mcp = %name, "refreshing the tool list failed: {e}"),
            }
        });
    }

    #[allow(deprecated)] // MCP logging is deprecated upstream but servers still send it.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::info!(mcp = %self.name, level = ?params.level, "upstream log: {}", params.data);
    }
}

async fn fetch_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let tools = peer.list_all_tools().await.map_err(|e| error_chain(&e))?;
    tools
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            serde_json::to_value(t)
                .and_then(serde_json::from_value)
                .map_err(|e| format!("tool {name:?} is malformed: {e}"))
        })
        .collect()
}

/// One live connection to the upstream.
struct Session {
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    peer: Peer<RoleClient>,
    child: Option<ChildProcess>,
    routes: Arc<ProgressRoutes>,
    /// The server promised `notifications/tools/list_changed`, so the cached list stays true.
    announces_tool_changes: bool,
}

impl Session {
    fn alive(&self) -> bool {
        !self.peer.is_transport_closed()
            && self
                .child
                .as_ref()
                .is_none_or(|c| c.exit_status().is_none())
    }

    /// Closes the session: the transport first (a stdio server sees EOF), then whatever of its
    /// process group is left.
    async fn close(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
        }
        if let Some(child) = &self.child {
            child.terminate(Duration::from_millis(500)).await;
        }
    }

    /// Why the session is gone, for error messages.
    async fn death_report(&self) -> String {
        match &self.child {
            Some(child) => format!("exited ({})", child.death_report().await),
            None => "closed the connection".to_string(),
        }
    }
}

/// What `GET /mcps` shows of an upstream's health.
#[derive(Debug, Clone, Default)]
struct Health {
    state: &'static str,
    pid: Option<u32>,
    restarts: u64,
    last_error: Option<String>,
    recent_restarts: VecDeque<Instant>,
    died_at: Option<Instant>,
}

/// A registered MCP server.
pub struct Upstream {
    /// The name it is registered under.
    pub name: String,
    /// The spec as registered (normalised, without runtime headers).
    pub spec: McpSpec,
    settings: Settings,
    runtime_headers: http::SharedHeaders,
    session: Mutex<Option<Arc<Session>>>,
    reconnect: tokio::sync::Mutex<()>,
    tools: Arc<ToolCache>,
    health: Mutex<Health>,
    closed: AtomicBool,
    /// Calls, errors and latency, for `/metrics`.
    pub metrics: crate::metrics::UpstreamMetrics,
}

impl Upstream {
    /// Connects (for a stateful MCP, keeping the session), lists the tools, and returns the
    /// ready upstream; the error is the reason the connection failed.
    pub async fn connect(
        spec: McpSpec,
        runtime_headers: &std::collections::BTreeMap<String, String>,
        settings: Settings,
    ) -> Result<Arc<Upstream>, String> {
        let upstream = Arc::new(Upstream {
            name: spec.name.clone(),
            runtime_headers: Arc::new(RwLock::new(http::header_map(runtime_headers)?)),
            spec,
            settings,
            session: Mutex::new(None),
            reconnect: tokio::sync::Mutex::new(()),
            tools: Arc::default(),
            health: Mutex::new(Health {
                state: "connecting",
                ..Health::default()
            }),
            closed: AtomicBool::new(false),
            metrics: Default::default(),
        });
        let session = upstream.open_session().await?;
        let tools = match upstream.list_within_limit(&session).await {
            Ok(tools) => tools,
            Err(e) => {
                session.close().await;
                return Err(e.detail);
            }
        };
        upstream.tools.set(tools);
        if upstream.spec.is_stateful {
            upstream.install(session);
        } else {
            session.close().await;
            upstream.health.lock().unwrap().state = "stateless";
        }
        Ok(upstream)
    }

    fn install(&self, session: Arc<Session>) {
        let mut health = self.health.lock().unwrap();
        health.state = "connected";
        health.pid = session.child.as_ref().map(|c| c.pid);
        *self.session.lock().unwrap() = Some(session);
    }

    /// How long connecting, initializing or listing tools may take: the gateway's connect
    /// timeout, shortened by an HTTP MCP's own `timeout` (AgentScope's HTTP timeout, 30 s by
    /// default). Tool calls have their own deadline.
    fn setup_limit(&self) -> Duration {
        match &self.spec.mcp_config {
            McpConfig::Http(http) => http
                .timeout
                .map(Duration::from_secs_f64)
                .map_or(self.settings.connect_timeout, |t| {
                    t.min(self.settings.connect_timeout)
                }),
            McpConfig::Stdio(_) => self.settings.connect_timeout,
        }
    }

    /// Starts a new session: spawn or connect, then the MCP handshake, bounded by the connect
    /// timeout.
    async fn open_session(&self) -> Result<Arc<Session>, String> {
        let routes = Arc::new(ProgressRoutes::default());
        let handler = Handler {
            name: self.name.as_str().into(),
            tools: self.tools.clone(),
        };
        let limit = self.setup_limit();
        let (service, child) = match &self.spec.mcp_config {
            McpConfig::Stdio(config) => {
                let (child, transport) = stdio::spawn(&self.name, config)?;
                match tokio::time::timeout(
                    limit,
                    handler.serve(ProgressTap::new(transport, routes.clone())),
                )
                .await
                {
                    Ok(Ok(service)) => (service, Some(child)),
                    outcome => {
                        let reason = match outcome {
                            Ok(Err(e)) => format!("initialize failed: {}", error_chain(&e)),
                            _ => format!("no answer to initialize within {limit:?}"),
                        };
                        let report = if child.exit_status().is_some()
                            || child.wait_exit(Duration::from_millis(200)).await.is_some()
                        {
                            format!("; the server {}", child.death_report().await)
                        } else {
                            String::new()
                        };
                        child.terminate(Duration::ZERO).await;
                        return Err(format!("{reason}{report}"));
                    }
                }
            }
            McpConfig::Http(config) if config.is_legacy_sse() => {
                let opened = tokio::time::timeout(limit, async {
                    let transport = sse::connect(&self.name, config).await?;
                    handler
                        .serve(ProgressTap::new(transport, routes.clone()))
                        .await
                        .map_err(|e| error_chain(&e))
                })
                .await;
                match opened {
                    Ok(Ok(service)) => (service, None),
                    Ok(Err(e)) => return Err(format!("{}: {e}", config.url)),
                    Err(_) => {
                        return Err(format!(
                            "{}: no answer to initialize within {limit:?}",
                            config.url
                        ));
                    }
                }
            }
            McpConfig::Http(config) => {
                let transport = http::transport(config, self.runtime_headers.clone())?;
                match tokio::time::timeout(
                    limit,
                    handler.serve(ProgressTap::new(transport, routes.clone())),
                )
                .await
                {
                    Ok(Ok(service)) => (service, None),
                    Ok(Err(e)) => {
                        // A plain request names the cause (refused, untrusted certificate)
                        // better than the transport's summary; the summary covers the rest
                        // (the server answered, but not as an MCP server).
                        return Err(match http::diagnose(config).await {
                            Some(cause) => format!("cannot reach {}: {cause}", config.url),
                            None => format!("{}: {}", config.url, error_chain(&e)),
                        });
                    }
                    Err(_) => {
                        return Err(format!(
                            "{}: no answer to initialize within {limit:?}",
                            config.url
                        ));
                    }
                }
            }
        };
        let peer = service.peer().clone();
        let announces_tool_changes = peer
            .peer_info()
            .and_then(|info| {
                info.capabilities
                    .tools
                    .as_ref()
                    .and_then(|t| t.list_changed)
            })
            .unwrap_or(false);
        Ok(Arc::new(Session {
            service: tokio::sync::Mutex::new(Some(service)),
            peer,
            child,
            routes,
            announces_tool_changes,
        }))
    }

    /// The session to use now: the live one, or a new one when the old one died (stateful), or a
    /// fresh one for this operation only (stateless). Restarts back off and give up when the
    /// upstream keeps crashing; a call is never replayed, only the next one gets the new session.
    async fn session(&self) -> Result<(Arc<Session>, bool), ApiError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ApiError::not_found(format!(
                "{} was removed",
                py_repr(&self.name)
            )));
        }
        if !self.spec.is_stateful {
            let session = self.open_session().await.map_err(|e| {
                ApiError::bad_gateway(format!("connecting to {} failed: {e}", py_repr(&self.name)))
            })?;
            return Ok((session, true));
        }
        if let Some(s) = self.live_session() {
            return Ok((s, false));
        }
        let _turn = self.reconnect.lock().await;
        if let Some(s) = self.live_session() {
            return Ok((s, false));
        }
        let wait = {
            let mut health = self.health.lock().unwrap();
            let now = Instant::now();
            while health
                .recent_restarts
                .front()
                .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
            {
                health.recent_restarts.pop_front();
            }
            if health.recent_restarts.len() >= MAX_RESTARTS {
                health.state = "crashing";
                return Err(ApiError::bad_gateway(format!(
                    "upstream {} keeps crashing ({MAX_RESTARTS} restarts within {}s); last error: {}",
                    py_repr(&self.name),
                    RESTART_WINDOW.as_secs(),
                    health.last_error.as_deref().unwrap_or("unknown")
                )));
            }
            let backoff = Duration::from_millis(100 << health.recent_restarts.len().min(6));
            let since = health.died_at.map_or(backoff, |d| now.duration_since(d));
            health.state = "restarting";
            backoff.saturating_sub(since)
        };
        tokio::time::sleep(wait).await;
        match self.open_session().await {
            Ok(session) => {
                {
                    let mut health = self.health.lock().unwrap();
                    health.restarts += 1;
                    health.recent_restarts.push_back(Instant::now());
                }
                tracing::info!(mcp = %self.name, "upstream restarted");
                if !session.announces_tool_changes
                    && let Ok(tools) = fetch_tools(&session.peer).await
                {
                    self.tools.set(tools);
                }
                self.install(session.clone());
                Ok((session, false))
            }
            Err(e) => {
                let mut health = self.health.lock().unwrap();
                health.recent_restarts.push_back(Instant::now());
                health.died_at = Some(Instant::now());
                health.last_error = Some(e.clone());
                health.state = "failed";
                Err(ApiError::bad_gateway(format!(
                    "restarting upstream {} failed: {e}",
                    py_repr(&self.name)
                )))
            }
        }
    }

    /// The installed session if it is alive; a dead one is noted and dropped (closing it kills
    /// what is left of its process group).
    fn live_session(&self) -> Option<Arc<Session>> {
        let mut slot = self.session.lock().unwrap();
        match slot.as_ref() {
            Some(s) if s.alive() => Some(s.clone()),
            Some(_) => {
                let dead = slot.take().expect("checked");
                let mut health = self.health.lock().unwrap();
                health.state = "exited";
                health.died_at = Some(Instant::now());
                health.pid = None;
                tokio::spawn(async move { dead.close().await });
                None
            }
            None => None,
        }
    }

    /// Runs `op` on a session, closing it afterwards when it was made for this operation only.
    async fn with_session<T, F, Fut>(&self, op: F) -> Result<T, ApiError>
    where
        F: FnOnce(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, ApiError>>,
    {
        let (session, one_off) = self.session().await?;
        let result = op(session.clone()).await;
        if one_off {
            session.close().await;
        }
        result
    }

    /// The tools, filtered by the spec's `enable_tools`/`disable_tools` (as AgentScope's gateway
    /// lists them). Served from the cache when the server announces list changes, else fetched.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ApiError> {
        let current = self.live_session();
        let cached_is_true = current.is_some_and(|s| s.announces_tool_changes);
        let tools = if cached_is_true {
            self.tools.get()
        } else {
            self.refresh_tools().await?
        };
        Ok(tools
            .iter()
            .filter(|t| self.spec.lists_tool(&t.name))
            .cloned()
            .collect())
    }

    /// Lists the session's tools within the setup limit: `502` when listing fails, `504` past
    /// the limit.
    async fn list_within_limit(&self, session: &Session) -> Result<Vec<Tool>, ApiError> {
        let limit = self.setup_limit();
        match tokio::time::timeout(limit, fetch_tools(&session.peer)).await {
            Ok(listed) => listed.map_err(|e| {
                ApiError::bad_gateway(format!(
                    "listing the tools of {} failed: {e}",
                    py_repr(&self.name)
                ))
            }),
            Err(_) => Err(ApiError::timeout(format!(
                "listing the tools of {} took longer than {limit:?}",
                py_repr(&self.name)
            ))),
        }
    }

    async fn refresh_tools(&self) -> Result<Arc<Vec<Tool>>, ApiError> {
        let tools = self
            .with_session(|s| async move { self.list_within_limit(&s).await })
            .await?;
        self.tools.set(tools);
        Ok(self.tools.get())
    }

    /// Calls `tool` and returns the upstream's `CallToolResult` as JSON. `deadline` (from the
    /// request) can only shorten the MCP's `execution_timeout`; past it the upstream is sent
    /// `notifications/cancelled`. Progress goes to `progress` when given.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        progress: Option<ProgressSender>,
    ) -> Result<Value, ApiError> {
        let started = Instant::now();
        self.metrics.calls.fetch_add(1, Ordering::Relaxed);
        let result = self.call_inner(tool, arguments, deadline, progress).await;
        if result.is_err() {
            self.metrics.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics.latency.observe(started.elapsed());
        result
    }

    async fn call_inner(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        progress: Option<ProgressSender>,
    ) -> Result<Value, ApiError> {
        let known = |tools: &[Tool]| tools.iter().any(|t| t.name == tool);
        if !known(&self.tools.get()) && !known(&self.refresh_tools().await?) {
            return Err(ApiError::not_found(format!(
                "Tool {} not found in MCP server {}",
                py_repr(tool),
                py_repr(&self.name)
            )));
        }
        let (limit, limit_source) = self.deadline(deadline);
        let name = &self.name;
        self.with_session(|session| async move {
            let mut params = CallToolRequestParams::new(tool.to_string());
            params.arguments = arguments;
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            let handle = session
                .peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(limit))
                .await
                .map_err(|e| ApiError::bad_gateway(format!("sending the call to {} failed: {}", py_repr(name), error_chain(&e))))?;
            let mut guard = CallGuard {
                session: session.clone(),
                id: Some(handle.id.clone()),
                token: handle.progress_token.clone(),
            };
            if let Some(sender) = progress {
                session.routes.listen(handle.progress_token.clone(), sender);
            }
            let outcome = handle.await_response().await;
            guard.id = None;
            match outcome {
                Ok(ServerResult::CallToolResult(result)) => Ok(serde_json::to_value(result).expect("serializable")),
                Ok(ServerResult::EmptyResult(_)) => Ok(json!({"content": []})),
                Ok(other) => match serde_json::to_value(other) {
                    Ok(v @ Value::Object(_)) => Ok(v),
                    _ => Err(ApiError::bad_gateway(format!("{} answered the call with something that is not a tool result", py_repr(name)))),
                },
                Err(ServiceError::Timeout { .. }) => Err(ApiError::timeout(format!(
                    "tool {} of {} did not finish within its deadline of {} ({limit_source}); the upstream was told to cancel it",
                    py_repr(tool), py_repr(name), seconds(limit)
                ))),
                Err(ServiceError::McpError(e)) => Err(ApiError::bad_gateway(format!(
                    "{} answered with error {}: {}", py_repr(name), e.code.0, e.message
                ))),
                Err(ServiceError::TransportClosed) | Err(ServiceError::TransportSend(_)) => {
                    let report = session.death_report().await;
                    let report_for_health = report.clone();
                    self.note_death(report_for_health);
                    Err(ApiError::bad_gateway(format!(
                        "upstream {} {report} during the call to {}; the call was not retried",
                        py_repr(name), py_repr(tool)
                    )))
                }
                Err(e) => Err(ApiError::bad_gateway(format!("the call to {} failed: {}", py_repr(name), error_chain(&e)))),
            }
        })
        .await
    }

    fn note_death(&self, report: String) {
        let mut health = self.health.lock().unwrap();
        health.last_error = Some(report);
        health.died_at.get_or_insert_with(Instant::now);
    }

    /// The effective deadline of a call and a phrase naming where it came from.
    fn deadline(&self, requested: Option<Duration>) -> (Duration, String) {
        let own = self.spec.execution_timeout.map(Duration::from_secs_f64);
        match (own, requested) {
            (Some(o), Some(r)) if r < o => (r, "the request's timeout".into()),
            (Some(o), _) => (o, "the MCP's execution_timeout".into()),
            (None, Some(r)) => (r, "the request's timeout".into()),
            (None, None) => (
                self.settings.call_timeout,
                "the gateway's --call-timeout".into(),
            ),
        }
    }

    /// Replaces the runtime headers of an HTTP upstream; the next request carries them.
    pub fn set_runtime_headers(
        &self,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        match &self.spec.mcp_config {
            McpConfig::Http(c) if !c.is_legacy_sse() => {}
            _ => {
                return Err(ApiError::bad_request(
                    "Runtime headers require a Streamable HTTP MCP client.",
                ));
            }
        }
        mcpgw::wire::validate_headers(headers).map_err(ApiError::bad_request)?;
        let map = http::header_map(headers).map_err(ApiError::bad_request)?;
        *self.runtime_headers.write().unwrap() = map;
        Ok(())
    }

    /// The spec as `GET /mcps` shows it, with a `status` object.
    pub fn describe(&self) -> Value {
        let mut v = serde_json::to_value(&self.spec).expect("serializable");
        let _ = self.live_session();
        let health = self.health.lock().unwrap().clone();
        v["status"] = json!({
            "state": health.state,
            "pid": health.pid,
            "restarts": health.restarts,
            "last_error": health.last_error,
            "calls": self.metrics.calls.load(Ordering::Relaxed),
            "errors": self.metrics.errors.load(Ordering::Relaxed),
        });
        v
    }

    /// How many times the upstream was started again after dying.
    pub fn restarts(&self) -> u64 {
        self.health.lock().unwrap().restarts
    }

    /// Whether calls can be served now without (re)connecting first.
    pub fn is_up(&self) -> bool {
        !self.spec.is_stateful || self.live_session().is_some()
    }

    /// Closes the upstream for good: no new calls, the session and its processes ended.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _turn = self.reconnect.lock().await;
        let session = self.session.lock().unwrap().take();
        if let Some(session) = session {
            session.close().await;
        }
        self.health.lock().unwrap().state = "closed";
    }
}

/// Cancels the call upstream when the caller goes away before its answer (the HTTP client
/// disconnected, the handler future was dropped), and unroutes its progress.
struct CallGuard {
    session: Arc<Session>,
    id: Option<rmcp::model::RequestId>,
    token: ProgressToken,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.session.routes.forget(&self.token);
        if let Some(id) = self.id.take() {
            let peer = self.session.peer.clone();
            tokio::spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the gateway's caller went away".into()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}

/// An error with its causes, outermost first ("sending failed: connection error: invalid peer
/// certificate: UnknownIssuer"): the cause is usually what a person can act on.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Some errors repeat their cause in their own message.
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s}s")
    }
}
