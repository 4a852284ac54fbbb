//! A session with an upstream: opening it (spawn a stdio child, or connect over streamable HTTP
//! or legacy SSE, then the MCP handshake, within a limit), what it receives on its own (tool list
//! changes, log messages), and closing it.

use std::sync::Arc;
use std::time::Duration;

use mcpgw::wire::McpConfig;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{NotificationContext, Peer, RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};

use super::logs::UpstreamLog;
use super::progress::{ProgressRoutes, ProgressTap};
use super::stdio::ChildProcess;
use super::tools::{ToolCache, fetch_tools};
use super::{error_chain, http, sse, stdio};

/// Receives what the upstream sends on its own: tool list changes. (Progress and log messages
/// are taken out by the transport tap.)
#[derive(Clone)]
pub struct Handler {
    name: Arc<str>,
    tools: Arc<ToolCache>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcpgw-gateway", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        // Refresh on a task of its own: awaiting a request from inside a notification handler
        // would hold up the session's message loop that must deliver the answer.
        let (name, tools, peer) = (self.name.clone(), self.tools.clone(), context.peer);
        tokio::spawn(async move {
            match fetch_tools(&peer).await {
                Ok(list) => {
                    tracing::info!(mcp = %name, tools = list.len(), "tool list changed upstream; refreshed");
                    tools.set(list);
                }
                Err(e) => tracing::warn!(mcp = %name, "refreshing the tool list failed: {e}"),
            }
        });
    }
}

/// One live connection to the upstream.
pub struct Session {
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, Handler>>>,
    /// Sends requests and notifications to the upstream.
    pub peer: Peer<RoleClient>,
    child: Option<ChildProcess>,
    /// Where the progress of this session's calls goes.
    pub routes: Arc<ProgressRoutes>,
    /// The server promised `notifications/tools/list_changed`, so the cached list stays true.
    pub announces_tool_changes: bool,
    /// Why the transport ended, when it ended the session itself (e.g. an oversized event).
    closed_because: CloseReason,
}

/// Why a transport ended the session, set by the transport.
pub type CloseReason = Arc<std::sync::Mutex<Option<String>>>;

impl Session {
    /// Whether the transport is open and the child (if any) has not exited.
    pub fn alive(&self) -> bool {
        !self.peer.is_transport_closed()
            && self
                .child
                .as_ref()
                .is_none_or(|c| c.exit_status().is_none())
    }

    /// The process id of a stdio upstream.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.pid)
    }

    /// Closes the session: the transport first (a stdio server sees EOF), then whatever of its
    /// processes is left.
    pub async fn close(&self) {
        if let Some(mut service) = self.service.lock().await.take() {
            let _ = service.close_with_timeout(Duration::from_secs(2)).await;
        }
        if let Some(child) = &self.child {
            child.terminate(Duration::from_millis(500)).await;
        }
    }

    /// Why the session is gone, for error messages.
    pub async fn death_report(&self) -> String {
        if let Some(reason) = self.closed_because.lock().unwrap().clone() {
            return reason;
        }
        match &self.child {
            Some(child) => format!("exited ({})", child.death_report().await),
            None => "closed the connection".to_string(),
        }
    }
}

/// What opening a session needs.
pub struct Opening<'a> {
    /// The MCP's name, for logs.
    pub name: &'a str,
    /// How to reach it.
    pub config: &'a McpConfig,
    /// Runtime headers of a streamable HTTP upstream, read on every request.
    pub runtime_headers: &'a http::SharedHeaders,
    /// Where tool list changes go.
    pub tools: &'a Arc<ToolCache>,
    /// How long spawning or connecting plus the handshake may take.
    pub limit: Duration,
    /// The largest message accepted from the upstream.
    pub max_reply_bytes: usize,
    /// Where its log messages and stderr go.
    pub log: &'a Arc<UpstreamLog>,
}

/// Starts a new session: spawn or connect, then the MCP handshake, within `limit`. The error is
/// the reason, for a person.
pub async fn open(o: Opening<'_>) -> Result<Arc<Session>, String> {
    let routes = Arc::new(ProgressRoutes::default());
    let closed_because = CloseReason::default();
    let handler = Handler {
        name: o.name.into(),
        tools: o.tools.clone(),
    };
    let limit = o.limit;
    let (service, child) = match o.config {
        McpConfig::Stdio(config) => {
            let (child, transport) =
                stdio::spawn(o.name, config, o.max_reply_bytes, o.log.clone())?;
            match tokio::time::timeout(
                limit,
                handler.serve(ProgressTap::new(transport, routes.clone(), o.log.clone())),
            )
            .await
            {
                Ok(Ok(service)) => (service, Some(child)),
                outcome => {
                    let reason = match outcome {
                        Ok(Err(e)) => format!("initialize failed: {}", error_chain(&e)),
                        _ => format!("no answer to initialize within {limit:?}"),
                    };
                    let report = if child.exit_status().is_some()
                        || child.wait_exit(Duration::from_millis(200)).await.is_some()
                    {
                        format!("; the server {}", child.death_report().await)
                    } else {
                        String::new()
                    };
                    child.terminate(Duration::ZERO).await;
                    return Err(format!("{reason}{report}"));
                }
            }
        }
        McpConfig::Http(config) if config.is_legacy_sse() => {
            let opened = tokio::time::timeout(limit, async {
                let transport =
                    sse::connect(o.name, config, o.max_reply_bytes, closed_because.clone()).await?;
                handler
                    .serve(ProgressTap::new(transport, routes.clone(), o.log.clone()))
                    .await
                    .map_err(|e| error_chain(&e))
            })
            .await;
            match opened {
                Ok(Ok(service)) => (service, None),
                Ok(Err(e)) => return Err(format!("{}: {e}", config.url)),
                Err(_) => {
                    return Err(format!(
                        "{}: no answer to initialize within {limit:?}",
                        config.url
                    ));
                }
            }
        }
        McpConfig::Http(config) => {
            let transport = http::transport(config, o.runtime_headers.clone(), o.max_reply_bytes)?;
            match tokio::time::timeout(
                limit,
                handler.serve(ProgressTap::new(transport, routes.clone(), o.log.clone())),
            )
            .await
            {
                Ok(Ok(service)) => (service, None),
                Ok(Err(e)) => {
                    // A plain request names the cause (refused, untrusted certificate) better
                    // than the transport's summary; the summary covers the rest (the server
                    // answered, but not as an MCP server).
                    return Err(match http::diagnose(config).await {
                        Some(cause) => format!("cannot reach {}: {cause}", config.url),
                        None => format!("{}: {}", config.url, error_chain(&e)),
                    });
                }
                Err(_) => {
                    return Err(format!(
                        "{}: no answer to initialize within {limit:?}",
                        config.url
                    ));
                }
            }
        }
    };
    let peer = service.peer().clone();
    let announces_tool_changes = peer
        .peer_info()
        .and_then(|info| {
            info.capabilities
                .tools
                .as_ref()
                .and_then(|t| t.list_changed)
        })
        .unwrap_or(false);
    Ok(Arc::new(Session {
        service: tokio::sync::Mutex::new(Some(service)),
        peer,
        child,
        routes,
        announces_tool_changes,
        closed_because,
    }))
}
