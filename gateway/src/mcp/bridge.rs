//! Multi round-trip requests (2026-07-28) for hosts of 2025: when a modern upstream answers a
//! legacy host's `tools/call`, `prompts/get` or `resources/read` with `input_required`, the
//! gateway asks the host each input request (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`) as a 2025 server would, on the same connection, and sends the request again
//! with the answers as `inputResponses` and the upstream's `requestState`, round after round,
//! until the upstream completes it. The host sees one request and the server's requests it
//! knows; the upstream sees a client of its own revision.

use mcpgw::wire::jsonrpc::method;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::{Connection, Waiter};
use crate::upstream::hub::Downstream;

/// Rounds the gateway answers for one request before it gives up on an upstream that keeps
/// asking (as the SDKs' clients do).
pub const MAX_ROUNDS: usize = 10;

/// The methods whose results may be `input_required`.
const MULTI_ROUND_TRIP: [&str; 3] = [
    method::TOOLS_CALL,
    method::PROMPTS_GET,
    method::RESOURCES_READ,
];

/// What an `input_required` result asks for.
pub struct Asks {
    /// `inputRequests`, in the upstream's order.
    requests: Vec<(String, Value)>,
    /// `requestState`, to echo.
    state: Option<String>,
}

impl Connection {
    /// The input requests of `result` when it is a multi round-trip request's
    /// `input_required` that the gateway answers for this host (a legacy one).
    pub(super) fn input_required(&self, method: &str, result: &RawValue) -> Option<Asks> {
        if !MULTI_ROUND_TRIP.contains(&method) || self.host().is_none_or(|h| h.modern()) {
            return None;
        }
        #[derive(Deserialize)]
        struct InputRequired {
            #[serde(rename = "resultType")]
            result_type: String,
            #[serde(default, rename = "inputRequests")]
            input_requests: Map<String, Value>,
            #[serde(default, rename = "requestState")]
            request_state: Option<String>,
        }
        let found = serde_json::from_str::<InputRequired>(result.get()).ok()?;
        (found.result_type == "input_required").then(|| Asks {
            requests: found.input_requests.into_iter().collect(),
            state: found.request_state,
        })
    }

    /// Asks the host the input requests of round `round` of request `gw_id`, one after the
    /// other; what to add to the request's params for the next round (`inputResponses`,
    /// `requestState`), `None` when the request was cancelled or its connection ended
    /// meanwhile, or the error the host gets instead of an answer.
    pub(super) async fn answer_inputs(
        &self,
        gw_id: u64,
        asks: Asks,
        round: usize,
        deadline: Instant,
    ) -> Result<Option<Map<String, Value>>, String> {
        if round > MAX_ROUNDS {
            return Err(format!(
                "the upstream still asked for input after {MAX_ROUNDS} rounds of this request: \
                 the gateway stopped answering for the client"
            ));
        }
        let Some(done) = self.in_flight_done(gw_id) else {
            return Ok(None);
        };
        // All of them or none: the host is not asked one question of a round it cannot end.
        let mut requests = Vec::with_capacity(asks.requests.len());
        for (key, request) in asks.requests {
            let method = request["method"].as_str().unwrap_or_default().to_string();
            let params = request.get("params").map(Value::to_string);
            let raw = params
                .as_deref()
                .and_then(|p| serde_json::from_str::<Box<RawValue>>(p).ok());
            if !self.can_answer(&method, raw.as_deref()) {
                return Err(format!(
                    "the upstream needs the client's answer to {method:?} (input request {key:?} \
                     of a 2026-07-28 multi round-trip request), which this {} client did not \
                     declare the capability for",
                    self.host().map(|h| h.version).unwrap_or_default()
                ));
            }
            requests.push((key, method, params));
        }
        let mut responses = Map::new();
        for (key, method, params) in requests {
            let (tx, rx) = oneshot::channel();
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(ours) = self.ask(&method, params.as_deref(), left, Waiter::Gateway(tx)) else {
                return Err(self.too_many_asked(&method));
            };
            let answer = tokio::select! {
                answer = rx => answer,
                () = done.cancelled() => {
                    if let Some(asked) = self.state.lock().unwrap().asked.remove(&ours) {
                        asked.timer.abort();
                    }
                    self.withdraw(ours, "the request it was asked for ended");
                    return Ok(None);
                }
            };
            match answer {
                Ok(Ok(result)) => {
                    let value = serde_json::from_str(&result).unwrap_or(Value::Null);
                    responses.insert(key, value);
                }
                Ok(Err(error)) => {
                    let message = serde_json::from_str::<Value>(&error)
                        .ok()
                        .and_then(|e| e["message"].as_str().map(str::to_owned))
                        .unwrap_or(error);
                    return Err(format!(
                        "the upstream needs the client's answer to {method:?} (input request \
                         {key:?}), and the client answered with an error: {message}"
                    ));
                }
                Err(_) => return Ok(None),
            }
        }
        let mut next = Map::new();
        next.insert("inputResponses".into(), Value::Object(responses));
        if let Some(state) = asks.state {
            next.insert("requestState".into(), json!(state));
        }
        Ok(Some(next))
    }

    /// What fires when request `gw_id` is forgotten, while it is in flight.
    pub(super) fn in_flight_done(&self, gw_id: u64) -> Option<tokio_util::sync::CancellationToken> {
        let state = self.state.lock().unwrap();
        state.in_flight.get(&gw_id).map(|e| e.done.clone())
    }

    /// Request `gw_id` goes on as upstream request `upstream_id`; false when it is no longer
    /// in flight.
    pub(super) fn carry(&self, gw_id: u64, upstream_id: u64) -> bool {
        let mut state = self.state.lock().unwrap();
        match state.in_flight.get_mut(&gw_id) {
            Some(entry) => {
                entry.upstream_id = upstream_id;
                true
            }
            None => false,
        }
    }

    /// A legacy upstream's `result`, as `text` (filtered), as a host of 2026-07-28 reads it:
    /// with the `"resultType": "complete"` every result of that revision carries. `None` when
    /// it goes as it is (a legacy host, a modern upstream, a result that has its type).
    pub(super) fn typed_result(&self, result: &RawValue, text: &str) -> Option<String> {
        if self.session().handshake.is_modern() || !self.host()?.modern() {
            return None;
        }
        if crate::upstream::call::result_type(result).is_some() {
            return None;
        }
        let body = text.trim_start().strip_prefix('{')?.trim_start();
        Some(match body.strip_prefix('}') {
            Some(_) => r#"{"resultType":"complete"}"#.to_string(),
            None => format!(r#"{{"resultType":"complete",{body}"#),
        })
    }

    /// Why a result of the upstream's cannot reach this host as it is, when it cannot: a
    /// result type of 2026-07-28 other than a task the host declared the tasks extension for.
    pub(super) fn gap(&self, result: &RawValue) -> Option<String> {
        let host = self.host()?;
        if host.modern() {
            return None;
        }
        let kind = crate::upstream::call::result_type(result)?;
        let declared_tasks = host.capabilities["extensions"]
            .get(mcpgw::wire::jsonrpc::TASKS_EXTENSION)
            .is_some();
        (kind != "complete" && !(kind == "task" && declared_tasks)).then(|| {
            format!(
                "the upstream answered with a {kind:?} result (2026-07-28), which a {} \
                 connection cannot carry: connect with protocol version 2026-07-28",
                host.version
            )
        })
    }
}
