//! The registered MCPs, in isolated scopes keyed by `(agent_id, session_id)`.
//!
//! The map's lock is held only to look up, reserve or remove a name, never across a connect,
//! a call or a close: a slow `POST /mcps` does not stall anything else.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgw::wire::McpSpec;
use serde_json::Value;

use crate::error::{ApiError, py_repr};
use crate::upstream::{Settings, Upstream};

/// `(agent_id, session_id)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
}

impl Scope {
    /// The default scope, `("", "")`.
    pub fn default_scope() -> Self {
        Scope {
            agent_id: String::new(),
            session_id: String::new(),
        }
    }

    fn describe(&self) -> String {
        format!(
            "agent={} session={}",
            py_repr(&self.agent_id),
            py_repr(&self.session_id)
        )
    }
}

enum Slot {
    /// Reserved by a `POST /mcps` that is still connecting.
    Connecting,
    Ready(Arc<Upstream>),
}

/// Every scope's MCPs.
pub struct Registry {
    scopes: Mutex<HashMap<Scope, HashMap<String, Slot>>>,
    settings: Settings,
}

impl Registry {
    /// An empty registry.
    pub fn new(settings: Settings) -> Self {
        Registry {
            scopes: Mutex::new(HashMap::new()),
            settings,
        }
    }

    /// The ready MCPs of a scope, as registered, each with its `status`.
    pub fn list(&self, scope: &Scope) -> Vec<Value> {
        let upstreams: Vec<Arc<Upstream>> = {
            let scopes = self.scopes.lock().unwrap();
            let mut ready: Vec<_> = scopes
                .get(scope)
                .into_iter()
                .flat_map(|m| m.values())
                .filter_map(|slot| match slot {
                    Slot::Ready(u) => Some(u.clone()),
                    Slot::Connecting => None,
                })
                .collect();
            ready.sort_by(|a, b| a.name.cmp(&b.name));
            ready
        };
        upstreams.iter().map(|u| u.describe()).collect()
    }

    /// Registers and connects an MCP; the name is reserved while it connects, so a duplicate
    /// gets `409` at once.
    pub async fn add(
        &self,
        scope: &Scope,
        spec: McpSpec,
        runtime_headers: BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let name = spec.name.clone();
        {
            let mut scopes = self.scopes.lock().unwrap();
            let names = scopes.entry(scope.clone()).or_default();
            if names.contains_key(&name) {
                return Err(ApiError::conflict(format!(
                    "{} already exists for {}",
                    py_repr(&name),
                    scope.describe()
                )));
            }
            names.insert(name.clone(), Slot::Connecting);
        }
        let connected = Upstream::connect(spec, &runtime_headers, self.settings).await;
        let mut scopes = self.scopes.lock().unwrap();
        let reserved = scopes
            .get_mut(scope)
            .and_then(|names| names.get_mut(&name))
            .filter(|slot| matches!(slot, Slot::Connecting));
        match (connected, reserved) {
            (Ok(upstream), Some(slot)) => {
                *slot = Slot::Ready(upstream);
                tracing::info!(mcp = %name, agent_id = %scope.agent_id, session_id = %scope.session_id, "MCP registered");
                Ok(())
            }
            (Ok(upstream), None) => {
                drop(scopes);
                tokio::spawn(async move { upstream.close().await });
                Err(ApiError::conflict(format!(
                    "{} was removed while it was connecting",
                    py_repr(&name)
                )))
            }
            (Err(e), reserved) => {
                if reserved.is_some() {
                    Self::remove_slot(&mut scopes, scope, &name);
                }
                tracing::warn!(mcp = %name, "connect failed: {e}");
                Err(ApiError::internal(format!("connect failed: {e}")))
            }
        }
    }

    fn remove_slot(
        scopes: &mut HashMap<Scope, HashMap<String, Slot>>,
        scope: &Scope,
        name: &str,
    ) -> Option<Slot> {
        let names = scopes.get_mut(scope)?;
        let slot = names.remove(name);
        if names.is_empty() {
            scopes.remove(scope);
        }
        slot
    }

    fn not_found(scope: &Scope, name: &str) -> ApiError {
        ApiError::not_found(format!(
            "{} not found for {}",
            py_repr(name),
            scope.describe()
        ))
    }

    /// Unregisters an MCP and returns once its session is closed and its processes are gone.
    pub async fn remove(&self, scope: &Scope, name: &str) -> Result<(), ApiError> {
        let slot = Self::remove_slot(&mut self.scopes.lock().unwrap(), scope, name);
        match slot {
            None => Err(Self::not_found(scope, name)),
            Some(Slot::Connecting) => Ok(()),
            Some(Slot::Ready(upstream)) => {
                upstream.close().await;
                tracing::info!(mcp = %name, agent_id = %scope.agent_id, session_id = %scope.session_id, "MCP removed");
                Ok(())
            }
        }
    }

    /// A ready MCP, or `404`.
    pub fn get(&self, scope: &Scope, name: &str) -> Result<Arc<Upstream>, ApiError> {
        match self
            .scopes
            .lock()
            .unwrap()
            .get(scope)
            .and_then(|m| m.get(name))
        {
            Some(Slot::Ready(u)) => Ok(u.clone()),
            Some(Slot::Connecting) => Err(ApiError::unavailable(format!(
                "{} is still connecting",
                py_repr(name)
            ))),
            None => Err(Self::not_found(scope, name)),
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
                    Slot::Connecting => None,
                })
            })
            .collect()
    }

    /// Closes every upstream at once, waiting at most `limit`.
    pub async fn shutdown(&self, limit: Duration) {
        let all: Vec<_> = {
            let mut scopes = self.scopes.lock().unwrap();
            scopes
                .drain()
                .flat_map(|(_, names)| names.into_values())
                .filter_map(|slot| match slot {
                    Slot::Ready(u) => Some(u),
                    Slot::Connecting => None,
                })
                .collect()
        };
        let closing = futures::future::join_all(all.iter().map(|u| u.close()));
        if tokio::time::timeout(limit, closing).await.is_err() {
            tracing::warn!("some upstreams did not close within {limit:?}");
        }
    }
}
