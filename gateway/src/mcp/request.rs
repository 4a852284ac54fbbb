//! A host's request on its way upstream and its answer on the way back: the `_meta` the
//! upstream's revision takes (the gateway's progress token, the host's revision and
//! capabilities for a modern upstream, none of them for a legacy one), the deadline, the rounds
//! of a multi round-trip request the gateway answers for a legacy host, and the answer under
//! the host's id (filtered, typed for a modern host).

use std::sync::Arc;
use std::time::Duration;

use mcpgw::wire::jsonrpc::{self, MODERN, code};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Connection, to_raw};
use crate::upstream::rpc::Reply;

impl Connection {
    /// Rewrites the `_meta` of a host's request `params` for the upstream (request `gw_id`):
    /// the host's progress token, if it gave one (given back), becomes the gateway's id; a
    /// modern upstream gets the host's revision, capabilities, client info and log level, a
    /// legacy one none of them.
    pub(super) fn upstream_meta(
        &self,
        params: &mut Map<String, Value>,
        gw_id: u64,
    ) -> Option<Box<RawValue>> {
        let modern_upstream = self.session().handshake.is_modern();
        let mut progress = None;
        {
            let state = self.state.lock().unwrap();
            let meta = params.get_mut("_meta").and_then(Value::as_object_mut);
            if let Some(meta) = meta {
                if let Some(token) = meta
                    .get("progressToken")
                    .filter(|t| t.is_string() || t.is_number())
                {
                    progress = Some(to_raw(token));
                    meta.insert("progressToken".into(), json!(gw_id));
                }
                if !modern_upstream {
                    // What a modern host sends per request is the legacy upstream's session.
                    meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
                }
            }
            if modern_upstream {
                let host = state.host.clone().unwrap_or_default();
                let meta = params
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(meta) = meta {
                    meta.entry(jsonrpc::META_PROTOCOL_VERSION)
                        .or_insert_with(|| json!(MODERN));
                    meta.entry(jsonrpc::META_CLIENT_CAPABILITIES)
                        .or_insert_with(|| host.capabilities.clone());
                    if !host.info.is_null() {
                        meta.entry(jsonrpc::META_CLIENT_INFO)
                            .or_insert_with(|| host.info.clone());
                    }
                    if let Some(level) = &state.log_level {
                        meta.entry(jsonrpc::META_LOG_LEVEL)
                            .or_insert_with(|| json!(level));
                    }
                }
                if params["_meta"].as_object().is_some_and(Map::is_empty) {
                    params.remove("_meta");
                }
            } else if params
                .get("_meta")
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                params.remove("_meta");
            }
        }
        progress
    }

    /// Sends request `gw_id` upstream and gives the host its answer: round after round while
    /// the upstream asks for input a legacy host is asked for, within the MCP's deadline (a
    /// subscription lasts as long as the host keeps it).
    pub(super) async fn relay(
        self: Arc<Self>,
        gw_id: u64,
        method: String,
        params: Map<String, Value>,
        had_params: bool,
        listen: bool,
    ) {
        // A subscription lasts as long as the host keeps it; every other request has the
        // MCP's deadline, over all its rounds.
        let (limit, _) = self.upstream.deadline(None);
        let deadline = tokio::time::Instant::now() + limit;
        let mut upstream_id = gw_id;
        // A request the host sent without params goes without them.
        let mut text =
            (!params.is_empty() || had_params).then(|| Value::Object(params.clone()).to_string());
        let mut rounds = 0;
        let reply = loop {
            let pending = self
                .session()
                .peer
                .request_with_id(upstream_id, &method, text.as_deref())
                .await;
            // Cancelled by the host, or the connection ended, before it went out: its
            // cancel may have gone first, so it is cancelled again.
            if self.in_flight_done(gw_id).is_none() {
                let peer = &self.session().peer;
                return peer
                    .cancel(upstream_id, "cancelled by the MCP client")
                    .await;
            }
            let reply = if listen {
                Some(pending.reply().await)
            } else {
                tokio::time::timeout_at(deadline, pending.reply())
                    .await
                    .ok()
            };
            let Some(Reply::Ok(result)) = &reply else {
                break reply;
            };
            let Some(asks) = self.input_required(&method, result) else {
                break reply;
            };
            rounds += 1;
            match self.answer_inputs(gw_id, asks, rounds, deadline).await {
                Ok(Some(next)) => {
                    let mut params = params.clone();
                    params.extend(next);
                    text = Some(Value::Object(params).to_string());
                    upstream_id = self.session().peer.next_id();
                    if !self.carry(gw_id, upstream_id) {
                        return;
                    }
                }
                // Cancelled by the host, or the connection ended.
                Ok(None) => return,
                Err(gap) => {
                    if let Some(entry) = self.forget(gw_id) {
                        self.reply_error(Some(entry.host_id.get()), code::INTERNAL_ERROR, &gap);
                    }
                    return;
                }
            }
        };
        self.answer_host(gw_id, upstream_id, &method, reply, limit)
            .await;
    }

    /// Gives the host the answer `reply` to request `gw_id` (now upstream request
    /// `upstream_id`), unless it is no longer in flight; `None` is the deadline `limit`
    /// passing, which the upstream is told of as a cancellation.
    async fn answer_host(
        &self,
        gw_id: u64,
        upstream_id: u64,
        method: &str,
        reply: Option<Reply>,
        limit: Duration,
    ) {
        let Some(entry) = self.forget(gw_id) else {
            // Cancelled by the host, or the connection ended.
            return;
        };
        let host_id = entry.host_id.get();
        match reply {
            Some(Reply::Ok(result)) if let Some(gap) = self.gap(&result) => {
                self.reply_error(Some(host_id), code::INTERNAL_ERROR, &gap)
            }
            Some(Reply::Ok(result)) => {
                let filtered = self.filtered_result(method, &result);
                let text = filtered.as_deref().unwrap_or(result.get());
                let typed = self.typed_result(&result, text);
                self.reply(Some(host_id), Ok(typed.as_deref().unwrap_or(text)))
            }
            Some(Reply::Err(error)) => self.reply(Some(host_id), Err(error.get())),
            Some(Reply::Closed(reason)) => self.reply_error(
                Some(host_id),
                code::INTERNAL_ERROR,
                &format!("the upstream session ended: {reason}"),
            ),
            None => {
                self.session()
                    .peer
                    .cancel(upstream_id, "the request's deadline passed")
                    .await;
                self.reply_error(
                    Some(host_id),
                    code::INTERNAL_ERROR,
                    &format!("{method} did not complete within {limit:?} (the MCP's deadline): the upstream was told to cancel it"),
                );
            }
        }
    }
}
