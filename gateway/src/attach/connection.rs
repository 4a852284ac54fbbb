//! Virtual MCP connections over the session channel: each `open` frame becomes one upgraded
//! HTTP/1.1 connection to the gateway (`GET /mcps/{name}/connection`, `Upgrade:
//! mcpgw-jsonrpc`), whose stream carries one JSON-RPC message a line both ways. `msg` frames
//! from the host are written to it as lines; each line from it goes to the host as a `msg`
//! frame, untouched. `close` (or the end of input) ends it; `closed` is its final frame, with
//! the gateway's reason when the gateway ended it, or the HTTP status and detail when it
//! refused the `open`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONNECTION, HeaderValue, UPGRADE};
use http::uri::{Authority, PathAndQuery, Scheme, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use mcpgw::wire::frame::GatewayFrame;
use mcpgw::wire::rest;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::output;
use super::pool::{self, SendError};
use super::relay::encode;

/// Messages from the host queued for one connection; past it the connection is closed (the
/// dispatcher never waits on one connection).
const QUEUE: usize = 1024;

/// How long a closing connection waits for the gateway's last lines.
const DRAIN: Duration = Duration::from_secs(2);

/// The connections of one session channel.
pub struct Connections {
    addr: std::net::SocketAddr,
    /// The gateway's router, when the gateway relays the session itself: connections open
    /// into it in memory rather than to `addr`.
    router: Option<axum::Router>,
    authority: Authority,
    authorization: Option<HeaderValue>,
    out: output::Sender,
    max: usize,
    open: Mutex<HashMap<u64, Open>>,
}

struct Open {
    /// Lines for the gateway; dropping it closes the connection.
    lines: mpsc::Sender<Bytes>,
}

impl Connections {
    /// Connections to the gateway at `addr` (or into `router`), at most `max` at once, frames
    /// to `out`.
    pub fn new(
        addr: std::net::SocketAddr,
        router: Option<axum::Router>,
        authority: Authority,
        authorization: Option<HeaderValue>,
        out: output::Sender,
        max: usize,
    ) -> Arc<Connections> {
        Arc::new(Connections {
            addr,
            router,
            authority,
            authorization,
            out,
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// Whether connection `id` is open (or opening).
    pub fn contains(&self, id: u64) -> bool {
        self.open.lock().unwrap().contains_key(&id)
    }

    /// Opens connection `id` to `path`; what the gateway answers comes as frames. The error is
    /// the final frame to answer `open` with at once.
    pub fn open(
        self: &Arc<Self>,
        id: u64,
        path: PathAndQuery,
    ) -> Result<(), GatewayFrame<'static>> {
        let mut open = self.open.lock().unwrap();
        if open.contains_key(&id) {
            return Err(GatewayFrame::Error {
                id: Some(id),
                message: format!("connection id {id} is already open: this open was refused")
                    .into(),
            });
        }
        if open.len() >= self.max {
            return Err(GatewayFrame::Closed {
                id,
                reason: Some(
                    format!(
                        "{} MCP connections are open on this channel, as many as it allows (--max-mcp-connections)",
                        self.max
                    )
                    .into(),
                ),
                status: Some(429),
            });
        }
        let (lines, queue) = mpsc::channel(QUEUE);
        open.insert(id, Open { lines });
        drop(open);
        tokio::spawn(self.clone().run(id, path, queue));
        Ok(())
    }

    /// Passes a message of the host to connection `id`; false when it is not open.
    pub fn message(&self, id: u64, msg: Bytes) -> bool {
        let mut open = self.open.lock().unwrap();
        let Some(conn) = open.get(&id) else {
            return false;
        };
        if conn.lines.try_send(msg).is_err() {
            // The gateway does not take the host's messages: the connection ends (its task
            // sees the closed queue and says why).
            open.remove(&id);
        }
        true
    }

    /// Closes connection `id`; false when it is not open.
    pub fn close(&self, id: u64) -> bool {
        self.open.lock().unwrap().remove(&id).is_some()
    }

    /// Closes every connection (the end of input).
    pub fn close_all(&self) {
        self.open.lock().unwrap().clear();
    }

    async fn send(&self, frame: &GatewayFrame<'_>) {
        let _ = self.out.send(encode(frame)).await;
    }

    async fn run(self: Arc<Self>, id: u64, path: PathAndQuery, mut queue: mpsc::Receiver<Bytes>) {
        let (reason, status) = match self.connect(path).await {
            Err((reason, status)) => (Some(reason), status),
            Ok(io) => {
                self.send(&GatewayFrame::Opened { id }).await;
                (self.relay(id, io, &mut queue).await, None)
            }
        };
        self.open.lock().unwrap().remove(&id);
        self.send(&GatewayFrame::Closed {
            id,
            reason: reason.map(Into::into),
            status,
        })
        .await;
    }

    /// The upgraded stream, or why there is none (with the gateway's status when it refused).
    async fn connect(
        &self,
        path: PathAndQuery,
    ) -> Result<TokioIo<hyper::upgrade::Upgraded>, (String, Option<u16>)> {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(Scheme::HTTP);
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(path);
        let uri = Uri::from_parts(uri).map_err(|e| (format!("invalid path: {e}"), None))?;
        let mut request = http::Request::get(uri)
            .header(CONNECTION, "upgrade")
            .header(UPGRADE, rest::UPGRADE);
        if let Some(auth) = &self.authorization {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| (format!("cannot build the request: {e}"), None))?;
        let response = match &self.router {
            Some(router) => pool::send_upgradable_into(router.clone(), request).await,
            None => pool::send_upgradable(self.addr, request).await,
        };
        let response = response.map_err(|e| {
            let why = match e {
                SendError::Connect(e) => e.to_string(),
                SendError::Request(e) => crate::upstream::error_chain(&e),
            };
            (
                format!("cannot reach the gateway at {}: {why}", self.authority),
                None,
            )
        })?;
        let status = response.status();
        if status != http::StatusCode::SWITCHING_PROTOCOLS {
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let detail = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["detail"].as_str().map(str::to_owned))
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            return Err((detail, Some(status.as_u16())));
        }
        let upgraded = hyper::upgrade::on(response)
            .await
            .map_err(|e| (format!("the gateway's upgrade failed: {e}"), None))?;
        Ok(TokioIo::new(upgraded))
    }

    /// Carries lines both ways until either side ends; the gateway's reason when it ended.
    async fn relay(
        &self,
        id: u64,
        io: TokioIo<hyper::upgrade::Upgraded>,
        queue: &mut mpsc::Receiver<Bytes>,
    ) -> Option<String> {
        let (reader, mut writer) = tokio::io::split(io);
        let mut lines = BufReader::new(reader);
        let mut line = String::new();
        let mut reason = None;
        let mut host_done = false;
        let drain = tokio::time::sleep(Duration::MAX);
        tokio::pin!(drain);
        loop {
            line.clear();
            tokio::select! {
                read = lines.read_line(&mut line) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if let Some(closed) = self.forward(id, line.trim_end()).await {
                            reason = Some(closed);
                        }
                    }
                },
                msg = queue.recv(), if !host_done => match msg {
                    Some(msg) => {
                        let mut out = msg.to_vec();
                        out.push(b'\n');
                        if writer.write_all(&out).await.is_err() {
                            break;
                        }
                    }
                    None => {
                        // The host closed it: the gateway ends it and says nothing more.
                        host_done = true;
                        let _ = writer.shutdown().await;
                        drain.as_mut().reset(tokio::time::Instant::now() + DRAIN);
                    }
                },
                () = &mut drain => break,
            }
        }
        if host_done {
            None
        } else {
            reason.or_else(|| Some("the gateway closed the connection".into()))
        }
    }

    /// Sends one line of the gateway's to the host; a control line gives the reason instead.
    async fn forward(&self, id: u64, line: &str) -> Option<String> {
        if line.is_empty() {
            return None;
        }
        let Ok(msg) = serde_json::from_str::<&RawValue>(line) else {
            tracing::warn!(
                id,
                "the gateway sent a line that is not JSON on an MCP connection"
            );
            return None;
        };
        if let Some(reason) = rest::closed_reason(line) {
            return Some(reason);
        }
        self.send(&GatewayFrame::Message { id, msg }).await;
        None
    }
}
