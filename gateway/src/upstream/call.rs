//! Tool calls: the effective deadline, the request with its progress routed to the caller, the
//! answer or the error, and cancellation upstream when the caller goes away.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpgw::wire::JsonObject;
use mcpgw::wire::jsonrpc::{self, method};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::hub::{Progress, ProgressSender};
use super::rpc::Reply;
use super::session::Session;
use super::{Upstream, stdio};
use crate::error::{DeadlineSource, Error};
use crate::scope::py_repr;

/// Progress notifications of one call waiting for its caller; beyond, intermediate ones are
/// dropped (never the result).
const PROGRESS_QUEUE: usize = 1024;

impl Upstream {
    /// Calls `tool` and returns the upstream's `CallToolResult` as it sent it; a tool the
    /// spec's filters do not list is refused without asking the upstream. `deadline`
    /// (from the request) can only shorten the MCP's `execution_timeout`; past it the upstream
    /// is told to cancel. Progress goes to `progress` when given.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        progress: Option<ProgressSender>,
    ) -> Result<Box<RawValue>, Error> {
        let started = Instant::now();
        self.metrics.calls.fetch_add(1, Ordering::Relaxed);
        let result = async {
            self.check_listed(tool)?;
            if !self.knows_tool(tool).await? {
                return Err(Error::ToolNotFound {
                    tool: tool.to_string(),
                    mcp: self.name.clone(),
                });
            }
            let (limit, source) = self.deadline(deadline);
            self.with_session(|session| async move {
                let id = session.peer.next_id();
                let mut params = Map::new();
                params.insert("name".into(), json!(tool));
                if let Some(arguments) = arguments {
                    params.insert("arguments".into(), Value::Object(arguments));
                }
                params.insert("_meta".into(), json!({"progressToken": id}));
                let token = id.to_string();
                if let Some(sender) = progress {
                    session.hub.listen(&token, sender);
                }
                let mut guard = CallGuard {
                    session: session.clone(),
                    id: Some(id),
                    token,
                };
                let pending = session
                    .peer
                    .request_with_id(
                        id,
                        method::TOOLS_CALL,
                        Some(&session.handshake.params(params)),
                    )
                    .await;
                let outcome = tokio::time::timeout(limit, pending.reply()).await;
                let reply = match outcome {
                    Ok(reply) => {
                        guard.id = None;
                        reply
                    }
                    Err(_) => {
                        // The guard tells the upstream to cancel.
                        return Err(Error::Deadline {
                            tool: tool.to_string(),
                            mcp: self.name.clone(),
                            limit,
                            source,
                        });
                    }
                };
                self.outcome(&session, tool, reply).await
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

    /// A `tools/call` answer as a result or the error it stands for.
    async fn outcome(
        &self,
        session: &Session,
        tool: &str,
        reply: Reply,
    ) -> Result<Box<RawValue>, Error> {
        let name = &self.name;
        match reply {
            Reply::Ok(result) => match result_type(&result) {
                None | Some("complete") if result.get().starts_with('{') => Ok(result),
                Some("input_required") => Err(input_required(
                    &format!("the tool {} of {}", py_repr(tool), py_repr(name)),
                    "call it",
                )),
                _ => Err(Error::Upstream(format!(
                    "{} answered the call with something that is not a tool result",
                    py_repr(name)
                ))),
            },
            Reply::Err(error) => {
                #[derive(serde::Deserialize)]
                struct Data {
                    #[serde(default)]
                    data: Value,
                }
                let data =
                    serde_json::from_str::<Data>(error.get()).map_or(Value::Null, |d| d.data);
                if let Some(bytes) = data.get(stdio::TOO_LARGE_KEY).and_then(Value::as_u64) {
                    return Err(Error::ReplyTooLarge {
                        mcp: name.clone(),
                        tool: tool.to_string(),
                        bytes,
                        limit: self.settings.max_reply_bytes,
                    });
                }
                let (code, message) = jsonrpc::error_parts(&error);
                Err(Error::Rpc {
                    mcp: name.clone(),
                    code,
                    message,
                })
            }
            Reply::Closed(_) => {
                let report = session.death_report().await;
                self.note_death(report.clone());
                Err(Error::Died {
                    mcp: name.clone(),
                    tool: tool.to_string(),
                    report,
                })
            }
        }
    }

    /// Sends `method` with `params` (a request the REST surface passes through: resources,
    /// prompts) and returns the upstream's result as it sent it, within the MCP's deadline.
    pub async fn ask(
        &self,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<Box<RawValue>, Error> {
        let (limit, _) = self.deadline(None);
        let name = &self.name;
        self.with_session(|session| async move {
            let pending = session
                .peer
                .request(method, Some(&session.handshake.params(params)))
                .await;
            let id = pending.id;
            match tokio::time::timeout(limit, pending.reply()).await {
                Err(_) => {
                    session
                        .peer
                        .cancel(id, "the request's deadline passed")
                        .await;
                    Err(Error::SetupTimeout {
                        what: format!("{method} of {}", py_repr(name)),
                        limit,
                    })
                }
                Ok(Reply::Ok(result)) if result_type(&result) == Some("input_required") => Err(
                    input_required(&format!("{method} of {}", py_repr(name)), "send it"),
                ),
                Ok(Reply::Ok(result)) => Ok(result),
                Ok(Reply::Err(error)) => {
                    let (code, message) = jsonrpc::error_parts(&error);
                    Err(Error::Rpc {
                        mcp: name.clone(),
                        code,
                        message,
                    })
                }
                Ok(Reply::Closed(_)) => Err(Error::Upstream(format!(
                    "upstream {} {} during {method}",
                    py_repr(name),
                    session.death_report().await
                ))),
            }
        })
        .await
    }

    /// Every item under `key` of every page of the list `method`.
    pub async fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, Error> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default, rename = "nextCursor")]
            next_cursor: Option<String>,
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..super::tools::MAX_PAGES {
            let mut params = Map::new();
            if let Some(c) = &cursor {
                params.insert("cursor".into(), json!(c));
            }
            let page = self.ask(method, params).await?;
            let mut value: Value = serde_json::from_str(page.get()).unwrap_or_default();
            if let Some(Value::Array(list)) = value.get_mut(key).map(Value::take) {
                items.extend(list);
            }
            match serde_json::from_str::<Page>(page.get())
                .ok()
                .and_then(|p| p.next_cursor)
            {
                Some(next) if !next.is_empty() => cursor = Some(next),
                _ => return Ok(items),
            }
        }
        Err(Error::Upstream(format!(
            "the list {method} of {} did not end after {} pages",
            py_repr(&self.name),
            super::tools::MAX_PAGES
        )))
    }

    /// [`Upstream::call`] with its progress handed to `progress` as it arrives, in order, all
    /// of it before the result. `None` when the caller went away first (`progress` returned
    /// false, or `gone` resolved): the call is then dropped, which cancels it upstream.
    pub async fn call_with_progress<F>(
        &self,
        tool: &str,
        arguments: Option<JsonObject>,
        deadline: Option<Duration>,
        mut progress: impl FnMut(Progress) -> F,
        gone: impl Future<Output = ()>,
    ) -> Option<Result<Box<RawValue>, Error>>
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
    pub(crate) fn deadline(&self, requested: Option<Duration>) -> (Duration, DeadlineSource) {
        match (self.spec.execution_timeout(), requested) {
            (Some(own), Some(r)) if r < own => (r, DeadlineSource::Request),
            (Some(own), _) => (own, DeadlineSource::ExecutionTimeout),
            (None, Some(r)) => (r, DeadlineSource::Request),
            (None, None) => (self.settings.call_timeout, DeadlineSource::Gateway),
        }
    }
}

/// Cancels the call upstream when the caller goes away before its answer (the HTTP client
/// disconnected, the handler future was dropped, the deadline passed), and unroutes its
/// progress.
struct CallGuard {
    session: Arc<Session>,
    id: Option<u64>,
    token: String,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        self.session.hub.forget(&self.token);
        if let Some(id) = self.id.take() {
            let peer = self.session.peer.clone();
            tokio::spawn(async move {
                peer.cancel(
                    id,
                    "the gateway's caller went away, or the call's deadline passed",
                )
                .await;
            });
        }
    }
}

/// A result's `resultType` (2026-07-28), when it has one.
pub(crate) fn result_type(result: &RawValue) -> Option<&str> {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(default, borrow, rename = "resultType")]
        result_type: Option<&'a str>,
    }
    serde_json::from_str::<Kind>(result.get())
        .ok()
        .and_then(|k| k.result_type)
}

/// What a REST request gets for a multi round-trip request's `input_required`: `what` asked
/// for more input, which the request cannot give.
fn input_required(what: &str, how: &str) -> Error {
    Error::Upstream(format!(
        "{what} asked for more input (a multi round-trip request), which a REST request cannot \
         give: {how} over an MCP connection"
    ))
}
