//! The registered MCPs, in isolated scopes keyed by `(agent_id, session_id)`.
//!
//! The map's lock is held only to look up, reserve or remove a name, never across a connect,
//! a call or a close: a slow `POST /mcps` does not stall anything else.
//!
//! A registration is atomic as callers see it: it either ends with the MCP ready, or leaves
//! nothing behind (no reserved name, no process), whoever gave up on it: the upstream that
//! failed, a `DELETE` of the name while it connected, or the caller that went away.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgw::wire::{McpEntry, McpSpec};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::scope::Scope;
use crate::upstream::{Settings, Upstream};

/// A name reserved by a registration still connecting.
struct Pending {
    /// Tells this registration apart from a later one of the same name.
    id: u64,
    /// Cancelled when the name is deleted, or the caller went away.
    cancel: CancellationToken,
    /// Becomes true once the registration has finished cleaning up.
    done: watch::Receiver<bool>,
}

enum Slot {
    Connecting(Pending),
    Ready(Arc<Upstream>),
}

type Scopes = HashMap<Scope, HashMap<String, Slot>>;

/// Every scope's MCPs.
pub struct Registry {
    scopes: Arc<Mutex<Scopes>>,
    settings: Settings,
    next_id: AtomicU64,
}

impl Registry {
    /// An empty registry.
    pub fn new(settings: Settings) -> Self {
        Registry {
            scopes: Arc::default(),
            settings,
            next_id: AtomicU64::new(1),
        }
    }

    /// The ready MCPs of a scope, as registered, each with its `status`.
    pub fn list(&self, scope: &Scope) -> Vec<McpEntry> {
        let mut ready: Vec<Arc<Upstream>> = {
            let scopes = self.scopes.lock().unwrap();
            scopes
                .get(scope)
                .into_iter()
                .flat_map(|m| m.values())
                .filter_map(|slot| match slot {
                    Slot::Ready(u) => Some(u.clone()),
                    Slot::Connecting(_) => None,
                })
                .collect()
        };
        ready.sort_by(|a, b| a.name.cmp(&b.name));
        ready.iter().map(|u| u.describe()).collect()
    }

    /// Registers and connects an MCP. The name is reserved while it connects, so a duplicate
    /// gets `409` at once. The connect runs on a task of its own that always finishes and
    /// cleans up; dropping this future (the caller went away) cancels it.
    pub async fn add(
        &self,
        scope: &Scope,
        spec: McpSpec,
        runtime_headers: BTreeMap<String, String>,
    ) -> Result<(), Error> {
        let name = spec.name.clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let cancel = CancellationToken::new();
        let (done_tx, done) = watch::channel(false);
        {
            let mut scopes = self.scopes.lock().unwrap();
            let names = scopes.entry(scope.clone()).or_default();
            if names.contains_key(&name) {
                return Err(Error::Conflict {
                    name,
                    scope: scope.clone(),
                });
            }
            let pending = Pending {
                id,
                cancel: cancel.clone(),
                done,
            };
            names.insert(name.clone(), Slot::Connecting(pending));
        }
        let _caller = cancel.clone().drop_guard();
        let (scopes, settings, scope) = (self.scopes.clone(), self.settings, scope.clone());
        let registration = tokio::spawn(async move {
            let connected = tokio::select! {
                connected = Upstream::connect(spec, &runtime_headers, settings) => Some(connected),
                // Dropping the connect kills whatever it spawned.
                () = cancel.cancelled() => None,
            };
            let result = finish(&scopes, &scope, &name, id, connected).await;
            let _ = done_tx.send(true);
            result
        });
        registration
            .await
            .unwrap_or_else(|e| Err(Error::Internal(format!("the registration failed: {e}"))))
    }

    fn remove_slot(scopes: &mut Scopes, scope: &Scope, name: &str) -> Option<Slot> {
        let names = scopes.get_mut(scope)?;
        let slot = names.remove(name);
        if names.is_empty() {
            scopes.remove(scope);
        }
        slot
    }

    /// Unregisters an MCP and returns once its session is closed and its processes are gone. A
    /// registration still connecting is cancelled; its name is free at once.
    pub async fn remove(&self, scope: &Scope, name: &str) -> Result<(), Error> {
        let slot = Self::remove_slot(&mut self.scopes.lock().unwrap(), scope, name);
        match slot {
            None => Err(Error::NotFound {
                name: name.to_string(),
                scope: scope.clone(),
            }),
            Some(Slot::Connecting(pending)) => {
                pending.cancel.cancel();
                let mut done = pending.done;
                let _ = done.wait_for(|d| *d).await;
                tracing::info!(mcp = %name, agent_id = %scope.agent_id, session_id = %scope.session_id, "MCP removed while it was connecting");
                Ok(())
            }
            Some(Slot::Ready(upstream)) => {
                upstream.close().await;
                tracing::info!(mcp = %name, agent_id = %scope.agent_id, session_id = %scope.session_id, "MCP removed");
                Ok(())
            }
        }
    }

    /// A ready MCP.
    pub fn get(&self, scope: &Scope, name: &str) -> Result<Arc<Upstream>, Error> {
        match self
            .scopes
            .lock()
            .unwrap()
            .get(scope)
            .and_then(|m| m.get(name))
        {
            Some(Slot::Ready(u)) => Ok(u.clone()),
            Some(Slot::Connecting(_)) => Err(Error::StillConnecting {
                name: name.to_string(),
            }),
            None => Err(Error::NotFound {
                name: name.to_string(),
                scope: scope.clone(),
            }),
        }
    }

    /// Every upstream of every scope, for metrics and shutdown.
    pub fn all(&self) -> Vec<(Scope, Arc<Upstream>)> {
        let scopes = self.scopes.lock().unwrap();
        scopes
            .iter()
            .flat_map(|(scope, names)| {
                names.values().filter_map(move |slot| match slot {
                    Slot::Ready(u) => Some((scope.clone(), u.clone())),
                    Slot::Connecting(_) => None,
                })
            })
            .collect()
    }

    /// Closes every upstream and cancels every registration at once, waiting at most `limit`.
    pub async fn shutdown(&self, limit: Duration) {
        let slots: Vec<Slot> = {
            let mut scopes = self.scopes.lock().unwrap();
            scopes
                .drain()
                .flat_map(|(_, names)| names.into_values())
                .collect()
        };
        let closing = futures::future::join_all(slots.into_iter().map(|slot| async move {
            match slot {
                Slot::Ready(u) => u.close().await,
                Slot::Connecting(pending) => {
                    pending.cancel.cancel();
                    let mut done = pending.done;
                    let _ = done.wait_for(|d| *d).await;
                }
            }
        }));
        if tokio::time::timeout(limit, closing).await.is_err() {
            tracing::warn!("some upstreams did not close within {limit:?}");
        }
    }
}

/// Ends registration `id` of `name`: installs the upstream when the name is still reserved for
/// it, else (it was deleted, or the caller went away) closes what was connected; frees the name
/// when the registration failed.
async fn finish(
    scopes: &Mutex<Scopes>,
    scope: &Scope,
    name: &str,
    id: u64,
    connected: Option<Result<Arc<Upstream>, Error>>,
) -> Result<(), Error> {
    let removed = || Error::RemovedWhileConnecting {
        name: name.to_string(),
    };
    let connected_too_late = {
        let mut scopes = scopes.lock().unwrap();
        let ours = matches!(
            scopes.get(scope).and_then(|names| names.get(name)),
            Some(Slot::Connecting(p)) if p.id == id
        );
        match connected {
            Some(Ok(upstream)) if ours => {
                let names = scopes.get_mut(scope).expect("checked");
                names.insert(name.to_string(), Slot::Ready(upstream));
                tracing::info!(mcp = %name, agent_id = %scope.agent_id, session_id = %scope.session_id, "MCP registered");
                return Ok(());
            }
            Some(Ok(upstream)) => upstream,
            Some(Err(e)) => {
                if ours {
                    Registry::remove_slot(&mut scopes, scope, name);
                }
                tracing::warn!(mcp = %name, "{e}");
                return Err(if ours { e } else { removed() });
            }
            None => {
                if ours {
                    Registry::remove_slot(&mut scopes, scope, name);
                    tracing::info!(mcp = %name, "registration abandoned by its caller");
                }
                return Err(removed());
            }
        }
    };
    connected_too_late.close().await;
    Err(removed())
}
