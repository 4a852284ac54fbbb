//! The relay: each `req` frame becomes one HTTP request to the gateway, many in flight at once
//! over a keep-alive pool ([`super::pool`]), each answered as soon as it completes (so out of
//! order). `cancel` drops a request's exchange, which closes its connection, and the gateway
//! cancels the call upstream; a resumable call outlives its exchange, so its `cancel` becomes
//! `DELETE /calls/{id}`. A `resume` is `GET /calls/{id}`; acknowledgements go together
//! ([`super::acks`]).
//!
//! Everything here runs on one current-thread runtime, which keeps the bookkeeping simple: a
//! task that has not finished cannot run while the dispatcher cancels it, so a request ends
//! with exactly one of `res`, `error` or `cancelled`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, HOST, HeaderValue};
use http_body_util::{BodyExt, Full};
use mcpgw::wire::frame::{CallId, GatewayFrame, quoted};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::AbortHandle;

use super::acks::Acks;
use super::input::{Call, Input, Resumable};
use super::liveness::{Beat, Liveness};
use super::locate::Gateway;
use super::output;
use super::pool::{Lease, Pool, SendError};

/// Requests read ahead while all slots are taken, so a `cancel` behind them is still seen.
const MAX_WAITING: usize = 64;

/// Connections a session keeps beside those of its requests, for its own requests to the
/// gateway (cancelling and forgetting resumable calls).
pub const SPARE_CONNECTIONS: usize = 2;

/// How many requests a session relays at once and how many connections it opens: at most
/// half the connections the gateway serves (at least one), so that another session or one-shot
/// requests fit beside it, and at most `max_in_flight` requests.
pub fn fit(max_in_flight: usize, gateway_max_connections: usize) -> (usize, usize) {
    let allowance = (gateway_max_connections / 2).max(1);
    let spare = SPARE_CONNECTIONS.min(allowance - 1);
    let in_flight = max_in_flight.min(allowance - spare).max(1);
    (in_flight, in_flight + spare)
}

/// One frame as one line.
pub fn encode(frame: &GatewayFrame<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    frame.encode(&mut out);
    out
}

/// Why the session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Stdin ended.
    Eof,
    /// A signal asked to stop.
    Signal(&'static str),
    /// Stdout failed: the host is gone.
    OutputClosed,
    /// Nothing arrived from the host for this long (`--heartbeat-timeout`).
    Silent(Duration),
    /// attach, which handed the session to the gateway, went away.
    AttachGone,
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Eof => f.write_str("end of input"),
            Ending::Signal(name) => write!(f, "{name}"),
            Ending::OutputClosed => f.write_str("stdout closed"),
            Ending::Silent(after) => write!(
                f,
                "nothing arrived from the host for {after:?} (--heartbeat-timeout)"
            ),
            Ending::AttachGone => f.write_str("attach went away"),
        }
    }
}

/// A response whose body is still to be read.
pub type Response = http::Response<axum::body::Body>;

/// Where the relay's requests go.
pub enum Route {
    /// Over loopback connections to the gateway: attach relaying in a process of its own.
    Pool(Arc<Pool>),
    /// Straight into the gateway's router: a session the gateway serves itself
    /// ([`super::handoff`]), with no connection, HTTP parsing or process in between.
    Router(axum::Router),
}

/// What the dispatcher and the request tasks share.
pub struct Relay {
    route: Route,
    host: HeaderValue,
    pub(super) addr: SocketAddr,
    pub(super) gateway_pid: u32,
    authorization: Option<HeaderValue>,
    out: output::Sender,
    pub(super) in_flight: Mutex<HashMap<u64, Flight>>,
    /// Acknowledgements on their way to the gateway.
    pub(super) acks: Acks,
    chores: Chores,
    /// The virtual MCP connections.
    connections: Arc<super::connection::Connections>,
}

/// A request in flight.
pub(super) struct Flight {
    /// Its exchange, or the cancelling of its call.
    task: AbortHandle,
    /// The resumable call it makes or resumes.
    call: Option<CallId>,
    /// Its call is being cancelled in the gateway; that ends with its final frame.
    cancelling: bool,
}

/// attach's own requests to the gateway (cancelling and acknowledging resumable calls), which
/// the end of the session waits for.
#[derive(Default)]
struct Chores {
    pending: AtomicUsize,
    done: Notify,
}

/// Counts a chore out when its task ends, however it ends.
struct ChoreDone {
    relay: Arc<Relay>,
    ack: bool,
}

impl Drop for ChoreDone {
    fn drop(&mut self) {
        if self.ack {
            self.relay.acks.sent();
        }
        self.relay.chores.pending.fetch_sub(1, Ordering::Relaxed);
        self.relay.chores.done.notify_waiters();
    }
}

impl Relay {
    /// A relay to `gateway` by `route` that writes its frames to `out`.
    pub fn new(
        gateway: &Gateway,
        route: Route,
        authorization: Option<HeaderValue>,
        out: output::Sender,
        max_connections: usize,
    ) -> Relay {
        let authority =
            http::uri::Authority::try_from(gateway.addr.to_string()).expect("an address");
        Relay {
            connections: super::connection::Connections::new(
                gateway.addr,
                match &route {
                    Route::Router(router) => Some(router.clone()),
                    Route::Pool(_) => None,
                },
                authority,
                authorization.clone(),
                out.clone(),
                max_connections,
            ),
            route,
            host: HeaderValue::try_from(gateway.addr.to_string()).expect("an address"),
            addr: gateway.addr,
            gateway_pid: gateway.pid,
            authorization,
            out,
            in_flight: Mutex::new(HashMap::new()),
            acks: Acks::default(),
            chores: Chores::default(),
        }
    }

    fn start(self: &Arc<Self>, call: Call, permit: OwnedSemaphorePermit) {
        let id = call.id;
        let resumable = call.resumable.as_ref().map(|r| r.call.clone());
        self.acks.request_started();
        let task = tokio::spawn(self.clone().serve(call, permit));
        // On a current-thread runtime the task cannot run, let alone remove its entry, before
        // this insert.
        self.in_flight.lock().unwrap().insert(
            id,
            Flight {
                task: task.abort_handle(),
                call: resumable,
                cancelling: false,
            },
        );
    }

    /// Runs one of attach's own requests on a task of its own (`ack`: the one that sends the
    /// waiting acknowledgements).
    pub(super) fn chore(
        self: &Arc<Self>,
        ack: bool,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> AbortHandle {
        self.chores.pending.fetch_add(1, Ordering::Relaxed);
        let done = ChoreDone {
            relay: self.clone(),
            ack,
        };
        tokio::spawn(async move {
            let _done = done;
            work.await
        })
        .abort_handle()
    }

    /// Waits for every chore, at most `limit`.
    async fn chores_done(&self, limit: Duration) {
        let all = async {
            loop {
                let done = self.chores.done.notified();
                tokio::pin!(done);
                done.as_mut().enable();
                if self.chores.pending.load(Ordering::Relaxed) == 0 {
                    return;
                }
                done.await;
            }
        };
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!(
                "the gateway did not answer every cancel and acknowledgement within {limit:?}"
            );
        }
    }

    /// `DELETE /calls/{call}` (`ack`: only a finished call); the status it answered.
    pub(super) async fn delete_call(
        &self,
        call: &CallId,
        ack: bool,
    ) -> Result<(u16, Bytes), String> {
        let mut path = mcpgw::wire::rest::path::call(call);
        if ack {
            path.push_str("?ack=true");
        }
        let request = self
            .builder(http::Method::DELETE, &path)
            .body(Full::default())
            .map_err(|e| format!("cannot build the request: {e}"))?;
        self.send_whole(request).await
    }

    /// Sends `request` and reads its whole answer: the status and the body.
    pub(super) async fn send_whole(
        &self,
        request: super::pool::Request,
    ) -> Result<(u16, Bytes), String> {
        let (response, lease) = self
            .request_gateway(request)
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status().as_u16();
        Ok((status, self.whole_body(response, lease).await?))
    }

    /// Sends `request` and returns its response (the body still to be read) with the lease of
    /// its connection.
    pub(super) async fn request_gateway(
        &self,
        request: super::pool::Request,
    ) -> Result<(Response, Lease), SendError> {
        match &self.route {
            Route::Pool(pool) => {
                let (response, lease) = pool.send(request).await?;
                Ok((response.map(axum::body::Body::new), lease))
            }
            Route::Router(router) => {
                let mut router = router.clone();
                let Ok(response) = tower_service::Service::call(&mut router, request).await;
                Ok((response, Lease::none()))
            }
        }
    }

    /// A request to the gateway, with its `Host` and the token.
    pub(super) fn builder(&self, method: http::Method, target: &str) -> http::request::Builder {
        let request = http::Request::builder()
            .method(method)
            .uri(target)
            .header(HOST, self.host.clone());
        match &self.authorization {
            Some(auth) => request.header(AUTHORIZATION, auth.clone()),
            None => request,
        }
    }

    /// Reads the whole body of `response`, then gives its connection back to the pool.
    pub(super) async fn whole_body(
        &self,
        response: Response,
        mut lease: Lease,
    ) -> Result<Bytes, String> {
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| self.broke_off(&e))?
            .to_bytes();
        lease.reusable();
        Ok(body)
    }

    /// Cancels resumable call `call` of request `id` in the gateway, then ends `id`.
    async fn cancel_call(self: Arc<Self>, id: u64, call: CallId) {
        let last = match self.delete_call(&call, false).await {
            // Cancelled, or already gone: either way it runs no more.
            Ok((200 | 404 | 410, _)) => GatewayFrame::Cancelled { id },
            Ok((status, body)) => GatewayFrame::Error {
                id: Some(id),
                message: format!(
                    "cancelling call {call} in the gateway failed: {status} {}",
                    quoted(&String::from_utf8_lossy(&body))
                )
                .into(),
            },
            Err(e) => GatewayFrame::Error {
                id: Some(id),
                message: format!("cancelling call {call} in the gateway failed: {e}").into(),
            },
        };
        self.finish(id, encode(&last)).await;
    }

    /// Takes request `id` out and queues its last frame without a pause in between, so a
    /// cancel finds the request either still running or already answered.
    async fn finish(&self, id: u64, last: Vec<u8>) {
        let Ok(slot) = self.out.reserve().await else {
            return;
        };
        self.in_flight.lock().unwrap().remove(&id);
        slot.send(last);
    }

    fn admit(
        self: &Arc<Self>,
        call: Call,
        permits: &Arc<Semaphore>,
        waiting: &mut VecDeque<Call>,
        outbox: &mut Outbox,
    ) {
        if self.is_in_flight(call.id, waiting) {
            self.refuse(Some(call.id), "a new request".into(), waiting, outbox);
            return;
        }
        match permits.clone().try_acquire_owned() {
            Ok(permit) if waiting.is_empty() => self.start(call, permit),
            _ => waiting.push_back(call),
        }
    }

    /// Whether `id` belongs to a request or a virtual MCP connection in flight.
    fn is_in_flight(&self, id: u64, waiting: &VecDeque<Call>) -> bool {
        self.in_flight.lock().unwrap().contains_key(&id)
            || waiting.iter().any(|c| c.id == id)
            || self.connections.contains(id)
    }

    /// `open`, `msg` and `close` of virtual MCP connections.
    fn connection_frame(&self, input: Input, waiting: &VecDeque<Call>, outbox: &mut Outbox) {
        match input {
            Input::Open { id, path } => {
                if self.is_in_flight(id, waiting) {
                    self.refuse(Some(id), "an open".into(), waiting, outbox);
                } else if let Err(frame) = self.connections.open(id, path) {
                    outbox.push(&self.out, &frame);
                }
            }
            Input::Message { id, msg } => {
                if self.connections.message(id, msg) {
                    return;
                }
                let message =
                    format!("a msg frame for connection {id}, which is not open: dropped");
                outbox.push(
                    &self.out,
                    &GatewayFrame::Error {
                        id: None,
                        message: message.into(),
                    },
                );
            }
            Input::Close(id) if !self.connections.close(id) => {
                tracing::debug!(id, "close for a connection not open: ignored");
            }
            _ => {}
        }
    }

    /// Answers a frame that is refused with one `error`: with the frame's id, unless a request
    /// or a connection in flight has that id (it goes on, to its own one final frame).
    fn refuse(
        &self,
        id: Option<u64>,
        message: String,
        waiting: &VecDeque<Call>,
        outbox: &mut Outbox,
    ) {
        let frame = match id {
            Some(id) if self.is_in_flight(id, waiting) => GatewayFrame::Error {
                id: None,
                message: format!(
                    "a frame with id {id}, the id of a request in flight, was refused (that request goes on): {message}"
                )
                .into(),
            },
            _ => GatewayFrame::Error {
                id,
                message: message.into(),
            },
        };
        outbox.push(&self.out, &frame);
    }

    fn cancel(self: &Arc<Self>, id: u64, waiting: &mut VecDeque<Call>, outbox: &mut Outbox) {
        let mut flights = self.in_flight.lock().unwrap();
        if let Some(flight) = flights.get_mut(&id) {
            if flight.cancelling {
                tracing::debug!(id, "a second cancel of a request: ignored");
                return;
            }
            // Dropping the exchange closes its connection: the gateway cancels a call that is
            // not resumable; a resumable one is cancelled in the gateway by its id.
            flight.task.abort();
            match flight.call.clone() {
                None => {
                    flights.remove(&id);
                    outbox.push(&self.out, &GatewayFrame::Cancelled { id });
                }
                Some(call) => {
                    flight.cancelling = true;
                    flight.task = self.chore(false, self.clone().cancel_call(id, call));
                }
            }
            return;
        }
        let Some(at) = waiting.iter().position(|c| c.id == id) else {
            tracing::debug!(
                id,
                "cancel for a request not in flight (finished or unknown): ignored"
            );
            return;
        };
        let call = waiting.remove(at).expect("found");
        match call.resumable {
            // A resume's call runs in the gateway (a call not sent yet runs nowhere).
            Some(Resumable { call, resume: true }) => {
                let task = self.chore(false, self.clone().cancel_call(id, call.clone()));
                let flight = Flight {
                    task,
                    call: Some(call),
                    cancelling: true,
                };
                flights.insert(id, flight);
            }
            _ => outbox.push(&self.out, &GatewayFrame::Cancelled { id }),
        }
    }

    /// The end of the session: what waits was never sent, and is cancelled (a resume gets no
    /// frame); a request in flight is cancelled unless its call is resumable, which runs on in
    /// the gateway for a later channel to resume (its exchange is dropped without a frame). A
    /// call being cancelled gets its final frame once the gateway answered.
    fn end(&self, waiting: VecDeque<Call>, outbox: &mut Outbox) {
        for call in waiting {
            // A resume not sent yet leaves its call running, like one in flight.
            if !call.resumable.is_some_and(|r| r.resume) {
                outbox.push(&self.out, &GatewayFrame::Cancelled { id: call.id });
            }
        }
        let mut detached = 0;
        self.in_flight.lock().unwrap().retain(|&id, flight| {
            if flight.cancelling {
                return true;
            }
            flight.task.abort();
            match flight.call {
                None => outbox.push(&self.out, &GatewayFrame::Cancelled { id }),
                Some(_) => detached += 1,
            }
            false
        });
        if detached > 0 {
            tracing::info!(
                "{detached} resumable calls run on in the gateway, for another channel to resume"
            );
        }
    }

    pub(super) async fn send(&self, frame: &GatewayFrame<'_>) {
        // A closed stdout ends the session; the dispatcher sees it.
        let _ = self.out.send(encode(frame)).await;
    }

    /// One request from start to its last frame.
    async fn serve(self: Arc<Self>, call: Call, _permit: OwnedSemaphorePermit) {
        let last = match self.exchange(&call).await {
            Ok(frame) => frame,
            Err(message) => encode(&GatewayFrame::Error {
                id: Some(call.id),
                message: message.into(),
            }),
        };
        self.finish(call.id, last).await;
    }
}

/// The dispatcher's own frames (`error`, `cancelled`) that the output queue could not take
/// yet: the dispatcher never waits on stdout, so a signal or a cancel is always seen.
#[derive(Default)]
struct Outbox(VecDeque<Vec<u8>>);

impl Outbox {
    fn push(&mut self, out: &output::Sender, frame: &GatewayFrame<'_>) {
        let bytes = encode(frame);
        if !self.0.is_empty() {
            self.0.push_back(bytes);
        } else if let Err(mpsc::error::TrySendError::Full(bytes)) = out.try_send(bytes) {
            self.0.push_back(bytes);
        }
    }

    /// Hands every frame to the output queue, waiting for room.
    async fn flush(&mut self, out: &output::Sender) {
        while let Some(bytes) = self.0.pop_front() {
            if out.send(bytes).await.is_err() {
                return;
            }
        }
    }
}

/// Relays until stdin ends, `stop` says why to stop (a signal), stdout fails or the host falls
/// silent,
/// `max_in_flight` requests at once (past it the next ones wait, then stdin is no longer read),
/// writing heartbeats as `live` says; then cancels whatever is still in flight, answering
/// `cancelled` for each while stdout takes them (at most `limit`).
pub async fn run(
    relay: Arc<Relay>,
    mut frames: mpsc::Receiver<Input>,
    max_in_flight: usize,
    mut live: Liveness,
    limit: Duration,
    stop: impl Future<Output = Ending>,
) -> Ending {
    tokio::pin!(stop);
    let far = || tokio::time::Instant::now() + Duration::from_secs(86400 * 365);
    let beat = tokio::time::sleep_until(live.next_check().unwrap_or_else(far));
    tokio::pin!(beat);
    let permits = Arc::new(Semaphore::new(max_in_flight));
    let mut waiting: VecDeque<Call> = VecDeque::new();
    let mut outbox = Outbox::default();
    let ending = loop {
        tokio::select! {
            biased;
            ending = &mut stop => break ending,
            () = relay.out.closed() => break Ending::OutputClosed,
            slot = relay.out.reserve(), if !outbox.0.is_empty() => match slot {
                Ok(slot) => slot.send(outbox.0.pop_front().expect("not empty")),
                Err(_) => break Ending::OutputClosed,
            },
            () = &mut beat => {
                match live.check(tokio::time::Instant::now()) {
                    Beat::Silent(after) => break Ending::Silent(after),
                    Beat::Ping => outbox.push(&relay.out, &GatewayFrame::Ping),
                    Beat::Nothing => {}
                }
                beat.as_mut().reset(live.next_check().unwrap_or_else(far));
            }
            permit = permits.clone().acquire_owned(), if !waiting.is_empty() => {
                let call = waiting.pop_front().expect("not empty");
                relay.start(call, permit.expect("the semaphore is never closed"));
            }
            // Input waits while the dispatcher's own frames wait for stdout.
            input = frames.recv(), if waiting.len() < MAX_WAITING && outbox.0.is_empty() => match input {
                None => break Ending::Eof,
                Some(Input::Request(call)) => relay.admit(call, &permits, &mut waiting, &mut outbox),
                Some(Input::Cancel(id)) => relay.cancel(id, &mut waiting, &mut outbox),
                Some(input @ (Input::Open { .. } | Input::Message { .. } | Input::Close(_))) => {
                    relay.connection_frame(input, &waiting, &mut outbox)
                }
                Some(Input::Ping) => {
                    live.host_pinged();
                    beat.as_mut().reset(live.next_check().unwrap_or_else(far));
                }
                Some(Input::Ack(call)) => relay.ack(call),
                Some(Input::Invalid { id, message }) => relay.refuse(id, message, &waiting, &mut outbox),
            },
        }
    };
    relay.connections.close_all();
    relay.end(waiting, &mut outbox);
    if ending != Ending::OutputClosed
        && tokio::time::timeout(limit, outbox.flush(&relay.out))
            .await
            .is_err()
    {
        tracing::warn!("stdout took no frames for {limit:?}: the last cancelled frames are lost");
    }
    relay.send_acks();
    relay.chores_done(limit).await;
    ending
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_fits_in_half_the_gateways_connections() {
        assert_eq!(fit(usize::MAX, 1024), (510, 512));
        assert_eq!(fit(8, 1024), (8, 10));
        assert_eq!(fit(usize::MAX, 64), (30, 32));
        assert_eq!(fit(usize::MAX, 4), (1, 2));
        for gateway in 1..=3 {
            assert_eq!(fit(usize::MAX, gateway), (1, 1));
        }
    }
}
