//! Acknowledgements: the host's `ack` frames say which resumable calls it has the answers of,
//! so the gateway may forget them. They go together, as one `POST /calls/ack`, once the session
//! has been idle for [`ACK_IDLE`] (or [`ACK_BATCH`] wait, or the first has waited
//! [`ACK_LATEST`]), so that forgetting answered calls costs the gateway one request for many
//! and never holds up a request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http_body_util::Full;
use mcpgw::wire::frame::{CallId, quoted};
use tokio::time::Instant;

use super::relay::Relay;

/// Acknowledgements waiting to be sent, at most: past it one more is dropped (a call not
/// acknowledged is only kept until its retention ends).
const MAX_ACKS: usize = 256;

/// Acknowledgements that are sent even while requests are in flight: a session that is never
/// idle still lets the gateway forget its answered calls.
const ACK_BATCH: usize = 32;

// Whatever waits goes in one request.
const _: () = assert!(MAX_ACKS <= mcpgw::wire::AckCalls::MAX);

/// How long no request must have been in flight or started before the waiting
/// acknowledgements go: a host that calls one tool after another sends its next request well
/// within it.
const ACK_IDLE: Duration = Duration::from_millis(5);

/// How long an acknowledgement waits at most for the session to be idle: one request per this
/// long is in nobody's way, and a session that is never idle for [`ACK_IDLE`] still lets the
/// gateway forget a few answered calls.
const ACK_LATEST: Duration = Duration::from_millis(50);

/// The acknowledgements of one session on their way to the gateway.
pub struct Acks {
    /// Acknowledged calls not yet sent.
    waiting: Mutex<Vec<CallId>>,
    /// When the last request started.
    last_start: Mutex<Instant>,
    /// A task waits for the session to be idle, to send them.
    idle_watch: AtomicBool,
    /// The chore that sends them runs.
    sending: AtomicBool,
}

impl Default for Acks {
    fn default() -> Acks {
        Acks {
            waiting: Mutex::new(Vec::new()),
            last_start: Mutex::new(Instant::now()),
            idle_watch: AtomicBool::new(false),
            sending: AtomicBool::new(false),
        }
    }
}

impl Acks {
    /// A request started: the session is not idle.
    pub fn request_started(&self) {
        *self.last_start.lock().unwrap() = Instant::now();
    }

    /// The chore that sent them ended.
    pub fn sent(&self) {
        self.sending.store(false, Ordering::Relaxed);
    }
}

impl Relay {
    /// Keeps `call`'s acknowledgement for the gateway: sent once the session is idle, or at
    /// once when [`ACK_BATCH`] wait.
    pub(super) fn ack(self: &Arc<Self>, call: CallId) {
        let mut waiting = self.acks.waiting.lock().unwrap();
        if waiting.len() >= MAX_ACKS {
            tracing::debug!("{MAX_ACKS} acknowledgements wait already: one more is dropped");
            return;
        }
        waiting.push(call);
        let full = waiting.len() >= ACK_BATCH;
        drop(waiting);
        if full {
            self.send_acks();
        } else {
            self.send_acks_when_idle();
        }
    }

    /// Sends the waiting acknowledgements once no request has been in flight or started for
    /// [`ACK_IDLE`], or [`ACK_LATEST`] from now, unless a task waits for that already. (Not a
    /// chore: the end of the session sends what waits itself.)
    fn send_acks_when_idle(self: &Arc<Self>) {
        if self.acks.idle_watch.swap(true, Ordering::Relaxed) {
            return;
        }
        let relay = self.clone();
        let latest = Instant::now() + ACK_LATEST;
        tokio::spawn(async move {
            loop {
                let now = Instant::now();
                let quiet_from = *relay.acks.last_start.lock().unwrap() + ACK_IDLE;
                let busy = !relay.in_flight.lock().unwrap().is_empty();
                if (!busy && quiet_from <= now) || latest <= now {
                    break;
                }
                let next = if busy { now + ACK_IDLE } else { quiet_from };
                tokio::time::sleep_until(next.min(latest)).await;
            }
            relay.acks.idle_watch.store(false, Ordering::Relaxed);
            relay.send_acks();
        });
    }

    /// Sends the waiting acknowledgements in one request (`POST /calls/ack`), unless that is
    /// under way already (it then sends these too, in the next one).
    pub(super) fn send_acks(self: &Arc<Self>) {
        if self.acks.waiting.lock().unwrap().is_empty()
            || self.acks.sending.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let relay = self.clone();
        self.chore(true, async move {
            loop {
                let calls = std::mem::take(&mut *relay.acks.waiting.lock().unwrap());
                if calls.is_empty() {
                    // The chore's end says it no longer runs, in this same step.
                    return;
                }
                match relay.ack_calls(&calls).await {
                    Ok((200, _)) => tracing::debug!(calls = calls.len(), "acknowledged"),
                    // A gateway of a version without `POST /calls/ack`: one at a time.
                    Ok((404 | 405, _)) => {
                        for call in &calls {
                            let acked = relay.delete_call(call, true).await;
                            relay.acknowledged(&acked, Some(call));
                        }
                    }
                    other => relay.acknowledged(&other, None),
                }
            }
        });
    }

    /// `POST /calls/ack` with `calls`; the status it answered.
    async fn ack_calls(&self, calls: &[CallId]) -> Result<(u16, Bytes), String> {
        let body = mcpgw::wire::AckCalls {
            calls: calls.iter().map(ToString::to_string).collect(),
        };
        let request = self
            .builder(http::Method::POST, mcpgw::wire::rest::route::CALLS_ACK)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(Full::new(Bytes::from(
                serde_json::to_vec(&body).expect("strings serialize"),
            )))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        self.send_whole(request).await
    }

    /// Logs how an acknowledgement (of `call`, else of a list) went, unless it went well.
    fn acknowledged(&self, outcome: &Result<(u16, Bytes), String>, call: Option<&CallId>) {
        let what = call.map_or_else(|| "a list of calls".to_owned(), |c| format!("call {c}"));
        match outcome {
            Ok((200 | 404 | 410, _)) => tracing::debug!("acknowledged {what}"),
            Ok((status, body)) => tracing::info!(
                "the gateway refused the acknowledgement of {what}: {status} {}",
                quoted(&String::from_utf8_lossy(body))
            ),
            Err(e) => tracing::info!("acknowledging {what} failed: {e}"),
        }
    }
}
