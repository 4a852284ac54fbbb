//! A session with an upstream: opening it (spawn a stdio child, or connect over streamable HTTP
//! or legacy SSE, then the handshake of the newest revision the upstream offers, within a
//! limit), and closing it.
//!
//! The revision: a server of 2026-07-28 has no `initialize`; it answers `server/discover`, and
//! every request carries its revision and the client's capabilities in `_meta`. For the
//! [`Era::Modern`] the gateway asks `server/discover` first (stdio and streamable HTTP; legacy
//! SSE predates it) and falls back to `initialize` on anything but a discovery result, as the
//! revision's backward compatibility rules say. For the [`Era::Legacy`] (a session for hosts of
//! 2025) it sends `initialize` first and asks `server/discover` only when the server refuses
//! it; a server that ends the connection on refusing it (a stdio server of the modern era
//! alone) is started or connected once more, for a modern session. A server that speaks both keeps to the era of its first answer (a stdio process cannot
//! be both), so the era is chosen when the session opens.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcpgw::wire::McpConfig;
use mcpgw::wire::jsonrpc::{self, LEGACY, MODERN, code, method};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::hub::Hub;
use super::logs::UpstreamLog;
use super::rpc::{Peer, Pending, Reply, Sink, Wire};
use super::stdio::ChildProcess;
use super::tools::ToolCache;
use super::{http, sse, stdio};

/// How long a `server/discover` probe waits before taking the server for a legacy one (some
/// legacy servers answer nothing to a request before `initialize`).
const PROBE_LIMIT: Duration = Duration::from_secs(3);

/// What the gateway calls itself to upstreams.
pub fn client_info() -> Value {
    json!({"name": "mcpgw-gateway", "version": env!("CARGO_PKG_VERSION")})
}

/// The two generations of the protocol: the handshake revisions of 2025 (`initialize`, a
/// session) and 2026-07-28 (`server/discover`, `_meta` on every request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2024-11-05 to 2025-11-25.
    Legacy,
    /// 2026-07-28.
    Modern,
}

impl Era {
    /// The era of a host whose first message is `first` (`initialize` with a handshake
    /// revision is a legacy host's; anything else, `server/discover` or a request with the
    /// revision's `_meta`, a modern one's).
    pub fn of_first_message(first: &Value) -> Era {
        let method = first["method"].as_str();
        let modern_meta = first["params"]["_meta"][jsonrpc::META_PROTOCOL_VERSION]
            .as_str()
            .is_some_and(jsonrpc::is_modern);
        match method {
            Some(method::INITIALIZE) => Era::Legacy,
            Some(method::DISCOVER) => Era::Modern,
            _ if modern_meta => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// The other era.
    pub fn other(self) -> Era {
        match self {
            Era::Legacy => Era::Modern,
            Era::Modern => Era::Legacy,
        }
    }
}

/// What the handshake learnt of the upstream.
#[derive(Debug, Clone)]
pub struct Handshake {
    /// The revision in use.
    pub version: String,
    /// The server's capabilities.
    pub capabilities: Value,
    /// The server's name and version (`serverInfo`).
    pub server_info: Value,
    /// The server's instructions.
    pub instructions: Option<String>,
    /// The capabilities the gateway declared (legacy revisions declare them once).
    pub declared: Value,
    /// The `initialize` or `server/discover` result as the server sent it.
    pub result: Arc<RawValue>,
    /// Whether the server also speaks the other era: a discovery listing a handshake revision
    /// (`Some(true)`), or a discovery refused before `initialize` (`Some(false)`); `None` when
    /// the handshake did not find out.
    pub other_era: Option<bool>,
}

impl Handshake {
    /// Whether the upstream speaks 2026-07-28 (no session; `_meta` on every request).
    pub fn is_modern(&self) -> bool {
        jsonrpc::is_modern(&self.version)
    }

    /// The era of the session.
    pub fn era(&self) -> Era {
        if self.is_modern() {
            Era::Modern
        } else {
            Era::Legacy
        }
    }

    /// `params` as the gateway's own requests send them: with the revision's `_meta` for a
    /// modern upstream (the gateway's REST calls declare no capabilities).
    pub fn params(&self, mut params: Map<String, Value>) -> String {
        if self.is_modern() {
            let meta = params
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(jsonrpc::META_PROTOCOL_VERSION.into(), json!(self.version));
                meta.insert(jsonrpc::META_CLIENT_CAPABILITIES.into(), json!({}));
                meta.insert(jsonrpc::META_CLIENT_INFO.into(), client_info());
            }
        }
        Value::Object(params).to_string()
    }

    /// Whether the server promised `notifications/tools/list_changed`.
    pub fn announces_tool_changes(&self) -> bool {
        self.capabilities["tools"]["listChanged"] == json!(true)
    }
}

/// One live connection to the upstream.
pub struct Session {
    /// Sends requests and notifications to the upstream.
    pub peer: Arc<Peer>,
    /// Routes what the upstream sends on its own.
    pub hub: Arc<Hub>,
    child: Option<ChildProcess>,
    /// What the handshake learnt.
    pub handshake: Handshake,
    /// A modern upstream's `subscriptions/listen` for the gateway's own tool list (and the
    /// list changes legacy hosts expect unasked): kept open for the session's life.
    _listen: std::sync::Mutex<Option<Pending>>,
    /// Resource subscriptions of a legacy upstream: how many connections hold each.
    subscriptions: tokio::sync::Mutex<HashMap<String, usize>>,
    /// The `logging/setLevel` of each connection, and the level the upstream was set to.
    levels: tokio::sync::Mutex<(HashMap<u64, String>, Option<String>)>,
}

/// The levels of `notifications/message`, least severe first.
pub const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Where `level` stands among [`LEVELS`] (0 for one not there).
pub fn severity(level: &str) -> usize {
    LEVELS.iter().position(|l| *l == level).unwrap_or(0)
}

impl Session {
    /// Whether the transport is open and the child (if any) has not exited.
    pub fn alive(&self) -> bool {
        !self.peer.is_closed()
            && self
                .child
                .as_ref()
                .is_none_or(|c| c.exit_status().is_none())
    }

    /// The process id of a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.pid)
    }

    /// Whether the server promised `notifications/tools/list_changed`.
    pub fn announces_tool_changes(&self) -> bool {
        self.handshake.announces_tool_changes()
    }

    /// Subscribes the session to `uri` for a connection: the upstream is asked once, however
    /// many connections hold the subscription. The error is the upstream's.
    pub async fn subscribe(&self, uri: &str) -> Result<(), Box<RawValue>> {
        let mut held = self.subscriptions.lock().await;
        let count = held.entry(uri.to_string()).or_default();
        *count += 1;
        if *count > 1 {
            return Ok(());
        }
        let params = json!({"uri": uri}).to_string();
        match self
            .peer
            .request(method::RESOURCES_SUBSCRIBE, Some(&params))
            .await
            .reply()
            .await
        {
            Reply::Ok(_) => Ok(()),
            failed => {
                held.remove(uri);
                Err(match failed {
                    Reply::Err(e) => e,
                    Reply::Closed(reason) => {
                        jsonrpc::error_object(code::INTERNAL_ERROR, &reason, None)
                    }
                    Reply::Ok(_) => unreachable!("matched above"),
                })
            }
        }
    }

    /// A connection lets go of its subscription to `uri`; the last one unsubscribes upstream.
    pub async fn unsubscribe(&self, uri: &str) {
        let mut held = self.subscriptions.lock().await;
        let Some(count) = held.get_mut(uri) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            held.remove(uri);
            let params = json!({"uri": uri}).to_string();
            let _ = self
                .peer
                .request(method::RESOURCES_UNSUBSCRIBE, Some(&params))
                .await
                .reply()
                .await;
        }
    }

    /// Sets connection `connection`'s log level; the upstream gets the most verbose level any
    /// connection asked for. The error is the upstream's.
    pub async fn set_level(&self, connection: u64, level: &str) -> Result<(), Box<RawValue>> {
        let mut levels = self.levels.lock().await;
        levels.0.insert(connection, level.to_string());
        self.apply_levels(&mut levels).await
    }

    /// Connection `connection` ended: its level no longer counts.
    pub async fn forget_level(&self, connection: u64) {
        let mut levels = self.levels.lock().await;
        if levels.0.remove(&connection).is_some() {
            let _ = self.apply_levels(&mut levels).await;
        }
    }

    async fn apply_levels(
        &self,
        levels: &mut (HashMap<u64, String>, Option<String>),
    ) -> Result<(), Box<RawValue>> {
        let Some(wanted) = levels.0.values().min_by_key(|l| severity(l)).cloned() else {
            return Ok(());
        };
        if levels.1.as_deref() == Some(wanted.as_str()) {
            return Ok(());
        }
        let params = json!({"level": wanted}).to_string();
        match self
            .peer
            .request(method::SET_LEVEL, Some(&params))
            .await
            .reply()
            .await
        {
            Reply::Ok(_) => {
                levels.1 = Some(wanted);
                Ok(())
            }
            Reply::Err(e) => Err(e),
            Reply::Closed(reason) => {
                Err(jsonrpc::error_object(code::INTERNAL_ERROR, &reason, None))
            }
        }
    }

    /// Closes the session: the transport first (a stdio server sees EOF), then whatever of its
    /// processes is left.
    pub async fn close(&self) {
        self._listen.lock().unwrap().take();
        self.peer.shut("the session was closed").await;
        if let Some(child) = &self.child {
            child.terminate(Duration::from_millis(500)).await;
        }
    }

    /// Why the session is gone, for error messages.
    pub async fn death_report(&self) -> String {
        match &self.child {
            Some(child) => format!("exited ({})", child.death_report().await),
            None => match self.peer.close_reason() {
                r if r.is_empty() => "closed the connection".to_string(),
                r => r,
            },
        }
    }
}

/// What opening a session needs.
pub struct Opening<'a> {
    /// The MCP's name, for logs.
    pub name: &'a str,
    /// How to reach it.
    pub config: &'a McpConfig,
    /// Runtime headers of a streamable HTTP upstream, read on every request.
    pub runtime_headers: &'a http::SharedHeaders,
    /// Where tool list changes go.
    pub tools: &'a Arc<ToolCache>,
    /// How long spawning or connecting plus the handshake may take.
    pub limit: Duration,
    /// The largest message accepted from the upstream.
    pub max_reply_bytes: usize,
    /// Where its log messages and stderr go.
    pub log: &'a Arc<UpstreamLog>,
    /// The client capabilities to declare (what the host connections declared).
    pub capabilities: Value,
    /// The era to ask for first.
    pub era: Era,
    /// A host's own `initialize` params, sent as they are for a session of its own (its
    /// `notifications/initialized` is then the host's to send); `None` for the gateway's.
    pub host_initialize: Option<&'a Value>,
}

/// Starts a new session: spawn or connect, then the handshake, within `limit`. The error is
/// the reason, for a person. A server that refuses a legacy session by ending its connection
/// is opened once more, for a modern one.
pub async fn open(o: Opening<'_>) -> Result<Arc<Session>, String> {
    match open_once(&o, o.era).await {
        Err(Failure::ClosedOnRefusal(_)) if o.era == Era::Legacy => open_once(&o, Era::Modern)
            .await
            .map_err(Failure::into_reason),
        done => done.map_err(Failure::into_reason),
    }
}

impl From<String> for Failure {
    fn from(reason: String) -> Failure {
        Failure::Failed(reason)
    }
}

impl Failure {
    fn into_reason(self) -> String {
        match self {
            Failure::ClosedOnRefusal(r) | Failure::Failed(r) => r,
        }
    }
}

async fn open_once(o: &Opening<'_>, era: Era) -> Result<Arc<Session>, Failure> {
    let sink = Sink::default();
    let hub = Hub::new(o.name, o.log.clone(), o.tools.clone());
    let limit = o.limit;
    let (wire, child, probe): (Box<dyn Wire>, _, _) = match o.config {
        McpConfig::Stdio(config) => {
            let (child, wire) = stdio::spawn(
                o.name,
                config,
                o.max_reply_bytes,
                o.log.clone(),
                sink.clone(),
            )?;
            (Box::new(wire), Some(child), true)
        }
        McpConfig::Http(config) if config.is_legacy_sse() => {
            let connected = tokio::time::timeout(
                limit,
                sse::connect(o.name, config, o.max_reply_bytes, sink.clone()),
            )
            .await
            .map_err(|_| format!("{}: no event stream within {limit:?}", config.url))?;
            (Box::new(connected?), None, false)
        }
        McpConfig::Http(config) => {
            let wire = http::connect(
                config,
                o.runtime_headers.clone(),
                o.max_reply_bytes,
                sink.clone(),
                o.tools.clone(),
            )?;
            (Box::new(wire), None, true)
        }
    };
    let peer = Peer::new(o.name, wire, &sink, hub.clone());
    let shaken = tokio::time::timeout(
        limit,
        handshake(&peer, probe, era, &o.capabilities, o.host_initialize),
    )
    .await;
    let handshake = match shaken {
        Ok(Ok(h)) => h,
        failed => {
            let (reason, failure): (_, fn(String) -> Failure) = match failed {
                Ok(Err(Failure::ClosedOnRefusal(e))) => {
                    (format!("initialize failed: {e}"), Failure::ClosedOnRefusal)
                }
                Ok(Err(Failure::Failed(e))) => (format!("initialize failed: {e}"), Failure::Failed),
                _ => (
                    format!("no answer to initialize within {limit:?}"),
                    Failure::Failed,
                ),
            };
            peer.shut("the handshake failed").await;
            return Err(failure(match (&child, o.config) {
                (Some(child), _) => {
                    let report = if child.exit_status().is_some()
                        || child.wait_exit(Duration::from_millis(200)).await.is_some()
                    {
                        format!("; the server {}", child.death_report().await)
                    } else {
                        String::new()
                    };
                    child.terminate(Duration::ZERO).await;
                    format!("{reason}{report}")
                }
                (None, McpConfig::Http(config)) => match http::diagnose(config).await {
                    Some(cause) if !config.is_legacy_sse() => {
                        format!("cannot reach {}: {cause}", config.url)
                    }
                    _ => format!("{}: {reason}", config.url),
                },
                (None, _) => reason,
            }));
        }
    };
    peer.wire().handshaken(&handshake.version);
    let _ = hub.handshake.set(handshake.clone());
    let listen = if handshake.is_modern() {
        open_listen(&peer, &handshake).await
    } else {
        None
    };
    // When the transport ends, the session's connections learn why.
    let (watch_peer, watch_hub) = (peer.clone(), hub.clone());
    tokio::spawn(async move {
        watch_peer.closed().await;
        watch_hub.session_ended(&watch_peer.close_reason());
    });
    Ok(Arc::new(Session {
        peer,
        hub,
        child,
        handshake,
        _listen: std::sync::Mutex::new(listen),
        subscriptions: Default::default(),
        levels: Default::default(),
    }))
}

/// A modern upstream's list changes reach the gateway only on a `subscriptions/listen`
/// stream: one is opened for every list change the server offers.
async fn open_listen(peer: &Arc<Peer>, handshake: &Handshake) -> Option<Pending> {
    let caps = &handshake.capabilities;
    let mut filter = Map::new();
    for (capability, flag) in [
        ("tools", "toolsListChanged"),
        ("prompts", "promptsListChanged"),
        ("resources", "resourcesListChanged"),
    ] {
        if caps[capability]["listChanged"] == json!(true) {
            filter.insert(flag.into(), json!(true));
        }
    }
    if filter.is_empty() {
        return None;
    }
    let mut params = Map::new();
    params.insert("notifications".into(), Value::Object(filter));
    Some(
        peer.request(
            method::SUBSCRIPTIONS_LISTEN,
            Some(&handshake.params(params)),
        )
        .await,
    )
}

#[derive(Deserialize)]
struct Discovered {
    #[serde(default, rename = "supportedVersions")]
    supported_versions: Vec<String>,
    #[serde(default)]
    capabilities: Value,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default, rename = "_meta")]
    meta: Value,
}

#[derive(Deserialize)]
struct Initialized {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(default)]
    capabilities: Value,
    #[serde(default, rename = "serverInfo")]
    server_info: Value,
    #[serde(default)]
    instructions: Option<String>,
}

fn error_text(error: &RawValue) -> String {
    let (code, message) = jsonrpc::error_parts(error);
    format!("{message} (JSON-RPC error {code})")
}

/// The handshake of `era` when the server speaks it, else of the other one: for the modern
/// era `server/discover` first (when `probe`: the transport has it), else or then
/// `initialize`; for the legacy era `initialize` first, then `server/discover` (when `probe`)
/// if the server refuses it. `capabilities` are the client's, declared either way.
async fn handshake(
    peer: &Arc<Peer>,
    probe: bool,
    era: Era,
    capabilities: &Value,
    host_initialize: Option<&Value>,
) -> Result<Handshake, Failure> {
    let discovered = |raw: Box<RawValue>| -> Option<Handshake> {
        let d = serde_json::from_str::<Discovered>(raw.get()).ok()?;
        d.supported_versions
            .iter()
            .any(|v| v == MODERN)
            .then(|| Handshake {
                version: MODERN.into(),
                capabilities: d.capabilities,
                server_info: d.meta[jsonrpc::META_SERVER_INFO].clone(),
                instructions: d.instructions,
                declared: capabilities.clone(),
                result: raw.into(),
                other_era: Some(
                    d.supported_versions
                        .iter()
                        .any(|v| LEGACY.contains(&v.as_str())),
                ),
            })
    };
    let discover_params = || {
        json!({"_meta": {
            jsonrpc::META_PROTOCOL_VERSION: MODERN,
            jsonrpc::META_CLIENT_CAPABILITIES: capabilities,
            jsonrpc::META_CLIENT_INFO: client_info(),
        }})
        .to_string()
    };
    if era == Era::Legacy {
        return match legacy_handshake(peer, capabilities, host_initialize).await {
            Err(LegacyFailure::Refused(e)) if probe => {
                let asked = peer
                    .request(method::DISCOVER, Some(&discover_params()))
                    .await;
                match asked.reply().await {
                    Reply::Ok(raw) => discovered(raw).ok_or(Failure::Failed(e)),
                    // A server that ends its connection when it refuses `initialize` (a stdio
                    // server of the modern era alone does): a new connection of that era.
                    Reply::Closed(_) => Err(Failure::ClosedOnRefusal(e)),
                    Reply::Err(_) => Err(Failure::Failed(e)),
                }
            }
            done => done.map_err(|e| Failure::Failed(e.into_reason())),
        };
    }
    // A probe with no answer yet: a slow server may still answer it after `initialize`
    // failed (a modern server refuses `initialize`).
    let mut unanswered = None;
    let mut refused = None;
    if probe {
        let asked = peer
            .request(method::DISCOVER, Some(&discover_params()))
            .await;
        let mut reply = Box::pin(asked.reply());
        match tokio::time::timeout(PROBE_LIMIT, &mut reply).await {
            Ok(Reply::Ok(raw)) => {
                if let Some(h) = discovered(raw) {
                    return Ok(h);
                }
            }
            Ok(Reply::Closed(reason)) => return Err(Failure::Failed(reason)),
            // An error (a modern server without this revision answers -32022; a legacy one
            // whatever it answers before `initialize`): `initialize` it is.
            Ok(Reply::Err(_)) => refused = Some(false),
            Err(_) => unanswered = Some(reply),
        }
    }
    match legacy_handshake(peer, capabilities, host_initialize).await {
        Err(e) if unanswered.is_some() => match unanswered.expect("checked").await {
            Reply::Ok(raw) => discovered(raw).ok_or_else(|| Failure::Failed(e.into_reason())),
            _ => Err(Failure::Failed(e.into_reason())),
        },
        done => done
            .map(|h| Handshake {
                other_era: refused,
                ..h
            })
            .map_err(|e| Failure::Failed(e.into_reason())),
    }
}

/// Why a handshake did not make a session.
enum Failure {
    /// The server refused `initialize`, then ended the connection: a new connection of the
    /// modern era may still make one.
    ClosedOnRefusal(String),
    /// Anything else.
    Failed(String),
}

/// Why `initialize` did not make a session.
enum LegacyFailure {
    /// The server answered it with an error (a modern server refuses it).
    Refused(String),
    /// Anything else: the connection closed, a malformed answer.
    Failed(String),
}

impl LegacyFailure {
    fn into_reason(self) -> String {
        match self {
            LegacyFailure::Refused(r) | LegacyFailure::Failed(r) => r,
        }
    }
}

/// `initialize`, then `notifications/initialized`; or the host's own `initialize`, whose
/// `notifications/initialized` is the host's to send.
async fn legacy_handshake(
    peer: &Arc<Peer>,
    capabilities: &Value,
    host_initialize: Option<&Value>,
) -> Result<Handshake, LegacyFailure> {
    let params = match host_initialize {
        Some(params) => params.to_string(),
        None => json!({
            "protocolVersion": LEGACY[0],
            "capabilities": capabilities,
            "clientInfo": client_info(),
        })
        .to_string(),
    };
    let raw = match peer
        .request(method::INITIALIZE, Some(&params))
        .await
        .reply()
        .await
    {
        Reply::Ok(raw) => raw,
        Reply::Err(e) => return Err(LegacyFailure::Refused(error_text(&e))),
        Reply::Closed(reason) => return Err(LegacyFailure::Failed(reason)),
    };
    let init: Initialized = serde_json::from_str(raw.get()).map_err(|e| {
        LegacyFailure::Failed(format!("the server's initialize result is malformed: {e}"))
    })?;
    if !LEGACY.contains(&init.protocol_version.as_str()) {
        return Err(LegacyFailure::Refused(format!(
            "the server answered initialize with protocol version {:?}, which the gateway does not speak ({})",
            init.protocol_version,
            LEGACY.join(", ")
        )));
    }
    if host_initialize.is_none() {
        peer.notify(method::INITIALIZED, None)
            .await
            .map_err(LegacyFailure::Failed)?;
    }
    Ok(Handshake {
        version: init.protocol_version,
        capabilities: init.capabilities,
        server_info: init.server_info,
        instructions: init.instructions,
        declared: capabilities.clone(),
        result: raw.into(),
        other_era: None,
    })
}
