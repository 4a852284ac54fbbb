//! The tokio runner of the host driver: [`Host`] runs a sans-IO [`mcpgw::driver::Host`] on a
//! tokio runtime (the `mcpgw` command, the benches and the Rust tests use it).
//!
//! One task owns each host driver and does its I/O: it spawns the processes the driver asks for
//! (one-shot commands in a process group of their own, the session channel with its pipes),
//! pipes their bytes, keeps the driver's one timer, and hands results, progress and connection
//! messages to the callers. The policy (session or one-shot, reopening, resuming, backends,
//! timers) is the driver's; this crate only moves bytes. Many hosts share one runtime: no thread
//! is made per host or per session.

#![forbid(unsafe_code)]

pub mod audit;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use mcpgw::client::Output;
use mcpgw::driver::{self, Action, Exit, HostConfig, Id, ProcId, Program, Stdin, Submit};
use mcpgw::{Error, ErrorKind};
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

pub use mcpgw::driver::{Backend, Container, Op, Pod, Prefix};

/// Bytes read from a channel at a time.
const READ_BYTES: usize = 64 * 1024;
/// Frames for a channel's stdin that queued up are gathered into one write up to this size.
const GATHER_BYTES: usize = 256 * 1024;

/// How long the processes of a host whose last handle was dropped may take to exit.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What the callers and the process tasks tell the driver task.
enum Msg {
    Submit {
        submit: Submit,
        progress: Option<mpsc::UnboundedSender<Box<RawValue>>>,
        done: oneshot::Sender<Result<Output, Error>>,
        id: oneshot::Sender<Id>,
    },
    Cancel(Id),
    Connect {
        mcp: String,
        agent_id: String,
        session_id: String,
        own_upstream: bool,
        events: mpsc::UnboundedSender<ConnectionEvent>,
        reply: oneshot::Sender<Result<Id, Error>>,
    },
    Send {
        conn: Id,
        msgs: Vec<String>,
        reply: oneshot::Sender<Vec<Result<(), Error>>>,
    },
    CloseConnection(Id),
    Exited(ProcId, Exit),
    Data(ProcId, Vec<u8>),
    Stderr(ProcId, Vec<u8>),
    Eof(ProcId),
    State(oneshot::Sender<String>),
    /// The last [`Host`] was dropped.
    Shutdown,
}

/// What a virtual connection receives.
#[derive(Debug)]
pub enum ConnectionEvent {
    /// The connection is open.
    Opened,
    /// A JSON-RPC message from the gateway.
    Message(Box<RawValue>),
    /// The connection ended (the reason, unless the host closed it; the HTTP status of a
    /// refused open).
    Closed {
        /// Why.
        reason: Option<String>,
        /// The status of a refused open.
        status: Option<u16>,
        /// The kind of the end, unless the host closed it.
        kind: Option<mcpgw::error::ErrorKind>,
    },
}

/// A host driver run by a task of its own. Cheap to clone; every clone drives the same host.
/// Dropping the last clone closes the session (its resumable calls are cancelled) and ends the
/// task; processes still running after a short grace are killed.
#[derive(Clone)]
pub struct Host {
    inner: std::sync::Arc<Inner>,
}

struct Inner {
    tx: mpsc::UnboundedSender<Msg>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Shutdown);
    }
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

fn gone() -> Error {
    Error::new(ErrorKind::InvalidState, "the host's driver task has ended")
}

/// An operation submitted and not yet finished: cancelled when dropped.
struct Pending {
    tx: mpsc::UnboundedSender<Msg>,
    id: Option<Id>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let _ = self.tx.send(Msg::Cancel(id));
        }
    }
}

impl Host {
    /// Starts a driver for `config` on the current tokio runtime.
    pub fn start(config: HostConfig) -> Result<Host, Error> {
        Host::start_audited(config, None)
    }

    /// [`Host::start`], with `audit` receiving each audit record (a line of JSON) when the
    /// configuration's `audit` is on.
    pub fn start_audited(config: HostConfig, audit: Option<AuditSink>) -> Result<Host, Error> {
        let host = driver::Host::new(config)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut task = Task::new(host, tx.clone());
        task.audit = audit;
        tokio::spawn(task.run(rx));
        Ok(Host {
            inner: std::sync::Arc::new(Inner { tx }),
        })
    }

    fn tx(&self) -> &mpsc::UnboundedSender<Msg> {
        &self.inner.tx
    }

    /// Runs `submit` to its end. `progress` receives each progress chunk of a streamed call (a
    /// ToolChunk's JSON). Dropping the future cancels the operation.
    pub async fn run(
        &self,
        submit: Submit,
        progress: Option<mpsc::UnboundedSender<Box<RawValue>>>,
    ) -> Result<Output, Error> {
        let (done_tx, done_rx) = oneshot::channel();
        let (id_tx, id_rx) = oneshot::channel();
        self.tx()
            .send(Msg::Submit {
                submit,
                progress,
                done: done_tx,
                id: id_tx,
            })
            .map_err(|_| gone())?;
        let mut pending = Pending {
            tx: self.tx().clone(),
            id: id_rx.await.ok(),
        };
        let result = done_rx.await.map_err(|_| gone())?;
        pending.id = None;
        result
    }

    /// [`Host::run`] of an operation with the default scope and limit.
    pub async fn op(&self, op: Op) -> Result<Output, Error> {
        self.run(Submit::new(op), None).await
    }

    /// Opens a virtual MCP connection to `mcp` in scope (`agent_id`, `session_id`) over the
    /// session channel, with an upstream session of its own when `own_upstream` (see
    /// [`mcpgw::driver::Host::open_connection`]); its events come on the returned receiver.
    pub async fn connect(
        &self,
        mcp: &str,
        agent_id: &str,
        session_id: &str,
        own_upstream: bool,
    ) -> Result<Connection, Error> {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (reply_tx, reply) = oneshot::channel();
        self.tx()
            .send(Msg::Connect {
                mcp: mcp.into(),
                agent_id: agent_id.into(),
                session_id: session_id.into(),
                own_upstream,
                events: events_tx,
                reply: reply_tx,
            })
            .map_err(|_| gone())?;
        let id = reply.await.map_err(|_| gone())??;
        Ok(Connection {
            id,
            host: self.clone(),
            events,
        })
    }

    /// What the driver knows (see [`mcpgw::driver::Host::state_json`]).
    pub async fn state(&self) -> Result<serde_json::Value, Error> {
        let (tx, rx) = oneshot::channel();
        self.tx().send(Msg::State(tx)).map_err(|_| gone())?;
        let text = rx.await.map_err(|_| gone())?;
        serde_json::from_str(&text).map_err(|e| Error::protocol(e.to_string()))
    }
}

/// A virtual MCP connection.
#[derive(Debug)]
pub struct Connection {
    id: Id,
    host: Host,
    events: mpsc::UnboundedReceiver<ConnectionEvent>,
}

impl Connection {
    /// Sends one JSON-RPC message (a JSON object's text).
    pub async fn send(&self, msg: &str) -> Result<(), Error> {
        self.send_all(vec![msg.to_owned()])
            .await?
            .pop()
            .unwrap_or_else(|| Err(gone()))
    }

    /// Sends JSON-RPC messages in order, the result of each in its place: the frames of the
    /// ones sent go to the channel together, in one write when the channel takes them at once.
    pub async fn send_all(&self, msgs: Vec<String>) -> Result<Vec<Result<(), Error>>, Error> {
        let (reply_tx, reply) = oneshot::channel();
        self.host
            .tx()
            .send(Msg::Send {
                conn: self.id,
                msgs,
                reply: reply_tx,
            })
            .map_err(|_| gone())?;
        reply.await.map_err(|_| gone())
    }

    /// The next event; `None` after [`ConnectionEvent::Closed`].
    pub async fn recv(&mut self) -> Option<ConnectionEvent> {
        self.events.recv().await
    }

    /// [`Connection::recv`] as a poll, for waiting on many connections at once.
    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<ConnectionEvent>> {
        self.events.poll_recv(cx)
    }

    /// Closes the connection.
    pub fn close(&self) {
        let _ = self.host.tx().send(Msg::CloseConnection(self.id));
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.close();
    }
}

/// A process the task runs: its group's id, and the stdin of a channel.
struct Proc {
    pid: Option<u32>,
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
}

/// Where audit records go.
pub type AuditSink = Box<dyn FnMut(&str) + Send>;

struct Task {
    host: driver::Host,
    audit: Option<AuditSink>,
    tx: mpsc::UnboundedSender<Msg>,
    procs: HashMap<ProcId, Proc>,
    ops: HashMap<Id, Waiter>,
    conns: HashMap<Id, mpsc::UnboundedSender<ConnectionEvent>>,
}

struct Waiter {
    progress: Option<mpsc::UnboundedSender<Box<RawValue>>>,
    done: oneshot::Sender<Result<Output, Error>>,
}

/// Reads `pipe` until its end, handing each read to `take` (until it says stop). No buffer is
/// held while waiting: one is made when the pipe is readable, and given away with what it read,
/// so an idle channel costs no read buffer. The buffer is not zeroed, and a read that leaves
/// the pipe empty (a short one) ends the pipe's readiness: no second read only to hear
/// `EAGAIN`.
async fn read_pipe(
    pipe: impl std::os::fd::AsFd + tokio::io::AsyncRead + Unpin,
    max: usize,
    mut take: impl FnMut(Vec<u8>) -> bool,
) {
    use tokio::io::AsyncReadExt;
    let Ok(fd) = pipe.as_fd().try_clone_to_owned() else {
        return;
    };
    drop(pipe);
    let Ok(mut rx) = tokio::net::unix::pipe::Receiver::from_owned_fd(fd) else {
        return;
    };
    loop {
        if rx.readable().await.is_err() {
            return;
        }
        let mut buf = Vec::with_capacity(max);
        match rx.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if !take(buf) {
                    return;
                }
            }
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

impl Task {
    fn new(host: driver::Host, tx: mpsc::UnboundedSender<Msg>) -> Task {
        Task {
            host,
            audit: None,
            tx,
            procs: HashMap::new(),
            ops: HashMap::new(),
            conns: HashMap::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        loop {
            let msg = match self.host.timeout() {
                Some(at) => {
                    let at = tokio::time::Instant::from_std(at);
                    tokio::select! {
                        m = rx.recv() => m,
                        () = tokio::time::sleep_until(at) => {
                            self.host.on_timeout(Instant::now());
                            self.act();
                            continue;
                        }
                    }
                }
                None => rx.recv().await,
            };
            match msg {
                None | Some(Msg::Shutdown) => break,
                Some(msg) => {
                    self.take(msg);
                    self.act();
                }
            }
        }
        self.shut_down(rx).await;
    }

    /// Closes the session, gives the processes a moment to exit, kills what is left.
    async fn shut_down(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        self.host
            .submit(&Submit::new(Op::CloseSession {}), Instant::now());
        self.act();
        for proc in self.procs.values_mut() {
            proc.stdin = None;
        }
        let grace = tokio::time::sleep(SHUTDOWN_GRACE);
        tokio::pin!(grace);
        while !self.procs.is_empty() {
            tokio::select! {
                () = &mut grace => break,
                m = rx.recv() => match m {
                    Some(Msg::Exited(proc, _)) => {
                        self.procs.remove(&proc);
                    }
                    Some(_) => {}
                    None => break,
                },
            }
        }
        for proc in self.procs.values() {
            if let Some(pid) = proc.pid {
                mcpgw_sys::process::kill_group(pid);
            }
        }
    }

    fn take(&mut self, msg: Msg) {
        let now = Instant::now();
        match msg {
            Msg::Submit {
                submit,
                progress,
                done,
                id,
            } => {
                let op = self.host.submit(&submit, now);
                self.ops.insert(op, Waiter { progress, done });
                let _ = id.send(op);
            }
            Msg::Cancel(id) => {
                self.host.cancel(id, now);
            }
            Msg::Connect {
                mcp,
                agent_id,
                session_id,
                own_upstream,
                events,
                reply,
            } => {
                let r = self
                    .host
                    .open_connection(&mcp, &agent_id, &session_id, own_upstream, now);
                if let Ok(id) = r {
                    self.conns.insert(id, events);
                }
                let _ = reply.send(r);
            }
            Msg::Send { conn, msgs, reply } => {
                let sent = msgs.iter().map(|m| self.host.send(conn, m, now)).collect();
                let _ = reply.send(sent);
            }
            Msg::CloseConnection(conn) => {
                self.host.close_connection(conn, now);
            }
            Msg::Exited(proc, exit) => {
                self.procs.remove(&proc);
                self.host.on_exit(proc, exit, now);
            }
            Msg::Data(proc, bytes) => self.host.on_data(proc, &bytes, now),
            Msg::Stderr(proc, bytes) => self.host.on_stderr(proc, &bytes, now),
            Msg::Eof(proc) => self.host.on_eof(proc, now),
            Msg::State(reply) => {
                let _ = reply.send(self.host.state_json());
            }
            Msg::Shutdown => {}
        }
    }

    fn act(&mut self) {
        while let Some(action) = self.host.poll_action() {
            match action {
                Action::Run {
                    proc,
                    program,
                    stdin,
                    timeout,
                } => self.run_command(proc, program, stdin, timeout),
                Action::Open { proc, program } => self.open_channel(proc, program),
                Action::Write { proc, bytes } => {
                    if let Some(stdin) = self.procs.get(&proc).and_then(|p| p.stdin.as_ref()) {
                        let _ = stdin.send(bytes);
                    }
                }
                Action::CloseInput { proc } => {
                    if let Some(p) = self.procs.get_mut(&proc) {
                        p.stdin = None;
                    }
                }
                Action::Kill { proc } => {
                    if let Some(pid) = self.procs.get(&proc).and_then(|p| p.pid) {
                        mcpgw_sys::process::kill_group(pid);
                    }
                }
                Action::Progress { op, chunk } => {
                    if let Some(tx) = self.ops.get(&op).and_then(|w| w.progress.as_ref()) {
                        let _ = tx.send(chunk);
                    }
                }
                Action::Done { op, result } => {
                    if let Some(w) = self.ops.remove(&op) {
                        let _ = w.done.send(result);
                    }
                }
                Action::ConnectionOpened { conn } => {
                    if let Some(tx) = self.conns.get(&conn) {
                        let _ = tx.send(ConnectionEvent::Opened);
                    }
                }
                Action::ConnectionMessage { conn, msg } => {
                    if let Some(tx) = self.conns.get(&conn) {
                        let _ = tx.send(ConnectionEvent::Message(msg));
                    }
                }
                Action::ConnectionClosed {
                    conn,
                    reason,
                    status,
                    kind,
                } => {
                    if let Some(tx) = self.conns.remove(&conn) {
                        let _ = tx.send(ConnectionEvent::Closed {
                            reason,
                            status,
                            kind,
                        });
                    }
                }
                Action::Notice(_) => {}
                Action::Audit(record) => {
                    if let Some(sink) = self.audit.as_mut() {
                        sink(&record);
                    }
                }
            }
        }
    }

    fn command(&self, argv: &[String]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        if let Some(cwd) = self.host.config().backend.cwd() {
            cmd.current_dir(cwd);
        }
        cmd
    }

    /// Spawns `program` for `proc` with `stdin`; `None` once its failure is reported as the
    /// process's exit (`opener` names what would have run shell text).
    fn spawn(
        &mut self,
        proc: ProcId,
        program: Program,
        stdin: Stdio,
        opener: &str,
    ) -> Option<(tokio::process::Child, Vec<String>)> {
        let Program::Argv(argv) = program else {
            let why = format!("this host has no {opener} for shell text");
            let _ = self.tx.send(Msg::Exited(proc, Exit::Failed(why)));
            return None;
        };
        match self.command(&argv).stdin(stdin).spawn() {
            Ok(child) => Some((child, argv)),
            Err(e) => {
                let why = format!("cannot run {}: {e}", argv[0]);
                let _ = self.tx.send(Msg::Exited(proc, Exit::Failed(why)));
                None
            }
        }
    }

    fn run_command(&mut self, proc: ProcId, program: Program, stdin: Stdin, _timeout: Duration) {
        let tx = self.tx.clone();
        let piped = match stdin {
            Stdin::Null => Stdio::null(),
            Stdin::Bytes(_) | Stdin::Hold => Stdio::piped(),
        };
        let Some((mut child, argv)) = self.spawn(proc, program, piped, "exec function") else {
            return;
        };
        self.procs.insert(
            proc,
            Proc {
                pid: child.id(),
                stdin: None,
            },
        );
        let pipe = child.stdin.take();
        tokio::spawn(async move {
            let held = match (stdin, pipe) {
                (Stdin::Bytes(bytes), Some(mut pipe)) => {
                    // A command that exits without reading all of it closes the pipe.
                    tokio::spawn(async move {
                        let _ = pipe.write_all(&bytes).await;
                    });
                    None
                }
                (Stdin::Hold, pipe) => pipe,
                _ => None,
            };
            let exit = match child.wait_with_output().await {
                Ok(out) => Exit::Exited {
                    code: exit_code(out.status),
                    stdout: out.stdout,
                    stderr: out.stderr,
                },
                Err(e) => Exit::Failed(format!("waiting for {} failed: {e}", argv[0])),
            };
            drop(held);
            let _ = tx.send(Msg::Exited(proc, exit));
        });
    }

    fn open_channel(&mut self, proc: ProcId, program: Program) {
        let tx = self.tx.clone();
        let Some((mut child, _)) = self.spawn(proc, program, Stdio::piped(), "channel opener")
        else {
            return;
        };
        let (stdin_tx, mut stdin_rx) = mpsc::unbounded_channel::<Vec<u8>>();
        self.procs.insert(
            proc,
            Proc {
                pid: child.id(),
                stdin: Some(stdin_tx),
            },
        );
        let mut stdin = child.stdin.take().expect("piped");
        tokio::spawn(async move {
            while let Some(mut bytes) = stdin_rx.recv().await {
                // Frames that queued up together (those of one `send_all`, or while the last
                // write was under way) go out in one write.
                while bytes.len() < GATHER_BYTES
                    && let Ok(more) = stdin_rx.try_recv()
                {
                    bytes.extend_from_slice(&more);
                }
                if stdin.write_all(&bytes).await.is_err() {
                    break;
                }
            }
            // Dropping it closes the channel's input.
        });
        let stdout = child.stdout.take().expect("piped");
        let out_tx = tx.clone();
        let reading = tokio::spawn(async move {
            read_pipe(stdout, READ_BYTES, |bytes| {
                out_tx.send(Msg::Data(proc, bytes)).is_ok()
            })
            .await;
            let _ = out_tx.send(Msg::Eof(proc));
        });
        let stderr = child.stderr.take().expect("piped");
        let err_tx = tx.clone();
        tokio::spawn(async move {
            read_pipe(stderr, 4096, |bytes| {
                err_tx.send(Msg::Stderr(proc, bytes)).is_ok()
            })
            .await;
        });
        tokio::spawn(async move {
            let exit = match child.wait().await {
                Ok(status) => Exit::code(exit_code(status)),
                Err(e) => Exit::Failed(format!("waiting for the channel failed: {e}")),
            };
            // Its output's end first, so the driver reads every frame before it hears of the exit.
            let _ = reading.await;
            let _ = tx.send(Msg::Exited(proc, exit));
        });
    }
}
