//! One MCP client's link to one server of the sandbox: its virtual connection, and what it
//! takes to open it again unnoticed. A lost connection is opened again (the driver opens the
//! channel again), the client's `initialize` replayed, and requests that were in flight
//! answered with an error naming the loss.

use std::collections::{HashSet, VecDeque};
use std::task::{Context, Poll};
use std::time::Duration;

use mcpgw::ErrorKind;
use mcpgw::wire::jsonrpc::{self, Message, method};
use mcpgw_runner::{Connection, ConnectionEvent, Host};
use tokio::time::Instant;

use crate::cli::{Level, log};

/// How long a lost connection is tried again before the endpoint gives up.
const RECONNECT_FOR: Duration = Duration::from_secs(60);
/// How long between two tries.
const RECONNECT_EVERY: Duration = Duration::from_millis(250);
/// A connection lost sooner than this after it opened was never steady (its server ends
/// every connection at once): the next try waits [`RECONNECT_EVERY`], and the time since the
/// loss before counts on towards [`RECONNECT_FOR`].
const STEADY: Duration = Duration::from_secs(1);
/// Messages of a client kept while the connection is being (re)opened.
const MAX_QUEUED: usize = 10_000;

/// The answer to request `id` (its JSON text) that the endpoint or the sandbox could not
/// serve, `why` naming the cause.
pub fn sandbox_error(id: &str, why: &str) -> String {
    jsonrpc::error_response(Some(id), jsonrpc::code::SANDBOX_ERROR, why)
}

/// The id (as [`jsonrpc::id_key`] knows it) of a message that is a request.
pub fn request_id(msg: &Message<'_>) -> Option<String> {
    match msg {
        Message::Request { id, .. } => Some(jsonrpc::id_key(id).into_owned()),
        _ => None,
    }
}

/// A message of the client for the connection: sent, or waiting for it.
struct Going {
    text: String,
    /// Its id, when it is a request.
    request: Option<String>,
    /// Whether it is the client's `initialize`.
    handshake: bool,
}

/// One MCP client's link to one server of the sandbox: its virtual connection, and what it
/// takes to open it again unnoticed (the client's handshake, replayed).
pub struct Link {
    host: Host,
    mcp: String,
    conn: Option<Connection>,
    /// The client's `initialize` (its text), replayed on a new connection.
    initialize: Option<String>,
    /// Whether the client sent `notifications/initialized`.
    initialized: bool,
    /// Whether the client's `initialize` went out on a connection (a new one then gets it
    /// replayed).
    handshake_sent: bool,
    /// The id (JSON text) of the replayed `initialize`, whose answer the client never sees.
    replay_id: Option<String>,
    /// The client's requests the server has not answered (their ids' JSON text).
    in_flight: HashSet<String>,
    /// Messages waiting for the connection.
    queue: VecDeque<Going>,
    /// Since when the link has been trying to connect, and when it tries next.
    lost_at: Option<Instant>,
    retry_at: Option<Instant>,
    /// Since when the connection has been open, and since when the link had been trying
    /// when it opened.
    opened_at: Option<Instant>,
    lost_before: Option<Instant>,
    /// Why the link is dead for good, if it is.
    dead: Option<String>,
    level: Level,
    /// Whether its connections get an upstream session of their own (`upstream=own`): a
    /// client's session (stdio, or an HTTP session) meets the server as a client of its own
    /// would; a stateless request of 2026-07-28 shares the MCP's.
    own_upstream: bool,
}

impl Link {
    /// A link to `mcp`, not yet connected ([`Link::open`] connects it), with an upstream
    /// session of its own when `own_upstream`.
    pub fn new(host: Host, mcp: &str, level: Level, own_upstream: bool) -> Link {
        Link {
            own_upstream,
            host,
            mcp: mcp.to_owned(),
            conn: None,
            initialize: None,
            initialized: false,
            handshake_sent: false,
            replay_id: None,
            in_flight: HashSet::new(),
            queue: VecDeque::new(),
            lost_at: Some(Instant::now()),
            retry_at: Some(Instant::now()),
            opened_at: None,
            lost_before: None,
            dead: None,
            level,
        }
    }

    /// The server's name in the gateway.
    pub fn mcp(&self) -> &str {
        &self.mcp
    }

    /// Whether the connection is open.
    pub fn is_up(&self) -> bool {
        self.conn.is_some()
    }

    /// Why the link is dead for good, if it is.
    pub fn dead(&self) -> Option<&str> {
        self.dead.as_deref()
    }

    /// When the link wants [`Link::open`] called again (it is down and not dead).
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    /// One try at opening the connection: true when it is open (the client's handshake
    /// replayed, what waited sent). A try that fails for now schedules the next one; past
    /// [`RECONNECT_FOR`], or when the gateway refuses the server, the link is dead, and `out`
    /// receives the answers to the requests that waited for it.
    pub async fn open(&mut self, out: &mut Vec<String>) -> bool {
        self.retry_at = None;
        match self.try_open().await {
            Ok(true) => {
                self.opened_at = Some(Instant::now());
                self.lost_before = self.lost_at.take();
                true
            }
            Ok(false) => {
                let lost = *self.lost_at.get_or_insert_with(Instant::now);
                if lost.elapsed() > RECONNECT_FOR {
                    let why =
                        format!("the sandbox could not be reached again within {RECONNECT_FOR:?}");
                    self.die(why, out);
                } else {
                    self.retry_at = Some(Instant::now() + RECONNECT_EVERY);
                }
                false
            }
            Err(why) => {
                log(self.level, Level::Error, &format!("{}: {why}", self.mcp));
                self.die(why, out);
                false
            }
        }
    }

    /// The link is dead for good: every request still waiting (queued for a connection that
    /// will not come, or in flight) is answered with `why`, and every later one at once.
    fn die(&mut self, why: String, out: &mut Vec<String>) {
        for queued in self.queue.drain(..) {
            if let Some(id) = queued.request {
                out.push(sandbox_error(&id, &why));
            }
        }
        for id in self.in_flight.drain() {
            out.push(sandbox_error(&id, &why));
        }
        self.dead = Some(why);
    }

    /// Opens the connection, trying again until it is open or the link is dead (before the
    /// client has sent anything: nothing waits for it).
    pub async fn open_now(&mut self) -> bool {
        let mut nothing_waits = Vec::new();
        while self.dead.is_none() {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
            }
            if self.open(&mut nothing_waits).await {
                return true;
            }
        }
        false
    }

    /// `Ok(false)`: not now; `Err`: never.
    async fn try_open(&mut self) -> Result<bool, String> {
        let mut conn = match self
            .host
            .connect(&self.mcp, "", "", self.own_upstream)
            .await
        {
            Ok(conn) => conn,
            Err(e) if e.kind() == ErrorKind::InvalidState => {
                let state = self.host.state().await.map_err(|e| e.to_string())?;
                if state["session"] == "off" {
                    return Err("the session channel could not be opened again".into());
                }
                return Ok(false);
            }
            Err(e) => return Err(e.message().to_owned()),
        };
        match conn.recv().await {
            Some(ConnectionEvent::Opened) => {}
            Some(ConnectionEvent::Closed { reason, status, .. }) => {
                let reason = reason.unwrap_or_else(|| "closed".into());
                // 503: the server is (re)starting; other refusals are final.
                if status.is_some_and(|s| s != 503) {
                    return Err(reason);
                }
                log(self.level, Level::Info, &format!("connecting: {reason}"));
                return Ok(false);
            }
            _ => return Ok(false),
        }
        if let Some(init) = self.initialize.as_deref().filter(|_| self.handshake_sent) {
            let id = format!("\"mcpgw-replay-{}\"", mcpgw::random::hex_id());
            let replay = match jsonrpc::parse(init) {
                Ok(Message::Request { params, .. }) => {
                    jsonrpc::request(&id, method::INITIALIZE, params.map(|p| p.get()))
                }
                _ => return Err("the client's initialize cannot be read again".into()),
            };
            self.replay_id = Some(id);
            if conn.send(&replay).await.is_err() {
                return Ok(false);
            }
            if self.initialized
                && conn
                    .send(&jsonrpc::notification(method::INITIALIZED, None))
                    .await
                    .is_err()
            {
                return Ok(false);
            }
        }
        while let Some(queued) = self.queue.pop_front() {
            if conn.send(&queued.text).await.is_err() {
                self.queue.push_front(queued);
                return Ok(false);
            }
            self.handshake_sent |= queued.handshake;
        }
        self.conn = Some(conn);
        Ok(true)
    }

    /// A message from the client; `out` receives what to answer the client at once.
    pub async fn from_client(&mut self, text: &str, out: &mut Vec<String>) {
        match jsonrpc::parse(text) {
            Ok(msg) => self.send(&msg, text.trim(), out).await,
            Err(invalid) => out.push(invalid.answer()),
        }
    }

    /// Messages from the client that arrived together, in order: those for the connection go
    /// to it in one [`Connection::send_all`], so their frames travel together.
    pub async fn from_client_all(&mut self, texts: &[String], out: &mut Vec<String>) {
        let mut going = Vec::new();
        for text in texts {
            match jsonrpc::parse(text) {
                Ok(msg) => going.extend(self.prepare(&msg, text.trim(), out)),
                Err(invalid) => out.push(invalid.answer()),
            }
        }
        self.send_prepared(going, out).await;
    }

    /// Sends a message read by [`jsonrpc::parse`] (`text` is its JSON).
    pub async fn send(&mut self, msg: &Message<'_>, text: &str, out: &mut Vec<String>) {
        let going = self.prepare(msg, text, out);
        self.send_prepared(going.into_iter().collect(), out).await;
    }

    /// Sends what [`Link::prepare`] let through, in one [`Connection::send_all`], and takes
    /// note of how each went.
    async fn send_prepared(&mut self, mut going: Vec<Going>, out: &mut Vec<String>) {
        if going.is_empty() {
            return;
        }
        // What is left of each after this is its note (its id, whether it is the handshake).
        let texts = going
            .iter_mut()
            .map(|g| std::mem::take(&mut g.text))
            .collect();
        let results = match &self.conn {
            Some(conn) => conn.send_all(texts).await.map_err(|e| e.to_string()),
            None => Err("closed".to_owned()),
        };
        match results {
            Ok(results) => {
                for (g, result) in going.into_iter().zip(results) {
                    self.sent(g, result.map_err(|e| e.to_string()), out);
                }
            }
            Err(why) => {
                for g in going {
                    self.sent(g, Err(why.clone()), out);
                }
            }
        }
    }

    /// Takes note of a message of the client before it is sent: what it means for the
    /// handshake and what is in flight. It returns the message when it is for the connection;
    /// otherwise it was queued for one, or answered in `out`, or dropped (a dead link's
    /// notification).
    fn prepare(&mut self, msg: &Message<'_>, text: &str, out: &mut Vec<String>) -> Option<Going> {
        let handshake =
            matches!(msg, Message::Request { method, .. } if *method == method::INITIALIZE);
        if matches!(msg, Message::Notification { method, .. } if *method == method::INITIALIZED) {
            self.initialized = true;
        }
        let request = request_id(msg);
        if let Some(id) = &request {
            if let Some(why) = &self.dead {
                out.push(sandbox_error(id, why));
                return None;
            }
            if handshake {
                self.initialize = Some(text.to_owned());
            }
            self.in_flight.insert(id.clone());
        }
        if self.dead.is_some() {
            return None;
        }
        let going = Going {
            text: text.to_owned(),
            request,
            handshake,
        };
        if self.conn.is_some() {
            return Some(going);
        }
        if self.queue.len() < MAX_QUEUED {
            self.queue.push_back(going);
        } else {
            self.sent(
                going,
                Err("too many messages wait for the sandbox".into()),
                out,
            );
        }
        None
    }

    /// Takes note of how sending `going` went: a request that could not be sent is answered
    /// with why.
    fn sent(&mut self, going: Going, result: Result<(), String>, out: &mut Vec<String>) {
        match result {
            Ok(()) => self.handshake_sent |= going.handshake,
            Err(refused) => {
                if let Some(id) = going.request {
                    self.in_flight.remove(&id);
                    out.push(sandbox_error(&id, &refused));
                }
            }
        }
    }

    /// Polls for the connection's next event (pending while it is down).
    pub fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<ConnectionEvent>> {
        match self.conn.as_mut() {
            Some(c) => c.poll_recv(cx),
            None => Poll::Pending,
        }
    }

    /// Handles an event of the connection; `out` receives the messages for the client. A
    /// lost connection answers what was in flight with an error naming the loss, and is
    /// tried again at once.
    pub async fn on_event(&mut self, event: Option<ConnectionEvent>, out: &mut Vec<String>) {
        match event {
            Some(ConnectionEvent::Message(raw)) => {
                if let Ok(Message::Response { id, .. }) = jsonrpc::parse(raw.get()) {
                    let id = jsonrpc::id_key(id);
                    if self.replay_id.as_deref() == Some(&*id) {
                        self.replay_id = None;
                        return;
                    }
                    self.in_flight.remove(&*id);
                }
                out.push(Box::<str>::from(raw).into());
            }
            Some(ConnectionEvent::Opened) => {}
            closed => {
                self.conn = None;
                let reason = match closed {
                    Some(ConnectionEvent::Closed {
                        reason: Some(r), ..
                    }) => r,
                    _ => "the connection closed".to_owned(),
                };
                log(
                    self.level,
                    Level::Warn,
                    &format!("{}: the connection was lost: {reason}", self.mcp),
                );
                let why = format!(
                    "the connection to the sandbox was lost ({reason}); the request may have run"
                );
                for id in self.in_flight.drain() {
                    out.push(sandbox_error(&id, &why));
                }
                let now = Instant::now();
                if self.opened_at.is_some_and(|t| now - t < STEADY) {
                    self.lost_at = self.lost_before.or(Some(now));
                    self.retry_at = Some(now + RECONNECT_EVERY);
                } else {
                    self.lost_at = Some(now);
                    self.open(out).await;
                }
            }
        }
    }

    /// Closes the connection.
    pub fn close(&mut self) {
        if let Some(c) = self.conn.take() {
            c.close();
        }
        self.retry_at = None;
    }
}

/// What a relay waits for: an event of one of its connections, or the time to try one again.
pub enum Wake {
    /// Connection `which` has an event.
    Event(usize, Option<ConnectionEvent>),
    /// A link wants to be opened again.
    Retry,
}
