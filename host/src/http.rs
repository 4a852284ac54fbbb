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

use std::collections::{BTreeMap, HashMap, VecDeque};
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
use mcpgw::wire::jsonrpc;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cli::{Level, McpArgs};
use crate::endpoint::{
    Kind, Link, Relay, SANDBOX_ERROR, Sandbox, classify, error_response, log, terminated,
};

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
/// The JSON-RPC code of a header that does not match the body (2026-07-28).
const HEADER_MISMATCH: i64 = -32020;

/// A response body: fixed bytes, or an SSE stream fed by a session.
enum Out {
    Full(Option<Bytes>),
    Stream(mpsc::UnboundedReceiver<Bytes>),
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
            Out::Stream(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
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
fn rpc_error(status: StatusCode, id: &Value, code: i64, message: &str) -> Response<Out> {
    json_reply(status, error_response(id, code, message))
}

fn empty(status: StatusCode) -> Response<Out> {
    reply(status, Out::Full(None), None)
}

fn sse(rx: mpsc::UnboundedReceiver<Bytes>) -> Response<Out> {
    let mut r = reply(StatusCode::OK, Out::Stream(rx), Some("text/event-stream"));
    let h = r.headers_mut();
    h.insert(
        hyper::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

/// What a session's task is told.
enum Cmd {
    /// A request: its id, progress token, text, and where its answer goes (only the response
    /// when `json`).
    Request {
        id: Value,
        token: Option<String>,
        text: String,
        sink: Sink,
        json: bool,
    },
    /// A notification or a response of the client's.
    Forward(String),
    /// The `GET` stream.
    Listen(Sink),
}

/// A session: one client of an earlier revision, one relay.
struct Session {
    tx: mpsc::UnboundedSender<Cmd>,
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
        .unwrap_or_else(|| {
            // SAFETY: getuid(2) has no failure and touches no memory.
            PathBuf::from(format!("/tmp/mcpgw-{}", unsafe { libc::getuid() }))
        });
    dir.join(format!("mcp-http-{tag}.token"))
}

/// Serves over streamable HTTP until interrupted; returns the exit status.
pub async fn serve(args: McpArgs) -> i32 {
    let level = args.log_level;
    let fail = |message: String| {
        log(level, Level::Error, &message);
        2
    };
    let addr = match parse_addr(args.http.as_deref().unwrap_or_default()) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let listener = match &addr {
        Addr::Tcp(a) => match tokio::net::TcpListener::bind(a).await {
            Ok(l) => Listener::Tcp(l),
            Err(e) => return fail(format!("--http {a}: {e}")),
        },
        Addr::Unix(path) => {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                let _ = std::fs::remove_file(path);
            }
            // The socket is made inaccessible to others before it can accept anyone.
            // SAFETY: umask(2) only swaps the process's mask.
            let old = unsafe { libc::umask(0o177) };
            let bound = tokio::net::UnixListener::bind(path);
            // SAFETY: as above.
            unsafe { libc::umask(old) };
            match bound {
                Ok(l) => {
                    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
                    Listener::Unix(l, path.clone())
                }
                Err(e) => return fail(format!("--http unix:{}: {e}", path.display())),
            }
        }
    };
    let (url, tag) = match &listener {
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
    };
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
        s = Sandbox::set_up(&args) => s,
        () = terminated() => {
            let _ = std::fs::remove_file(&token_file);
            return 1;
        }
    };
    let sandbox = match sandbox {
        Ok(s) => s,
        Err(e) => {
            let _ = std::fs::remove_file(&token_file);
            log(level, Level::Error, e.message());
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
    let socket = match &listener {
        Listener::Unix(_, p) => Some(p.clone()),
        Listener::Tcp(_) => None,
    };
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
    // Ending the sessions ends their streams, so the connections drain at once.
    let sessions: Vec<Session> = server
        .sessions
        .lock()
        .unwrap()
        .drain()
        .map(|(_, s)| s)
        .collect();
    drop(sessions);
    let _ = serving.await;
    server.sandbox.tear_down().await;
    let _ = std::fs::remove_file(&token_file);
    if let Some(p) = socket {
        let _ = std::fs::remove_file(p);
    }
    0
}

fn header<'a, B>(req: &'a Request<B>, name: &str) -> Option<&'a str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Whether `host` (a `Host` header) names this machine's loopback.
fn loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    matches!(name, "localhost" | "127.0.0.1" | "::1")
}

/// Whether `origin` (an `Origin` header) is a page of this machine's loopback
/// (`http://localhost:3000`, `https://127.0.0.1`, `http://[::1]:8080`): what a local client
/// sends, and no page a DNS rebinding can serve (its origin keeps the attacker's name).
fn loopback_origin(origin: &str) -> bool {
    origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .is_some_and(|authority| !authority.contains(['/', '@']) && loopback_host(authority))
}

/// The checks every request passes before anything else: Origin, Host, token.
fn refused(server: &Server, req: &Request<Incoming>) -> Option<Response<Out>> {
    if let Some(origin) = req.headers().get(hyper::header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| loopback_origin(o) || server.origins.iter().any(|a| a == o));
        if !ok {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                &Value::Null,
                -32600,
                "forbidden: this Origin is not allowed (start the endpoint with --allow-origin \
                 ORIGIN to allow it)",
            ));
        }
    }
    if server.tcp && !header(req, "host").is_some_and(loopback_host) {
        return Some(rpc_error(
            StatusCode::FORBIDDEN,
            &Value::Null,
            -32600,
            "forbidden: the Host header must name this machine's loopback",
        ));
    }
    let given = header(req, "authorization")
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !mcpgw::random::constant_time_eq(given.as_bytes(), server.token.as_bytes()) {
        let mut r = rpc_error(
            StatusCode::UNAUTHORIZED,
            &Value::Null,
            -32600,
            "unauthorized: send Authorization: Bearer with the token of the endpoint's token file",
        );
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer"),
        );
        return Some(r);
    }
    None
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
    if let Some(v) = req.headers().get("mcp-protocol-version")
        && !v.to_str().is_ok_and(jsonrpc::is_known_revision)
    {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            &Value::Null,
            jsonrpc::code::UNSUPPORTED_PROTOCOL_VERSION,
            &format!(
                "unsupported MCP-Protocol-Version {:?}: this endpoint speaks {} and {}",
                String::from_utf8_lossy(v.as_bytes()),
                jsonrpc::MODERN,
                jsonrpc::LEGACY.join(", ")
            ),
        );
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
                    &Value::Null,
                    -32600,
                    "the GET stream is text/event-stream: accept it",
                ),
                (Some(id), true) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    if !server.command(&id, Cmd::Listen(Sink(tx))) {
                        return no_session(&Value::Null);
                    }
                    sse(rx)
                }
            }
        }
        Method::DELETE => match session_id {
            None => method_not_allowed(),
            Some(id) => match server.sessions.lock().unwrap().remove(&id) {
                Some(_) => empty(StatusCode::OK),
                None => no_session(&Value::Null),
            },
        },
        _ => method_not_allowed(),
    }
}

fn method_not_allowed() -> Response<Out> {
    let mut r = rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        &Value::Null,
        -32600,
        "method not allowed: POST messages; GET and DELETE need an Mcp-Session-Id",
    );
    r.headers_mut().insert(
        hyper::header::ALLOW,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    r
}

fn no_session(id: &Value) -> Response<Out> {
    rpc_error(
        StatusCode::NOT_FOUND,
        id,
        -32001,
        "session not found (it ended, or the endpoint restarted): initialize a new one",
    )
}

/// The one JSON-RPC message a POST's body carries, or the JSON-RPC error (for a 400) that
/// refuses it: not UTF-8 (-32700), a batch, or not a valid message (see [`classify`]).
pub fn read_message(body: &[u8]) -> Result<(&str, Kind, Value), String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| {
            error_response(
                &Value::Null,
                jsonrpc::code::PARSE_ERROR,
                "parse error: not UTF-8",
            )
        })?
        .trim();
    if text.starts_with('[') {
        return Err(error_response(
            &Value::Null,
            jsonrpc::code::INVALID_REQUEST,
            "invalid request: JSON-RPC batches are not part of MCP: send one message a POST",
        ));
    }
    let (kind, msg) = classify(text)?;
    Ok((text, kind, msg))
}

/// The request metadata headers of 2026-07-28 against the body: the mismatch, if any.
pub fn header_mismatch<B>(req: &Request<B>, method: &str, msg: &Value) -> Option<String> {
    let version = msg["params"]["_meta"][jsonrpc::META_PROTOCOL_VERSION].as_str();
    let given = header(req, "mcp-protocol-version");
    if given != version {
        return Some(format!(
            "Header mismatch: MCP-Protocol-Version {given:?} does not match the body's {version:?}"
        ));
    }
    if header(req, "mcp-method") != Some(method) {
        return Some(format!(
            "Header mismatch: Mcp-Method {:?} does not match the body's {method:?}",
            header(req, "mcp-method")
        ));
    }
    let named = msg["params"][jsonrpc::mcp_name_member(method)?].as_str();
    let given = header(req, "mcp-name").map(|v| {
        v.strip_prefix("=?base64?")
            .and_then(|b| b.strip_suffix("?="))
            .and_then(|b| {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.decode(b).ok()
            })
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_else(|| v.to_owned())
    });
    (given.as_deref() != named)
        .then(|| format!("Header mismatch: Mcp-Name {given:?} does not match the body's {named:?}"))
}

async fn post(
    server: &Arc<Server>,
    req: Request<Incoming>,
    session_id: Option<String>,
) -> Response<Out> {
    let accept = header(&req, "accept").unwrap_or_default().to_owned();
    let json_only = !accept.contains("text/event-stream");
    let (parts, body) = req.into_parts();
    let bytes = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &Value::Null,
                -32600,
                &format!("the body is larger than {MAX_BODY} bytes, or could not be read"),
            );
        }
    };
    let req = Request::from_parts(parts, ());
    let (text, kind, msg) = match read_message(&bytes) {
        Ok(m) => m,
        Err(refusal) => return json_reply(StatusCode::BAD_REQUEST, refusal),
    };
    let (id, method) = match &kind {
        Kind::Request(id, m) => (id.clone(), m.clone()),
        _ => {
            // A notification or a response: for its session (a stateless client has nothing
            // to say but requests).
            if let Some(sid) = &session_id
                && !server.command(sid, Cmd::Forward(text.to_owned()))
            {
                return no_session(&Value::Null);
            }
            return empty(StatusCode::ACCEPTED);
        }
    };
    let token = msg["params"]["_meta"]["progressToken"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            msg["params"]["_meta"]["progressToken"]
                .as_i64()
                .map(|n| n.to_string())
        });
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = Sink(tx);
    let cmd = Cmd::Request {
        id: id.clone(),
        token,
        text: text.to_owned(),
        sink: sink.clone(),
        json: json_only,
    };
    let mut new_session = None;
    match (&session_id, method.as_str()) {
        (_, "initialize") => {
            let sid = mcpgw::random::hex_id();
            if !server.start_session(&sid, cmd) {
                return rpc_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &id,
                    SANDBOX_ERROR,
                    &format!("too many sessions ({MAX_SESSIONS}): end one (DELETE) first"),
                );
            }
            new_session = Some(sid);
        }
        (Some(sid), _) => {
            if !server.command(sid, cmd) {
                return no_session(&id);
            }
        }
        (None, _) => {
            let modern = msg["params"]["_meta"][jsonrpc::META_PROTOCOL_VERSION]
                .as_str()
                .is_some_and(jsonrpc::is_modern)
                || header(&req, "mcp-protocol-version").is_some_and(jsonrpc::is_modern);
            if !modern || server.prefixed {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    &id,
                    -32600,
                    "bad request: no Mcp-Session-Id: initialize a session first (or speak \
                     2026-07-28, per request, to an endpoint of one server)",
                );
            }
            if let Some(why) = header_mismatch(&req, &method, &msg) {
                return rpc_error(StatusCode::BAD_REQUEST, &id, HEADER_MISMATCH, &why);
            }
            tokio::spawn(stateless(
                server.clone(),
                text.to_owned(),
                id.clone(),
                sink.clone(),
            ));
        }
    }
    // The session (or the stateless task) holds the stream's sender from here: the stream ends
    // when it lets go.
    drop(sink);
    let mut r = if json_only {
        json_of(rx, &id).await
    } else {
        sse(rx)
    };
    if let Some(sid) = new_session
        && let Ok(v) = HeaderValue::from_str(&sid)
    {
        r.headers_mut().insert("mcp-session-id", v);
    }
    r
}

/// The one response a JSON answer carries: the answer to `id` on the stream meant for it (what
/// else a JSON answer's stream is given, it cannot carry). 202 when the stream ends without one.
async fn json_of(mut rx: mpsc::UnboundedReceiver<Bytes>, id: &Value) -> Response<Out> {
    while let Some(b) = rx.recv().await {
        let Some(msg) = std::str::from_utf8(&b)
            .ok()
            .and_then(|t| t.strip_prefix("event: message\ndata: "))
            .map(str::trim_end)
        else {
            continue;
        };
        if let Ok(jsonrpc::Message::Response { id: answered, .. }) = jsonrpc::parse(msg)
            && serde_json::from_str::<Value>(answered.get()).is_ok_and(|a| a == *id)
        {
            return json_reply(StatusCode::OK, msg.to_owned());
        }
    }
    empty(StatusCode::ACCEPTED)
}

impl Server {
    /// Hands `cmd` to session `id`; false when there is no such session.
    fn command(&self, id: &str, cmd: Cmd) -> bool {
        let mut sessions = self.sessions.lock().unwrap();
        match sessions.get(id) {
            Some(s) if s.tx.send(cmd).is_ok() => true,
            Some(_) => {
                sessions.remove(id);
                false
            }
            None => false,
        }
    }

    /// Starts session `id` with its `initialize`; false when there are too many.
    fn start_session(self: &Arc<Self>, id: &str, init: Cmd) -> bool {
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|_, s| !s.tx.is_closed());
        if sessions.len() >= MAX_SESSIONS {
            return false;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(init);
        sessions.insert(id.to_owned(), Session { tx });
        tokio::spawn(run_session(self.clone(), id.to_owned(), rx));
        true
    }
}

/// Where a session's messages for its client go.
#[derive(Default)]
struct Routes {
    /// Streams of requests in flight, by id, in the order they came.
    streams: BTreeMap<u64, (String, Sink, bool)>,
    by_id: HashMap<String, u64>,
    by_token: HashMap<String, u64>,
    next: u64,
    /// The `GET` stream.
    listen: Option<Sink>,
    /// The server's messages that found no stream yet.
    backlog: VecDeque<String>,
}

impl Routes {
    fn add(&mut self, id: &Value, token: Option<String>, sink: Sink, json: bool) {
        self.next += 1;
        let key = id.to_string();
        self.by_id.insert(key.clone(), self.next);
        if let Some(t) = &token {
            self.by_token.insert(t.clone(), self.next);
        }
        self.streams.insert(self.next, (key, sink, json));
    }

    fn remove(&mut self, n: u64) -> Option<Sink> {
        let (key, sink, _) = self.streams.remove(&n)?;
        self.by_id.remove(&key);
        self.by_token.retain(|_, v| *v != n);
        Some(sink)
    }

    fn busy(&self) -> bool {
        !self.streams.is_empty() || self.listen.is_some()
    }

    /// Sends one message of the server's where it belongs; gives back one that is not a valid
    /// message (an error answering a message whose id could not be read): on HTTP it would
    /// land on the stream of some other request.
    fn route(&mut self, msg: String) -> Result<(), String> {
        let (n, is_response) = match classify(&msg) {
            Err(_) => return Err(msg),
            Ok((Kind::Response(id), _)) => (self.by_id.get(&id.to_string()).copied(), true),
            Ok((Kind::Notification(m), v)) if m == "notifications/progress" => {
                let t = &v["params"]["progressToken"];
                let t = t
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| t.to_string());
                match self.by_token.get(&t) {
                    Some(n) if self.streams.get(n).is_some_and(|s| !s.2) => (Some(*n), false),
                    Some(_) => (None, false),
                    // The progress of a request already answered, which a client over stdio
                    // ignores: on another stream it could overtake the answer.
                    None => return Ok(()),
                }
            }
            Ok(_) => (None, false),
        };
        if let Some(n) = n {
            if is_response {
                let sink = self.remove(n).expect("present");
                if sink.send(&msg) {
                    return Ok(());
                }
            } else if self.streams[&n].1.send(&msg) {
                return Ok(());
            }
        }
        self.unrelated(msg);
        Ok(())
    }

    /// A message that belongs to no stream in particular: the `GET` stream, else a request's
    /// stream in flight, else the backlog.
    fn unrelated(&mut self, msg: String) {
        if let Some(l) = &self.listen {
            if l.send(&msg) {
                return;
            }
            self.listen = None;
        }
        for (_, s) in self.streams.iter().filter(|(_, s)| !s.2) {
            if s.1.send(&msg) {
                return;
            }
        }
        if self.backlog.len() >= MAX_BACKLOG {
            self.backlog.pop_front();
        }
        self.backlog.push_back(msg);
    }

    fn keep_alive(&mut self) {
        let comment = Bytes::from_static(b": keep-alive\n\n");
        if let Some(l) = &self.listen
            && l.0.send(comment.clone()).is_err()
        {
            self.listen = None;
        }
        for (_, s, _) in self.streams.values() {
            let _ = s.0.send(comment.clone());
        }
    }
}

/// A session's task: its relay, and where its messages go.
async fn run_session(server: Arc<Server>, id: String, mut rx: mpsc::UnboundedReceiver<Cmd>) {
    let mut relay = Relay::open(&server.sandbox, server.prefixed, server.level).await;
    let mut routes = Routes::default();
    let mut out = Vec::new();
    let mut idle_since = Instant::now();
    let mut tick = tokio::time::interval(KEEP_ALIVE);
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                None => break,
                Some(Cmd::Request { id, token, text, sink, json }) => {
                    if routes.by_id.contains_key(&id.to_string()) {
                        // Its answer could not be told from the first one's.
                        sink.send(&error_response(
                            &id,
                            jsonrpc::code::INVALID_REQUEST,
                            "invalid request: a request with this id is in flight in this \
                             session: use another id",
                        ));
                        continue;
                    }
                    routes.add(&id, token, sink, json);
                    relay.from_client(&text, &mut out).await;
                }
                Some(Cmd::Forward(text)) => relay.from_client(&text, &mut out).await,
                Some(Cmd::Listen(sink)) => {
                    let mut ok = true;
                    while let Some(msg) = routes.backlog.pop_front() {
                        if !sink.send(&msg) {
                            routes.backlog.push_front(msg);
                            ok = false;
                            break;
                        }
                    }
                    routes.listen = ok.then_some(sink);
                }
            },
            wake = relay.wait() => relay.handle(wake, &mut out).await,
            _ = tick.tick() => {
                routes.keep_alive();
                if routes.busy() {
                    idle_since = Instant::now();
                } else if idle_since.elapsed() > SESSION_IDLE {
                    log(server.level, Level::Info, &format!("session {}: idle, ended", &id[..8]));
                    break;
                }
            }
        }
        for msg in out.drain(..) {
            if let Err(msg) = routes.route(msg) {
                log(
                    server.level,
                    Level::Warn,
                    &format!(
                        "session {}: dropped a message of the server that answers no request: {}",
                        &id[..8],
                        mcpgw::wire::frame::quoted(&msg)
                    ),
                );
            }
        }
    }
    relay.close();
    server.sessions.lock().unwrap().remove(&id);
}

/// A request of 2026-07-28 without a session: a connection of its own while its stream is
/// open.
async fn stateless(server: Arc<Server>, text: String, id: Value, sink: Sink) {
    // A request of its own needs no server session of its own: it shares the MCP's.
    let mut link = Link::new(
        server.sandbox.host.clone(),
        &server.sandbox.servers[0],
        server.level,
        false,
    );
    let mut out = Vec::new();
    if !link.open_now().await {
        let why = link
            .dead()
            .unwrap_or("the sandbox cannot be reached")
            .to_owned();
        sink.send(&error_response(&id, SANDBOX_ERROR, &why));
        return;
    }
    let mut relay = Relay::One(Box::new(link));
    relay.from_client(&text, &mut out).await;
    loop {
        let mut done = false;
        for msg in out.drain(..) {
            let answer = matches!(classify(&msg), Ok((Kind::Response(i), _)) if i == id);
            if !sink.send(&msg) {
                done = true;
            }
            done |= answer;
        }
        if done {
            break;
        }
        tokio::select! {
            wake = relay.wait() => relay.handle(wake, &mut out).await,
            () = sink.0.closed() => break,
        }
    }
    relay.close();
}

#[cfg(test)]
mod tests {
    use super::loopback_origin;

    #[test]
    fn loopback_origins_are_told_from_others() {
        for o in [
            "http://localhost:6274",
            "http://localhost",
            "https://127.0.0.1:8443",
            "http://[::1]:3000",
        ] {
            assert!(loopback_origin(o), "{o}");
        }
        for o in [
            "null",
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example:80",
            "http://localhost@evil.example",
            "http://evil.example/localhost:80",
            "file://localhost",
            "localhost:80",
        ] {
            assert!(!loopback_origin(o), "{o}");
        }
    }
}
