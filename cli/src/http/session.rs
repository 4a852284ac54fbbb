//! A session of the revisions with `initialize`: one virtual connection, its requests' streams,
//! the `GET` stream, and where each message of the server's goes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use mcpgw::wire::jsonrpc::{self, Message, method};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{KEEP_ALIVE, MAX_BACKLOG, MAX_SESSIONS, SESSION_IDLE, Server, Sink};
use crate::cli::Level;
use crate::cli::log;
use crate::relay::Relay;

/// What a session's task is told.
pub(super) enum Cmd {
    /// A request: its id, progress token, text, and where its answer goes (only the response
    /// when `json`).
    Request {
        id: String,
        token: Option<String>,
        text: String,
        sink: Sink,
        json: bool,
    },
    /// A notification or a response of the client's.
    Forward(String),
    /// The `GET` stream.
    Listen(Sink),
}

/// A session: one client of an earlier revision, one relay.
pub(super) struct Session {
    tx: mpsc::UnboundedSender<Cmd>,
}

impl Server {
    /// Hands `cmd` to session `id`; false when there is no such session.
    pub(super) fn command(&self, id: &str, cmd: Cmd) -> bool {
        let mut sessions = self.sessions.lock().unwrap();
        match sessions.get(id) {
            Some(s) if s.tx.send(cmd).is_ok() => true,
            Some(_) => {
                sessions.remove(id);
                false
            }
            None => false,
        }
    }

    /// Starts session `id` with its `initialize`; false when there are too many.
    pub(super) fn start_session(self: &Arc<Self>, id: &str, init: Cmd) -> bool {
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, s| !s.tx.is_closed());
        if sessions.len() >= MAX_SESSIONS {
            return false;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(init);
        sessions.insert(id.to_owned(), Session { tx });
        tokio::spawn(run_session(self.clone(), id.to_owned(), rx));
        true
    }
}

/// Where a session's messages for its client go.
#[derive(Default)]
pub(super) struct Routes {
    /// Streams of requests in flight, by id, in the order they came.
    streams: BTreeMap<u64, (String, Sink, bool)>,
    by_id: HashMap<String, u64>,
    by_token: HashMap<String, u64>,
    next: u64,
    /// The `GET` stream.
    listen: Option<Sink>,
    /// The server's messages that found no stream yet.
    backlog: VecDeque<String>,
}

impl Routes {
    fn add(&mut self, id: &str, token: Option<String>, sink: Sink, json: bool) {
        self.next += 1;
        let key = id.to_owned();
        self.by_id.insert(key.clone(), self.next);
        if let Some(t) = &token {
            self.by_token.insert(t.clone(), self.next);
        }
        self.streams.insert(self.next, (key, sink, json));
    }

    fn remove(&mut self, n: u64) -> Option<Sink> {
        let (key, sink, _) = self.streams.remove(&n)?;
        self.by_id.remove(&key);
        self.by_token.retain(|_, v| *v != n);
        Some(sink)
    }

    fn busy(&self) -> bool {
        !self.streams.is_empty() || self.listen.is_some()
    }

    /// Sends one message of the server's where it belongs; gives back one that is not a valid
    /// message (an error answering a message whose id could not be read): on HTTP it would
    /// land on the stream of some other request.
    fn route(&mut self, msg: String) -> Result<(), String> {
        let (n, is_response) = match jsonrpc::parse(&msg) {
            Err(_) => return Err(msg),
            Ok(Message::Response { id, .. }) => {
                (self.by_id.get(&*jsonrpc::id_key(id)).copied(), true)
            }
            Ok(Message::Notification {
                method: method::PROGRESS,
                params,
            }) => {
                let t = jsonrpc::progress_token(params).map(jsonrpc::id_key);
                match t.and_then(|t| self.by_token.get(&*t)) {
                    Some(n) if self.streams.get(n).is_some_and(|s| !s.2) => (Some(*n), false),
                    Some(_) => (None, false),
                    // The progress of a request already answered, which a client over stdio
                    // ignores: on another stream it could overtake the answer.
                    None => return Ok(()),
                }
            }
            Ok(_) => (None, false),
        };
        if let Some(n) = n {
            if is_response {
                let sink = self.remove(n).expect("present");
                if sink.send(&msg) {
                    return Ok(());
                }
            } else if self.streams[&n].1.send(&msg) {
                return Ok(());
            }
        }
        self.unrelated(msg);
        Ok(())
    }

    /// A message that belongs to no stream in particular: the `GET` stream, else a request's
    /// stream in flight, else the backlog.
    fn unrelated(&mut self, msg: String) {
        if let Some(l) = &self.listen {
            if l.send(&msg) {
                return;
            }
            self.listen = None;
        }
        for (_, s) in self.streams.iter().filter(|(_, s)| !s.2) {
            if s.1.send(&msg) {
                return;
            }
        }
        if self.backlog.len() >= MAX_BACKLOG {
            self.backlog.pop_front();
        }
        self.backlog.push_back(msg);
    }

    fn keep_alive(&mut self) {
        let comment = Bytes::from_static(b": keep-alive\n\n");
        if let Some(l) = &self.listen
            && l.0.send(comment.clone()).is_err()
        {
            self.listen = None;
        }
        for (_, s, _) in self.streams.values() {
            let _ = s.0.send(comment.clone());
        }
    }
}

/// A session's task: its relay, and where its messages go.
pub(super) async fn run_session(
    server: Arc<Server>,
    id: String,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
) {
    let mut relay = Relay::open(&server.sandbox, server.prefixed, server.level).await;
    let mut routes = Routes::default();
    let mut out = Vec::new();
    let mut idle_since = Instant::now();
    let mut tick = tokio::time::interval(KEEP_ALIVE);
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                None => break,
                Some(Cmd::Request { id, token, text, sink, json }) => {
                    if routes.by_id.contains_key(&id) {
                        // Its answer could not be told from the first one's.
                        sink.send(&jsonrpc::error_response(
                            Some(&id),
                            jsonrpc::code::INVALID_REQUEST,
                            "a request with this id is in flight in this session: use another id",
                        ));
                        continue;
                    }
                    routes.add(&id, token, sink, json);
                    relay.from_client(&text, &mut out).await;
                }
                Some(Cmd::Forward(text)) => relay.from_client(&text, &mut out).await,
                Some(Cmd::Listen(sink)) => {
                    let mut ok = true;
                    while let Some(msg) = routes.backlog.pop_front() {
                        if !sink.send(&msg) {
                            routes.backlog.push_front(msg);
                            ok = false;
                            break;
                        }
                    }
                    routes.listen = ok.then_some(sink);
                }
            },
            wake = relay.wait() => relay.handle(wake, &mut out).await,
            _ = tick.tick() => {
                routes.keep_alive();
                if routes.busy() {
                    idle_since = Instant::now();
                } else if idle_since.elapsed() > SESSION_IDLE {
                    log(server.level, Level::Info, &format!("session {}: idle, ended", &id[..8]));
                    break;
                }
            }
        }
        for msg in out.drain(..) {
            if let Err(msg) = routes.route(msg) {
                log(
                    server.level,
                    Level::Warn,
                    &format!(
                        "session {}: dropped a message of the server that answers no request: {}",
                        &id[..8],
                        mcpgw::wire::frame::quoted(&msg)
                    ),
                );
            }
        }
    }
    relay.close();
    server.sessions.lock().unwrap().remove(&id);
}
