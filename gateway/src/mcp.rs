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

use mcpgw::wire::jsonrpc::{self, MODERN, Message, code, method};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::upstream::Upstream;
use crate::upstream::hub::Downstream;
use crate::upstream::param_headers;
use crate::upstream::rpc::Peer;
use crate::upstream::session::{Era, Session};

mod answered;
mod bridge;
mod downstream;
mod filter;
mod request;

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
            Some(method::INITIALIZE) => first["params"]["capabilities"].clone(),
            _ => first["params"]["_meta"][jsonrpc::META_CLIENT_CAPABILITIES].clone(),
        };
        let declared = if declared.is_object() {
            declared
        } else {
            json!({})
        };
        let era = Era::of_first_message(&first);
        if era == Era::Modern {
            // A host of 2026-07-28 says what it is on every request: its first one (a
            // stateless client's only one) declares it as `server/discover` would.
            let meta = &first["params"]["_meta"];
            self.state.lock().unwrap().host = Some(Host {
                version: meta[jsonrpc::META_PROTOCOL_VERSION]
                    .as_str()
                    .unwrap_or(MODERN)
                    .to_string(),
                capabilities: declared.clone(),
                info: meta[jsonrpc::META_CLIENT_INFO].clone(),
            });
        }
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
    fn send(&self, message: impl Into<Vec<u8>>) {
        if self.ended.is_cancelled() {
            return;
        }
        match self.out.try_send(message.into()) {
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
        let last = mcpgw::wire::rest::closed_line(reason);
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
            return self.send(jsonrpc::id_in_flight(id_text));
        }
        let modern_upstream = self.session().handshake.is_modern();
        match method {
            method::INITIALIZE => return self.initialize(id_text, params),
            method::DISCOVER => return self.discover(id_text, params),
            method::PING if modern_upstream => return self.reply(Some(id_text), Ok("{}")),
            method::SET_LEVEL => return self.set_level(id_text, params),
            method::RESOURCES_SUBSCRIBE | method::RESOURCES_UNSUBSCRIBE if !modern_upstream => {
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
        // The `Mcp-Param-*` headers the host endpoint took over HTTP, checked here (the
        // gateway has the tools' schemas) and never passed on.
        if let Some(given) = param_headers::take_given(&mut params)
            && method == method::TOOLS_CALL
            && let Err(why) = param_headers::check(&self.upstream.cached_tools(), &params, &given)
        {
            return self.reply_error(Some(id_text), code::HEADER_MISMATCH, &why);
        }
        let gw_id = self.session().peer.next_id();
        let progress = self.upstream_meta(&mut params, gw_id);
        let listen = method == method::SUBSCRIPTIONS_LISTEN;
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
        tokio::spawn(self.relay(gw_id, method.to_string(), params, had_params, listen));
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

    fn host_notification(self: Arc<Self>, method: &str, params: Option<&RawValue>) {
        match method {
            // A session of the host's own waits for it, as a server does for its client; the
            // shared session is initialized already.
            method::INITIALIZED => {
                if self.own_upstream && !self.session().handshake.is_modern() {
                    let peer = self.session().peer.clone();
                    tokio::spawn(async move {
                        let _ = peer.notify(method::INITIALIZED, None).await;
                    });
                }
            }
            method::CANCELLED => {
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
