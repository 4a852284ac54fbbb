//! The streamable HTTP endpoint: `POST`, `GET` and `DELETE` on `/mcp`, on a loopback address
//! of this machine or a Unix socket (mode 0600), behind a bearer token of its own (minted at
//! start, written to a 0600 file; the gateway's token never leaves the sandbox).
//!
//! - Every request needs `Authorization: Bearer TOKEN` (else 401); an `Origin` header must be
//!   a loopback one (`http://localhost:PORT`, `127.0.0.1`, `[::1]`) or one given with
//!   `--allow-origin` (else 403), and the `Host` a loopback name (else 403):
//!   a web page cannot reach the endpoint through DNS rebinding.
//! - Revisions with `initialize` (2025-06-18, 2025-11-25): `initialize` starts a session
//!   (`Mcp-Session-Id`), which is one virtual connection to the sandbox. A request is answered
//!   with an SSE stream carrying its progress and ending with its response (JSON when the
//!   client does not accept `text/event-stream`); notifications and responses get 202. The
//!   server's own messages (its requests, log messages, list changes) go to the session's
//!   `GET` stream when one is open, else to the stream of a request in flight, else wait for
//!   one. `DELETE` ends the session; an unknown session is 404. A session with nothing open
//!   for [`SESSION_IDLE`] ends.
//! - 2026-07-28, stateless: a request without a session, its revision in `MCP-Protocol-Version`
//!   and `_meta` (they must agree, as must `Mcp-Method` and `Mcp-Name` with the body, else 400
//!   with `HeaderMismatch`), gets a virtual connection of its own for as long as its stream is
//!   open; closing the stream cancels it (and ends a `subscriptions/listen`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use mcpgw::wire::jsonrpc::{self, Message, method};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::cli::log;
use crate::cli::{Level, McpArgs};
use crate::endpoint::terminated;
use crate::link::request_id;
use crate::sandbox::Sandbox;

mod guard;
mod modern;
mod session;

use guard::refused;
pub use modern::header_mismatch;
use modern::{
    answer_status, answers, event_text, is_modern, refusal, removed, stateless, stateless_stream,
    unsupported_version, with_param_headers,
};
use session::{Cmd, Session};

/// The MCP endpoint's path.
pub const PATH: &str = "/mcp";
/// Sessions open at once (one virtual connection each).
const MAX_SESSIONS: usize = 64;
/// How long a session with no stream open and nothing in flight lives.
pub const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// The largest request body.
const MAX_BODY: usize = crate::endpoint::MAX_MESSAGE_BYTES;
/// How long a client may take to send a request head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a keep-alive connection may sit with nothing in flight.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Connections served at once (at most half the open-file limit).
const MAX_CONNECTIONS: usize = 512;
/// The server's messages kept for a session that has no stream to take them.
const MAX_BACKLOG: usize = 1024;
/// How often an open stream gets an SSE comment, so that idle streams stay open.
const KEEP_ALIVE: Duration = Duration::from_secs(25);

/// A response body: fixed bytes, or an SSE stream fed by a session (after an event already
/// taken from it, when there is one).
enum Out {
    Full(Option<Bytes>),
    Stream(Option<Bytes>, mpsc::UnboundedReceiver<Bytes>),
}

impl Body for Out {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Out::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Out::Stream(first, rx) => match first.take() {
                Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
                None => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Out::Full(None))
    }
}

/// One SSE event carrying a JSON-RPC message.
fn event(msg: &str) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

/// A stream's sender: the SSE events of one response.
#[derive(Clone)]
struct Sink(mpsc::UnboundedSender<Bytes>);

impl Sink {
    /// Sends `msg`; false when the client has gone.
    fn send(&self, msg: &str) -> bool {
        self.0.send(event(msg)).is_ok()
    }
}

fn reply(status: StatusCode, body: Out, content_type: Option<&'static str>) -> Response<Out> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Some(t) = content_type {
        r.headers_mut()
            .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(t));
    }
    r
}

fn json_reply(status: StatusCode, msg: String) -> Response<Out> {
    reply(
        status,
        Out::Full(Some(Bytes::from(msg))),
        Some("application/json"),
    )
}

/// A JSON-RPC error (with `id` when it is known) as an HTTP error.
fn rpc_error(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response<Out> {
    json_reply(status, jsonrpc::error_response(id, code, message))
}

fn empty(status: StatusCode) -> Response<Out> {
    reply(status, Out::Full(None), None)
}

fn sse(first: Option<Bytes>, rx: mpsc::UnboundedReceiver<Bytes>) -> Response<Out> {
    let mut r = reply(
        StatusCode::OK,
        Out::Stream(first, rx),
        Some("text/event-stream"),
    );
    let h = r.headers_mut();
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// The endpoint's state, shared by its connections.
struct Server {
    token: String,
    origins: Vec<String>,
    /// Whether the listener is TCP (then the `Host` header is checked).
    tcp: bool,
    sandbox: Sandbox,
    prefixed: bool,
    level: Level,
    sessions: Mutex<HashMap<String, Session>>,
}

/// Where the endpoint listens.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener, PathBuf),
}

/// The address `--http` gives: a loopback `IP:PORT`, or `unix:PATH`.
pub enum Addr {
    /// A TCP address on loopback.
    Tcp(SocketAddr),
    /// A Unix socket's path.
    Unix(PathBuf),
}

/// Parses `--http`'s value; refuses an address that is not loopback.
pub fn parse_addr(text: &str) -> Result<Addr, String> {
    if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err("--http unix:PATH needs a path".into());
        }
        return Ok(Addr::Unix(PathBuf::from(path)));
    }
    let text = text
        .strip_prefix("localhost:")
        .map_or_else(|| text.to_owned(), |port| format!("127.0.0.1:{port}"));
    let addr: SocketAddr = text.parse().map_err(|_| {
        format!("--http {text:?}: give 127.0.0.1:PORT (PORT 0 picks one), [::1]:PORT or unix:PATH")
    })?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "--http {addr}: only a loopback address is served (127.0.0.1, ::1), or a Unix socket \
             (unix:PATH): the endpoint fronts a sandbox and must not be reachable from elsewhere"
        ));
    }
    Ok(Addr::Tcp(addr))
}

/// The default token file: in `$XDG_RUNTIME_DIR/mcpgw`, else `/tmp/mcpgw-UID`.
fn default_token_file(tag: &str) -> PathBuf {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("mcpgw"))
        .unwrap_or_else(|| PathBuf::from(format!("/tmp/mcpgw-{}", mcpgw_sys::fs::uid())));
    dir.join(format!("mcp-http-{tag}.token"))
}

/// Serves over streamable HTTP until interrupted; returns the exit status.
pub async fn serve(args: McpArgs) -> i32 {
    let level = args.log_level;
    let fail = |message: String| {
        log(level, Level::Error, &message);
        2
    };
    let listener = match parse_addr(args.http.as_deref().unwrap_or_default()) {
        Ok(addr) => match bind(&addr).await {
            Ok(l) => l,
            Err(e) => return fail(e),
        },
        Err(e) => return fail(e),
    };
    let (url, tag) = listener.url_and_tag();
    let token = mcpgw::random::mint_token();
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| default_token_file(&tag));
    let mut contents = token.clone().into_bytes();
    contents.push(b'\n');
    if let Err(e) = mcpgw_net::private::create(&token_file, &contents, "token file") {
        return fail(e);
    }
    let sandbox = tokio::select! {
        s = Sandbox::set_up(&args) => s.map_err(|e| e.message().to_owned()),
        () = terminated() => Err(String::new()),
    };
    let sandbox = match sandbox {
        Ok(s) => s,
        Err(why) => {
            let _ = std::fs::remove_file(&token_file);
            if !why.is_empty() {
                log(level, Level::Error, &why);
            }
            return 1;
        }
    };
    let server = Arc::new(Server {
        token,
        origins: args.origins.clone(),
        tcp: matches!(listener, Listener::Tcp(_)),
        sandbox,
        prefixed: args.prefixed,
        level,
        sessions: Mutex::new(HashMap::new()),
    });
    let mut ready = json!({"url": url, "token_file": token_file});
    if let Listener::Unix(_, p) = &listener {
        ready["socket"] = json!(p);
    }
    println!("{ready}");
    log(
        level,
        Level::Info,
        &format!(
            "serving {url}; the bearer token is in {}",
            token_file.display()
        ),
    );
    let socket = match &listener {
        Listener::Unix(_, p) => Some(p.clone()),
        Listener::Tcp(_) => None,
    };
    run(listener, &server).await;
    server.sandbox.tear_down().await;
    let _ = std::fs::remove_file(&token_file);
    if let Some(p) = socket {
        let _ = std::fs::remove_file(p);
    }
    0
}

/// The listener at `addr`: a TCP port, or a Unix socket made 0600 before it accepts anyone.
async fn bind(addr: &Addr) -> Result<Listener, String> {
    match addr {
        Addr::Tcp(a) => match tokio::net::TcpListener::bind(a).await {
            Ok(l) => Ok(Listener::Tcp(l)),
            Err(e) => Err(format!("--http {a}: {e}")),
        },
        Addr::Unix(path) => {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(path);
            }
            // The socket is made inaccessible to others before it can accept anyone.
            let bound = mcpgw_sys::fs::with_umask(0o177, || tokio::net::UnixListener::bind(path));
            match bound {
                Ok(l) => {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
                    Ok(Listener::Unix(l, path.clone()))
                }
                Err(e) => Err(format!("--http unix:{}: {e}", path.display())),
            }
        }
    }
}

impl Listener {
    /// The endpoint's URL, and what names its default token file (the port, or the socket).
    fn url_and_tag(&self) -> (String, String) {
        match self {
            Listener::Tcp(l) => {
                let a = l.local_addr().expect("bound");
                (format!("http://{a}{PATH}"), a.port().to_string())
            }
            Listener::Unix(_, p) => (
                format!("http://localhost{PATH}"),
                p.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
        }
    }
}

/// Accepts and serves connections until the process is asked to end; then ends the sessions
/// (which ends their streams, so the connections drain at once) and waits for the drain.
async fn run(listener: Listener, server: &Arc<Server>) {
    let level = server.level;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let limits = mcpgw_net::conn::Limits {
        header_timeout: HEADER_TIMEOUT,
        idle_timeout: IDLE_TIMEOUT,
        max_connections: MAX_CONNECTIONS
            .min(usize::try_from(mcpgw_net::conn::raise_fd_limit() / 2).unwrap_or(usize::MAX))
            .max(1),
    };
    let warn: mcpgw_net::conn::Warn =
        Arc::new(move |message: &str| log(level, Level::Warn, message));
    let service = {
        let server = server.clone();
        hyper::service::service_fn(move |req| {
            let server = server.clone();
            async move { Ok::<_, Infallible>(handle(&server, req).await) }
        })
    };
    let drain = Duration::from_secs(2);
    let serving = match listener {
        Listener::Tcp(l) => tokio::spawn(mcpgw_net::conn::serve(
            l, service, limits, stop_rx, drain, warn,
        )),
        Listener::Unix(l, _) => tokio::spawn(mcpgw_net::conn::serve(
            l, service, limits, stop_rx, drain, warn,
        )),
    };
    terminated().await;
    let _ = stop_tx.send(true);
    let sessions: Vec<Session> = server
        .sessions
        .lock()
        .unwrap()
        .drain()
        .map(|(_, s)| s)
        .collect();
    drop(sessions);
    let _ = serving.await;
}

fn header<'a, B>(req: &'a Request<B>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

async fn handle(server: &Arc<Server>, req: Request<Incoming>) -> Response<Out> {
    if req.uri().path() != PATH {
        return reply(
            StatusCode::NOT_FOUND,
            Out::Full(Some(Bytes::from_static(
                b"not found: the MCP endpoint is /mcp",
            ))),
            Some("text/plain"),
        );
    }
    if let Some(r) = refused(server, &req) {
        return r;
    }
    // A POST's refusal carries its request's id: it is read first.
    if req.method() != Method::POST
        && let Some(r) = unsupported_version(&req, None)
    {
        return r;
    }
    let session_id = header(&req, "mcp-session-id").map(str::to_owned);
    match *req.method() {
        Method::POST => post(server, req, session_id).await,
        Method::GET => {
            let accepts = header(&req, "accept").is_some_and(|a| a.contains("text/event-stream"));
            match (session_id, accepts) {
                (None, _) => method_not_allowed(),
                (Some(_), false) => rpc_error(
                    StatusCode::NOT_ACCEPTABLE,
                    None,
                    jsonrpc::code::INVALID_REQUEST,
                    "the GET stream is text/event-stream: accept it",
                ),
                (Some(id), true) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    if !server.command(&id, Cmd::Listen(Sink(tx))) {
                        return no_session(None);
                    }
                    sse(None, rx)
                }
            }
        }
        Method::DELETE => match session_id {
            None => method_not_allowed(),
            Some(id) => match server.sessions.lock().unwrap().remove(&id) {
                Some(_) => empty(StatusCode::OK),
                None => no_session(None),
            },
        },
        _ => method_not_allowed(),
    }
}

fn method_not_allowed() -> Response<Out> {
    let mut r = rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        None,
        jsonrpc::code::INVALID_REQUEST,
        "method not allowed: POST messages; GET and DELETE need an Mcp-Session-Id",
    );
    r.headers_mut().insert(
        hyper::header::ALLOW,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    r
}

fn no_session(id: Option<&str>) -> Response<Out> {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        jsonrpc::code::SESSION_NOT_FOUND,
        "session not found (it ended, or the endpoint restarted): initialize a new one",
    )
}

/// The one JSON-RPC message a POST's body carries, or the JSON-RPC error (for a 400) that
/// refuses it: not UTF-8 (-32700), a batch, or not a valid message (see [`jsonrpc::parse`]).
pub fn read_message(body: &[u8]) -> Result<(&str, Message<'_>), String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| jsonrpc::error_response(None, jsonrpc::code::PARSE_ERROR, "not UTF-8"))?
        .trim();
    if text.starts_with('[') {
        return Err(jsonrpc::error_response(
            None,
            jsonrpc::code::INVALID_REQUEST,
            "JSON-RPC batches are not part of MCP: send one message a POST",
        ));
    }
    let msg = jsonrpc::parse(text).map_err(|e| e.answer())?;
    Ok((text, msg))
}

async fn post(
    server: &Arc<Server>,
    req: Request<Incoming>,
    session_id: Option<String>,
) -> Response<Out> {
    let accept = header(&req, "accept").unwrap_or_default().to_owned();
    let json_only = !accept.contains("text/event-stream");
    let (parts, body) = req.into_parts();
    let Ok(bytes) = http_body_util::Limited::new(body, MAX_BODY).collect().await else {
        return rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            jsonrpc::code::INVALID_REQUEST,
            &format!("the body is larger than {MAX_BODY} bytes, or could not be read"),
        );
    };
    let bytes = bytes.to_bytes();
    let req = Request::from_parts(parts, ());
    let (text, msg) = match read_message(&bytes) {
        Ok(m) => m,
        Err(refusal) => return json_reply(StatusCode::BAD_REQUEST, refusal),
    };
    if let Some(r) = unsupported_version(&req, request_id(&msg).as_deref()) {
        return r;
    }
    let (id, method, params) = match msg {
        Message::Request { id, method, params } => {
            (jsonrpc::id_key(id).into_owned(), method, params)
        }
        _ => {
            // A notification or a response: for its session (a stateless client has nothing
            // to say but requests).
            if let Some(sid) = &session_id
                && !server.command(sid, Cmd::Forward(text.to_owned()))
            {
                return no_session(None);
            }
            return empty(StatusCode::ACCEPTED);
        }
    };
    let token = jsonrpc::request_progress_token(params).map(|t| jsonrpc::id_key(t).into_owned());
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = Sink(tx);
    let cmd = Cmd::Request {
        id: id.clone(),
        token,
        text: text.to_owned(),
        sink: sink.clone(),
        json: json_only,
    };
    // Without a session, the whole request is read: a request of 2026-07-28 (there is no
    // session in that revision) carries in its `_meta` what is checked before it goes on.
    let whole: Option<Value> = match session_id {
        None => serde_json::from_str(text).ok(),
        Some(_) => None,
    };
    let modern = whole.as_ref().is_some_and(|w| is_modern(&req, w));
    if modern && let Some(r) = removed(method, &id) {
        return r;
    }
    let whole = whole.filter(|_| modern);
    let new_session = match place(
        server,
        &req,
        session_id.as_deref(),
        (method, text, &id),
        whole,
        cmd,
        sink,
    ) {
        Ok(new_session) => new_session,
        Err(refused) => return *refused,
    };
    let mut r = if json_only {
        json_of(rx, &id, modern).await
    } else if modern {
        stateless_stream(rx, &id).await
    } else {
        sse(None, rx)
    };
    if let Some(sid) = new_session
        && let Ok(v) = HeaderValue::from_str(&sid)
    {
        r.headers_mut().insert("mcp-session-id", v);
    }
    r
}

/// Hands a request to its session (`initialize` starts one, whose id is returned), or, without
/// a session, to a connection of its own (a request of 2026-07-28, read whole as `modern`); or
/// refuses it. Whoever takes
/// it holds the stream's sender from then on: the stream ends when it lets go.
fn place(
    server: &Arc<Server>,
    req: &Request<()>,
    session_id: Option<&str>,
    (method, text, id): (&str, &str, &str),
    modern: Option<Value>,
    cmd: Cmd,
    sink: Sink,
) -> Result<Option<String>, Box<Response<Out>>> {
    match (session_id, method) {
        (_, method::INITIALIZE) => {
            let sid = mcpgw::random::hex_id();
            if !server.start_session(&sid, cmd) {
                return Err(Box::new(rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    Some(id),
                    jsonrpc::code::SANDBOX_ERROR,
                    &format!("too many sessions ({MAX_SESSIONS}): end one (DELETE) first"),
                )));
            }
            return Ok(Some(sid));
        }
        (Some(sid), _) => {
            if !server.command(sid, cmd) {
                return Err(Box::new(no_session(Some(id))));
            }
        }
        (None, _) => {
            let Some(whole) = modern.filter(|_| !server.prefixed) else {
                return Err(Box::new(rpc_error(
                    StatusCode::BAD_REQUEST,
                    Some(id),
                    jsonrpc::code::INVALID_REQUEST,
                    "no Mcp-Session-Id: initialize a session first (or speak 2026-07-28, per \
                     request, to an endpoint of one server)",
                )));
            };
            if let Some(r) = refusal(req, method, &whole, id) {
                return Err(Box::new(r));
            }
            let text = match method {
                method::TOOLS_CALL => with_param_headers(req, whole),
                _ => text.to_owned(),
            };
            tokio::spawn(stateless(server.clone(), text, id.to_owned(), sink.clone()));
        }
    }
    Ok(None)
}

/// The one response a JSON answer carries: the answer to `id` on the stream meant for it (what
/// else a JSON answer's stream is given, it cannot carry). 202 when the stream ends without one.
/// A 2026-07-28 request's answer (`modern`) has the status [`answer_status`] gives it.
async fn json_of(mut rx: mpsc::UnboundedReceiver<Bytes>, id: &str, modern: bool) -> Response<Out> {
    while let Some(b) = rx.recv().await {
        if let Some(msg) = event_text(&b)
            && answers(msg, id)
        {
            let status = if modern {
                answer_status(msg)
            } else {
                StatusCode::OK
            };
            return json_reply(status, msg.to_owned());
        }
    }
    empty(StatusCode::ACCEPTED)
}
