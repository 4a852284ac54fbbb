//! The MCP server handler: tool listing, tool calls, cancellation bookkeeping.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rmcp::{
    ErrorData as McpError, Peer, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
        CancelledNotificationParam, ContentBlock, GetTaskParams, GetTaskResult, Implementation,
        InitializeRequestParams, InitializeResult, ListToolsResult, PaginatedRequestParams,
        ProgressNotificationParam, ProtocolVersion, RequestId, ServerCapabilities, ServerConfig,
        SubscriptionFilter,
    },
    service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink},
};
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use crate::{
    log,
    rounds::Rounds,
    stdout::Injector,
    tools::{self, Args},
};

/// How long a cancelled `slow` waits for the `notifications/cancelled` that explains
/// its cancellation token. rmcp cancels the token first and dispatches the
/// notification to [`ServerHandler::on_cancelled`] in a task of its own right after.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// Bound on remembered cancellations that no `slow` call has claimed.
const MAX_CANCEL_SLOTS: usize = 1024;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// State shared by every session of one server process.
pub struct Shared {
    extra_enabled: Mutex<bool>,
    /// Sessions that began with `initialize`: they get unsolicited list_changed notifications.
    session_peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Open `subscriptions/listen` streams (2026-07-28 lifecycle) that asked for list_changed.
    /// Keyed by a process-wide number: subscription ids repeat across sessions.
    subscriptions: Mutex<HashMap<u64, SubscriptionSink>>,
    next_subscription: AtomicU64,
    /// `confirm`'s rounds and `task`'s tasks.
    rounds: Arc<Rounds>,
}

impl Shared {
    /// Fresh state: `extra` disabled, no sessions.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            extra_enabled: Mutex::new(false),
            session_peers: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(HashMap::new()),
            next_subscription: AtomicU64::new(0),
            rounds: Arc::default(),
        })
    }

    fn extra_enabled(&self) -> bool {
        *lock(&self.extra_enabled)
    }

    fn live_session_peers(&self) -> Vec<Peer<RoleServer>> {
        let mut peers = lock(&self.session_peers);
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    }
}

/// The transport a [`TestServer`] instance serves.
#[derive(Clone)]
pub enum Transport {
    /// stdin/stdout; `garbage` writes through the injector.
    Stdio(Injector),
    /// Streamable HTTP; `headers` reads the request's HTTP parts.
    Http,
}

/// What on_cancelled has recorded about a request.
enum CancelSlot {
    /// `slow` is running and waits here for the reason.
    Waiting(oneshot::Sender<Option<String>>),
    /// The notification came before `slow` got to register.
    Cancelled(Option<String>),
}

/// One MCP session's handler (stdio has one; HTTP makes one per session).
pub struct TestServer {
    shared: Arc<Shared>,
    transport: Transport,
    /// Request ids are per session, and so is this map.
    cancels: Arc<Mutex<HashMap<RequestId, CancelSlot>>>,
}

/// Removes a request's cancel slot when `slow` finishes.
struct CancelRegistration {
    cancels: Arc<Mutex<HashMap<RequestId, CancelSlot>>>,
    id: RequestId,
}

impl Drop for CancelRegistration {
    fn drop(&mut self) {
        lock(&self.cancels).remove(&self.id);
    }
}

impl TestServer {
    /// A handler for one session on `transport`, sharing `shared` with the others.
    pub fn new(shared: Arc<Shared>, transport: Transport) -> Self {
        Self {
            shared,
            transport,
            cancels: Arc::default(),
        }
    }

    /// Returns a receiver that yields the reason once `notifications/cancelled` names `id`.
    fn register_cancel(
        &self,
        id: &RequestId,
    ) -> (CancelRegistration, oneshot::Receiver<Option<String>>) {
        let (tx, rx) = oneshot::channel();
        let mut cancels = lock(&self.cancels);
        match cancels.remove(id) {
            Some(CancelSlot::Cancelled(reason)) => {
                let _ = tx.send(reason);
            }
            _ => {
                cancels.insert(id.clone(), CancelSlot::Waiting(tx));
            }
        }
        let registration = CancelRegistration {
            cancels: self.cancels.clone(),
            id: id.clone(),
        };
        (registration, rx)
    }

    async fn slow(
        &self,
        args: Args<'_>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, String> {
        let seconds = Args::required(args.number("seconds"), "seconds")?
            .as_f64()
            .filter(|s| (0.0..=3600.0).contains(s))
            .ok_or("argument `seconds` must be between 0 and 3600")?;
        let steps = args.integer("steps", 0, 10_000)?.unwrap_or(5) as u64;
        let marker = args.str("cancel_marker")?.map(PathBuf::from);
        let (_registration, explicit_cancel) = self.register_cancel(&context.id);

        let progress_token = context.meta.get_progress_token();
        let total = Duration::from_secs_f64(seconds);
        let start = tokio::time::Instant::now();
        let done = AtomicU64::new(0);
        let work = async {
            if steps == 0 {
                tokio::time::sleep(total).await;
                return;
            }
            for i in 1..=steps {
                // Deadlines from the start, so slow notification sends do not add up.
                tokio::time::sleep_until(start + total.mul_f64(i as f64 / steps as f64)).await;
                if let Some(token) = &progress_token {
                    let progress = ProgressNotificationParam::new(token.clone(), i as f64)
                        .with_total(steps as f64)
                        .with_message(format!("step {i}/{steps}"));
                    let _ = context.peer.notify_progress(progress).await;
                }
                done.store(i, Ordering::Relaxed);
            }
        };

        tokio::select! {
            biased;
            () = context.ct.cancelled() => {}
            () = work => return Ok(text_result(format!("done after {steps} steps"))),
        }

        let done = done.load(Ordering::Relaxed);
        // The token also fires when the session ends (stdin closed, HTTP session
        // deleted); only a notifications/cancelled is a cancellation. A request of
        // the stateless HTTP lifecycle has no session and no such notification: its
        // client cancels by closing the response stream.
        let reason = tokio::time::timeout(CANCEL_GRACE, explicit_cancel).await;
        let stateless_http =
            matches!(self.transport, Transport::Http) && context.meta.protocol_version().is_some();
        let cancelled = match reason {
            Ok(Ok(reason)) => Some(reason),
            _ if stateless_http => Some(Some("response stream closed".to_owned())),
            _ => None,
        };
        let Some(reason) = cancelled else {
            log(&format!(
                "slow (request {}) stopped after {done}/{steps} steps: session closed",
                context.id
            ));
            return Ok(text_result("session closed"));
        };
        let reason = reason.map(|r| format!(" ({r})")).unwrap_or_default();
        log(&format!(
            "cancelled: slow (request {}) after {done}/{steps} steps{reason}",
            context.id
        ));
        // Written whole under another name, then renamed: a test that waits for the file to
        // appear reads all of it.
        if let Some(marker) = marker
            && let Err(e) = {
                let partial = marker.with_extension("partial");
                std::fs::write(&partial, "cancelled")
                    .and_then(|()| std::fs::rename(&partial, &marker))
            }
        {
            log(&format!(
                "cannot write cancel marker {}: {e}",
                marker.display()
            ));
        }
        // rmcp drops the response of a cancelled request; this is never sent.
        Ok(CallToolResult::error(vec![ContentBlock::text("cancelled")]))
    }

    async fn change_tools(&self) -> CallToolResult {
        let enabled = {
            let mut extra = lock(&self.shared.extra_enabled);
            *extra = !*extra;
            *extra
        };
        // Awaited, so the caller sees the notification before the result.
        for peer in self.shared.live_session_peers() {
            let _ = peer.notify_tool_list_changed().await;
        }
        let sinks = lock(&self.shared.subscriptions).clone();
        for (key, sink) in sinks {
            if sink.notify_tool_list_changed().await.is_err() {
                lock(&self.shared.subscriptions).remove(&key);
            }
        }
        let state = if enabled { "enabled" } else { "disabled" };
        log(&format!("extra tool {state}"));
        text_result(format!("extra tool {state}"))
    }

    fn headers(&self, context: &RequestContext<RoleServer>) -> Value {
        match self.transport {
            Transport::Stdio(_) => json!({}),
            Transport::Http => context
                .extensions
                .get::<http::request::Parts>()
                .map(|parts| tools::headers_json(&parts.headers))
                .unwrap_or_else(|| json!({})),
        }
    }

    async fn dispatch(
        &self,
        name: &str,
        args: Args<'_>,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResult, String>> {
        let result = match name {
            "echo" => Args::required(args.str("text"), "text").map(text_result),
            "echo_json" => Ok(CallToolResult::structured(Value::Object(args.0.clone()))),
            "add" => (|| {
                let a = Args::required(args.number("a"), "a")?;
                let b = Args::required(args.number("b"), "b")?;
                tools::add(a, b).map(CallToolResult::structured)
            })(),
            "media" => Ok(CallToolResult::success(tools::media_content())),
            "fail" => args.str("message").map(|m| {
                CallToolResult::error(vec![ContentBlock::text(m.unwrap_or("tool failed"))])
            }),
            "slow" => self.slow(args, context).await,
            "change_tools" => Ok(self.change_tools().await),
            "big" => Args::required(
                args.integer("bytes", 0, tools::BIG_MAX_BYTES as i64),
                "bytes",
            )
            .map(|n| text_result(tools::big_text(n as usize))),
            "crash" => crash(args),
            "garbage" => {
                if let Transport::Stdio(injector) = &self.transport {
                    injector.inject(tools::GARBAGE_LINE.as_bytes());
                }
                Ok(text_result("ok after garbage"))
            }
            "info" => Ok(CallToolResult::structured(tools::process_info())),
            "headers" => Ok(CallToolResult::structured(self.headers(context))),
            "extra" if self.shared.extra_enabled() => Ok(text_result("extra")),
            _ => return None,
        };
        Some(result)
    }
}

fn text_result(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// Bad arguments are a tool error, so the caller sees the message.
fn invalid_arguments(message: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "invalid arguments: {message}"
    ))])
}

fn crash(args: Args<'_>) -> Result<CallToolResult, String> {
    let code = args.integer("code", 0, 255)?.unwrap_or(3);
    let message = args.str("message")?.unwrap_or("crashing on purpose");
    eprintln!("{message}");
    std::process::exit(code as i32);
}

impl ServerHandler for TestServer {
    /// `MCPGW_TEST_PROTOCOLS` (comma-separated revisions) narrows what the server speaks, so
    /// that tests have upstreams of each revision.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        match std::env::var("MCPGW_TEST_PROTOCOLS") {
            Ok(list) => list
                .split(',')
                .filter_map(|v| {
                    ProtocolVersion::KNOWN_VERSIONS
                        .iter()
                        .find(|k| k.as_str() == v.trim())
                        .cloned()
                })
                .collect::<Vec<_>>()
                .into(),
            Err(_) => std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new(
            "mcpgw-testserver",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions("The MCP server mcpgw's tests run against.")
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        {
            let mut peers = lock(&self.shared.session_peers);
            peers.retain(|p| !p.is_transport_closed());
            peers.push(context.peer.clone());
        }
        let result = self.negotiate_initialize(&request)?;
        log(&format!(
            "initialize from {} {} (protocol {})",
            request.client_info.name, request.client_info.version, result.protocol_version
        ));
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::tool_list(
            self.shared.extra_enabled(),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name == "confirm" {
            return self.shared.rounds.confirm(&request);
        }
        let empty = Map::new();
        let args = Args(request.arguments.as_ref().unwrap_or(&empty));
        if request.name == "task" {
            let as_task = context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
            return Ok(match self.shared.rounds.task(args, as_task).await {
                Ok(response) => response,
                Err(message) => invalid_arguments(&message).into(),
            });
        }
        match self.dispatch(&request.name, args, &context).await {
            Some(Ok(result)) => Ok(result.into()),
            Some(Err(message)) => Ok(invalid_arguments(&message).into()),
            None => Err(McpError::invalid_params(
                format!("unknown tool: {}", request.name),
                None,
            )),
        }
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let Some(id) = notification.request_id else {
            return;
        };
        let reason = notification.reason;
        log(&format!(
            "notifications/cancelled for request {id}{}",
            reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
        let mut cancels = lock(&self.cancels);
        match cancels.remove(&id) {
            Some(CancelSlot::Waiting(tx)) => {
                let _ = tx.send(reason);
            }
            _ => {
                // Most cancelled requests are not `slow` and never claim their slot.
                if cancels.len() >= MAX_CANCEL_SLOTS {
                    cancels.retain(|_, slot| matches!(slot, CancelSlot::Waiting(_)));
                }
                cancels.insert(id, CancelSlot::Cancelled(reason));
            }
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.shared.rounds.get(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.shared.rounds.cancel(&request.task_id)
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        if context.accepted().tools_list_changed != Some(true) {
            context.cancelled().await;
            return Ok(());
        }
        let key = self
            .shared
            .next_subscription
            .fetch_add(1, Ordering::Relaxed);
        lock(&self.shared.subscriptions).insert(key, context.sink().clone());
        context.cancelled().await;
        lock(&self.shared.subscriptions).remove(&key);
        Ok(())
    }
}
