//! What an upstream sends on its own, and where it goes: progress to the call (or the
//! virtual connection's request) it belongs to, tool list changes to the gateway's cache, log
//! messages to the gateway's log, and everything a host may want (notifications, the
//! upstream's requests) to the virtual MCP connections of the session ([`Downstream`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::logs::UpstreamLog;
use super::rpc::{Inbound, Origin, Peer};
use super::session::Handshake;
use super::tools::{ToolCache, fetch_tools};
use mcpgw::wire::jsonrpc::{self, code, method};

/// A progress update of a running REST call.
#[derive(Debug, Clone, Deserialize)]
pub struct Progress {
    /// How far it is.
    pub progress: f64,
    /// Out of how much, when known.
    #[serde(default)]
    pub total: Option<f64>,
    /// What it is doing.
    #[serde(default)]
    pub message: Option<String>,
}

/// Where a REST call's progress goes.
pub type ProgressSender = mpsc::Sender<Progress>;

/// A virtual MCP connection as the session sees it: where what the upstream sends on its own
/// goes. Implemented in `crate::mcp`.
pub trait Downstream: Send + Sync {
    /// The connection's number.
    fn number(&self) -> u64;

    /// A notification of the upstream's. `origin` is the gateway request whose answer stream
    /// carried it (HTTP), when known; the connection decides whether it is its own.
    fn notification(&self, method: &str, params: Option<&RawValue>, origin: Origin);

    /// Progress for the connection's request whose progress token the gateway made `token`.
    fn progress(&self, token: &str, params: &RawValue);

    /// Whether the connection owns gateway request `id` (to route what its answer stream
    /// carried, or a request of the upstream that the request caused).
    fn owns(&self, id: u64) -> bool;

    /// Whether the host declared what answering `method` needs (sampling, elicitation, roots).
    fn can_answer(&self, method: &str, params: Option<&RawValue>) -> bool;

    /// Whether the host speaks 2026-07-28, which has no requests from server to client.
    fn modern(&self) -> bool;

    /// Relays a request of the upstream to the host; the connection answers the upstream.
    fn upstream_request(
        &self,
        peer: &Arc<Peer>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    );

    /// The session ended.
    fn session_ended(&self, reason: &str);
}

/// Where a progress token's notifications go.
enum Route {
    /// A REST call: parsed.
    Call(ProgressSender),
    /// A connection's request: passed on.
    Connection(Arc<dyn Downstream>),
}

/// The session's router of unsolicited messages.
pub struct Hub {
    name: Arc<str>,
    log: Arc<UpstreamLog>,
    tools: Arc<ToolCache>,
    /// What the handshake learnt (the era decides how the tool list is fetched again).
    pub handshake: OnceLock<Handshake>,
    routes: Mutex<HashMap<String, Route>>,
    connections: RwLock<Vec<Arc<dyn Downstream>>>,
}

impl Hub {
    /// A router for the upstream `name`.
    pub fn new(name: &str, log: Arc<UpstreamLog>, tools: Arc<ToolCache>) -> Arc<Hub> {
        Arc::new(Hub {
            name: name.into(),
            log,
            tools,
            handshake: OnceLock::new(),
            routes: Mutex::new(HashMap::new()),
            connections: RwLock::new(Vec::new()),
        })
    }

    /// Sends the progress of token `token` (a JSON text) to a REST call.
    pub fn listen(&self, token: &str, sender: ProgressSender) {
        self.routes
            .lock()
            .unwrap()
            .insert(token.to_string(), Route::Call(sender));
    }

    /// Sends the progress of token `token` to a connection.
    pub fn route_to(&self, token: &str, connection: Arc<dyn Downstream>) {
        self.routes
            .lock()
            .unwrap()
            .insert(token.to_string(), Route::Connection(connection));
    }

    /// Stops routing `token`.
    pub fn forget(&self, token: &str) {
        self.routes.lock().unwrap().remove(token);
    }

    /// Adds a connection.
    pub fn attach(&self, connection: Arc<dyn Downstream>) {
        self.connections.write().unwrap().push(connection);
    }

    /// Removes connection `number`.
    pub fn detach(&self, number: u64) {
        self.connections
            .write()
            .unwrap()
            .retain(|c| c.number() != number);
        self.routes.lock().unwrap().retain(|_, r| match r {
            Route::Connection(c) => c.number() != number,
            Route::Call(_) => true,
        });
    }

    /// The connections, for routing.
    pub fn connections(&self) -> Vec<Arc<dyn Downstream>> {
        self.connections.read().unwrap().clone()
    }

    /// The session ended: every connection is told why.
    pub fn session_ended(&self, reason: &str) {
        let connections = std::mem::take(&mut *self.connections.write().unwrap());
        for c in connections {
            c.session_ended(reason);
        }
    }

    fn refresh_tools(&self, peer: &Arc<Peer>) {
        // On a task of its own: the answer must come through the reader that called us.
        let (peer, tools, name) = (peer.clone(), self.tools.clone(), self.name.clone());
        let Some(handshake) = self.handshake.get().cloned() else {
            return;
        };
        tokio::spawn(async move {
            match fetch_tools(&peer, &handshake).await {
                Ok(list) => {
                    tracing::info!(mcp = %name, tools = list.len(), "tool list changed upstream; refreshed");
                    tools.set(list);
                }
                Err(e) => tracing::warn!(mcp = %name, "refreshing the tool list failed: {e}"),
            }
        });
    }
}

#[derive(Deserialize)]
struct Token<'a> {
    #[serde(borrow, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct LogMessage {
    #[serde(default)]
    level: String,
    #[serde(default)]
    data: serde_json::Value,
}

impl Inbound for Hub {
    fn request(
        &self,
        peer: &Arc<Peer>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
        origin: Origin,
    ) {
        if method == method::PING {
            let (peer, id) = (peer.clone(), id.get().to_owned());
            tokio::spawn(async move { peer.respond(&id, Ok("{}")).await });
            return;
        }
        let connections = self.connections();
        // The connection whose request caused it (what its answer stream carried), else one
        // that declared what answering it takes.
        let target = origin
            .and_then(|o| connections.iter().find(|c| c.owns(o)))
            .filter(|c| c.can_answer(method, params))
            .or_else(|| connections.iter().find(|c| c.can_answer(method, params)));
        if let Some(connection) = target {
            connection.upstream_request(peer, id, method, params);
            return;
        }
        let message = if connections.is_empty() {
            format!("{method}: no MCP client is connected through the gateway to answer it")
        } else if connections.iter().all(|c| c.modern()) {
            format!(
                "{method}: the MCP clients connected through the gateway speak 2026-07-28, which \
                 has no requests from server to client (it asks with multi round-trip results \
                 instead); the gateway does not carry a {} server's {method} to them",
                self.handshake
                    .get()
                    .map_or("legacy", |h| h.version.as_str())
            )
        } else {
            format!(
                "{method}: no MCP client connected through the gateway declared the capability it needs"
            )
        };
        tracing::debug!(mcp = %self.name, "refusing the upstream's {method}: {message}");
        let (peer, id) = (peer.clone(), id.get().to_owned());
        tokio::spawn(async move {
            let error = jsonrpc::error_object(code::METHOD_NOT_FOUND, &message, None);
            peer.respond(&id, Err(error.get())).await
        });
    }

    fn notification(
        &self,
        peer: &Arc<Peer>,
        method: &str,
        params: Option<&RawValue>,
        origin: Origin,
    ) {
        match method {
            method::PROGRESS => {
                let Some(token) = params
                    .and_then(|p| serde_json::from_str::<Token>(p.get()).ok())
                    .and_then(|t| t.progress_token)
                else {
                    return;
                };
                let routes = self.routes.lock().unwrap();
                match routes.get(token.get()) {
                    Some(Route::Call(sender)) => {
                        if let Some(p) =
                            params.and_then(|p| serde_json::from_str::<Progress>(p.get()).ok())
                        {
                            // A slow reader loses intermediate progress, never the result.
                            let _ = sender.try_send(p);
                        }
                    }
                    Some(Route::Connection(c)) => {
                        c.progress(token.get(), params.expect("read above"))
                    }
                    None => {}
                }
                return;
            }
            method::MESSAGE => {
                if let Some(m) =
                    params.and_then(|p| serde_json::from_str::<LogMessage>(p.get()).ok())
                {
                    self.log.message(&m.level, &m.data);
                }
            }
            method::TOOLS_LIST_CHANGED => self.refresh_tools(peer),
            _ => {}
        }
        for c in self.connections() {
            c.notification(method, params, origin);
        }
    }
}
