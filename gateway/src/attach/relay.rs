//! The relay: each `req` frame becomes one HTTP request to the gateway, many in flight at once
//! over a keep-alive pool, each answered as soon as it completes (so out of order); `cancel`
//! drops a request's exchange, which closes its connection, and the gateway cancels the call
//! upstream.
//!
//! Everything here runs on one current-thread runtime, which keeps the bookkeeping simple: a
//! task that has not finished cannot run while the dispatcher cancels it, so a request ends
//! with exactly one of `res`, `error` or `cancelled`.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use http::uri::{Authority, Scheme, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcpgw::wire::frame::{Body, GatewayFrame, body_of};
use mcpgw::wire::rest::NDJSON;
use serde_json::value::RawValue;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::AbortHandle;

use super::input::{Call, Input};
use super::locate::Gateway;
use super::output;

/// Requests read ahead while all slots are taken, so a `cancel` behind them is still seen.
const MAX_WAITING: usize = 64;

/// The client every request and health check goes through.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A keep-alive pool to the gateway, Nagle off (frames are small and latency is the point).
/// Idle connections are dropped well before the gateway's own `--idle-timeout` (60 s) closes
/// them: a request on a connection the gateway is closing fails with a reset.
pub fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
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
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ending::Eof => f.write_str("end of input"),
            Ending::Signal(name) => write!(f, "{name}"),
            Ending::OutputClosed => f.write_str("stdout closed"),
        }
    }
}

/// What the dispatcher and the request tasks share.
pub struct Relay {
    client: HttpClient,
    authority: Authority,
    addr: SocketAddr,
    gateway_pid: u32,
    authorization: Option<HeaderValue>,
    out: output::Sender,
    in_flight: Mutex<HashMap<u64, AbortHandle>>,
    /// The virtual MCP connections.
    connections: Arc<super::connection::Connections>,
}

impl Relay {
    /// A relay to `gateway` that writes its frames to `out`.
    pub fn new(
        client: HttpClient,
        gateway: &Gateway,
        authorization: Option<HeaderValue>,
        out: output::Sender,
        max_connections: usize,
    ) -> Relay {
        let authority = Authority::try_from(gateway.addr.to_string()).expect("an address");
        Relay {
            connections: super::connection::Connections::new(
                client.clone(),
                authority.clone(),
                authorization.clone(),
                out.clone(),
                max_connections,
            ),
            client,
            authority,
            addr: gateway.addr,
            gateway_pid: gateway.pid,
            authorization,
            out,
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    fn start(self: &Arc<Self>, call: Call, permit: OwnedSemaphorePermit) {
        let id = call.id;
        let task = tokio::spawn(self.clone().serve(call, permit));
        // On a current-thread runtime the task cannot run, let alone remove its entry, before
        // this insert.
        self.in_flight
            .lock()
            .unwrap()
            .insert(id, task.abort_handle());
    }

    fn admit(
        self: &Arc<Self>,
        call: Call,
        permits: &Arc<Semaphore>,
        waiting: &mut VecDeque<Call>,
        outbox: &mut Outbox,
    ) {
        let id = call.id;
        if self.in_use(id, waiting) {
            let message = format!("request id {id} is already in flight: this request was dropped");
            outbox.push(
                &self.out,
                &GatewayFrame::Error {
                    id: None,
                    message: message.into(),
                },
            );
            return;
        }
        match permits.clone().try_acquire_owned() {
            Ok(permit) if waiting.is_empty() => self.start(call, permit),
            _ => waiting.push_back(call),
        }
    }

    /// Whether `id` belongs to a request or a connection in flight.
    fn in_use(&self, id: u64, waiting: &VecDeque<Call>) -> bool {
        self.in_flight.lock().unwrap().contains_key(&id)
            || waiting.iter().any(|c| c.id == id)
            || self.connections.contains(id)
    }

    /// `open`, `msg` and `close` of virtual MCP connections.
    fn connection_frame(&self, input: Input, waiting: &VecDeque<Call>, outbox: &mut Outbox) {
        let refused = match input {
            Input::Open { id, path } => {
                if self.in_use(id, waiting) {
                    Some(GatewayFrame::Error {
                        id: Some(id),
                        message: format!("id {id} is already in flight: this open was refused")
                            .into(),
                    })
                } else {
                    self.connections.open(id, path).err()
                }
            }
            Input::Message { id, msg } => {
                (!self.connections.message(id, msg)).then(|| GatewayFrame::Error {
                    id: None,
                    message: format!("a msg frame for connection {id}, which is not open: dropped")
                        .into(),
                })
            }
            Input::Close(id) => {
                if !self.connections.close(id) {
                    tracing::debug!(id, "close for a connection not open: ignored");
                }
                None
            }
            _ => None,
        };
        if let Some(frame) = refused {
            outbox.push(&self.out, &frame);
        }
    }

    fn cancel(&self, id: u64, waiting: &mut VecDeque<Call>, outbox: &mut Outbox) {
        let task = self.in_flight.lock().unwrap().remove(&id);
        let known = match task {
            Some(task) => {
                // Dropping the exchange closes its connection: the gateway cancels upstream.
                task.abort();
                true
            }
            None => match waiting.iter().position(|c| c.id == id) {
                Some(at) => waiting.remove(at).is_some(),
                None => false,
            },
        };
        if known {
            outbox.push(&self.out, &GatewayFrame::Cancelled { id });
        } else {
            tracing::debug!(
                id,
                "cancel for a request not in flight (finished or unknown): ignored"
            );
        }
    }

    fn cancel_all(&self, waiting: VecDeque<Call>, outbox: &mut Outbox) {
        let tasks: Vec<_> = self.in_flight.lock().unwrap().drain().collect();
        let ids = tasks
            .into_iter()
            .map(|(id, task)| {
                task.abort();
                id
            })
            .chain(waiting.into_iter().map(|c| c.id));
        for id in ids {
            outbox.push(&self.out, &GatewayFrame::Cancelled { id });
        }
    }

    async fn send(&self, frame: &GatewayFrame<'_>) {
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
        // Taking the id out and queueing the last frame happen without a pause in between, so a
        // cancel finds the request either still running or already answered.
        let Ok(slot) = self.out.reserve().await else {
            return;
        };
        self.in_flight.lock().unwrap().remove(&call.id);
        slot.send(last);
    }

    fn request(&self, call: &Call) -> Result<http::Request<Full<Bytes>>, String> {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(Scheme::HTTP);
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(call.path.clone());
        let uri = Uri::from_parts(uri).map_err(|e| format!("invalid request target: {e}"))?;
        let mut request = http::Request::builder()
            .method(call.method.clone())
            .uri(uri);
        if let Some(auth) = &self.authorization {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        if call.body.is_some() {
            request = request.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if call.stream {
            request = request.header(ACCEPT, HeaderValue::from_static(NDJSON));
        }
        request
            .body(Full::new(call.body.clone().unwrap_or_default()))
            .map_err(|e| format!("cannot build the request: {e}"))
    }

    /// Sends the request, relays a streamed answer's chunks, and returns the last frame.
    async fn exchange(&self, call: &Call) -> Result<Vec<u8>, String> {
        let response = self
            .client
            .request(self.request(call)?)
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status().as_u16();
        let streamed = call.stream
            && response
                .headers()
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(NDJSON.as_bytes()));
        let id = call.id;
        if !streamed {
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| self.broke_off(&e))?
                .to_bytes();
            return Ok(encode(&GatewayFrame::Response {
                id,
                status,
                body: body_of(&body),
            }));
        }
        // NDJSON: every line is a ToolChunk, relayed the moment it is complete.
        let mut body = response.into_body();
        let mut partial = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| self.broke_off(&e))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let mut rest = &data[..];
            while let Some(at) = memchr::memchr(b'\n', rest) {
                if partial.is_empty() {
                    self.chunk(id, &rest[..at]).await?;
                } else {
                    partial.extend_from_slice(&rest[..at]);
                    self.chunk(id, &partial).await?;
                    partial.clear();
                }
                rest = &rest[at + 1..];
            }
            partial.extend_from_slice(rest);
        }
        self.chunk(id, &partial).await?;
        Ok(encode(&GatewayFrame::Response {
            id,
            status,
            body: Body::Empty,
        }))
    }

    async fn chunk(&self, id: u64, line: &[u8]) -> Result<(), String> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return Ok(());
        }
        let chunk: &RawValue = std::str::from_utf8(line)
            .ok()
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| {
                format!(
                    "the gateway streamed a line that is not JSON: {:?}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                )
            })?;
        self.send(&GatewayFrame::Chunk {
            id,
            chunk,
            seq: None,
        })
        .await;
        Ok(())
    }

    fn gone(&self) -> String {
        // SAFETY: signal 0 only checks that the process exists.
        if self.gateway_pid != 0 && unsafe { libc::kill(self.gateway_pid as libc::pid_t, 0) } != 0 {
            format!(" (its process {} is gone)", self.gateway_pid)
        } else {
            String::new()
        }
    }

    fn unreachable(&self, e: &hyper_util::client::legacy::Error) -> String {
        let cause = crate::upstream::error_chain(e);
        if e.is_connect() {
            format!(
                "cannot reach the gateway at {}{}: {cause}",
                self.addr,
                self.gone()
            )
        } else {
            format!(
                "the gateway at {} failed the request{}: {cause}",
                self.addr,
                self.gone()
            )
        }
    }

    fn broke_off(&self, e: &hyper::Error) -> String {
        format!(
            "the gateway at {} broke off its answer{}: {}",
            self.addr,
            self.gone(),
            crate::upstream::error_chain(e)
        )
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

/// Relays until stdin ends, a signal arrives or stdout fails, `max_in_flight` requests at once
/// (past it the next ones wait, then stdin is no longer read); then cancels whatever is still in
/// flight, answering `cancelled` for each while stdout takes them (at most `limit`).
pub async fn run(
    relay: Arc<Relay>,
    mut frames: mpsc::Receiver<Input>,
    max_in_flight: usize,
    limit: Duration,
) -> Ending {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    let mut hup = signal(SignalKind::hangup()).expect("installing a SIGHUP handler");
    let permits = Arc::new(Semaphore::new(max_in_flight));
    let mut waiting: VecDeque<Call> = VecDeque::new();
    let mut outbox = Outbox::default();
    let ending = loop {
        tokio::select! {
            biased;
            _ = term.recv() => break Ending::Signal("SIGTERM"),
            _ = int.recv() => break Ending::Signal("SIGINT"),
            _ = hup.recv() => break Ending::Signal("SIGHUP"),
            () = relay.out.closed() => break Ending::OutputClosed,
            slot = relay.out.reserve(), if !outbox.0.is_empty() => match slot {
                Ok(slot) => slot.send(outbox.0.pop_front().expect("not empty")),
                Err(_) => break Ending::OutputClosed,
            },
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
                Some(Input::Ping) => {}
                Some(Input::Invalid { id, message }) => {
                    outbox.push(&relay.out, &GatewayFrame::Error { id, message: message.into() })
                }
            },
        }
    };
    relay.connections.close_all();
    if ending != Ending::OutputClosed {
        relay.cancel_all(waiting, &mut outbox);
        if tokio::time::timeout(limit, outbox.flush(&relay.out))
            .await
            .is_err()
        {
            tracing::warn!(
                "stdout took no frames for {limit:?}: the last cancelled frames are lost"
            );
        }
    }
    ending
}
