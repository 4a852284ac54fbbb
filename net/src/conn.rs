//! Client connections: accepted under a cap, each served by hyper (HTTP/1.1) and watched, so
//! that no client can hold the server's connections, file descriptors or tasks by doing
//! nothing (the gateway's REST surface and the host endpoint's `--http` alike).
//!
//! - A client must send a whole request head within `header_timeout`: after connecting, and
//!   once it has begun a request (a partial head is never waited on for longer).
//! - A keep-alive connection with no request in flight is closed after `idle_timeout`.
//! - At most `max_connections` are served at once (a server keeps it under the open-file
//!   limit, which [`raise_fd_limit`] raises to its hard limit). A new connection past the cap,
//!   or an accept that fails for want of descriptors, closes the longest-idle connection: idle
//!   clients cannot lock out the server's real clients. Only a connection with nothing in
//!   flight and no byte of a next request read is closed so: a request under way is never lost
//!   to it. An accept that keeps failing is retried with a growing pause and reported once.
//! - A connection closed with a request body unread (say, `413` from its `Content-Length`)
//!   lingers: it reads and drops what the client still sends for a moment, so the client gets
//!   the answer instead of a reset.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, watch};

/// A listening socket whose connections [`serve`] takes.
pub trait Listen: Send + Sync + 'static {
    /// A client's connection.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// The next connection.
    fn accept(&self) -> impl std::future::Future<Output = std::io::Result<Self::Stream>> + Send;
}

impl Listen for tokio::net::TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&self) -> std::io::Result<Self::Stream> {
        let (stream, _) = tokio::net::TcpListener::accept(self).await?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl Listen for tokio::net::UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept(&self) -> std::io::Result<Self::Stream> {
        Ok(tokio::net::UnixListener::accept(self).await?.0)
    }
}

/// What a server says about its connections: a warning (all busy, accepting fails).
pub type Warn = Arc<dyn Fn(&str) + Send + Sync>;

/// The limits of client connections.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a client may take to send a request head.
    pub header_timeout: Duration,
    /// How long a connection may sit with nothing in flight between requests.
    pub idle_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
}

/// How long a closing connection reads and drops what its client still sends.
const LINGER: Duration = Duration::from_secs(2);
/// How much a closing connection reads and drops at most.
const LINGER_BYTES: u64 = 256 << 20;

/// Raises the soft open-file limit to the hard one (as Go programs do): every connection and
/// every upstream's pipes take descriptors. Returns the soft limit now in force.
pub fn raise_fd_limit() -> u64 {
    mcpgw_sys::fs::raise_fd_limit()
}

/// Milliseconds since the server started, for atomics.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

/// What a connection is doing, shared by its I/O, its service and its watch.
struct Activity {
    clock: Clock,
    /// Requests between their head and the end of their answer's body.
    in_flight: AtomicUsize,
    /// Requests answered on this connection.
    served: AtomicU64,
    /// When it last had nothing in flight (accepted, or its last answer finished).
    idle_since: AtomicU64,
    /// When the first byte of a request head arrived while idle; 0 when none did.
    head_since: AtomicU64,
    /// Asks the connection to close (it is the longest-idle one and the gateway needs room).
    evict: Notify,
    /// Set once it was asked: it no longer counts, and is not asked twice.
    evicted: std::sync::atomic::AtomicBool,
}

impl Activity {
    fn new(clock: Clock) -> Activity {
        Activity {
            clock,
            in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            idle_since: AtomicU64::new(clock.now()),
            head_since: AtomicU64::new(0),
            evict: Notify::new(),
            evicted: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) == 0
    }

    /// Idle with no byte of a next request read: closing it loses nothing the client sent.
    fn may_evict(&self) -> bool {
        self.is_idle() && self.head_since.load(Ordering::Acquire) == 0
    }

    /// When this idle connection must be closed, in clock milliseconds.
    fn deadline(&self, limits: &Limits) -> u64 {
        let head = self.head_since.load(Ordering::Acquire);
        if head != 0 {
            return head + limits.header_timeout.as_millis() as u64;
        }
        let wait = if self.served.load(Ordering::Acquire) == 0 {
            limits.header_timeout
        } else {
            limits.idle_timeout
        };
        self.idle_since.load(Ordering::Acquire) + wait.as_millis() as u64
    }

    fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.head_since.store(0, Ordering::Release);
    }

    fn request_finished(&self) {
        self.served.fetch_add(1, Ordering::AcqRel);
        self.idle_since.store(self.clock.now(), Ordering::Release);
        self.head_since.store(0, Ordering::Release);
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connections being served.
struct Table {
    next: AtomicU64,
    live: Mutex<BTreeMap<u64, Arc<Activity>>>,
    /// Wakes shutdown when the last connection ends.
    emptied: Notify,
}

impl Table {
    /// Returns once no connection is left.
    async fn wait_empty(&self) {
        loop {
            let emptied = self.emptied.notified();
            if self.live.lock().unwrap().is_empty() {
                return;
            }
            emptied.await;
        }
    }

    /// Connections served and not asked to close.
    fn count(&self) -> usize {
        let live = self.live.lock().unwrap();
        live.values()
            .filter(|a| !a.evicted.load(Ordering::Acquire))
            .count()
    }

    /// Asks the longest-idle connection to close (never one with a request under way, nor one
    /// whose next request has begun to arrive); false when every connection is busy.
    fn evict_one(&self) -> bool {
        let live = self.live.lock().unwrap();
        let oldest = live
            .values()
            .filter(|a| a.may_evict() && !a.evicted.load(Ordering::Acquire))
            .min_by_key(|a| a.idle_since.load(Ordering::Acquire));
        match oldest {
            Some(activity) => {
                activity.evicted.store(true, Ordering::Release);
                activity.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// Serves `service` on `listener` until `stop` turns true, then lets the connections finish
/// what they are doing for at most `drain`; `warn` hears what an operator should know.
pub async fn serve<L, S, B>(
    listener: L,
    service: S,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    drain: Duration,
    warn: Warn,
) where
    L: Listen,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let clock = Clock(Instant::now());
    let table = Arc::new(Table {
        next: AtomicU64::new(1),
        live: Mutex::new(BTreeMap::new()),
        emptied: Notify::new(),
    });
    let mut warned_full = false;
    // Consecutive failed accepts: each waits longer (up to a second), and only the first of a
    // run is reported, so a server out of descriptors neither spins nor floods its log.
    let mut failing = 0u32;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let stream = match stream {
            Ok(stream) => {
                failing = 0;
                stream
            }
            Err(e) => {
                // Out of descriptors (or another transient failure): make room, then go on.
                if matches!(
                    e.raw_os_error(),
                    Some(mcpgw_sys::fs::EMFILE | mcpgw_sys::fs::ENFILE)
                ) {
                    table.evict_one();
                }
                if failing == 0 {
                    warn(&format!(
                        "accepting a connection failed: {e} (retrying; reported once until an \
                         accept succeeds)"
                    ));
                }
                let pause =
                    Duration::from_millis(10u64 << failing.min(7)).min(Duration::from_secs(1));
                failing = failing.saturating_add(1);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
                continue;
            }
        };
        let count = table.count();
        if count >= limits.max_connections && !table.evict_one() {
            if !warned_full {
                warn(&format!(
                    "{count} connections, all busy: refusing new ones until one finishes"
                ));
                warned_full = true;
            }
            drop(stream);
            continue;
        }
        warned_full = false;
        let id = table.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new(clock));
        table.live.lock().unwrap().insert(id, activity.clone());
        let (service, table, stop) = (service.clone(), table.clone(), stop.clone());
        tokio::spawn(async move {
            connection(stream, service, activity, limits, stop).await;
            let mut live = table.live.lock().unwrap();
            live.remove(&id);
            if live.is_empty() {
                table.emptied.notify_waiters();
            }
        });
    }
    // Stopped: each connection closes once its requests are answered.
    if tokio::time::timeout(drain, table.wait_empty())
        .await
        .is_err()
    {
        warn("some requests were still open at shutdown");
    }
}

/// Serves one connection until it ends, is evicted, times out, or the server stops.
async fn connection<T, S, B>(
    stream: T,
    service: S,
    activity: Arc<Activity>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
        linger: None,
    });
    let service_activity = activity.clone();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let activity = service_activity.clone();
        activity.request_started();
        let finished = Finished(Some(activity));
        let answer = service.call(request);
        async move {
            let response = answer.await?;
            Ok::<_, Infallible>(response.map(|body| Tracked {
                inner: body,
                _finished: finished,
            }))
        }
    });
    // An upgraded connection (the gateway's virtual MCP connections) leaves this loop and its
    // limits: the server bounds those itself.
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        let deadline = if activity.is_idle() {
            let ms = activity.deadline(&limits);
            tokio::time::Instant::from_std(activity.clock.0 + Duration::from_millis(ms))
        } else {
            // Busy: look again a little later.
            tokio::time::Instant::now() + limits.header_timeout.min(Duration::from_secs(1))
        };
        tokio::select! {
            result = conn.as_mut() => {
                let _ = result;
                return;
            }
            () = activity.evict.notified() => {
                if activity.may_evict() {
                    return;
                }
                // A request began meanwhile: the connection stays, and counts again.
                activity.evicted.store(false, Ordering::Release);
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            () = tokio::time::sleep_until(deadline) => {
                if activity.is_idle() && activity.clock.now() >= activity.deadline(&limits) {
                    return;
                }
            }
        }
    }
}

/// Marks the end of a request when dropped: its answer's body was sent, or abandoned.
struct Finished(Option<Arc<Activity>>);

impl Drop for Finished {
    fn drop(&mut self) {
        if let Some(activity) = self.0.take() {
            activity.request_finished();
        }
    }
}

/// An answer's body that marks its request finished once hyper is done with it.
struct Tracked<B> {
    inner: B,
    _finished: Finished,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The client's socket: notes when a request head begins, and lingers when it is shut down.
struct Watched<T> {
    inner: T,
    activity: Arc<Activity>,
    /// While shutting down: until when, and how much more, to read and drop.
    linger: Option<(Pin<Box<tokio::time::Sleep>>, u64)>,
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before && self.activity.is_idle() {
            let now = self.activity.clock.now().max(1);
            let _ = self.activity.head_since.compare_exchange(
                0,
                now,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        polled
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// Sends FIN, then reads and drops what the client still sends until it closes too (or
    /// for [`LINGER`], at most [`LINGER_BYTES`]): closing with unread data would reset the
    /// connection and could destroy the answer before the client read it.
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        if self.linger.is_none() {
            std::task::ready!(Pin::new(&mut self.inner).poll_shutdown(cx))?;
            self.linger = Some((Box::pin(tokio::time::sleep(LINGER)), LINGER_BYTES));
        }
        let this = &mut *self;
        let (timer, budget) = this.linger.as_mut().expect("set above");
        let mut scratch = [0u8; 16 * 1024];
        loop {
            if timer.as_mut().poll(cx).is_ready() || *budget == 0 {
                return Poll::Ready(Ok(()));
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => {
                    *budget = budget.saturating_sub(buf.filled().len() as u64);
                }
                Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

use std::future::Future as _;
