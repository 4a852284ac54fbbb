//! The gateway's own JSON-RPC client of one upstream session, over any of the transports.
//!
//! It keeps every message as the upstream wrote it: a reply's `result` or `error` reaches its
//! caller as the upstream's bytes, and what the upstream sends on its own (its requests and
//! notifications) goes to the session's [`Inbound`] untouched. (rmcp's typed model re-encodes
//! every message, which loses what its types do not know; a virtual MCP connection must pass
//! the upstream's JSON through as it is.) Each transport has one task that owns its reader
//! and hands every message to [`Peer::receive`], so no read is ever cut short by a
//! cancellation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use futures::future::BoxFuture;
use mcpgw::wire::jsonrpc::{self, Message, method};
use serde_json::value::RawValue;
use tokio::sync::{oneshot, watch};

/// What answered a request.
#[derive(Debug)]
pub enum Reply {
    /// The `result`, as the upstream wrote it.
    Ok(Box<RawValue>),
    /// The `error` object, as the upstream wrote it (or as the gateway made it for a reply
    /// that could not be read).
    Err(Box<RawValue>),
    /// The session ended first; why.
    Closed(String),
}

/// Which request's answer stream a message came on (streamable HTTP), when it did.
pub type Origin = Option<u64>;

/// Where a message goes out: the transport's sending half.
pub trait Wire: Send + Sync + 'static {
    /// Sends one message (a JSON text). `request` is the gateway's id when it is a request,
    /// `method` its method and `params` its parameters (HTTP puts them in headers).
    fn send(
        &self,
        message: Vec<u8>,
        request: Option<u64>,
        method: &str,
        params: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>>;

    /// Cancels request `id` by closing its answer stream, where the transport has one per
    /// request and the revision makes that the cancellation (2026-07-28 over HTTP); false when
    /// a `notifications/cancelled` must be sent instead.
    fn close_stream(&self, id: u64) -> bool {
        let _ = id;
        false
    }

    /// The handshake chose `version` (streamable HTTP sends it as a header from then on).
    fn handshaken(&self, version: &str) {
        let _ = version;
    }

    /// Ends the transport (closes stdin, deletes the HTTP session).
    fn shut(&self) -> BoxFuture<'static, ()>;
}

/// Queues `message` on a transport's writer task; the error says the writer is gone with
/// `gone`.
pub fn queue(
    writer: &tokio::sync::mpsc::Sender<Vec<u8>>,
    message: Vec<u8>,
    gone: &'static str,
) -> BoxFuture<'static, Result<(), String>> {
    let writer = writer.clone();
    Box::pin(async move { writer.send(message).await.map_err(|_| gone.to_string()) })
}

/// What the upstream sends on its own.
pub trait Inbound: Send + Sync + 'static {
    /// A request from the upstream (`sampling/createMessage`, `roots/list`, `ping`, ...); it
    /// must be answered with [`Peer::respond`].
    fn request(
        &self,
        peer: &Arc<Peer>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
        origin: Origin,
    );

    /// A notification from the upstream.
    fn notification(
        &self,
        peer: &Arc<Peer>,
        method: &str,
        params: Option<&RawValue>,
        origin: Origin,
    );
}

/// Where a transport's readers deliver what they read: the session's peer, once it exists
/// (the transport is made first, the peer over it).
#[derive(Clone, Default)]
pub struct Sink(Arc<OnceLock<Weak<Peer>>>);

impl Sink {
    /// Hands one message to the peer.
    pub fn deliver(&self, text: &str, origin: Origin) {
        if let Some(peer) = self.peer() {
            peer.receive(text, origin);
        }
    }

    /// Answers request `id` in the upstream's stead (an error the transport made).
    pub fn fail(&self, id: u64, error: Box<RawValue>) {
        if let Some(peer) = self.peer() {
            peer.fail(id, Reply::Err(error));
        }
    }

    /// The transport ended: the session is over, for `reason`.
    pub fn close(&self, reason: &str) {
        if let Some(peer) = self.peer() {
            peer.close(reason);
        }
    }

    /// Whether request `id` still waits for its answer.
    pub fn is_pending(&self, id: u64) -> bool {
        self.peer()
            .is_some_and(|p| p.pending.lock().unwrap().contains_key(&id))
    }

    /// Whether the session is over (or never began).
    pub fn is_closed(&self) -> bool {
        self.peer().is_none_or(|p| p.is_closed())
    }

    fn peer(&self) -> Option<Arc<Peer>> {
        self.0.get().and_then(Weak::upgrade)
    }
}

/// A JSON-RPC client session with an upstream.
pub struct Peer {
    /// The upstream's name, for logs.
    name: Arc<str>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    wire: Box<dyn Wire>,
    inbound: Arc<dyn Inbound>,
    /// Why the session ended, once it did.
    closed: watch::Sender<Option<String>>,
}

/// A request in flight: its id and its answer to come. Dropping it forgets the request (a late
/// reply is then dropped); cancelling it upstream is the caller's to do.
pub struct Pending {
    /// The gateway's id of the request.
    pub id: u64,
    reply: oneshot::Receiver<Reply>,
    peer: Arc<Peer>,
}

impl Pending {
    /// Waits for the answer.
    pub async fn reply(mut self) -> Reply {
        match (&mut self.reply).await {
            Ok(reply) => reply,
            Err(_) => Reply::Closed(self.peer.close_reason()),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.peer.pending.lock().unwrap().remove(&self.id);
    }
}

impl Peer {
    /// A session over `wire`, whose readers deliver to `sink`; what the upstream sends on its
    /// own goes to `inbound`.
    pub fn new(
        name: &str,
        wire: Box<dyn Wire>,
        sink: &Sink,
        inbound: Arc<dyn Inbound>,
    ) -> Arc<Peer> {
        let peer = Arc::new(Peer {
            name: name.into(),
            next_id: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
            wire,
            inbound,
            closed: watch::channel(None).0,
        });
        let _ = sink.0.set(Arc::downgrade(&peer));
        peer
    }

    /// A fresh request id (also used as the request's progress token).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Sends request `id` (from [`Self::next_id`]) and returns its answer to come.
    pub async fn request_with_id(
        self: &Arc<Self>,
        id: u64,
        method: &str,
        params: Option<&str>,
    ) -> Pending {
        let (tx, rx) = oneshot::channel();
        let pending = Pending {
            id,
            reply: rx,
            peer: self.clone(),
        };
        if let Some(reason) = self.closed.borrow().clone() {
            let _ = tx.send(Reply::Closed(reason));
            return pending;
        }
        self.pending.lock().unwrap().insert(id, tx);
        let message = jsonrpc::request(&id.to_string(), method, params);
        if let Err(e) = self
            .wire
            .send(message.into(), Some(id), method, params)
            .await
        {
            self.fail(id, Reply::Closed(format!("sending {method} failed: {e}")));
        }
        pending
    }

    /// Sends a request and returns its answer to come.
    pub async fn request(self: &Arc<Self>, method: &str, params: Option<&str>) -> Pending {
        self.request_with_id(self.next_id(), method, params).await
    }

    /// Sends a notification.
    pub async fn notify(&self, method: &str, params: Option<&str>) -> Result<(), String> {
        let message = jsonrpc::notification(method, params);
        self.wire.send(message.into(), None, method, params).await
    }

    /// Answers request `id` of the upstream.
    pub async fn respond(&self, id: &str, outcome: Result<&str, &str>) {
        let message = jsonrpc::response(Some(id), outcome);
        if let Err(e) = self.wire.send(message.into(), None, "", None).await {
            tracing::debug!(mcp = %self.name, "answering the upstream's request {id} failed: {e}");
        }
    }

    /// Tells the upstream to stop request `id`: by closing its answer stream where that is
    /// how the transport cancels, else with `notifications/cancelled`.
    pub async fn cancel(&self, id: u64, reason: &str) {
        self.pending.lock().unwrap().remove(&id);
        if self.wire.close_stream(id) {
            return;
        }
        let params = serde_json::json!({"requestId": id, "reason": reason}).to_string();
        let _ = self.notify(method::CANCELLED, Some(&params)).await;
    }

    /// Answers request `id` with `reply` (a reply the gateway made in the upstream's stead).
    pub fn fail(&self, id: u64, reply: Reply) {
        if let Some(tx) = self.pending.lock().unwrap().remove(&id) {
            let _ = tx.send(reply);
        }
    }

    /// Handles one message from the upstream. `origin` is the request whose answer stream
    /// carried it, when the transport knows.
    pub fn receive(self: &Arc<Self>, text: &str, origin: Origin) {
        match jsonrpc::parse(text) {
            Ok(Message::Response { id, outcome }) => {
                let Ok(id) = id.get().parse::<u64>() else {
                    tracing::debug!(mcp = %self.name, "a reply to a request the gateway never sent ({})", id.get());
                    return;
                };
                let reply = match outcome {
                    Ok(result) => Reply::Ok(result.to_owned()),
                    Err(error) => Reply::Err(error.to_owned()),
                };
                self.fail(id, reply);
            }
            Ok(Message::Request { id, method, params }) => {
                self.inbound.request(self, id, method, params, origin)
            }
            Ok(Message::Notification { method, params }) => {
                self.inbound.notification(self, method, params, origin)
            }
            Err(invalid) => {
                // A reply whose id can be read but not its body fails its request now rather
                // than leave it waiting.
                if let Some(id) = invalid.id.and_then(|id| id.get().parse::<u64>().ok())
                    && self.pending.lock().unwrap().contains_key(&id)
                {
                    tracing::warn!(mcp = %self.name, "malformed reply to request {id}: {}", invalid.message);
                    let error = jsonrpc::error_object(
                        jsonrpc::code::INTERNAL_ERROR,
                        &format!("the upstream sent a malformed reply: {}", invalid.message),
                        None,
                    );
                    self.fail(id, Reply::Err(error));
                    return;
                }
                let shown: String = text.chars().take(200).collect();
                tracing::warn!(mcp = %self.name, "ignoring a message that is not JSON-RPC ({}): {shown:?}", invalid.message);
            }
        }
    }

    /// Ends the session: every request waiting gets `reason`, and so does every later one.
    pub fn close(&self, reason: &str) {
        self.closed.send_if_modified(|r| {
            if r.is_none() {
                *r = Some(reason.to_string());
                true
            } else {
                false
            }
        });
        let waiting: Vec<_> = self.pending.lock().unwrap().drain().collect();
        for (_, tx) in waiting {
            let _ = tx.send(Reply::Closed(reason.to_string()));
        }
    }

    /// Whether the session ended.
    pub fn is_closed(&self) -> bool {
        self.closed.borrow().is_some()
    }

    /// Why the session ended ("" while it runs).
    pub fn close_reason(&self) -> String {
        self.closed.borrow().clone().unwrap_or_default()
    }

    /// Resolves once the session ended.
    pub async fn closed(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// Ends the transport and the session.
    pub async fn shut(&self, reason: &str) {
        self.close(reason);
        self.wire.shut().await;
    }

    /// The transport.
    pub fn wire(&self) -> &dyn Wire {
        &*self.wire
    }
}
