//! attach's connections to the gateway: HTTP/1.1 keep-alive on loopback, Nagle off.
//!
//! - At most `cap` are open at once, counting those still connecting and those closing, so
//!   attach never holds more connections than the gateway allows it (the gateway closes its
//!   longest-idle connection past its `--max-connections`, which could be one attach is about
//!   to use).
//! - The most recently used connection is reused first; one idle for half the gateway's
//!   `--idle-timeout` is closed instead of reused, so the gateway never closes a connection
//!   under a request attach is writing.
//! - A request that was not sent (its connection turned out to be closed before the request
//!   went out, which hyper reports by handing the request back) is sent again on another
//!   connection. A request that may have reached the gateway is never sent twice.

use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// A request as attach sends it.
pub type Request = http::Request<Full<Bytes>>;

/// A response whose body is still to be read.
pub type Response = http::Response<Incoming>;

/// How long connecting to the gateway may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// How many times a request that was not sent is tried.
const ATTEMPTS: usize = 3;

/// Why a request got no response.
#[derive(Debug)]
pub enum SendError {
    /// No connection to the gateway could be made.
    Connect(std::io::Error),
    /// The request failed on its connection (it may have reached the gateway).
    Request(hyper::Error),
}

/// The pool.
pub struct Pool {
    addr: SocketAddr,
    cap: usize,
    reuse_within: Duration,
    state: Mutex<State>,
    /// A connection went idle or closed.
    changed: Notify,
}

struct State {
    /// Idle connections, the most recently used last, with when they went idle.
    idle: Vec<(SendRequest<Full<Bytes>>, Instant)>,
    /// Connections open or opening.
    open: usize,
}

/// A connection lent to one exchange. Dropped after [`Lease::reusable`], it goes back to the
/// pool; dropped before (an exchange abandoned or failed), it is closed. An exchange with the
/// gateway's own router holds no connection ([`Lease::none`]).
pub struct Lease {
    held: Option<(SendRequest<Full<Bytes>>, Arc<Pool>)>,
    reusable: bool,
}

impl Lease {
    /// The lease of an exchange that holds no connection.
    pub fn none() -> Lease {
        Lease {
            held: None,
            reusable: false,
        }
    }

    /// The response's body has been read to its end: the connection may carry another request.
    pub fn reusable(&mut self) {
        self.reusable = true;
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some((sender, pool)) = self.held.take() else {
            return;
        };
        if self.reusable && !sender.is_closed() {
            let mut state = pool.state.lock().unwrap();
            let reuse_within = pool.reuse_within;
            state
                .idle
                .retain(|(_, since)| since.elapsed() < reuse_within);
            state.idle.push((sender, Instant::now()));
            drop(state);
            pool.changed.notify_waiters();
        }
        // Otherwise dropping the sender closes the connection; its task then counts it out.
    }
}

/// Opens one connection to `addr`; its driver runs on a task of its own, which calls `closed`
/// when the connection ends.
async fn connect(
    addr: SocketAddr,
    closed: impl FnOnce() + Send + 'static,
) -> Result<SendRequest<Full<Bytes>>, std::io::Error> {
    let stream = open_stream(addr).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("a connection to the gateway ended: {e}");
        }
        closed();
    });
    Ok(sender)
}

/// A TCP connection to `addr`, Nagle off, within [`CONNECT_LIMIT`].
async fn open_stream(addr: SocketAddr) -> Result<TcpStream, std::io::Error> {
    let stream = tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(addr))
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("connecting took longer than {CONNECT_LIMIT:?}"),
            )
        })??;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Sends `request` on a connection of its own that the answer may upgrade (a virtual MCP
/// connection takes its connection for as long as it lasts, so it is not the pool's).
pub async fn send_upgradable(addr: SocketAddr, request: Request) -> Result<Response, SendError> {
    let stream = open_stream(addr).await.map_err(SendError::Connect)?;
    upgradable_on(TokioIo::new(stream), request).await
}

/// [`send_upgradable`] into `router` on an in-memory connection: no socket, and once upgraded
/// the bytes cross in memory.
pub async fn send_upgradable_into(
    router: axum::Router,
    request: Request,
) -> Result<Response, SendError> {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let service = crate::rest::api::hyper_service(router);
    tokio::spawn(async move {
        let served = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(server), service)
            .with_upgrades()
            .await;
        if let Err(e) = served {
            tracing::debug!("an in-memory connection into the router ended: {e}");
        }
    });
    upgradable_on(TokioIo::new(client), request).await
}

/// Sends `request` on `io`, driving the connection with upgrades on a task of its own.
async fn upgradable_on<T>(io: TokioIo<T>, request: Request) -> Result<Response, SendError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(SendError::Request)?;
    tokio::spawn(async move {
        if let Err(e) = connection.with_upgrades().await {
            tracing::debug!("an upgradable connection to the gateway ended: {e}");
        }
    });
    sender
        .send_request(request)
        .await
        .map_err(SendError::Request)
}

/// Sends one request on a connection of its own (finding the gateway, before the pool's
/// limits are known) and reads the whole answer.
pub async fn send_once(
    addr: SocketAddr,
    request: Request,
) -> Result<(http::response::Parts, Bytes), String> {
    use http_body_util::BodyExt;
    let mut sender = connect(addr, || {}).await.map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| crate::upstream::error_chain(&e))?;
    let (parts, body) = response.into_parts();
    let body = body
        .collect()
        .await
        .map_err(|e| format!("the answer broke off: {e}"))?
        .to_bytes();
    Ok((parts, body))
}

impl Pool {
    /// A pool of at most `cap` connections to `addr`, reusing a connection only while it has
    /// been idle for less than `reuse_within`.
    pub fn new(addr: SocketAddr, cap: usize, reuse_within: Duration) -> Arc<Pool> {
        Arc::new(Pool {
            addr,
            cap: cap.max(1),
            reuse_within,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            changed: Notify::new(),
        })
    }

    /// Connections open or opening now.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.state.lock().unwrap().open
    }

    fn closed_one(&self) {
        self.state.lock().unwrap().open -= 1;
        self.changed.notify_waiters();
    }

    /// An idle connection that is still fit for a request, or a new one once the cap allows.
    async fn checkout(self: &Arc<Self>) -> Result<(SendRequest<Full<Bytes>>, bool), SendError> {
        loop {
            let mut changed = pin!(self.changed.notified());
            changed.as_mut().enable();
            let fresh = {
                let mut state = self.state.lock().unwrap();
                let mut found = None;
                while let Some((sender, since)) = state.idle.pop() {
                    // Too old: the gateway may be closing it right now. Dropping it closes it.
                    if !sender.is_closed() && since.elapsed() < self.reuse_within {
                        found = Some(sender);
                        break;
                    }
                }
                match found {
                    Some(sender) => return Ok((sender, true)),
                    None if state.open < self.cap => {
                        state.open += 1;
                        true
                    }
                    None => false,
                }
            };
            if fresh {
                let pool = self.clone();
                return match connect(self.addr, move || pool.closed_one()).await {
                    Ok(sender) => Ok((sender, false)),
                    Err(e) => {
                        self.closed_one();
                        Err(SendError::Connect(e))
                    }
                };
            }
            changed.await;
        }
    }

    /// Sends `request` and returns its response (the body still to be read) with the lease of
    /// its connection.
    pub async fn send(
        self: &Arc<Self>,
        mut request: Request,
    ) -> Result<(Response, Lease), SendError> {
        let mut attempts = 0;
        loop {
            let (mut sender, reused) = self.checkout().await?;
            if reused && sender.ready().await.is_err() {
                // Closed while idle: not an attempt.
                continue;
            }
            let lease = |sender| Lease {
                held: Some((sender, self.clone())),
                reusable: false,
            };
            match sender.try_send_request(request).await {
                Ok(response) => return Ok((response, lease(sender))),
                Err(mut e) => {
                    attempts += 1;
                    match e.take_message() {
                        Some(unsent) if attempts < ATTEMPTS => {
                            tracing::debug!(
                                "a connection closed before the request went out; sending it on another: {}",
                                e.error()
                            );
                            request = unsent;
                        }
                        _ => return Err(SendError::Request(e.into_error())),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

    fn get(addr: SocketAddr) -> Request {
        http::Request::get(format!("http://{addr}/x"))
            .header(http::header::HOST, addr.to_string())
            .body(Full::default())
            .unwrap()
    }

    /// Answers every request head it reads with `ANSWER`, and closes the connection after
    /// `per_connection` answers; counts connections.
    async fn server(listener: tokio::net::TcpListener, accepted: Arc<Mutex<usize>>) {
        serve(listener, accepted, usize::MAX).await
    }

    async fn serve(
        listener: tokio::net::TcpListener,
        accepted: Arc<Mutex<usize>>,
        per_connection: usize,
    ) {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            *accepted.lock().unwrap() += 1;
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut seen = Vec::new();
                loop {
                    let Ok(n) = stream.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let mut answered = 0;
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        answered += 1;
                        if stream.write_all(ANSWER).await.is_err() || answered == per_connection {
                            return;
                        }
                    }
                }
            });
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn never_more_connections_than_the_cap_and_idle_ones_are_reused() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        tokio::spawn(server(listener, accepted.clone()));
        let pool = Pool::new(addr, 3, Duration::from_secs(60));
        // 40 requests at once through 3 connections; each holds its connection until its body
        // has been read.
        let exchanges = (0..40).map(|_| {
            let pool = pool.clone();
            async move {
                let (response, mut lease) = pool.send(get(addr)).await.unwrap();
                assert!(pool.open() <= 3);
                let body = response.into_body().collect().await.unwrap().to_bytes();
                lease.reusable();
                body
            }
        });
        for body in futures::future::join_all(exchanges).await {
            assert_eq!(&body[..], b"ok");
        }
        assert!(*accepted.lock().unwrap() <= 3, "{accepted:?}");
        // Sequential requests reuse one idle connection.
        let before = *accepted.lock().unwrap();
        for _ in 0..5 {
            let (response, mut lease) = pool.send(get(addr)).await.unwrap();
            response.into_body().collect().await.unwrap();
            lease.reusable();
        }
        assert_eq!(*accepted.lock().unwrap(), before);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_idle_too_long_is_not_reused_and_an_abandoned_one_is_closed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        tokio::spawn(server(listener, accepted.clone()));
        let pool = Pool::new(addr, 2, Duration::ZERO);
        for _ in 0..3 {
            let (response, mut lease) = pool.send(get(addr)).await.unwrap();
            response.into_body().collect().await.unwrap();
            lease.reusable();
        }
        assert_eq!(
            *accepted.lock().unwrap(),
            3,
            "an old idle connection was reused"
        );
        // A lease dropped before its body was read closes its connection.
        let (_response, lease) = pool.send(get(addr)).await.unwrap();
        drop(lease);
        all_closed(&pool).await;
    }

    /// Waits until the pool has no connection open.
    async fn all_closed(pool: &Pool) {
        loop {
            let mut changed = pin!(pool.changed.notified());
            changed.as_mut().enable();
            if pool.open() == 0 {
                return;
            }
            changed.await;
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_connection_the_server_closed_while_idle_is_not_used() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        tokio::spawn(serve(listener, accepted.clone(), 1));
        let pool = Pool::new(addr, 1, Duration::from_secs(60));
        for round in 1..=3 {
            let (response, mut lease) = pool.send(get(addr)).await.unwrap();
            response.into_body().collect().await.unwrap();
            lease.reusable();
            drop(lease);
            all_closed(&pool).await;
            assert_eq!(*accepted.lock().unwrap(), round);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_refused_connection_says_so() {
        let addr = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap()
        };
        let pool = Pool::new(addr, 2, Duration::from_secs(1));
        match pool.send(get(addr)).await {
            Err(SendError::Connect(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused)
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert_eq!(pool.open(), 0);
    }
}
