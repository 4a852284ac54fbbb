//! Virtual MCP connections: a host's MCP client talks JSON-RPC to one registered MCP through
//! the gateway, which is the MCP server of the connection and relays it to the upstream's one
//! session, which every connection (and the REST surface) shares.
//!
//! - `initialize` and `server/discover` are answered from the upstream's own handshake
//!   (`serverInfo`, capabilities, instructions), in the revision the host asks for.
//! - Requests go to the upstream under ids of the gateway's, progress tokens too; the answer
//!   goes back under the host's id, its `result` or `error` exactly as the upstream wrote it.
//! - What the upstream sends on its own reaches the connections it concerns: progress and log
//!   messages of a request to the connection that sent it; list changes and resource updates
//!   to the connections that subscribed or listen; the upstream's requests (sampling,
//!   elicitation, roots) to the connection whose request caused them, else to one that
//!   declared the capability, with the answer going back upstream.
//! - The spec's `enable_tools` / `disable_tools` hold as on the REST surface: `tools/list`
//!   results lack the tools they exclude, and a `tools/call` of one is answered by the gateway
//!   with an error (`filter`).
//! - `notifications/cancelled` both ways; a connection that ends cancels what it has in flight
//!   upstream and ends its subscriptions.
//!
//! The host end is a byte stream of one JSON-RPC message a line (an HTTP/1.1 upgrade of
//! `GET /mcps/{name}/connection`, which `attach` carries as `open`/`msg`/`close` frames). The
//! gateway's last line before it closes the stream is `{"mcpgw":"closed","reason":...}`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use mcpgw::wire::jsonrpc::{self, LEGACY, MODERN, Message, code};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::upstream::Upstream;
use crate::upstream::hub::Downstream;
use crate::upstream::rpc::{Origin, Peer, Reply};
use crate::upstream::session::{Era, LEVELS, Session, severity};

mod bridge;
mod filter;

/// The upgrade token of a connection's HTTP/1.1 upgrade.
pub const UPGRADE: &str = "mcpgw-jsonrpc";

/// The bounds of virtual connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Connections open at once, over all channels.
    pub max_connections: usize,
    /// Messages queued for a host that does not read; past it the connection is cut off.
    pub max_queued: usize,
    /// Requests of the upstream waiting for one connection's host.
    pub max_pending: usize,
    /// The longest line a host may send.
    pub max_line_bytes: usize,
}

/// Every open connection, for the bound.
#[derive(Default)]
pub struct Registry {
    open: AtomicUsize,
    next: AtomicU64,
}

/// A reserved place among the open connections, freed on drop.
pub struct Slot(Arc<Registry>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Registry {
    /// A place for one more connection, unless `max` are open.
    pub fn reserve(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let mut open = self.open.load(Ordering::Acquire);
        loop {
            if open >= max {
                return None;
            }
            match self
                .open
                .compare_exchange(open, open + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(Slot(self.clone())),
                Err(now) => open = now,
            }
        }
    }
}

/// What the host declared of itself.
#[derive(Debug, Clone, Default)]
struct Host {
    /// The revision it speaks.
    version: String,
    /// Its capabilities.
    capabilities: Value,
    /// Its `clientInfo`.
    info: Value,
}

impl Host {
    fn modern(&self) -> bool {
        jsonrpc::is_modern(&self.version)
    }
}

/// A request of the host's in flight upstream.
struct InFlight {
    /// The host's id.
    host_id: Box<RawValue>,
    /// The host's progress token, when it asked for progress (the upstream got the gateway's
    /// id in its place).
    progress: Option<Box<RawValue>>,
    /// `subscriptions/listen`: its notifications carry the subscription id to rewrite.
    listen: bool,
    /// The upstream request that carries it now: the gateway's id at first, another one for
    /// each round of a multi round-trip request the gateway answers for the host.
    upstream_id: u64,
    /// Fires when it is forgotten (answered, cancelled, the connection ended).
    done: CancellationToken,
}

/// Who waits for the host's answer to a request made of it.
enum Waiter {
    /// The upstream, under its id for the request.
    Upstream { peer: Arc<Peer>, id: Box<RawValue> },
    /// The gateway, answering a multi round-trip request's input request for a legacy host.
    Gateway(oneshot::Sender<Result<String, String>>),
}

impl Waiter {
    /// Hands over the host's answer: its `result` or `error` object as JSON text.
    async fn settle(self, outcome: Result<&str, &str>) {
        match self {
            Waiter::Upstream { peer, id } => peer.respond(id.get(), outcome).await,
            Waiter::Gateway(tx) => {
                let _ = tx.send(outcome.map(str::to_owned).map_err(str::to_owned));
            }
        }
    }
}

/// A request made of the host, waiting for its answer.
struct Asked {
    waiter: Waiter,
    /// Ends its deadline's timer.
    timer: tokio::task::AbortHandle,
}

#[derive(Default)]
struct State {
    host: Option<Host>,
    /// By the gateway's id.
    in_flight: HashMap<u64, InFlight>,
    /// The host's ids in flight (their JSON text), to refuse one used twice.
    host_ids: HashMap<String, u64>,
    /// By the id the host got.
    asked: HashMap<u64, Asked>,
    next_asked: u64,
    /// The `logging/setLevel` of a legacy host.
    log_level: Option<String>,
    /// Resources a legacy host subscribed to.
    subscriptions: HashSet<String>,
}

/// One virtual connection.
pub struct Connection {
    number: u64,
    upstream: Arc<Upstream>,
    /// The upstream session, chosen when the host first says what it can do (its
    /// `initialize`, or the `_meta` of its first request).
    session: OnceLock<Arc<Session>>,
    /// Whether the session is this connection's alone (a stateless MCP's, or one asked for
    /// with `upstream=own`), to close at the end.
    own_session: std::sync::atomic::AtomicBool,
    /// Whether the host asked for a session of its own (`upstream=own`): opened with its
    /// handshake, its `notifications/initialized` passed on.
    own_upstream: bool,
    out: mpsc::Sender<Vec<u8>>,
    ended: CancellationToken,
    reason: Mutex<Option<String>>,
    state: Mutex<State>,
    limits: Limits,
    me: Weak<Connection>,
    _slot: Slot,
}

fn to_raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("a value serializes")
}

/// Serves one connection over `io` until either side ends it.
pub async fn serve<S>(
    io: S,
    upstream: Arc<Upstream>,
    own_upstream: bool,
    limits: Limits,
    slot: Slot,
    registry: Arc<Registry>,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (reader, mut writer) = tokio::io::split(io);
    let (out, mut queue) = mpsc::channel::<Vec<u8>>(limits.max_queued);
    let connection = Arc::new_cyclic(|me| Connection {
        number: registry.next.fetch_add(1, Ordering::Relaxed) + 1,
        upstream,
        session: OnceLock::new(),
        own_session: std::sync::atomic::AtomicBool::new(false),
        own_upstream,
        out,
        ended: CancellationToken::new(),
        reason: Mutex::new(None),
        state: Mutex::new(State::default()),
        limits,
        me: me.clone(),
        _slot: slot,
    });
    tracing::info!(mcp = %connection.upstream.name, connection = connection.number, "MCP connection opened");
    let ended = connection.ended.clone();
    let writing = tokio::spawn(async move {
        loop {
            tokio::select! {
                biased;
                line = queue.recv() => match line {
                    Some(mut line) => {
                        line.push(b'\n');
                        if writer.write_all(&line).await.is_err() {
                            return;
                        }
                    }
                    None => return,
                },
                () = ended.cancelled() => break,
            }
        }
        // What was queued before the end still goes, then the reason.
        while let Ok(mut line) = queue.try_recv() {
            line.push(b'\n');
            if writer.write_all(&line).await.is_err() {
                return;
            }
        }
        let _ = writer.flush().await;
    });
    let mut lines = BufReader::new(reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = read_line(&mut lines, &mut line, limits.max_line_bytes) => read,
            () = connection.ended.cancelled() => break,
        };
        match read {
            Ok(true) => {
                if connection.session.get().is_none() && !connection.choose_session(&line).await {
                    break;
                }
                connection.clone().host_line(&line)
            }
            Ok(false) => {
                connection.end("the client closed the connection");
                break;
            }
            Err(e) => {
                connection.end(&e);
                break;
            }
        }
    }
    connection.finish().await;
    let reason = connection
        .reason
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_default();
    let _ = writing.await;
    tracing::info!(mcp = %connection.upstream.name, connection = connection.number, "MCP connection closed: {reason}");
}

/// Reads one line of at most `max` bytes into `line` (without its newline); false at the end.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    max: usize,
) -> Result<bool, String> {
    loop {
        let buf = reader
            .fill_buf()
            .await
            .map_err(|e| format!("reading from the client failed: {e}"))?;
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        let (take, done) = match memchr::memchr(b'\n', buf) {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max {
            return Err(format!(
                "the client sent a message longer than {max} bytes: the connection was closed"
            ));
        }
        line.extend_from_slice(&buf[..take.min(buf.len())]);
        reader.consume(take);
        if done {
            line.pop();
            return Ok(true);
        }
    }
}

impl Connection {
    /// The upstream session (chosen before any message is handled).
    fn session(&self) -> &Arc<Session> {
        self.session.get().expect("chosen on the first message")
    }

    /// Chooses the upstream session from the host's first message: one that declared what
    /// the host declares (a legacy upstream's session may be started again for it); false
    /// when there is none to be had (the connection then ends with the reason).
    async fn choose_session(self: &Arc<Self>, first: &[u8]) -> bool {
        let first = std::str::from_utf8(first)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .unwrap_or_default();
        let declared = match first["method"].as_str() {
            Some("initialize") => first["params"]["capabilities"].clone(),
            _ => first["params"]["_meta"][jsonrpc::META_CLIENT_CAPABILITIES].clone(),
        };
        let declared = if declared.is_object() {
            declared
        } else {
            json!({})
        };
        let era = Era::of_first_message(&first);
        let chosen = if self.own_upstream {
            self.upstream
                .own_session(&first, &declared, era)
                .await
                .map(|s| (s, true))
        } else {
            self.upstream.session_declaring(&declared, era).await
        };
        match chosen {
            Ok((session, own)) => {
                self.own_session.store(own, Ordering::Relaxed);
                session.hub.attach(self.clone());
                let _ = self.session.set(session);
                true
            }
            Err(e) => {
                let (_, detail) = e.status_and_detail();
                self.end(&format!("no upstream session: {detail}"));
                false
            }
        }
    }

    /// Queues one message for the host; a host that has not read the last
    /// [`Limits::max_queued`] is cut off.
    fn send(&self, message: Vec<u8>) {
        if self.ended.is_cancelled() {
            return;
        }
        match self.out.try_send(message) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => self.end(&format!(
                "the client read none of the last {} messages: the connection was cut off",
                self.limits.max_queued
            )),
            Err(mpsc::error::TrySendError::Closed(_)) => self.end("the client went away"),
        }
    }

    fn reply(&self, id: Option<&str>, outcome: Result<&str, &str>) {
        self.send(jsonrpc::response(id, outcome));
    }

    fn reply_error(&self, id: Option<&str>, code: i64, message: &str) {
        self.send(jsonrpc::error_response(id, code, message));
    }

    /// Ends the connection (once): why goes to the host as the last line.
    fn end(&self, reason: &str) {
        let mut slot = self.reason.lock().unwrap();
        if slot.is_some() {
            return;
        }
        *slot = Some(reason.to_string());
        drop(slot);
        let last = json!({"mcpgw": "closed", "reason": reason}).to_string();
        let _ = self.out.try_send(last.into_bytes());
        self.ended.cancel();
    }

    /// After the end: everything in flight upstream is cancelled, the upstream's requests
    /// waiting for this host are failed, its subscriptions end.
    async fn finish(&self) {
        let Some(session) = self.session.get() else {
            return;
        };
        session.hub.detach(self.number);
        let state = std::mem::take(&mut *self.state.lock().unwrap());
        for entry in state.in_flight.values() {
            entry.done.cancel();
            session
                .peer
                .cancel(entry.upstream_id, "the MCP client's connection closed")
                .await;
        }
        for (_, asked) in state.asked {
            asked.timer.abort();
            let error = jsonrpc::error_object(
                code::INTERNAL_ERROR,
                "the MCP client that was asked closed its connection",
                None,
            );
            asked.waiter.settle(Err(error.get())).await;
        }
        for uri in state.subscriptions {
            session.unsubscribe(&uri).await;
        }
        session.forget_level(self.number).await;
        if self.own_session.load(Ordering::Relaxed) {
            session.close().await;
        }
    }

    /// Handles one line from the host.
    fn host_line(self: Arc<Self>, line: &[u8]) {
        let Ok(text) = std::str::from_utf8(line) else {
            return self.reply_error(None, code::PARSE_ERROR, "the message is not UTF-8");
        };
        if text.trim().is_empty() {
            return;
        }
        match jsonrpc::parse(text) {
            Err(invalid) => self.reply_error(
                invalid.id.map(RawValue::get),
                invalid.code,
                &invalid.message,
            ),
            Ok(Message::Request { id, method, params }) => self.host_request(id, method, params),
            Ok(Message::Notification { method, params }) => self.host_notification(method, params),
            Ok(Message::Response { id, outcome }) => self.host_answer(id, outcome),
        }
    }

    fn host_request(self: Arc<Self>, id: &RawValue, method: &str, params: Option<&RawValue>) {
        let id_text = id.get();
        if self.state.lock().unwrap().host_ids.contains_key(id_text) {
            return self.reply_error(
                Some(id_text),
                code::INVALID_REQUEST,
                &format!("request id {id_text} is already in flight: this request was refused"),
            );
        }
        let modern_upstream = self.session().handshake.is_modern();
        match method {
            "initialize" => return self.initialize(id_text, params),
            "server/discover" => return self.discover(id_text, params),
            "ping" if modern_upstream => return self.reply(Some(id_text), Ok("{}")),
            "logging/setLevel" => return self.set_level(id_text, params),
            "resources/subscribe" | "resources/unsubscribe" if !modern_upstream => {
                return self.subscription(id_text, method, params);
            }
            _ => {}
        }
        let had_params = params.is_some();
        let mut params: Map<String, Value> = match params {
            Some(p) => match serde_json::from_str(p.get()) {
                Ok(map) => map,
                Err(_) => {
                    return self.reply_error(
                        Some(id_text),
                        code::INVALID_PARAMS,
                        "\"params\" must be an object",
                    );
                }
            },
            None => Map::new(),
        };
        if let Some(refusal) = self.refused_by_filters(method, &params) {
            return self.reply_error(Some(id_text), filter::TOOL_DISABLED, &refusal);
        }
        let gw_id = self.session().peer.next_id();
        let mut progress = None;
        {
            let state = self.state.lock().unwrap();
            let meta = params.get_mut("_meta").and_then(Value::as_object_mut);
            if let Some(meta) = meta {
                if let Some(token) = meta
                    .get("progressToken")
                    .filter(|t| t.is_string() || t.is_number())
                {
                    progress = Some(to_raw(token));
                    meta.insert("progressToken".into(), json!(gw_id));
                }
                if !modern_upstream {
                    // What a modern host sends per request is the legacy upstream's session.
                    meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
                }
            }
            if modern_upstream {
                let host = state.host.clone().unwrap_or_default();
                let meta = params
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(meta) = meta {
                    meta.entry(jsonrpc::META_PROTOCOL_VERSION)
                        .or_insert_with(|| json!(MODERN));
                    meta.entry(jsonrpc::META_CLIENT_CAPABILITIES)
                        .or_insert_with(|| host.capabilities.clone());
                    if !host.info.is_null() {
                        meta.entry(jsonrpc::META_CLIENT_INFO)
                            .or_insert_with(|| host.info.clone());
                    }
                    if let Some(level) = &state.log_level {
                        meta.entry(jsonrpc::META_LOG_LEVEL)
                            .or_insert_with(|| json!(level));
                    }
                }
                if params["_meta"].as_object().is_some_and(Map::is_empty) {
                    params.remove("_meta");
                }
            } else if params
                .get("_meta")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                params.remove("_meta");
            }
        }
        let listen = method == "subscriptions/listen";
        {
            let mut state = self.state.lock().unwrap();
            state.host_ids.insert(id_text.to_string(), gw_id);
            state.in_flight.insert(
                gw_id,
                InFlight {
                    host_id: id.to_owned(),
                    progress: progress.clone(),
                    listen,
                    upstream_id: gw_id,
                    done: CancellationToken::new(),
                },
            );
        }
        if progress.is_some() {
            self.session()
                .hub
                .route_to(&gw_id.to_string(), self.clone() as Arc<dyn Downstream>);
        }
        let method = method.to_string();
        // A subscription lasts as long as the host keeps it; every other request has the
        // MCP's deadline, over all its rounds.
        let (limit, _) = self.upstream.deadline(None);
        let deadline = tokio::time::Instant::now() + limit;
        tokio::spawn(async move {
            let mut upstream_id = gw_id;
            // A request the host sent without params goes without them.
            let mut text = (!params.is_empty() || had_params)
                .then(|| Value::Object(params.clone()).to_string());
            let mut rounds = 0;
            let reply = loop {
                let pending = self
                    .session()
                    .peer
                    .request_with_id(upstream_id, &method, text.as_deref())
                    .await;
                // Cancelled by the host, or the connection ended, before it went out: its
                // cancel may have gone first, so it is cancelled again.
                if self.in_flight_done(gw_id).is_none() {
                    let peer = &self.session().peer;
                    return peer
                        .cancel(upstream_id, "cancelled by the MCP client")
                        .await;
                }
                let reply = if listen {
                    Some(pending.reply().await)
                } else {
                    tokio::time::timeout_at(deadline, pending.reply())
                        .await
                        .ok()
                };
                let Some(Reply::Ok(result)) = &reply else {
                    break reply;
                };
                let Some(asks) = self.input_required(&method, result) else {
                    break reply;
                };
                rounds += 1;
                match self.answer_inputs(gw_id, asks, rounds, deadline).await {
                    Ok(Some(next)) => {
                        let mut params = params.clone();
                        params.extend(next);
                        text = Some(Value::Object(params).to_string());
                        upstream_id = self.session().peer.next_id();
                        if !self.carry(gw_id, upstream_id) {
                            return;
                        }
                    }
                    // Cancelled by the host, or the connection ended.
                    Ok(None) => return,
                    Err(gap) => {
                        if let Some(entry) = self.forget(gw_id) {
                            self.reply_error(Some(entry.host_id.get()), code::INTERNAL_ERROR, &gap);
                        }
                        return;
                    }
                }
            };
            let Some(entry) = self.forget(gw_id) else {
                // Cancelled by the host, or the connection ended.
                return;
            };
            let host_id = entry.host_id.get();
            match reply {
                Some(Reply::Ok(result)) if let Some(gap) = self.gap(&result) => {
                    self.reply_error(Some(host_id), code::INTERNAL_ERROR, &gap)
                }
                Some(Reply::Ok(result)) => {
                    let filtered = self.filtered_result(&method, &result);
                    self.reply(
                        Some(host_id),
                        Ok(filtered.as_deref().unwrap_or(result.get())),
                    )
                }
                Some(Reply::Err(error)) => self.reply(Some(host_id), Err(error.get())),
                Some(Reply::Closed(reason)) => self.reply_error(
                    Some(host_id),
                    code::INTERNAL_ERROR,
                    &format!("the upstream session ended: {reason}"),
                ),
                None => {
                    self.session()
                        .peer
                        .cancel(upstream_id, "the request's deadline passed")
                        .await;
                    self.reply_error(
                        Some(host_id),
                        code::INTERNAL_ERROR,
                        &format!("{method} did not complete within {limit:?} (the MCP's deadline): the upstream was told to cancel it"),
                    );
                }
            }
        });
    }

    /// Forgets request `gw_id`; what it was, if it was still in flight.
    fn forget(&self, gw_id: u64) -> Option<InFlight> {
        let mut state = self.state.lock().unwrap();
        let entry = state.in_flight.remove(&gw_id)?;
        state.host_ids.remove(entry.host_id.get());
        drop(state);
        entry.done.cancel();
        if entry.progress.is_some() {
            self.session().hub.forget(&gw_id.to_string());
        }
        Some(entry)
    }

    /// `initialize`: answered from the upstream's handshake, in the revision the host asks for
    /// when the gateway speaks it (else the newest legacy one).
    fn initialize(&self, id: &str, params: Option<&RawValue>) {
        #[derive(Deserialize, Default)]
        struct Init {
            #[serde(default, rename = "protocolVersion")]
            protocol_version: String,
            #[serde(default)]
            capabilities: Value,
            #[serde(default, rename = "clientInfo")]
            client_info: Value,
        }
        let init: Init = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let handshake = &self.session().handshake;
        // A session of the host's own answered its `initialize`: in the revision it chose.
        let version = if self.own_upstream && !handshake.is_modern() {
            handshake.version.clone()
        } else if LEGACY.contains(&init.protocol_version.as_str()) {
            init.protocol_version.clone()
        } else {
            LEGACY[0].to_string()
        };
        let mut result = if handshake.is_modern() {
            let mut r = json!({"capabilities": handshake.capabilities, "serverInfo": handshake.server_info});
            if let Some(i) = &handshake.instructions {
                r["instructions"] = json!(i);
            }
            r
        } else {
            serde_json::from_str(handshake.result.get()).unwrap_or_else(|_| json!({}))
        };
        result["protocolVersion"] = json!(version);
        self.state.lock().unwrap().host = Some(Host {
            version,
            capabilities: init.capabilities.clone(),
            info: init.client_info,
        });
        self.reply(Some(id), Ok(&result.to_string()));
    }

    /// `server/discover`: the upstream's own answer when it speaks 2026-07-28, else one made
    /// from its `initialize` result.
    fn discover(&self, id: &str, params: Option<&RawValue>) {
        let meta = params
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
            .map(|p| p["_meta"].clone())
            .unwrap_or_default();
        let host = Host {
            version: meta[jsonrpc::META_PROTOCOL_VERSION]
                .as_str()
                .unwrap_or(MODERN)
                .to_string(),
            capabilities: meta[jsonrpc::META_CLIENT_CAPABILITIES].clone(),
            info: meta[jsonrpc::META_CLIENT_INFO].clone(),
        };
        self.state.lock().unwrap().host = Some(host);
        let handshake = &self.session().handshake;
        if handshake.is_modern() {
            return self.reply(Some(id), Ok(handshake.result.get()));
        }
        let mut versions = vec![MODERN];
        versions.extend(LEGACY);
        let mut result = json!({
            "resultType": "complete",
            "supportedVersions": versions,
            "capabilities": handshake.capabilities,
            "_meta": {jsonrpc::META_SERVER_INFO: handshake.server_info},
        });
        if let Some(i) = &handshake.instructions {
            result["instructions"] = json!(i);
        }
        self.reply(Some(id), Ok(&result.to_string()));
    }

    /// `logging/setLevel`: the level is the connection's. A legacy upstream is set to the most
    /// verbose level any connection asked for; each connection gets the messages at or above
    /// its own.
    fn set_level(self: Arc<Self>, id: &str, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Level {
            level: String,
        }
        let Some(level) = params
            .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
            .map(|l| l.level)
            .filter(|l| LEVELS.contains(&l.as_str()))
        else {
            return self.reply_error(
                Some(id),
                code::INVALID_PARAMS,
                &format!(
                    "logging/setLevel needs a level: one of {}",
                    LEVELS.join(", ")
                ),
            );
        };
        self.state.lock().unwrap().log_level = Some(level.clone());
        if self.session().handshake.is_modern() {
            return self.reply(Some(id), Ok("{}"));
        }
        let id = id.to_string();
        tokio::spawn(async move {
            let outcome = self.session().set_level(self.number, &level).await;
            match outcome {
                Ok(()) => self.reply(Some(&id), Ok("{}")),
                Err(e) => self.reply(Some(&id), Err(e.get())),
            }
        });
    }

    /// `resources/subscribe` and `unsubscribe` of a legacy upstream: one upstream subscription
    /// per resource, however many connections hold it.
    fn subscription(self: Arc<Self>, id: &str, method: &str, params: Option<&RawValue>) {
        #[derive(Deserialize)]
        struct Uri {
            uri: String,
        }
        let Some(uri) = params
            .and_then(|p| serde_json::from_str::<Uri>(p.get()).ok())
            .map(|u| u.uri)
        else {
            return self.reply_error(
                Some(id),
                code::INVALID_PARAMS,
                &format!("{method} needs a uri"),
            );
        };
        let subscribe = method == "resources/subscribe";
        let changed = {
            let mut state = self.state.lock().unwrap();
            if subscribe {
                state.subscriptions.insert(uri.clone())
            } else {
                state.subscriptions.remove(&uri)
            }
        };
        let id = id.to_string();
        tokio::spawn(async move {
            let outcome = match (changed, subscribe) {
                (false, _) => Ok(()),
                (true, true) => self.session().subscribe(&uri).await,
                (true, false) => {
                    self.session().unsubscribe(&uri).await;
                    Ok(())
                }
            };
            match outcome {
                Ok(()) => self.reply(Some(&id), Ok("{}")),
                Err(e) => {
                    self.state.lock().unwrap().subscriptions.remove(&uri);
                    self.reply(Some(&id), Err(e.get()))
                }
            }
        });
    }

    fn host_notification(self: Arc<Self>, method: &str, params: Option<&RawValue>) {
        match method {
            // A session of the host's own waits for it, as a server does for its client; the
            // shared session is initialized already.
            "notifications/initialized" => {
                if self.own_upstream && !self.session().handshake.is_modern() {
                    let peer = self.session().peer.clone();
                    tokio::spawn(async move {
                        let _ = peer.notify("notifications/initialized", None).await;
                    });
                }
            }
            "notifications/cancelled" => {
                #[derive(Deserialize)]
                struct Cancel<'a> {
                    #[serde(borrow, rename = "requestId")]
                    request_id: Option<&'a RawValue>,
                    #[serde(default)]
                    reason: Option<String>,
                }
                let Some(cancel) =
                    params.and_then(|p| serde_json::from_str::<Cancel>(p.get()).ok())
                else {
                    return;
                };
                let Some(host_id) = cancel.request_id else {
                    return;
                };
                let gw_id = self
                    .state
                    .lock()
                    .unwrap()
                    .host_ids
                    .get(host_id.get())
                    .copied();
                if let Some(entry) = gw_id.and_then(|gw_id| self.forget(gw_id)) {
                    let reason = cancel
                        .reason
                        .unwrap_or_else(|| "cancelled by the MCP client".into());
                    let upstream_id = entry.upstream_id;
                    tokio::spawn(
                        async move { self.session().peer.cancel(upstream_id, &reason).await },
                    );
                }
            }
            _ => {
                let (method, params) = (method.to_string(), params.map(|p| p.get().to_string()));
                tokio::spawn(async move {
                    let _ = self.session().peer.notify(&method, params.as_deref()).await;
                });
            }
        }
    }

    /// The host's answer to a request of the upstream's.
    fn host_answer(self: Arc<Self>, id: &RawValue, outcome: Result<&RawValue, &RawValue>) {
        let Some(asked) = id
            .get()
            .parse::<u64>()
            .ok()
            .and_then(|n| self.state.lock().unwrap().asked.remove(&n))
        else {
            tracing::debug!(
                connection = self.number,
                "an answer to no request of the upstream ({})",
                id.get()
            );
            return;
        };
        asked.timer.abort();
        let outcome = outcome
            .map(|r| r.get().to_string())
            .map_err(|e| e.get().to_string());
        tokio::spawn(async move {
            let outcome = outcome.as_ref().map(String::as_str).map_err(String::as_str);
            asked.waiter.settle(outcome).await;
        });
    }

    fn host(&self) -> Option<Host> {
        self.state.lock().unwrap().host.clone()
    }

    /// Rewrites a notification's subscription id from the gateway's to the host's; `None`
    /// when it is not one of this connection's subscriptions.
    fn own_subscription(&self, params: &RawValue) -> Option<Option<String>> {
        let mut value: Value = serde_json::from_str(params.get()).ok()?;
        let Some(sub) = value["_meta"][jsonrpc::META_SUBSCRIPTION_ID].as_u64() else {
            return Some(None);
        };
        let state = self.state.lock().unwrap();
        let entry = state.in_flight.get(&sub).filter(|e| e.listen)?;
        value["_meta"][jsonrpc::META_SUBSCRIPTION_ID] =
            serde_json::from_str(entry.host_id.get()).unwrap_or_default();
        Some(Some(value.to_string()))
    }
}

impl Connection {
    /// Sends the host request `method` under an id of the gateway's; `waiter` gets the answer,
    /// or an error when the host has too many unanswered already, does not answer within
    /// `limit` (the host is then told it was cancelled) or closes the connection. The id.
    fn ask(
        &self,
        method: &str,
        params: Option<&str>,
        limit: Duration,
        waiter: Waiter,
    ) -> Option<u64> {
        let me = self.me.upgrade()?;
        let mut state = self.state.lock().unwrap();
        if state.asked.len() >= self.limits.max_pending {
            drop(state);
            let message = self.too_many_asked(method);
            tokio::spawn(async move {
                let error = jsonrpc::error_object(code::INTERNAL_ERROR, &message, None);
                waiter.settle(Err(error.get())).await;
            });
            return None;
        }
        state.next_asked += 1;
        let ours = state.next_asked;
        let method_owned = method.to_string();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            let Some(asked) = me.state.lock().unwrap().asked.remove(&ours) else {
                return;
            };
            let message = format!("the MCP client did not answer {method_owned} within {limit:?}");
            let error = jsonrpc::error_object(code::INTERNAL_ERROR, &message, None);
            asked.waiter.settle(Err(error.get())).await;
            me.withdraw(ours, &message);
        })
        .abort_handle();
        state.asked.insert(ours, Asked { waiter, timer });
        drop(state);
        self.send(jsonrpc::request(&ours.to_string(), method, params));
        Some(ours)
    }

    /// Why `method` is not asked of the host: it has [`Limits::max_pending`] unanswered.
    fn too_many_asked(&self, method: &str) -> String {
        format!(
            "{method}: the MCP client has {} requests unanswered already",
            self.limits.max_pending
        )
    }

    /// Tells the host that request `ours` made of it is no longer wanted.
    fn withdraw(&self, ours: u64, reason: &str) {
        let params = json!({"requestId": ours, "reason": reason});
        self.send(jsonrpc::notification(
            "notifications/cancelled",
            Some(&params.to_string()),
        ));
    }
}

impl Downstream for Connection {
    fn number(&self) -> u64 {
        self.number
    }

    fn notification(&self, method: &str, params: Option<&RawValue>, origin: Origin) {
        let Some(host) = self.host() else { return };
        let own_origin = origin.is_some_and(|o| self.owns(o));
        if origin.is_some() && !own_origin && method == "notifications/message" {
            return;
        }
        // A notification of a subscription stream is the subscriber's alone.
        let rewritten: Option<String> = match params.map(|p| self.own_subscription(p)) {
            None | Some(Some(None)) => None,
            Some(Some(Some(text))) => Some(text),
            Some(None) => {
                // Another subscriber's: a legacy host still gets the list changes it expects
                // unasked, from the gateway's own subscription.
                if host.modern() || !method.ends_with("/list_changed") {
                    return;
                }
                None
            }
        };
        match method {
            "notifications/message" if !own_origin => {
                #[derive(Deserialize)]
                struct Level {
                    #[serde(default)]
                    level: String,
                }
                let level = params
                    .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
                    .map(|l| l.level)
                    .unwrap_or_default();
                let wanted = self.state.lock().unwrap().log_level.clone();
                if wanted.is_some_and(|w| severity(&level) < severity(&w)) {
                    return;
                }
            }
            "notifications/resources/updated" if rewritten.is_none() => {
                #[derive(Deserialize)]
                struct Uri {
                    #[serde(default)]
                    uri: String,
                }
                let uri = params
                    .and_then(|p| serde_json::from_str::<Uri>(p.get()).ok())
                    .map(|u| u.uri)
                    .unwrap_or_default();
                if !self.state.lock().unwrap().subscriptions.contains(&uri) {
                    return;
                }
            }
            "notifications/cancelled" => {
                // The upstream withdrew a request it asked this host (or another one).
                #[derive(Deserialize)]
                struct Cancel<'a> {
                    #[serde(borrow, rename = "requestId")]
                    request_id: Option<&'a RawValue>,
                }
                let Some(upstream_id) = params
                    .and_then(|p| serde_json::from_str::<Cancel>(p.get()).ok())
                    .and_then(|c| c.request_id)
                else {
                    return;
                };
                let mut state = self.state.lock().unwrap();
                let Some(ours) = state
                    .asked
                    .iter()
                    .find(|(_, a)| {
                        matches!(&a.waiter, Waiter::Upstream { id, .. } if id.get() == upstream_id.get())
                    })
                    .map(|(n, _)| *n)
                else {
                    return;
                };
                if let Some(asked) = state.asked.remove(&ours) {
                    asked.timer.abort();
                }
                drop(state);
                return self.withdraw(ours, "the upstream withdrew its request");
            }
            _ => {}
        }
        let params = rewritten.or_else(|| params.map(|p| p.get().to_string()));
        self.send(jsonrpc::notification(method, params.as_deref()));
    }

    fn progress(&self, token: &str, params: &RawValue) {
        let Ok(gw_id) = token.parse::<u64>() else {
            return;
        };
        let host_token = {
            let state = self.state.lock().unwrap();
            match state.in_flight.get(&gw_id).and_then(|e| e.progress.clone()) {
                Some(t) => t,
                None => return,
            }
        };
        let Ok(mut value) = serde_json::from_str::<Value>(params.get()) else {
            return;
        };
        value["progressToken"] = serde_json::from_str(host_token.get()).unwrap_or_default();
        self.send(jsonrpc::notification(
            "notifications/progress",
            Some(&value.to_string()),
        ));
    }

    fn modern(&self) -> bool {
        self.host().is_some_and(|h| h.modern())
    }

    fn owns(&self, id: u64) -> bool {
        let state = self.state.lock().unwrap();
        state.in_flight.contains_key(&id) || state.in_flight.values().any(|e| e.upstream_id == id)
    }

    fn can_answer(&self, method: &str, params: Option<&RawValue>) -> bool {
        let Some(host) = self.host() else {
            return false;
        };
        // A host of 2026-07-28 takes no requests from its server.
        if host.modern() {
            return false;
        }
        let caps = &host.capabilities;
        match method {
            "sampling/createMessage" => caps.get("sampling").is_some(),
            "roots/list" => caps.get("roots").is_some(),
            "elicitation/create" => {
                let url_mode = params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .is_some_and(|p| p["mode"] == "url");
                match caps.get("elicitation") {
                    None => false,
                    Some(e) if url_mode => e.get("url").is_some(),
                    // An empty elicitation capability is form mode (2025-11-25).
                    Some(_) => true,
                }
            }
            _ => false,
        }
    }

    fn upstream_request(
        &self,
        peer: &Arc<Peer>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) {
        let (limit, _) = self.upstream.deadline(None);
        let waiter = Waiter::Upstream {
            peer: peer.clone(),
            id: id.to_owned(),
        };
        self.ask(method, params.map(RawValue::get), limit, waiter);
    }

    fn session_ended(&self, reason: &str) {
        self.end(&format!(
            "the upstream's session ended ({reason}): reconnect to start over"
        ));
    }
}
