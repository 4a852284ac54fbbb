//! What the upstream sends a connection: its notifications (each to the connections it
//! concerns, subscription ids rewritten), progress, its requests to the host (sampling,
//! elicitation, roots) and their answers, and the end of its session.

use std::sync::Arc;
use std::time::Duration;

use mcpgw::wire::jsonrpc::{self, code, method};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::{Asked, Connection, Waiter};
use crate::upstream::hub::Downstream;
use crate::upstream::rpc::{Origin, Peer};
use crate::upstream::session::severity;

impl Connection {
    /// Sends the host request `method` under an id of the gateway's; `waiter` gets the answer,
    /// or an error when the host has too many unanswered already, does not answer within
    /// `limit` (the host is then told it was cancelled) or closes the connection. The id.
    pub(super) fn ask(
        &self,
        method: &str,
        params: Option<&str>,
        limit: Duration,
        waiter: Waiter,
    ) -> Option<u64> {
        let me = self.me.upgrade()?;
        let mut state = self.state.lock().unwrap();
        if state.asked.len() >= self.limits.max_pending {
            drop(state);
            let message = self.too_many_asked(method);
            tokio::spawn(async move {
                let error = jsonrpc::error_object(code::INTERNAL_ERROR, &message, None);
                waiter.settle(Err(error.get())).await;
            });
            return None;
        }
        state.next_asked += 1;
        let ours = state.next_asked;
        let method_owned = method.to_string();
        let timer = tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            let Some(asked) = me.state.lock().unwrap().asked.remove(&ours) else {
                return;
            };
            let message = format!("the MCP client did not answer {method_owned} within {limit:?}");
            let error = jsonrpc::error_object(code::INTERNAL_ERROR, &message, None);
            asked.waiter.settle(Err(error.get())).await;
            me.withdraw(ours, &message);
        })
        .abort_handle();
        state.asked.insert(ours, Asked { waiter, timer });
        drop(state);
        self.send(jsonrpc::request(&ours.to_string(), method, params));
        Some(ours)
    }

    /// Why `method` is not asked of the host: it has [`Limits::max_pending`] unanswered.
    pub(super) fn too_many_asked(&self, method: &str) -> String {
        format!(
            "{method}: the MCP client has {} requests unanswered already",
            self.limits.max_pending
        )
    }

    /// Tells the host that request `ours` made of it is no longer wanted.
    pub(super) fn withdraw(&self, ours: u64, reason: &str) {
        let params = json!({"requestId": ours, "reason": reason});
        self.send(jsonrpc::notification(
            method::CANCELLED,
            Some(&params.to_string()),
        ));
    }
}

impl Downstream for Connection {
    fn number(&self) -> u64 {
        self.number
    }

    fn notification(&self, method: &str, params: Option<&RawValue>, origin: Origin) {
        let Some(host) = self.host() else { return };
        let own_origin = origin.is_some_and(|o| self.owns(o));
        if origin.is_some() && !own_origin && method == method::MESSAGE {
            return;
        }
        // A notification of a subscription stream is the subscriber's alone.
        let rewritten: Option<String> = match params.map(|p| self.own_subscription(p)) {
            None | Some(Some(None)) => None,
            Some(Some(Some(text))) => Some(text),
            Some(None) => {
                // Another subscriber's: a legacy host still gets the list changes it expects
                // unasked, from the gateway's own subscription.
                if host.modern() || !method.ends_with("/list_changed") {
                    return;
                }
                None
            }
        };
        match method {
            method::MESSAGE if !own_origin => {
                #[derive(Deserialize)]
                struct Level {
                    #[serde(default)]
                    level: String,
                }
                let level = params
                    .and_then(|p| serde_json::from_str::<Level>(p.get()).ok())
                    .map(|l| l.level)
                    .unwrap_or_default();
                let wanted = self.state.lock().unwrap().log_level.clone();
                if wanted.is_some_and(|w| severity(&level) < severity(&w)) {
                    return;
                }
            }
            method::RESOURCE_UPDATED if rewritten.is_none() => {
                #[derive(Deserialize)]
                struct Uri {
                    #[serde(default)]
                    uri: String,
                }
                let uri = params
                    .and_then(|p| serde_json::from_str::<Uri>(p.get()).ok())
                    .map(|u| u.uri)
                    .unwrap_or_default();
                if !self.state.lock().unwrap().subscriptions.contains(&uri) {
                    return;
                }
            }
            method::CANCELLED => {
                // The upstream withdrew a request it asked this host (or another one).
                #[derive(Deserialize)]
                struct Cancel<'a> {
                    #[serde(borrow, rename = "requestId")]
                    request_id: Option<&'a RawValue>,
                }
                let Some(upstream_id) = params
                    .and_then(|p| serde_json::from_str::<Cancel>(p.get()).ok())
                    .and_then(|c| c.request_id)
                else {
                    return;
                };
                let mut state = self.state.lock().unwrap();
                let Some(ours) = state
                    .asked
                    .iter()
                    .find(|(_, a)| {
                        matches!(&a.waiter, Waiter::Upstream { id, .. } if id.get() == upstream_id.get())
                    })
                    .map(|(n, _)| *n)
                else {
                    return;
                };
                if let Some(asked) = state.asked.remove(&ours) {
                    asked.timer.abort();
                }
                drop(state);
                return self.withdraw(ours, "the upstream withdrew its request");
            }
            _ => {}
        }
        let params = rewritten.or_else(|| params.map(|p| p.get().to_string()));
        self.send(jsonrpc::notification(method, params.as_deref()));
    }

    fn progress(&self, token: &str, params: &RawValue) {
        let Ok(gw_id) = token.parse::<u64>() else {
            return;
        };
        let host_token = {
            let state = self.state.lock().unwrap();
            match state.in_flight.get(&gw_id).and_then(|e| e.progress.clone()) {
                Some(t) => t,
                None => return,
            }
        };
        let Ok(mut value) = serde_json::from_str::<Value>(params.get()) else {
            return;
        };
        value["progressToken"] = serde_json::from_str(host_token.get()).unwrap_or_default();
        self.send(jsonrpc::notification(
            method::PROGRESS,
            Some(&value.to_string()),
        ));
    }

    fn modern(&self) -> bool {
        self.host().is_some_and(|h| h.modern())
    }

    fn owns(&self, id: u64) -> bool {
        let state = self.state.lock().unwrap();
        state.in_flight.contains_key(&id) || state.in_flight.values().any(|e| e.upstream_id == id)
    }

    fn can_answer(&self, method: &str, params: Option<&RawValue>) -> bool {
        let Some(host) = self.host() else {
            return false;
        };
        // A host of 2026-07-28 takes no requests from its server.
        if host.modern() {
            return false;
        }
        let caps = &host.capabilities;
        match method {
            method::CREATE_MESSAGE => caps.get("sampling").is_some(),
            method::ROOTS_LIST => caps.get("roots").is_some(),
            method::ELICIT => {
                let url_mode = params
                    .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
                    .is_some_and(|p| p["mode"] == "url");
                match caps.get("elicitation") {
                    None => false,
                    Some(e) if url_mode => e.get("url").is_some(),
                    // An empty elicitation capability is form mode (2025-11-25).
                    Some(_) => true,
                }
            }
            _ => false,
        }
    }

    fn upstream_request(
        &self,
        peer: &Arc<Peer>,
        id: &RawValue,
        method: &str,
        params: Option<&RawValue>,
    ) {
        let (limit, _) = self.upstream.deadline(None);
        let waiter = Waiter::Upstream {
            peer: peer.clone(),
            id: id.to_owned(),
        };
        self.ask(method, params.map(RawValue::get), limit, waiter);
    }

    fn session_ended(&self, reason: &str) {
        self.end(&format!(
            "the upstream's session ended ({reason}): reconnect to start over"
        ));
    }
}
