//! The tool list of an upstream: fetched at registration, kept fresh by
//! `notifications/tools/list_changed`, or fetched again on every listing when the server does not
//! announce changes.

use std::sync::{Arc, RwLock};

use mcpgw::wire::Tool;
use rmcp::service::{Peer, RoleClient};

use super::Upstream;
use super::error_chain;
use super::session::Session;
use crate::error::{Error, py_repr};

/// The tool list as last fetched.
#[derive(Default)]
pub struct ToolCache(RwLock<Arc<Vec<Tool>>>);

impl ToolCache {
    /// The list as last fetched.
    pub fn get(&self) -> Arc<Vec<Tool>> {
        self.0.read().unwrap().clone()
    }

    /// Replaces the list.
    pub fn set(&self, tools: Vec<Tool>) {
        *self.0.write().unwrap() = Arc::new(tools);
    }
}

/// Every tool of the session's server (all pages), as the server described them.
pub async fn fetch_tools(peer: &Peer<RoleClient>) -> Result<Vec<Tool>, String> {
    let tools = peer.list_all_tools().await.map_err(|e| error_chain(&e))?;
    tools
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            serde_json::to_value(t)
                .and_then(serde_json::from_value)
                .map_err(|e| format!("tool {name:?} is malformed: {e}"))
        })
        .collect()
}

impl Upstream {
    /// The tools, filtered by the spec's `enable_tools`/`disable_tools` (as AgentScope's gateway
    /// lists them). Served from the cache when the server announces list changes, else fetched.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        let current = self.live_session();
        let cached_is_true = current.is_some_and(|s| s.announces_tool_changes);
        let tools = if cached_is_true {
            self.tools.get()
        } else {
            self.refresh_tools().await?
        };
        Ok(tools
            .iter()
            .filter(|t| self.spec.lists_tool(&t.name))
            .cloned()
            .collect())
    }

    /// Whether the upstream has `tool`, asking it again when the cached list does not.
    pub(super) async fn knows_tool(&self, tool: &str) -> Result<bool, Error> {
        let known = |tools: &[Tool]| tools.iter().any(|t| t.name == tool);
        Ok(known(&self.tools.get()) || known(&self.refresh_tools().await?))
    }

    /// Lists the session's tools within the setup limit.
    pub(super) async fn list_within_limit(&self, session: &Session) -> Result<Vec<Tool>, Error> {
        let limit = self.setup_limit();
        match tokio::time::timeout(limit, fetch_tools(&session.peer)).await {
            Ok(listed) => listed.map_err(|e| {
                Error::Upstream(format!(
                    "listing the tools of {} failed: {e}",
                    py_repr(&self.name)
                ))
            }),
            Err(_) => Err(Error::SetupTimeout {
                what: format!("listing the tools of {}", py_repr(&self.name)),
                limit,
            }),
        }
    }

    async fn refresh_tools(&self) -> Result<Arc<Vec<Tool>>, Error> {
        let tools = self
            .with_session(|s| async move { self.list_within_limit(&s).await })
            .await?;
        self.tools.set(tools);
        Ok(self.tools.get())
    }
}
