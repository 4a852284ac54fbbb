//! One upstream MCP server, split by job:
//! - [`session`]: opening a session (spawn a stdio child or connect over HTTP, then the MCP
//!   handshake) and closing it;
//! - [`supervisor`]: the restart policy (pure) and the supervision that applies it;
//! - [`tools`]: the tool list, cached or fetched;
//! - [`call`]: tool calls with their deadlines and cancellation;
//! - [`rpc`]: the gateway's JSON-RPC client of a session, which keeps every message as the
//!   upstream wrote it; [`hub`]: where what the upstream sends on its own goes;
//! - [`stdio`], [`http`], [`sse`]: the transports.
//!
//! Calls take the current session without holding any lock across the call; the session
//! multiplexes concurrent requests by JSON-RPC id. Only reconnecting is serialised, per
//! upstream, so a slow or crashing upstream never stalls another.

pub mod call;
pub mod counters;
pub mod http;
pub mod hub;
pub mod lines;
pub mod logs;
pub mod param_headers;
pub mod process;
pub mod rpc;
pub mod session;
pub mod sse;
pub mod stdio;
pub mod supervisor;
pub mod tls;
pub mod tools;

use mcpgw::wire::jsonrpc::method;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use mcpgw::wire::{McpConfig, McpEntry, McpSpec, McpState, McpStatus, spec};

use crate::error::Error;
use session::{Era, Handshake, Session};
use supervisor::RestartPolicy;
use tools::ToolCache;

/// Limits that apply to every upstream.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// A tool call's deadline when neither the MCP's `execution_timeout` nor the request sets one.
    pub call_timeout: Duration,
    /// How long spawning/connecting, initializing and the first tool listing may take.
    pub connect_timeout: Duration,
    /// The largest single message accepted from an upstream: a stdio line, an SSE event, an
    /// HTTP response.
    pub max_reply_bytes: usize,
    /// Log lines (log notifications and stderr lines) each upstream may write per second.
    pub log_lines_per_sec: u32,
}

/// What `GET /mcps` shows of an upstream's health, and the restart policy behind it.
#[derive(Debug)]
struct Health {
    state: McpState,
    pid: Option<u32>,
    last_error: Option<String>,
    policy: RestartPolicy,
}

/// Which era an upstream's sessions ask for, and which it speaks as far as known.
#[derive(Debug)]
struct Eras {
    wanted: Era,
    legacy: Option<bool>,
    modern: Option<bool>,
}

impl Eras {
    fn speaks(&mut self, era: Era) -> &mut Option<bool> {
        match era {
            Era::Legacy => &mut self.legacy,
            Era::Modern => &mut self.modern,
        }
    }

    /// Notes what a handshake that asked for `asked` found out.
    fn learn(&mut self, asked: Era, handshake: &Handshake) {
        let got = handshake.era();
        *self.speaks(got) = Some(true);
        if got != asked {
            *self.speaks(asked) = Some(false);
        }
        if let Some(other) = handshake.other_era {
            *self.speaks(got.other()) = Some(other);
        }
    }

    /// Whether the server is known to speak `era`.
    fn known_to_speak(&mut self, era: Era) -> bool {
        *self.speaks(era) == Some(true)
    }
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
    log: Arc<logs::UpstreamLog>,
    health: Mutex<Health>,
    closed: AtomicBool,
    /// The client capabilities new sessions declare: what the virtual connections' hosts
    /// declared (nothing while none did).
    capabilities: Mutex<serde_json::Value>,
    /// The era new sessions ask for first (the modern one until a connection's host of the
    /// other era has a session started for it), and what the handshakes so far learnt of the
    /// eras the server speaks.
    eras: Mutex<Eras>,
    /// The sessions of connections of their own (`upstream=own`), to close with the MCP.
    own: Mutex<Vec<std::sync::Weak<Session>>>,
    /// Calls, errors and latency, for `/metrics`.
    pub metrics: counters::UpstreamMetrics,
}

impl Upstream {
    /// The tool list as last fetched (no request made).
    pub fn cached_tools(&self) -> Arc<Vec<mcpgw::wire::Tool>> {
        self.tools.get()
    }

    /// Connects (for a stateful MCP, keeping the session), lists the tools, and returns the
    /// ready upstream. Dropping the future before it finishes leaves nothing running: a child
    /// spawned so far is killed with everything it started.
    pub async fn connect(
        spec: McpSpec,
        runtime_headers: &BTreeMap<String, String>,
        settings: Settings,
    ) -> Result<Arc<Upstream>, Error> {
        let headers = http::header_map(runtime_headers).map_err(Error::ConnectFailed)?;
        let upstream = Arc::new(Upstream {
            name: spec.name.clone(),
            runtime_headers: Arc::new(RwLock::new(headers)),
            settings,
            session: Mutex::new(None),
            reconnect: tokio::sync::Mutex::new(()),
            tools: Arc::default(),
            log: Arc::new(logs::UpstreamLog::new(
                &spec.name,
                settings.log_lines_per_sec,
            )),
            health: Mutex::new(Health {
                state: McpState::Connecting,
                pid: None,
                last_error: None,
                policy: RestartPolicy::default(),
            }),
            closed: AtomicBool::new(false),
            capabilities: Mutex::new(serde_json::json!({})),
            eras: Mutex::new(Eras {
                wanted: Era::Modern,
                legacy: None,
                modern: None,
            }),
            own: Mutex::new(Vec::new()),
            metrics: Default::default(),
            spec,
        });
        let session = upstream
            .open_session()
            .await
            .map_err(Error::ConnectFailed)?;
        let tools = match upstream.list_within_limit(&session).await {
            Ok(tools) => tools,
            Err(e) => {
                session.close().await;
                return Err(Error::ConnectFailed(e.to_string()));
            }
        };
        upstream.tools.set(tools);
        if upstream.spec.is_stateful {
            upstream.install(session);
        } else {
            session.close().await;
            upstream.health.lock().unwrap().state = McpState::Stateless;
        }
        Ok(upstream)
    }

    fn install(&self, session: Arc<Session>) {
        let mut health = self.health.lock().unwrap();
        health.state = McpState::Connected;
        health.pid = session.pid();
        *self.session.lock().unwrap() = Some(session);
    }

    /// How long connecting, initializing or listing tools may take: the gateway's connect
    /// timeout, shortened by an HTTP MCP's own `timeout` (AgentScope's HTTP timeout, 30 s by
    /// default). Tool calls have their own deadline.
    fn setup_limit(&self) -> Duration {
        match &self.spec.mcp_config {
            McpConfig::Http(http) => http_timeout(http)
                .map_or(self.settings.connect_timeout, |t| {
                    t.min(self.settings.connect_timeout)
                }),
            McpConfig::Stdio(_) => self.settings.connect_timeout,
        }
    }

    /// Starts a new session within the setup limit, in the era sessions ask for.
    async fn open_session(&self) -> Result<Arc<Session>, String> {
        let era = self.eras.lock().unwrap().wanted;
        self.open_session_in(era).await
    }

    /// Starts a new session within the setup limit, asking for `era` first.
    async fn open_session_in(&self, era: Era) -> Result<Arc<Session>, String> {
        let capabilities = self.capabilities.lock().unwrap().clone();
        let session = session::open(session::Opening {
            name: &self.name,
            config: &self.spec.mcp_config,
            runtime_headers: &self.runtime_headers,
            tools: &self.tools,
            limit: self.setup_limit(),
            max_reply_bytes: self.settings.max_reply_bytes,
            log: &self.log,
            capabilities,
            era,
            host_initialize: None,
        })
        .await?;
        self.eras.lock().unwrap().learn(era, &session.handshake);
        Ok(session)
    }

    /// A session of one connection's own (`upstream=own`): opened for its host whose first
    /// message is `first` (declaring `capabilities`), in its `era`, a legacy host's
    /// `initialize` sent as it is; with a tool list of its own (the registered MCP's stays
    /// the shared session's). The connection closes it when it ends.
    pub async fn own_session(
        &self,
        first: &serde_json::Value,
        capabilities: &serde_json::Value,
        era: Era,
    ) -> Result<Arc<Session>, Error> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Removed {
                name: self.name.clone(),
            });
        }
        let host_initialize =
            (era == Era::Legacy && first["method"] == method::INITIALIZE).then(|| &first["params"]);
        let session = session::open(session::Opening {
            name: &self.name,
            config: &self.spec.mcp_config,
            runtime_headers: &self.runtime_headers,
            tools: &Arc::default(),
            limit: self.setup_limit(),
            max_reply_bytes: self.settings.max_reply_bytes,
            log: &self.log,
            capabilities: capabilities.clone(),
            era,
            host_initialize,
        })
        .await
        .map_err(|reason| Error::SessionFailed {
            mcp: self.name.clone(),
            reason,
        })?;
        {
            let mut own = self.own.lock().unwrap();
            own.retain(|s| s.strong_count() > 0);
            own.push(Arc::downgrade(&session));
        }
        // Removed meanwhile: it goes with the rest.
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            session.close().await;
            return Err(Error::Removed {
                name: self.name.clone(),
            });
        }
        Ok(session)
    }

    /// Replaces the runtime headers of an HTTP upstream; the next request carries them.
    pub fn set_runtime_headers(&self, headers: &BTreeMap<String, String>) -> Result<(), Error> {
        self.spec
            .check_runtime_headers(headers)
            .map_err(Error::Invalid)?;
        let map = http::header_map(headers).map_err(Error::Invalid)?;
        *self.runtime_headers.write().unwrap() = map;
        Ok(())
    }

    /// The upstream's state now.
    pub fn state(&self) -> McpState {
        let _ = self.live_session();
        self.health.lock().unwrap().state
    }

    /// The spec as `GET /mcps` shows it, with its `status`.
    pub fn describe(&self) -> McpEntry {
        let _ = self.live_session();
        let health = self.health.lock().unwrap();
        McpEntry {
            spec: self.spec.masked(),
            status: Some(McpStatus {
                state: health.state,
                pid: health.pid,
                restarts: health.policy.restarts(),
                last_error: health.last_error.clone(),
                calls: self.metrics.calls.load(Ordering::Relaxed),
                errors: self.metrics.errors.load(Ordering::Relaxed),
            }),
        }
    }

    /// How many times the upstream was started again after dying.
    pub fn restarts(&self) -> u64 {
        self.health.lock().unwrap().policy.restarts()
    }

    /// Closes the upstream for good: no new calls, the session and its processes ended.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _turn = self.reconnect.lock().await;
        let session = self.session.lock().unwrap().take();
        if let Some(session) = session {
            session.close().await;
        }
        let own: Vec<_> = self.own.lock().unwrap().drain(..).collect();
        for session in own.iter().filter_map(std::sync::Weak::upgrade) {
            session.close().await;
        }
        self.health.lock().unwrap().state = McpState::Closed;
    }
}

/// An HTTP MCP's `timeout` as a duration; the registration validator has already refused
/// values that are not positive, finite and at most a day.
pub fn http_timeout(config: &mcpgw::wire::HttpConfig) -> Option<Duration> {
    config
        .timeout
        .and_then(|t| spec::timeout_secs("mcp_config.timeout", t).ok())
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
