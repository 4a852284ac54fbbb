//! Tool calls: the effective deadline, the request with its progress routed to the caller, the
//! answer or the error, and cancellation upstream when the caller goes away.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpgw::wire::JsonObject;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotificationParam, ClientRequest,
    ProgressNotificationParam, ProgressToken, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::{Value, json};

use super::progress::ProgressSender;
use super::session::Session;
use super::{Upstream, error_chain, stdio};
use crate::error::{DeadlineSource, Error, py_repr};

/// Progress notifications of one call waiting for its caller; beyond, intermediate ones are
/// dropped (never the result).
const PROGRESS_QUEUE: usize = 1024;

impl Upstream {
    /// Calls `tool` and returns the upstream's `CallToolResult` as JSON. `deadline` (from the
    /// request) can only shorten the MCP's `execution_timeout`; past it the upstream is sent
    /// `notifications/cancelled`. Progress goes to `progress` when given.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        progress: Option<ProgressSender>,
    ) -> Result<Value, Error> {
        let started = Instant::now();
        self.metrics.calls.fetch_add(1, Ordering::Relaxed);
        let result = async {
            if !self.knows_tool(tool).await? {
                return Err(Error::ToolNotFound {
                    tool: tool.to_string(),
                    mcp: self.name.clone(),
                });
            }
            let (limit, source) = self.deadline(deadline);
            let name = &self.name;
            self.with_session(|session| async move {
                let mut params = CallToolRequestParams::new(tool.to_string());
                params.arguments = arguments;
                let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
                let handle = session
                    .peer
                    .send_request_with_option(request, PeerRequestOptions::with_timeout(limit))
                    .await
                    .map_err(|e| {
                        Error::Upstream(format!(
                            "sending the call to {} failed: {}",
                            py_repr(name),
                            error_chain(&e)
                        ))
                    })?;
                let mut guard = CallGuard {
                    session: session.clone(),
                    id: Some(handle.id.clone()),
                    token: handle.progress_token.clone(),
                };
                if let Some(sender) = progress {
                    session.routes.listen(handle.progress_token.clone(), sender);
                }
                let outcome = handle.await_response().await;
                guard.id = None;
                match outcome {
                    Ok(ServerResult::CallToolResult(result)) => {
                        Ok(serde_json::to_value(result).expect("serializable"))
                    }
                    Ok(ServerResult::EmptyResult(_)) => Ok(json!({"content": []})),
                    Ok(other) => match serde_json::to_value(other) {
                        Ok(v @ Value::Object(_)) => Ok(v),
                        _ => Err(Error::Upstream(format!(
                            "{} answered the call with something that is not a tool result",
                            py_repr(name)
                        ))),
                    },
                    Err(ServiceError::Timeout { .. }) => Err(Error::Deadline {
                        tool: tool.to_string(),
                        mcp: name.clone(),
                        limit,
                        source,
                    }),
                    Err(ServiceError::McpError(e))
                        if let Some(bytes) = e
                            .data
                            .as_ref()
                            .and_then(|d| d.get(stdio::TOO_LARGE_KEY)?.as_u64()) =>
                    {
                        Err(Error::ReplyTooLarge {
                            mcp: name.clone(),
                            tool: tool.to_string(),
                            bytes,
                            limit: self.settings.max_reply_bytes,
                        })
                    }
                    Err(ServiceError::McpError(e)) => Err(Error::Rpc {
                        mcp: name.clone(),
                        code: e.code.0,
                        message: e.message.to_string(),
                    }),
                    Err(ServiceError::TransportClosed) | Err(ServiceError::TransportSend(_)) => {
                        let report = session.death_report().await;
                        self.note_death(report.clone());
                        Err(Error::Died {
                            mcp: name.clone(),
                            tool: tool.to_string(),
                            report,
                        })
                    }
                    Err(e) => Err(Error::Upstream(format!(
                        "the call to {} failed: {}",
                        py_repr(name),
                        error_chain(&e)
                    ))),
                }
            })
            .await
        }
        .await;
        if result.is_err() {
            self.metrics.errors.fetch_add(1, Ordering::Relaxed);
        }
        self.metrics.latency.observe(started.elapsed());
        result
    }

    /// [`Upstream::call`] with its progress handed to `progress` as it arrives, in order, all
    /// of it before the result. `None` when the caller went away first (`progress` returned
    /// false, or `gone` resolved): the call is then dropped, which cancels it upstream.
    pub async fn call_with_progress<F>(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        mut progress: impl FnMut(ProgressNotificationParam) -> F,
        gone: impl Future<Output = ()>,
    ) -> Option<Result<Value, Error>>
    where
        F: Future<Output = bool>,
    {
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::channel(PROGRESS_QUEUE);
        let call = self.call(tool, arguments, deadline, Some(progress_tx));
        tokio::pin!(call);
        tokio::pin!(gone);
        loop {
            tokio::select! {
                biased;
                Some(p) = progress_rx.recv() => {
                    if !progress(p).await {
                        return None;
                    }
                }
                result = &mut call => {
                    while let Ok(p) = progress_rx.try_recv() {
                        if !progress(p).await {
                            return None;
                        }
                    }
                    return Some(result);
                }
                () = &mut gone => return None,
            }
        }
    }

    /// The effective deadline of a call and where it came from.
    fn deadline(&self, requested: Option<Duration>) -> (Duration, DeadlineSource) {
        match (self.spec.execution_timeout(), requested) {
            (Some(own), Some(r)) if r < own => (r, DeadlineSource::Request),
            (Some(own), _) => (own, DeadlineSource::ExecutionTimeout),
            (None, Some(r)) => (r, DeadlineSource::Request),
            (None, None) => (self.settings.call_timeout, DeadlineSource::Gateway),
        }
    }
}

/// Cancels the call upstream when the caller goes away before its answer (the HTTP client
/// disconnected, the handler future was dropped), and unroutes its progress.
struct CallGuard {
    session: Arc<Session>,
    id: Option<rmcp::model::RequestId>,
    token: ProgressToken,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.session.routes.forget(&self.token);
        if let Some(id) = self.id.take() {
            let peer = self.session.peer.clone();
            tokio::spawn(async move {
                let params = CancelledNotificationParam::new(
                    Some(id),
                    Some("the gateway's caller went away".into()),
                );
                let _ = peer.notify_cancelled(params).await;
            });
        }
    }
}
