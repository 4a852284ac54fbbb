//! The tool list of an upstream: fetched at registration, kept fresh by
//! `notifications/tools/list_changed`, or fetched again on every listing when the server does not
//! announce changes.

use std::sync::{Arc, RwLock};

use mcpgw::wire::Tool;
use mcpgw::wire::jsonrpc::{self, method};
use serde::Deserialize;
use serde_json::{Map, json};

use super::Upstream;
use super::rpc::{Peer, Reply};
use super::session::{Handshake, Session};
use crate::error::Error;
use crate::scope::py_repr;

/// Pages of a tool list followed at most: a server whose cursors never end is cut off.
pub(super) const MAX_PAGES: usize = 1000;

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

#[derive(Deserialize)]
struct Page {
    #[serde(default)]
    tools: Vec<serde_json::Value>,
    #[serde(default, rename = "nextCursor")]
    next_cursor: Option<String>,
}

/// Every tool of the session's server (all pages), as the server described them.
pub async fn fetch_tools(peer: &Arc<Peer>, handshake: &Handshake) -> Result<Vec<Tool>, String> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut params = Map::new();
        if let Some(c) = &cursor {
            params.insert("cursor".into(), json!(c));
        }
        let page = match peer
            .request(method::TOOLS_LIST, Some(&handshake.params(params)))
            .await
            .reply()
            .await
        {
            Reply::Ok(raw) => serde_json::from_str::<Page>(raw.get())
                .map_err(|e| format!("the tool list is malformed: {e}"))?,
            Reply::Err(e) => {
                let (code, message) = jsonrpc::error_parts(&e);
                return Err(format!("{message} (JSON-RPC error {code})"));
            }
            Reply::Closed(reason) => return Err(reason),
        };
        for t in page.tools {
            let name = t["name"].as_str().unwrap_or_default().to_string();
            tools.push(
                serde_json::from_value(t)
                    .map_err(|e| format!("tool {name:?} is malformed: {e}"))?,
            );
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(format!("the tool list did not end after {MAX_PAGES} pages"))
}

impl Upstream {
    /// The tools, filtered by the spec's `enable_tools`/`disable_tools` (as AgentScope's gateway
    /// lists them; a call of a tool filtered out is refused). Served from the cache when the
    /// server announces list changes, else fetched.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, Error> {
        let current = self.live_session();
        let cached_is_true = current.is_some_and(|s| s.announces_tool_changes());
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

    /// Refuses a call of `tool` when the spec's filters do not list it: such a tool is never
    /// called.
    pub(super) fn check_listed(&self, tool: &str) -> Result<(), Error> {
        match self.spec.tool_excluded_by(tool) {
            None => Ok(()),
            Some(rule) => Err(Error::ToolDisabled {
                tool: tool.to_string(),
                mcp: self.name.clone(),
                rule,
            }),
        }
    }

    /// Whether the upstream has `tool`, asking it again when the cached list does not.
    pub(super) async fn knows_tool(&self, tool: &str) -> Result<bool, Error> {
        let known = |tools: &[Tool]| tools.iter().any(|t| t.name == tool);
        Ok(known(&self.tools.get()) || known(&self.refresh_tools().await?))
    }

    /// Lists the session's tools within the setup limit.
    pub(super) async fn list_within_limit(&self, session: &Session) -> Result<Vec<Tool>, Error> {
        let limit = self.setup_limit();
        match tokio::time::timeout(limit, fetch_tools(&session.peer, &session.handshake)).await {
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
