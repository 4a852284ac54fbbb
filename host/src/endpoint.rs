//! `mcpgw mcp`: an MCP server on the host for a server inside a sandbox. The sandbox gets its
//! gateway (installed when needed, launched through the session channel), the server is
//! registered there, and one virtual MCP connection carries every message of the client, both
//! ways, unchanged. A lost connection is opened again (the driver opens the channel again),
//! the client's `initialize` replayed, and requests that were in flight answered with an error
//! naming the loss; when the client ends, everything the endpoint started in the sandbox ends.

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::time::Duration;

use mcpgw::client::Output;
use mcpgw::host::{Backend, HostConfig, Op, Submit};
use mcpgw::{Error, ErrorKind};
use serde_json::{Value, json};

use crate::cli::{Level, McpArgs};
use crate::{Connection, ConnectionEvent, Host};

/// How long a lost connection is tried again before the endpoint gives up.
const RECONNECT_FOR: Duration = Duration::from_secs(60);
/// How long between two tries.
const RECONNECT_EVERY: Duration = Duration::from_millis(250);
/// Messages of a client kept while the connection is being (re)opened.
const MAX_QUEUED: usize = 10_000;
/// The JSON-RPC error code of a failure of the endpoint or the sandbox (implementation-defined
/// server error range).
pub const SANDBOX_ERROR: i64 = -32000;

/// Writes a log line to stderr at `level` (stdout carries the MCP stream).
pub fn log(threshold: Level, level: Level, message: &str) {
    if level <= threshold {
        let tag = match level {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        };
        eprintln!("mcpgw mcp: {tag}: {message}");
    }
}

/// The static gateway on this machine to install into the sandbox, if one is known.
pub fn host_gateway_binary(args: &McpArgs) -> Option<PathBuf> {
    if let Some(p) = &args.gateway_binary {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os("MCPGW_GATEWAY_BINARY") {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("mcpgw-gateway"),
        dir.join("../libexec/mcpgw/mcpgw-gateway"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The sandbox set up for the endpoint: its host driver and what to undo at the end.
pub struct Sandbox {
    /// The driver.
    pub host: Host,
    /// The servers registered, by name.
    pub servers: Vec<String>,
    /// Whether the session launched the gateway (then it is stopped at the end).
    launched: bool,
    level: Level,
}

fn submit(op: Op, timeout_ms: u64) -> Submit {
    let mut s = Submit::new(op);
    s.timeout_ms = Some(timeout_ms);
    s
}

impl Sandbox {
    /// Installs and launches the gateway as needed, opens the session, registers the servers.
    pub async fn set_up(args: &McpArgs) -> Result<Sandbox, Error> {
        let binary = host_gateway_binary(args);
        let mut config = HostConfig::new(args.backend.clone());
        config.timeout_ms = args.timeout_ms;
        // The endpoint's own gateway, in a directory of its own: ended with the endpoint.
        let tag = mcpgw::random::hex_id();
        config.state_dir = Some(format!("/tmp/mcpgw-mcp-{}", &tag[..12]));
        let install = match (&args.gateway, &binary, &args.backend) {
            (Some(path), _, _) => {
                config.gateway_path = path.clone();
                binary.as_ref().filter(|_| path.starts_with('/'))
            }
            // The local machine runs the binary where it is.
            (None, Some(b), Backend::Local { .. }) => {
                config.gateway_path = b.display().to_string();
                None
            }
            (None, Some(_), _) => {
                config.gateway_path =
                    format!("/tmp/mcpgw-bin/mcpgw-gateway-{}", env!("CARGO_PKG_VERSION"));
                binary.as_ref()
            }
            (None, None, _) => {
                config.gateway_path = "mcpgw-gateway".into();
                None
            }
        };
        let host = Host::start(config)?;
        if let Some(bin) = install {
            host.run(
                submit(
                    Op::EnsureGatewayBinary {
                        binary_path: bin.display().to_string(),
                    },
                    args.timeout_ms,
                ),
                None,
            )
            .await?;
        }
        let launched = match host
            .run(submit(Op::OpenSession {}, args.timeout_ms), None)
            .await?
        {
            Output::Session(hello) => hello.launched,
            _ => false,
        };
        let mut sandbox = Sandbox {
            host,
            servers: Vec::new(),
            launched,
            level: args.log_level,
        };
        for (name, spec) in &args.servers {
            let added = sandbox
                .host
                .run(
                    submit(Op::AddMcp { spec: spec.clone() }, args.timeout_ms),
                    None,
                )
                .await;
            if let Err(e) = added {
                sandbox.tear_down().await;
                return Err(e.context(&format!("starting the server {name:?} in the sandbox")));
            }
            sandbox.servers.push(name.clone());
        }
        Ok(sandbox)
    }

    /// Removes the servers, stops a gateway the session launched, closes the session.
    pub async fn tear_down(&self) {
        for name in &self.servers {
            if let Err(e) = self.host.op(Op::RemoveMcp { name: name.clone() }).await {
                log(self.level, Level::Warn, &format!("removing {name:?}: {e}"));
            }
        }
        if self.launched
            && let Err(e) = self.host.op(Op::StopGateway {}).await
        {
            log(
                self.level,
                Level::Warn,
                &format!("stopping the gateway: {e}"),
            );
        }
        let _ = self.host.op(Op::CloseSession {}).await;
    }
}

/// A JSON-RPC error response to `id`.
pub fn error_response(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// What a client's message is, for the relay's bookkeeping.
#[derive(Debug, PartialEq)]
pub enum Kind {
    /// A request (with its id and method).
    Request(Value, String),
    /// A notification.
    Notification(String),
    /// A response (with its id).
    Response(Value),
}

/// Classifies a JSON-RPC message; `Err` with the JSON-RPC error to answer for one that is not.
pub fn classify(text: &str) -> Result<(Kind, Value), String> {
    let msg: Value = serde_json::from_str(text)
        .map_err(|e| error_response(&Value::Null, -32700, &format!("parse error: {e}")))?;
    let id = msg.get("id").cloned();
    let method = msg.get("method").and_then(Value::as_str).map(str::to_owned);
    let kind = match (id, method) {
        (Some(id), Some(m)) => Kind::Request(id, m),
        (None, Some(m)) => Kind::Notification(m),
        (Some(id), None) if msg.get("result").is_some() || msg.get("error").is_some() => {
            Kind::Response(id)
        }
        (id, None) => {
            return Err(error_response(
                &id.unwrap_or(Value::Null),
                -32600,
                "invalid request: a JSON-RPC message needs a method, or a result or an error",
            ));
        }
    };
    Ok((kind, msg))
}

/// One MCP client's link to one server of the sandbox: the connection, and what it takes to
/// open it again unnoticed.
pub struct Link {
    host: Host,
    mcp: String,
    conn: Option<Connection>,
    /// The client's `initialize`, replayed on a new connection.
    initialize: Option<Value>,
    /// Whether the client sent `notifications/initialized`.
    initialized: bool,
    /// The id of the replayed `initialize`, whose answer the client never sees.
    replay_id: Option<Value>,
    /// The client's requests the server has not answered, by id.
    in_flight: HashSet<String>,
    /// Messages waiting for the connection.
    queue: VecDeque<String>,
    /// Why the link is dead for good, if it is.
    pub dead: Option<String>,
    level: Level,
}

impl Link {
    /// A link to `mcp`, not yet connected.
    pub fn new(host: Host, mcp: &str, level: Level) -> Link {
        Link {
            host,
            mcp: mcp.to_owned(),
            conn: None,
            initialize: None,
            initialized: false,
            replay_id: None,
            in_flight: HashSet::new(),
            queue: VecDeque::new(),
            dead: None,
            level,
        }
    }

    /// Opens the connection, trying again for a while (the channel may be opening again);
    /// replays the client's handshake on a new one and sends what waited.
    pub async fn connect(&mut self, out: &mut Vec<String>) -> Result<(), String> {
        let start = tokio::time::Instant::now();
        let conn = loop {
            let attempt = self.host.connect(&self.mcp, "", "").await;
            match attempt {
                Ok(mut conn) => match conn.recv().await {
                    Some(ConnectionEvent::Opened) => break conn,
                    Some(ConnectionEvent::Closed { reason, status }) => {
                        let reason = reason.unwrap_or_else(|| "closed".into());
                        if status.is_some() {
                            return Err(reason);
                        }
                        log(self.level, Level::Info, &format!("connecting: {reason}"));
                    }
                    _ => {}
                },
                Err(e) if e.kind() == ErrorKind::InvalidState => {}
                Err(e) => return Err(e.message().to_owned()),
            }
            if start.elapsed() > RECONNECT_FOR {
                return Err(format!(
                    "the sandbox could not be reached again within {RECONNECT_FOR:?}"
                ));
            }
            let state = self.host.state().await.map_err(|e| e.to_string())?;
            if state["session"] == "off" {
                return Err("the session channel could not be opened again".into());
            }
            tokio::time::sleep(RECONNECT_EVERY).await;
        };
        if let Some(mut init) = self.initialize.clone() {
            let id = json!(format!("mcpgw-replay-{}", mcpgw::random::hex_id()));
            init["id"] = id.clone();
            self.replay_id = Some(id);
            conn.send(&init.to_string())
                .await
                .map_err(|e| e.to_string())?;
            if self.initialized {
                conn.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        while let Some(msg) = self.queue.pop_front() {
            if let Err(e) = conn.send(&msg).await {
                self.queue.push_front(msg);
                return Err(e.to_string());
            }
        }
        self.conn = Some(conn);
        let _ = out;
        Ok(())
    }

    /// A message from the client; `out` receives what to answer the client at once.
    pub async fn from_client(&mut self, text: &str, out: &mut Vec<String>) {
        let (kind, msg) = match classify(text) {
            Ok(k) => k,
            Err(reply) => return out.push(reply),
        };
        match &kind {
            Kind::Request(id, method) => {
                if let Some(why) = &self.dead {
                    return out.push(error_response(id, SANDBOX_ERROR, why));
                }
                if method == "initialize" {
                    self.initialize = Some(msg.clone());
                }
                self.in_flight.insert(id.to_string());
            }
            Kind::Notification(m) if m == "notifications/initialized" => self.initialized = true,
            _ => {}
        }
        if self.dead.is_some() {
            return;
        }
        match &self.conn {
            Some(conn) => {
                if let Err(e) = conn.send(text.trim()).await
                    && let Kind::Request(id, _) = &kind
                {
                    self.in_flight.remove(&id.to_string());
                    out.push(error_response(id, SANDBOX_ERROR, &e.to_string()));
                }
            }
            None if self.queue.len() < MAX_QUEUED => self.queue.push_back(text.trim().to_owned()),
            None => {
                if let Kind::Request(id, _) = kind {
                    out.push(error_response(
                        &id,
                        SANDBOX_ERROR,
                        "too many messages wait for the sandbox",
                    ));
                }
            }
        }
    }

    /// The next event of the connection (pending forever while there is none).
    pub async fn event(&mut self) -> Option<ConnectionEvent> {
        match self.conn.as_mut() {
            Some(c) => c.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Whether the link waits for a connection.
    pub fn disconnected(&self) -> bool {
        self.conn.is_none() && self.dead.is_none()
    }

    /// Handles an event of the connection; `out` receives the messages for the client.
    pub fn on_event(&mut self, event: Option<ConnectionEvent>, out: &mut Vec<String>) {
        match event {
            Some(ConnectionEvent::Message(raw)) => {
                let text = raw.get();
                if let Ok((Kind::Response(id), _)) = classify(text) {
                    if self.replay_id.as_ref() == Some(&id) {
                        self.replay_id = None;
                        return;
                    }
                    self.in_flight.remove(&id.to_string());
                }
                out.push(text.to_owned());
            }
            Some(ConnectionEvent::Opened) => {}
            closed => {
                self.conn = None;
                let reason = match closed {
                    Some(ConnectionEvent::Closed {
                        reason: Some(r), ..
                    }) => r,
                    _ => "the connection closed".to_owned(),
                };
                log(
                    self.level,
                    Level::Warn,
                    &format!("the connection was lost: {reason}"),
                );
                for id in self.in_flight.drain() {
                    let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
                    out.push(error_response(
                        &id,
                        SANDBOX_ERROR,
                        &format!(
                            "the connection to the sandbox was lost ({reason}); the request may \
                             have run"
                        ),
                    ));
                }
            }
        }
    }

    /// Closes the connection.
    pub fn close(&mut self) {
        if let Some(c) = self.conn.take() {
            c.close();
        }
    }
}

/// Serves one server of the sandbox over stdio until the client ends; returns the exit status.
pub async fn serve_stdio(args: McpArgs) -> i32 {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let level = args.log_level;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut stdout = tokio::io::stdout();
    let (ready_tx, mut ready_rx) = tokio::sync::oneshot::channel();
    let setup_args = args.clone();
    tokio::spawn(async move {
        let _ = ready_tx.send(Sandbox::set_up(&setup_args).await);
    });
    let mut sandbox: Option<Sandbox> = None;
    let mut link: Option<Link> = None;
    let mut waiting: Vec<String> = Vec::new();
    let mut failed: Option<String> = None;
    let mut out: Vec<String> = Vec::new();
    let mut status = 0;
    loop {
        tokio::select! {
            line = lines.next_line() => match line {
                Ok(Some(line)) if line.trim().is_empty() => {}
                Ok(Some(line)) => match link.as_mut() {
                    Some(l) => l.from_client(&line, &mut out).await,
                    None => match &failed {
                        Some(why) => {
                            if let Ok((Kind::Request(id, _), _)) = classify(&line) {
                                out.push(error_response(&id, SANDBOX_ERROR, why));
                            }
                        }
                        None => waiting.push(line),
                    },
                },
                _ => break,
            },
            ready = &mut ready_rx, if sandbox.is_none() && failed.is_none() => {
                match ready.unwrap_or_else(|_| Err(Error::new(ErrorKind::InvalidState, "the set-up task ended"))) {
                    Ok(sb) => {
                        let mut l = Link::new(sb.host.clone(), &sb.servers[0], level);
                        for line in waiting.drain(..) {
                            l.from_client(&line, &mut out).await;
                        }
                        if let Err(why) = l.connect(&mut out).await {
                            l.dead = Some(why);
                        }
                        sandbox = Some(sb);
                        link = Some(l);
                    }
                    Err(e) => {
                        let why = e.message().to_owned();
                        log(level, Level::Error, &why);
                        for line in waiting.drain(..) {
                            if let Ok((Kind::Request(id, _), _)) = classify(&line) {
                                out.push(error_response(&id, SANDBOX_ERROR, &why));
                            }
                        }
                        failed = Some(why);
                        status = 1;
                    }
                }
            }
            event = async { link.as_mut().expect("guarded").event().await }, if link.as_ref().is_some_and(|l| !l.disconnected() && l.dead.is_none()) => {
                let l = link.as_mut().expect("guarded");
                l.on_event(event, &mut out);
                if l.disconnected() && let Err(why) = l.connect(&mut out).await {
                    log(level, Level::Error, &why);
                    l.dead = Some(why);
                    status = 1;
                }
            }
        }
        for msg in out.drain(..) {
            let mut line = msg.into_bytes();
            line.push(b'\n');
            if stdout.write_all(&line).await.is_err() {
                break;
            }
        }
        let _ = stdout.flush().await;
    }
    if let Some(l) = link.as_mut() {
        l.close();
    }
    if let Some(sb) = &sandbox {
        sb.tear_down().await;
    }
    status
}
