//! Handing the session channel to the gateway. attach passes its stdin and stdout to the
//! gateway over a unix socket (`SCM_RIGHTS`), and the gateway relays the frames itself,
//! straight into its router: a process and an HTTP exchange fewer on the path of every
//! message. attach then only holds the exec open: it forwards a signal as a stop, and exits
//! with the status the gateway sends at the end.
//!
//! The gateway says where in `/health` ([`header::ATTACH_SOCKET`]): an abstract unix socket.
//! It serves the sessions on one thread ([`Sessions`]): its one worker, or a thread of their
//! own when it has several. It serves only its own user (the peer's uid) holding its token.
//! One JSON line each way on the socket:
//! - attach, with the two descriptors: an [`Offer`];
//! - the gateway: `{"serving":true}`, or `{"refused":"why"}` (attach then relays itself);
//! - attach, any time: `{"stop":"SIGTERM"}` (closing the socket stops the session too);
//! - the gateway, at the end: `{"ended":"why","ok":true}`.

use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::net::SocketAddrExt;
use std::sync::Arc;
use std::time::Duration;

use http::header::HeaderValue;
use mcpgw::wire::frame::quoted;
use mcpgw::wire::rest::header;
use mcpgw_sys::stdio::{Kinds, Pipe, Standard};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::liveness::Liveness;
use super::locate::Gateway;
use super::relay::{self, Ending, Relay, Route};
use super::{FLUSH_LIMIT, Signals, output};

/// How long the first exchange on the socket may take.
const OFFER_LIMIT: Duration = Duration::from_secs(5);

/// The largest offer line.
const MAX_OFFER: usize = 64 * 1024;

/// What attach hands over with its stdin and stdout.
#[derive(Serialize, Deserialize)]
pub struct Offer {
    /// The `Authorization` header value (the token), if the gateway has one. Never logged.
    pub authorization: Option<String>,
    /// The line to write before any frame: attach's `hello`.
    pub first: String,
    /// `--max-frame-bytes`.
    pub max_frame_bytes: usize,
    /// `--heartbeat`, in milliseconds.
    pub heartbeat_ms: u64,
    /// `--heartbeat-timeout`, in milliseconds.
    pub heartbeat_timeout_ms: u64,
    /// `--max-in-flight`.
    pub max_in_flight: Option<usize>,
    /// `--max-mcp-connections`.
    pub max_mcp_connections: usize,
}

/// The gateway's lines.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Reply {
    Serving {
        serving: bool,
    },
    Refused {
        refused: String,
    },
    Ended {
        ended: String,
        ok: bool,
        /// Why the last frames were not all written, when they were not.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        unwritten: Option<String>,
    },
}

/// attach's line: a signal it received.
#[derive(Serialize, Deserialize)]
struct Stop {
    stop: String,
}

/// How a session the gateway served ended.
pub struct Served {
    /// Why, for a person.
    pub ending: String,
    /// Whether it ended well (the exit status).
    pub ok: bool,
}

fn socket_address(name: &str) -> std::io::Result<std::os::unix::net::SocketAddr> {
    std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
}

fn line<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(value).expect("serializable");
    out.push(b'\n');
    out
}

// --- attach's side ---

/// Why a session was not handed off.
pub enum NotTaken {
    /// The gateway never had the streams, or refused them: attach relays itself.
    Declined(String),
    /// Whether the gateway took them is unknown (it did not answer in time, or not in a way
    /// attach understands): relaying here too could put two readers on stdin, so the session
    /// ends.
    Unknown(String),
}

/// Offers stdin and stdout to the gateway at `socket`, and once it serves the session, passes
/// `signals` on until it says how the session ended.
pub async fn offer(
    socket: &str,
    gateway_pid: u32,
    offer: &Offer,
    signals: &mut Signals,
) -> Result<Served, NotTaken> {
    let declined = NotTaken::Declined;
    let address =
        socket_address(socket).map_err(|e| declined(format!("no socket {socket:?}: {e}")))?;
    let stream = std::os::unix::net::UnixStream::connect_addr(&address)
        .map_err(|e| declined(format!("cannot connect to {socket:?}: {e}")))?;
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    mcpgw_sys::fdpass::send(
        stream.as_fd(),
        &line(offer),
        &[stdin.as_fd(), stdout.as_fd()],
    )
    .map_err(|e| declined(format!("cannot pass stdin and stdout: {e}")))?;
    let unknown = NotTaken::Unknown;
    stream
        .set_nonblocking(true)
        .map_err(|e| unknown(format!("cannot configure the socket: {e}")))?;
    let stream = UnixStream::from_std(stream).map_err(|e| unknown(e.to_string()))?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    match tokio::time::timeout(OFFER_LIMIT, lines.next_line()).await {
        Err(_) => return Err(unknown(format!("no answer within {OFFER_LIMIT:?}"))),
        Ok(Err(e)) => return Err(unknown(format!("reading its answer failed: {e}"))),
        // Closed without a word: the session task that had the streams is gone.
        Ok(Ok(None)) => return Err(declined("it closed the socket".into())),
        Ok(Ok(Some(text))) => match serde_json::from_str(&text) {
            Ok(Reply::Serving { serving: true }) => {}
            Ok(Reply::Refused { refused }) => return Err(declined(refused)),
            _ => return Err(unknown(format!("it answered {}", quoted(&text)))),
        },
    }
    tracing::info!("the gateway relays the session itself (handed off)");
    loop {
        tokio::select! {
            name = signals.next() => {
                let _ = write.write_all(&line(&Stop { stop: name.into() })).await;
            }
            text = lines.next_line() => {
                let text = match text {
                    Ok(Some(text)) => text,
                    _ => {
                        return Ok(Served {
                            ending: format!(
                                "the gateway (process {gateway_pid}) went away in the middle of it"
                            ),
                            ok: false,
                        });
                    }
                };
                if let Ok(Reply::Ended { ended, ok, unwritten }) = serde_json::from_str(&text) {
                    if let Some(e) = unwritten {
                        tracing::warn!("the last frames were not all written: {e}");
                    }
                    return Ok(Served { ending: ended, ok });
                }
                tracing::debug!("an unknown line from the gateway: ignored");
            }
        }
    }
}

// --- the gateway's side ---

/// What the gateway serves handed-off sessions with.
pub struct Taker {
    /// Its router, which every request goes into.
    pub router: axum::Router,
    /// Itself, as attach would have found it.
    pub gateway: Gateway,
    /// Its token, when it has one.
    pub token: Option<crate::auth::Token>,
}

/// Binds the gateway's handoff socket: an abstract name of this process.
pub fn bind() -> std::io::Result<(std::os::unix::net::UnixListener, String)> {
    let name = format!(
        "mcpgw-gateway-{}-{}",
        std::process::id(),
        mcpgw::random::hex_id()
    );
    let listener = std::os::unix::net::UnixListener::bind_addr(&socket_address(&name)?)?;
    listener.set_nonblocking(true)?;
    Ok((listener, name))
}

/// Where handed-off sessions run. A session's tasks must never run side by side (the relay's
/// bookkeeping counts on it), so a gateway of one worker serves them on it, and a gateway of
/// several on a thread of their own with a runtime of one thread.
pub enum Sessions {
    /// On the gateway's one worker.
    Worker(tokio::task::JoinHandle<()>),
    /// On a thread of their own. What a session starts there (an upstream registered through
    /// it) runs there too, so the thread lasts until the gateway has closed its upstreams.
    Thread {
        served: tokio::task::JoinHandle<()>,
        exit: tokio::sync::oneshot::Sender<()>,
        thread: std::thread::JoinHandle<()>,
    },
}

impl Sessions {
    /// Serves sessions handed off on `listener` until `stop` turns true: on this runtime when
    /// it has one worker, else on a thread of their own.
    pub async fn start(
        listener: std::os::unix::net::UnixListener,
        host: Arc<Taker>,
        stop: tokio::sync::watch::Receiver<bool>,
        one_worker: bool,
    ) -> std::io::Result<Sessions> {
        if one_worker {
            let listener = tokio::net::UnixListener::from_std(listener)?;
            return Ok(Sessions::Worker(tokio::spawn(serve(listener, host, stop))));
        }
        let (ready, started) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("mcpgw-sessions".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => return drop(ready.send(Err(e))),
                };
                let listener = {
                    let _on = runtime.enter();
                    tokio::net::UnixListener::from_std(listener)
                };
                let listener = match listener {
                    Ok(listener) => listener,
                    Err(e) => return drop(ready.send(Err(e))),
                };
                let served = runtime.spawn(serve(listener, host, stop));
                let (exit, exited) = tokio::sync::oneshot::channel::<()>();
                if ready.send(Ok((served, exit))).is_ok() {
                    runtime.block_on(async {
                        let _ = exited.await;
                    });
                }
                runtime.shutdown_timeout(Duration::from_millis(200));
            })?;
        let (served, exit) = started
            .await
            .map_err(|_| std::io::Error::other("the sessions' thread ended at its start"))??;
        Ok(Sessions::Thread {
            served,
            exit,
            thread,
        })
    }

    /// Waits until the sessions have ended (after `stop` turned true), then ends their thread.
    pub async fn end(self) {
        match self {
            Sessions::Worker(served) => {
                let _ = served.await;
            }
            Sessions::Thread {
                served,
                exit,
                thread,
            } => {
                let _ = served.await;
                let _ = exit.send(());
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            }
        }
    }
}

/// Serves sessions handed off on `listener` until `stop` turns true, then waits for them to
/// end (each ends on `stop` too, its last frames written).
async fn serve(
    listener: tokio::net::UnixListener,
    host: Arc<Taker>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut stopping = stop.clone();
    let mut sessions = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    sessions.spawn(session(stream, host.clone(), stop.clone()));
                }
                Err(e) => {
                    tracing::warn!("accepting a handed-off session failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
            Some(_) = sessions.join_next(), if !sessions.is_empty() => {}
            () = until_true(&mut stopping) => break,
        }
    }
    drop(listener);
    while sessions.join_next().await.is_some() {}
}

/// Receives the offer and its descriptors, checks both, and answers whether it serves them.
async fn receive(stream: &UnixStream, host: &Taker) -> Result<(Offer, Pipe, Pipe), String> {
    let peer = stream
        .peer_cred()
        .map_err(|e| format!("cannot tell who connected: {e}"))?;
    if peer.uid() != mcpgw_sys::fs::euid() {
        return Err(format!("uid {} is not this gateway's user", peer.uid()));
    }
    let mut text = Vec::new();
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut buf = vec![0; 16 * 1024];
    while !text.contains(&b'\n') {
        stream.readable().await.map_err(|e| e.to_string())?;
        let received = stream.try_io(tokio::io::Interest::READABLE, || {
            mcpgw_sys::fdpass::recv(stream.as_fd(), &mut buf)
        });
        let (n, more) = match received {
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(format!("receiving the offer failed: {e}")),
        };
        if n == 0 {
            return Err("the socket closed before the offer was whole".into());
        }
        fds.extend(more);
        text.extend_from_slice(&buf[..n]);
        if text.len() > MAX_OFFER {
            return Err(format!("an offer of over {MAX_OFFER} bytes"));
        }
    }
    let offer: Offer = serde_json::from_slice(text.trim_ascii_end())
        .map_err(|e| format!("the offer is not one: {e}"))?;
    let given = offer.authorization.as_deref().unwrap_or("").as_bytes();
    let expected = host
        .token
        .as_ref()
        .map_or("", |t| t.header_value())
        .as_bytes();
    if !crate::auth::constant_time_eq(given, expected) {
        return Err("the offer's token is not this gateway's".into());
    }
    let [stdin, stdout]: [OwnedFd; 2] = fds
        .try_into()
        .map_err(|fds: Vec<_>| format!("{} descriptors came, not stdin and stdout", fds.len()))?;
    let stdin = Pipe::adopt(stdin, Standard::Input, Kinds::Pollable)
        .ok_or("stdin cannot be polled (a file?)")?;
    let stdout = Pipe::adopt(stdout, Standard::Output, Kinds::Pollable)
        .ok_or("stdout cannot be polled (a file?)")?;
    Ok((offer, stdin, stdout))
}

/// One handed-off session, from the offer to the line that says how it ended.
async fn session(stream: UnixStream, host: Arc<Taker>, stop: tokio::sync::watch::Receiver<bool>) {
    let mut stopping = stop.clone();
    let received = tokio::select! {
        received = tokio::time::timeout(OFFER_LIMIT, receive(&stream, &host)) => received
            .unwrap_or_else(|_| Err(format!("no whole offer within {OFFER_LIMIT:?}"))),
        () = until_true(&mut stopping) => Err("the gateway is stopping".into()),
    };
    let (read, mut write) = stream.into_split();
    let (offer, stdin, stdout) = match received {
        Ok(taken) => taken,
        Err(why) => {
            tracing::info!("a handed-off session was refused: {why}");
            let _ = write
                .write_all(&line(&Reply::Refused { refused: why }))
                .await;
            return;
        }
    };
    if write
        .write_all(&line(&Reply::Serving { serving: true }))
        .await
        .is_err()
    {
        return;
    }
    let authorization = offer.authorization.as_deref().map(|a| {
        let mut value = HeaderValue::try_from(a).expect("equal to the gateway's own");
        value.set_sensitive(true);
        value
    });
    let live = Liveness::new(
        Duration::from_millis(offer.heartbeat_ms),
        Duration::from_millis(offer.heartbeat_timeout_ms),
    );
    let (out, writer) = output::start(
        Box::pin(stdout),
        offer.first.into_bytes(),
        live.written.clone(),
    );
    let (frames, reader) =
        super::input::start(Box::pin(stdin), offer.max_frame_bytes, live.read.clone());
    let relay = Arc::new(Relay::new(
        &host.gateway,
        Route::Router(host.router.clone()),
        authorization,
        out.clone(),
        offer.max_mcp_connections,
    ));
    let (max_in_flight, _) = relay::fit(
        offer.max_in_flight.unwrap_or(usize::MAX),
        host.gateway.limits.max_connections,
    );
    tracing::info!("serving a session attach handed off");
    let ending = relay::run(
        relay,
        frames,
        max_in_flight,
        live,
        FLUSH_LIMIT,
        stopped(read, stop),
    )
    .await;
    reader.abort();
    let written = writer.finish(&out, FLUSH_LIMIT).await;
    tracing::info!("a handed-off session ended: {ending}");
    let ended = Reply::Ended {
        ended: ending.to_string(),
        ok: super::ended_well(ending, &written),
        unwritten: written.err().map(|e| e.to_string()),
    };
    let _ = write.write_all(&line(&ended)).await;
}

/// What stops a handed-off session: attach's stop, attach gone, or the gateway stopping.
async fn stopped(
    read: tokio::net::unix::OwnedReadHalf,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Ending {
    let mut lines = BufReader::new(read).lines();
    loop {
        tokio::select! {
            text = lines.next_line() => match text {
                Ok(Some(text)) => {
                    if let Ok(Stop { stop }) = serde_json::from_str(&text) {
                        return Ending::Signal(signal_name(&stop));
                    }
                }
                _ => return Ending::AttachGone,
            },
            () = until_true(&mut stop) => return Ending::Signal("the gateway stopping"),
        }
    }
}

/// Waits until `flag` is true (or its sender is gone).
async fn until_true(flag: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = flag.wait_for(|on| *on).await;
}

/// A signal's name as attach sends it.
fn signal_name(name: &str) -> &'static str {
    Signals::NAMES
        .into_iter()
        .find(|known| *known == name)
        .unwrap_or("a stop from attach")
}

/// The header value that announces the socket.
pub fn announce(name: &str) -> (http::HeaderName, HeaderValue) {
    (
        http::HeaderName::from_static(header::ATTACH_SOCKET),
        HeaderValue::try_from(name).expect("ASCII"),
    )
}
