//! The host driver, sans-IO: one sandbox's gateway, its session channel and every decision a
//! host makes about them, shaped like quiche's connection.
//!
//! The host submits operations ([`Submit`], in the vocabulary every binding shares) and feeds in
//! what happened: a process's exit and output, bytes read from the channel, its end, the time, a
//! cancel. The driver says what to do next ([`Action`]): run this program with this stdin and
//! time limit, open a channel with this program, write these bytes, close its input, kill a
//! process, here is progress of operation N, operation N is done; and when to wake it
//! ([`Host::timeout`]). A binding is then only a loop that spawns processes, pipes bytes and
//! sets one timer, in its language's own async I/O.
//!
//! What the driver decides, once for every language:
//! - **Session or one-shot.** Once a session is opened ([`Op::OpenSession`]) every REST
//!   operation goes over its channel; an operation the channel refuses (a body larger than its
//!   frames) or never wrote (the channel died first) goes over one-shot commands instead. The
//!   launch, the stop and the install are always one-shot.
//! - **Reopening.** A channel that ends, or stays silent past its heartbeat, is opened again
//!   (with backoff, at most [`HostConfig::reopen_attempts`] failed opens in a row), unless the
//!   backend says the sandbox is gone or the gateway at the other end is another one. Resumable
//!   calls (every tool call over a session) are resumed on the new channel by their call id:
//!   the caller sees its call finish, with every progress chunk once, not a lost session. A
//!   `GET` in flight is sent again; any other request in flight fails with
//!   [`ErrorKind::SessionLost`] (it may have had effects, so it is never replayed).
//! - **Timers.** An operation's own limit, the session answer's grace, the hello's wait, the
//!   heartbeat, the wait for a channel's exit status, the close grace, the reopen backoff, and
//!   the follow-up questions of a silent exit 137.
//! - **Backends** ([`backend`]): the argv of each command and channel, the cancel wrapper, and
//!   telling a backend's failure from the command's.
//! - **Messages.** A channel's stderr is split into the backend's own lines and attach's log
//!   lines; the messages quote each for what it is.

mod audit;
pub mod backend;
mod config;
mod govern;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;

pub use backend::{
    Backend, BackendFailure, Container, EXEC_FAILED_PREFIX, EXEC_FAILED_STATUS, FailureState, Pod,
    Prefix, Program, Provider, Sdk, Stdin, Verdict,
};
pub use config::{HostConfig, OP_NAMES, Op, Submit, TransportName};

use crate::client::{Client, ExecOutput, Operation, Output};
use crate::error::{Error, ErrorKind, tail};
use crate::secret::Secrets;
use crate::session::{AttachOptions, Event, Session};
use crate::wire::frame::{CallId, Hello};

/// The id of an operation or a virtual connection, given by [`Host::submit`] and
/// [`Host::open_connection`].
pub type Id = u64;

/// The id of a process the driver asked the host to run ([`Action::Run`], [`Action::Open`]).
pub type ProcId = u64;

/// How long a channel's exit status is awaited once its output ended, for the message.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// How long a container that still runs after a silent exit 137 is asked about again: the exec
/// of a container being killed can end before the daemon marks it stopped (more than a second
/// later on a loaded machine; a command's own exit 137 is then reported that much later).
const ASK_FOR: Duration = Duration::from_secs(3);
/// How often it is asked.
const ASK_EVERY: Duration = Duration::from_millis(50);
/// The time limit of one question.
const QUESTION_LIMIT: Duration = Duration::from_secs(10);
/// The first wait before a channel is opened again after a failed open, doubled each time.
const REOPEN_BACKOFF: Duration = Duration::from_millis(200);
/// The longest wait between two opens.
const REOPEN_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How much of a channel's stderr is kept, per kind of line, for messages.
const STDERR_KEEP: usize = 4096;

/// What the host should do next.
#[derive(Debug)]
pub enum Action {
    /// Run a program to its end: a one-shot command, or a question about the sandbox. Report
    /// its end with [`Host::on_exit`], whatever happens (a program that cannot be started is
    /// [`Exit::Failed`]). Kill it (its whole process group) on [`Action::Kill`].
    Run {
        /// The process's id.
        proc: ProcId,
        /// What to run.
        program: Program,
        /// Its standard input.
        stdin: Stdin,
        /// How long it may run (the driver also keeps this time and kills it).
        timeout: Duration,
    },
    /// Start a long-lived program with stdin, stdout and stderr piped: the session channel.
    /// Feed its stdout to [`Host::on_data`] and its end to [`Host::on_eof`], its stderr to
    /// [`Host::on_stderr`], and its exit to [`Host::on_exit`].
    Open {
        /// The process's id.
        proc: ProcId,
        /// What to run.
        program: Program,
    },
    /// Write these bytes to the channel's stdin, in order.
    Write {
        /// The channel's process.
        proc: ProcId,
        /// The bytes.
        bytes: Vec<u8>,
    },
    /// Close the channel's stdin (attach then ends what it carried and exits).
    CloseInput {
        /// The channel's process.
        proc: ProcId,
    },
    /// Kill the process and everything it started (its process group); then report its exit.
    Kill {
        /// The process.
        proc: ProcId,
    },
    /// A progress chunk of streamed operation `op` (a ToolChunk's JSON).
    Progress {
        /// The operation.
        op: Id,
        /// The chunk, as the gateway sent it.
        chunk: Box<RawValue>,
    },
    /// Operation `op` finished; each operation gets exactly one.
    Done {
        /// The operation.
        op: Id,
        /// Its result.
        result: Result<Output, Error>,
    },
    /// Connection `conn` is open.
    ConnectionOpened {
        /// The connection.
        conn: Id,
    },
    /// A JSON-RPC message for connection `conn`.
    ConnectionMessage {
        /// The connection.
        conn: Id,
        /// The message, as the gateway sent it.
        msg: Box<RawValue>,
    },
    /// Connection `conn` ended; each connection gets exactly one.
    ConnectionClosed {
        /// The connection.
        conn: Id,
        /// Why, unless the host closed it.
        reason: Option<String>,
        /// The HTTP status of a refused open (404: no such MCP).
        status: Option<u16>,
        /// What kind of failure the end is, unless the host closed it (see
        /// [`crate::session::Event::ConnectionClosed`]).
        kind: Option<ErrorKind>,
    },
    /// Something worth a log line (a frame for a call no longer in flight, a channel reopened).
    Notice(String),
    /// The audit record of a call that ended (JSON; see [`audit`]), when the configuration's
    /// `audit` is on: one per call, before the call's own end is reported.
    Audit(String),
}

/// How a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status (128 + N when signal N ended it) and wrote this (a channel's
    /// output and stderr were fed as they came: leave them empty).
    Exited {
        /// The exit status.
        code: i32,
        /// Its stdout.
        stdout: Vec<u8>,
        /// Its stderr.
        stderr: Vec<u8>,
    },
    /// It could not be run, or the host's exec function failed (the reason).
    Failed(String),
}

impl Exit {
    /// A process that exited with `code` and printed nothing (a channel's exit).
    pub fn code(code: i32) -> Exit {
        Exit::Exited {
            code,
            stdout: Vec::new(),
            stderr: Vec::new(),
        }
    }
}

/// The session's state, for the host's information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionState {
    /// No session: operations go one-shot.
    Off,
    /// The channel is opening (waiting for its hello), or about to be opened again.
    Opening,
    /// The channel is open.
    Open(Hello),
}

/// What an operation is.
enum Job {
    Op(Box<Operation<Output>>),
    /// A REST operation submitted while a session is opening and no gateway is known yet (the
    /// channel is launching one): it is prepared once the hello says which gateway answers.
    Later(Box<Submit>),
    OpenSession,
    CloseSession,
}

/// Where an operation is.
#[derive(Debug)]
enum Place {
    /// Waiting for the channel (being opened again, or for its hello).
    Waiting,
    /// Running a one-shot command.
    Command(ProcId),
    /// Its command exited 137 silently: asking whether the sandbox still runs.
    Asking {
        proc: Option<ProcId>,
        out: ExecOutput,
        until: Instant,
        again_at: Option<Instant>,
    },
    /// Carried by the channel under this session id.
    Session(u64),
    /// A resumable call whose channel was lost, waiting for a new one.
    Detached { call: CallId, chunks: u64 },
}

struct Entry {
    job: Job,
    stream: bool,
    place: Place,
    /// When the current step gives up: a command's limit, a session answer's limit.
    deadline: Option<Instant>,
    /// The call's id, for a resumable call.
    call: Option<CallId>,
    /// What carries the call on the channel, which says what its answer means.
    carry: Carry,
    /// The scope (agent, MCP) whose policy filters a tool list.
    filter: Option<(String, String)>,
    /// The audit of a call, when audit is on.
    audit: Option<audit::Started>,
    /// Whether its request holds a secret's value: it goes over the session channel or not at
    /// all (never in a command's text).
    sealed: bool,
}

/// What carries a call on the session channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Carry {
    /// Its own request.
    Request,
    /// A resume: 404 says the gateway never saw the call, 410 that it keeps it no more.
    Resume,
    /// Its request sent again after a resume's 404: 409 says the first reached the gateway
    /// after all.
    RequestAgain,
}

/// Who a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Command(Id),
    Question(Id),
    Channel,
    ChannelQuestion,
    /// A channel given up on: its remaining events are ignored.
    Retired,
}

/// The last bytes of one kind of a channel's stderr lines.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    fn push(&mut self, line: &[u8]) {
        self.0.extend_from_slice(line);
        self.0.push(b'\n');
        if self.0.len() > 2 * STDERR_KEEP {
            self.0.drain(..self.0.len() - STDERR_KEEP);
        }
    }

    fn text(&self) -> String {
        tail(&String::from_utf8_lossy(&self.0), STDERR_KEEP)
    }
}

/// Whether a stderr line is one of attach's own log lines (`2026-12-01T10:00:00.123Z  INFO ...`
/// or `{"timestamp":...,"level":...}`), as opposed to the backend's or the shell's.
fn is_attach_log(line: &[u8]) -> bool {
    let line = line.trim_ascii_start();
    if line.starts_with(b"{\"timestamp\"") || line.starts_with(b"mcpgw-gateway attach:") {
        return line.starts_with(b"{");
    }
    line.len() > 20
        && line[..4].iter().all(u8::is_ascii_digit)
        && line[4] == b'-'
        && line[10] == b'T'
        && [b"TRACE", b"DEBUG", b" INFO", b" WARN", b"ERROR"]
            .iter()
            .any(|level| line[..line.len().min(40)].windows(5).any(|w| w == *level))
}

/// A heartbeat agreed at the hello.
#[derive(Debug, Clone, Copy)]
struct Heartbeat {
    every: Duration,
    timeout: Duration,
}

struct Channel {
    proc: ProcId,
    session: Session,
    /// Session ids to operation and connection ids.
    by_sid: HashMap<u64, Id>,
    opened: bool,
    /// Whether the open command launches the gateway (`attach --launch`).
    launching: bool,
    open_deadline: Instant,
    heartbeat: Option<Heartbeat>,
    last_rx: Instant,
    last_tx: Instant,
    backend_err: Tail,
    attach_log: Tail,
    err_partial: Vec<u8>,
    eof: bool,
    exit: Option<Exit>,
    end_deadline: Option<Instant>,
    /// Asking whether the sandbox still runs, after the channel exited 137.
    question: Option<ProcId>,
    /// The driver is finishing with the channel (its session's loss is expected).
    ending: bool,
}

/// A virtual connection.
struct Conn {
    sid: u64,
    /// What the host's policy needs of it.
    screen: govern::Screen,
}

/// Whether a session is wanted, and the state of opening it again.
enum Want {
    Off,
    On {
        /// Whether a channel of this session ever opened: a first open that fails is
        /// reported, not tried again.
        ever_opened: bool,
        /// Opens that failed in a row (the hello never came).
        failures: u32,
        /// When to open the channel again.
        reopen_at: Option<Instant>,
        /// Why the last channel ended.
        last_error: Option<Error>,
    },
}

/// The host driver of one sandbox's gateway. `Send`; not for concurrent use (wrap it in a
/// mutex, or own it in one task).
pub struct Host {
    client: Client,
    config: HostConfig,
    next: u64,
    ops: HashMap<Id, Entry>,
    procs: HashMap<ProcId, Role>,
    channel: Option<Channel>,
    want: Want,
    conns: HashMap<Id, Conn>,
    /// Channels whose input was closed, and when they are killed if still running.
    retired: Vec<(ProcId, Instant)>,
    /// Calls resumed on a new channel, since the start.
    resumed: u64,
    actions: VecDeque<Action>,
    /// The secrets specs name, and the redaction of their values.
    secrets: Secrets,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("backend", &self.config.backend)
            .field("ops", &self.ops.len())
            .field("procs", &self.procs.len())
            .field("session", &self.session_state())
            .finish()
    }
}

impl Host {
    /// A driver with `config`; checks it, runs nothing.
    pub fn new(config: HostConfig) -> Result<Host, Error> {
        config.validate()?;
        let client = Client::new(config.client_config())?;
        let secrets = config.secrets.secrets()?;
        Ok(Host {
            client,
            config,
            next: 1,
            ops: HashMap::new(),
            procs: HashMap::new(),
            channel: None,
            want: Want::Off,
            conns: HashMap::new(),
            retired: Vec::new(),
            resumed: 0,
            actions: VecDeque::new(),
            secrets,
        })
    }

    /// The client: what the driver has learned of its gateway.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The configuration.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// The session's state.
    pub fn session_state(&self) -> SessionState {
        match (&self.want, &self.channel) {
            (Want::Off, _) => SessionState::Off,
            (_, Some(c)) => match c.session.hello() {
                Some(h) if c.opened => SessionState::Open(h.clone()),
                _ => SessionState::Opening,
            },
            (_, None) => SessionState::Opening,
        }
    }

    /// What the driver knows, as JSON: `{"session": "off"|"opening"|"open", "gateway": {port,
    /// pid, token_file, instance_nonce, state_dir} or null, "hello": {...} or null, "resumed":
    /// calls resumed on a new channel so far}`.
    pub fn state_json(&self) -> String {
        let (session, hello) = match self.session_state() {
            SessionState::Off => ("off", None),
            SessionState::Opening => ("opening", None),
            SessionState::Open(h) => ("open", Some(h)),
        };
        serde_json::json!({
            "session": session,
            "gateway": self.client.gateway(),
            "hello": hello,
            "resumed": self.resumed,
        })
        .to_string()
    }

    /// How many operations, connections and processes are under way.
    pub fn in_flight(&self) -> usize {
        self.ops.len() + self.conns.len() + self.procs.len()
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next;
        self.next += 1;
        id
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The next action, if any. Once a secret is in use, the text of every action from the
    /// sandbox has its value replaced by `[secret:NAME]` (see [`crate::secret`]).
    pub fn poll_action(&mut self) -> Option<Action> {
        let action = self.actions.pop_front()?;
        let r = self.secrets.redactor();
        if r.is_empty() {
            return Some(action);
        }
        let text = |mut t: String| {
            r.redact_in_place(&mut t);
            t
        };
        Some(match action {
            Action::Done { op, result: Err(e) } => Action::Done {
                op,
                result: Err(e.redacted(r)),
            },
            Action::Notice(t) => Action::Notice(text(t)),
            Action::Audit(t) => Action::Audit(text(t)),
            Action::ConnectionClosed {
                conn,
                reason,
                status,
                kind,
            } => Action::ConnectionClosed {
                conn,
                reason: reason.map(text),
                status,
                kind,
            },
            other => other,
        })
    }

    /// Gives the value of secret `name`, which a spec's `{"secret": "NAME"}` then resolves to
    /// (before the host's environment variable of that name). The value must be at least
    /// [`crate::wire::spec::MIN_SECRET_BYTES`] long.
    pub fn set_secret(&mut self, name: &str, value: &str) -> Result<(), Error> {
        self.secrets
            .set(name, value)
            .map_err(Error::invalid_argument)
    }

    /// Resolves the secrets an `add_mcp` spec names; `Ok(None)` when it names none.
    fn seal(&mut self, submit: &Submit) -> Result<Option<Submit>, Error> {
        let Op::AddMcp { spec } = &submit.op else {
            return Ok(None);
        };
        let mut spec = spec.clone();
        let named = self
            .secrets
            .resolve_spec(&mut spec)
            .map_err(|e| Error::invalid_argument(format!("the MCP spec is invalid: {e}")))?;
        if !named {
            return Ok(None);
        }
        if let Some(channel) = self.channel.as_mut() {
            channel
                .session
                .set_redactor(self.secrets.redactor().clone());
        }
        Ok(Some(Submit {
            op: Op::AddMcp { spec },
            ..submit.clone()
        }))
    }

    /// Submits an operation; every id gets exactly one [`Action::Done`] (an operation that
    /// cannot be prepared gets it at once, with the reason).
    pub fn submit(&mut self, submit: &Submit, now: Instant) -> Id {
        if matches!(submit.op, Op::StopGateway {}) {
            self.end_session(now);
        }
        let id = self.take_id();
        let audit = self
            .config
            .audit
            .then(|| govern::started_op(submit, id, self.config.audit_arguments, now))
            .flatten();
        let (sealed, refused) = match self.seal(submit) {
            Ok(s) => (s, govern::refused_op(&self.config.policy, submit)),
            Err(e) => (None, Some(e)),
        };
        let sealed_op = sealed.is_some();
        let submit = sealed.as_ref().unwrap_or(submit);
        if sealed_op && matches!(self.want, Want::Off) {
            return self.fail_at_once(
                id,
                Error::invalid_argument(
                    "a spec that names a secret is registered over the session channel only: \
                     open the session first (open_session)",
                ),
            );
        }
        if let Some(refused) = refused {
            let result = Err(refused);
            if let Some(started) = audit {
                let record = govern::op_record(&started, &result, now);
                self.actions.push_back(Action::Audit(record));
            }
            self.actions.push_back(Action::Done { op: id, result });
            return id;
        }
        let job = if submit.is_rest() && self.awaits_gateway() {
            Job::Later(Box::new(submit.clone()))
        } else {
            match submit.prepare(&self.client) {
                Some(op) => Job::Op(Box::new(op)),
                None if matches!(submit.op, Op::OpenSession {}) => Job::OpenSession,
                None => Job::CloseSession,
            }
        };
        self.ops.insert(
            id,
            Entry {
                job,
                stream: submit.stream,
                place: Place::Waiting,
                deadline: None,
                call: None,
                carry: Carry::Request,
                filter: govern::list_filter(&self.config.policy, submit),
                audit,
                sealed: sealed_op,
            },
        );
        self.dispatch(id, now);
        id
    }

    /// [`Host::submit`] of an operation given as JSON; fails only for JSON that is not an
    /// operation.
    pub fn submit_json(&mut self, json: &str, now: Instant) -> Result<Id, Error> {
        let submit = Submit::from_json(json)?;
        Ok(self.submit(&submit, now))
    }

    /// Ends operation `id`, which nothing started, with `error`.
    fn fail_at_once(&mut self, id: Id, error: Error) -> Id {
        self.actions.push_back(Action::Done {
            op: id,
            result: Err(error),
        });
        id
    }

    /// Submits an operation prepared on [`Host::client`] (Rust hosts that want typed
    /// operations); see [`Host::submit`]. A prepared operation is past the host's rules: with a
    /// policy or the audit on, one that reaches an MCP fails at once with INVALID_ARGUMENT
    /// (submit it with [`Host::submit`] instead), rather than bypass them.
    pub fn submit_operation(&mut self, op: Operation<Output>, stream: bool, now: Instant) -> Id {
        if op.name() == "stop_gateway" {
            self.end_session(now);
        }
        let id = self.take_id();
        let governed = !self.config.policy.is_empty() || self.config.audit;
        if governed && matches!(op.name(), "call_tool" | "list_tools" | "add_mcp") {
            let e = Error::invalid_argument(format!(
                "{}: a prepared operation would bypass the host's policy and audit: submit it as \
                 an operation (Host::submit)",
                op.name()
            ));
            return self.fail_at_once(id, e);
        }
        self.ops.insert(
            id,
            Entry {
                job: Job::Op(Box::new(op)),
                stream,
                place: Place::Waiting,
                deadline: None,
                call: None,
                carry: Carry::Request,
                filter: None,
                audit: None,
                sealed: false,
            },
        );
        self.dispatch(id, now);
        id
    }

    fn done(&mut self, id: Id, mut result: Result<Output, Error>) {
        if let Some(entry) = self.ops.remove(&id) {
            if let Some(scope) = &entry.filter {
                govern::filter_tools(&self.config.policy, scope, &mut result);
            }
            if let Some(started) = &entry.audit {
                let record = govern::op_record(started, &result, Instant::now());
                self.actions.push_back(Action::Audit(record));
            }
            if let Place::Command(proc)
            | Place::Asking {
                proc: Some(proc), ..
            } = entry.place
            {
                self.kill(proc);
            }
            self.actions.push_back(Action::Done { op: id, result });
        }
    }

    fn kill(&mut self, proc: ProcId) {
        if self.procs.remove(&proc).is_some() {
            self.actions.push_back(Action::Kill { proc });
        }
    }

    /// Whether REST operations must wait for the session's hello to learn their gateway: a
    /// session is wanted and the client knows no gateway (the channel launches one).
    fn awaits_gateway(&self) -> bool {
        matches!(self.want, Want::On { .. }) && self.client.port().is_none()
    }

    /// Decides where operation `id` goes now.
    fn dispatch(&mut self, id: Id, now: Instant) {
        let awaits_gateway = self.awaits_gateway();
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        if let Job::Later(submit) = &entry.job {
            if awaits_gateway {
                entry.place = Place::Waiting;
                return;
            }
            let op = submit.prepare(&self.client).expect("a REST operation");
            entry.job = Job::Op(Box::new(op));
        }
        match &mut entry.job {
            Job::Later(_) => unreachable!("prepared above"),
            Job::OpenSession => return self.open_session(id, now),
            Job::CloseSession => return self.close_session(id, now),
            Job::Op(op) => {
                if op.is_finished() {
                    let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                        Job::Op(op) => op,
                        _ => unreachable!(),
                    };
                    return self.done(id, op.finish());
                }
            }
        }
        let rest = matches!(&entry.job, Job::Op(op) if op.is_rest() && op.command().is_some());
        if rest && matches!(self.want, Want::On { .. }) {
            if self.channel.is_some() {
                if self.send_over_channel(id, now) {
                    return;
                }
            } else {
                // The channel is being opened again: wait for it.
                entry.place = Place::Waiting;
                return;
            }
        }
        if self.ops.get(&id).is_some_and(|e| e.sealed) {
            let e = Error::new(
                ErrorKind::SessionLost,
                "a spec that names a secret goes over the session channel only, and the channel \
                 did not take it",
            );
            return self.done(id, Err(e));
        }
        self.run_command(id, now);
    }

    /// Puts operation `id` on the channel; false when the channel refused it.
    fn send_over_channel(&mut self, id: Id, now: Instant) -> bool {
        let grace = Self::ms(self.config.answer_grace_ms);
        let (Some(channel), Some(entry)) = (self.channel.as_mut(), self.ops.get_mut(&id)) else {
            return false;
        };
        let Job::Op(op) = &mut entry.job else {
            return false;
        };
        let call = (op.name() == "call_tool").then(CallId::random);
        match channel.session.submit(op, entry.stream, call.clone()) {
            Ok(sid) => {
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.deadline = Some(now + op.session_limit() + grace);
                entry.call = call;
                self.flush(now);
                true
            }
            Err(e) => {
                self.actions.push_back(Action::Notice(format!(
                    "{e}; it goes over one-shot commands"
                )));
                false
            }
        }
    }

    /// Starts operation `id`'s next one-shot command, or finishes it.
    fn run_command(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        let Some(command) = op.command() else {
            let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                Job::Op(op) => op,
                _ => unreachable!(),
            };
            return self.done(id, op.finish());
        };
        let (program, stdin) = self
            .config
            .backend
            .command(&command.text, command.stdin.clone());
        let timeout = command.timeout;
        let proc = self.next;
        self.next += 1;
        entry.place = Place::Command(proc);
        entry.deadline = Some(now + timeout);
        self.procs.insert(proc, Role::Command(id));
        self.actions.push_back(Action::Run {
            proc,
            program,
            stdin,
            timeout,
        });
    }

    /// Hands operation `id` what its command did, and moves it on.
    fn complete(&mut self, id: Id, result: Result<ExecOutput, Error>, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        entry.place = Place::Waiting;
        entry.deadline = None;
        match result {
            Ok(mut out) => {
                let r = self.secrets.redactor();
                r.redact_bytes_in_place(&mut out.stdout);
                r.redact_bytes_in_place(&mut out.stderr);
                let _ = op.complete(Ok(out));
            }
            Err(e) => op.abandon(e),
        }
        self.run_command(id, now);
    }

    /// Cancels operation `id` (its command is killed; over a session the gateway cancels it
    /// upstream); it finishes with [`ErrorKind::Cancelled`]. Returns whether it was under way.
    pub fn cancel(&mut self, id: Id, now: Instant) -> bool {
        let Some(entry) = self.ops.get(&id) else {
            return false;
        };
        if let (Place::Session(sid), Some(channel)) = (&entry.place, self.channel.as_mut()) {
            channel.session.cancel(*sid);
            channel.by_sid.remove(sid);
            self.flush(now);
        }
        let e = Error::new(
            ErrorKind::Cancelled,
            "the operation was cancelled; the gateway was told to cancel it upstream",
        );
        self.fail(id, e);
        true
    }

    /// Ends operation `id` with `error`.
    fn fail(&mut self, id: Id, error: Error) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let result = match &mut entry.job {
            Job::Op(op) => {
                op.abandon(error.clone());
                let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                    Job::Op(op) => op,
                    _ => unreachable!(),
                };
                op.finish()
            }
            _ => Err(error),
        };
        self.done(id, result);
    }

    // ---- one-shot processes ----

    /// A process the driver started ended: a one-shot command, a question, or the channel.
    pub fn on_exit(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        let Some(role) = self.procs.remove(&proc) else {
            return;
        };
        match role {
            Role::Command(id) => self.command_exited(id, exit, now),
            Role::Question(id) => self.question_answered(id, exit, now),
            Role::Channel => {
                // Still registered until the channel is finished with.
                self.procs.insert(proc, Role::Channel);
                self.channel_exited(proc, exit, now);
            }
            Role::ChannelQuestion => self.channel_question_answered(proc, exit, now),
            Role::Retired => {}
        }
    }

    fn command_exited(&mut self, id: Id, exit: Exit, now: Instant) {
        match exit {
            Exit::Failed(reason) if self.config.backend.judge_failed(&reason).is_some() => {
                let f = self.config.backend.judge_failed(&reason).expect("judged");
                self.complete(id, Err(Error::backend_failed(f)), now)
            }
            Exit::Failed(reason) => {
                let e = Error::new(
                    ErrorKind::ExecFailed,
                    format!(
                        "{} could not run a command in the sandbox ({}); is the sandbox alive \
                         and the backend reachable?",
                        match &self.config.backend {
                            Backend::Exec { .. } => "the exec function".to_owned(),
                            b if b.runs_through_binding() => format!("the {} SDK", b.name()),
                            b => format!("{:?}", b.name()),
                        },
                        reason.trim()
                    ),
                );
                self.complete(id, Err(e), now)
            }
            Exit::Exited {
                code,
                stdout,
                stderr,
            } => match self.config.backend.judge(code, &stdout, &stderr, false) {
                Verdict::Command => self.complete(
                    id,
                    Ok(ExecOutput {
                        exit_code: code,
                        stdout,
                        stderr,
                    }),
                    now,
                ),
                Verdict::Failed(f) => self.complete(id, Err(Error::backend_failed(f)), now),
                Verdict::Ask(question) => {
                    let proc = self.ask(question, Role::Question(id));
                    if let Some(entry) = self.ops.get_mut(&id) {
                        entry.place = Place::Asking {
                            proc: Some(proc),
                            out: ExecOutput {
                                exit_code: code,
                                stdout,
                                stderr,
                            },
                            until: now + ASK_FOR,
                            again_at: None,
                        };
                        entry.deadline = None;
                    }
                }
            },
        }
    }

    fn ask(&mut self, question: Vec<String>, role: Role) -> ProcId {
        let proc = self.take_id();
        self.procs.insert(proc, role);
        self.actions.push_back(Action::Run {
            proc,
            program: Program::Argv(question),
            stdin: Stdin::Null,
            timeout: QUESTION_LIMIT,
        });
        proc
    }

    fn question_answered(&mut self, id: Id, exit: Exit, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Place::Asking {
            proc, out, until, ..
        } = &mut entry.place
        else {
            return;
        };
        *proc = None;
        let (answer_exit, answer) = match &exit {
            Exit::Exited { code, stdout, .. } => (*code, stdout.as_slice()),
            Exit::Failed(_) => (-1, &b""[..]),
        };
        match self
            .config
            .backend
            .judge_answer(out.exit_code, answer_exit, answer)
        {
            Some(failure) => self.complete(id, Err(Error::backend_failed(failure)), now),
            None if now < *until => {
                if let Place::Asking { again_at, .. } = &mut entry.place {
                    *again_at = Some(now + ASK_EVERY);
                }
            }
            None => {
                let out = std::mem::take(out);
                self.complete(id, Ok(out), now)
            }
        }
    }

    // ---- the session channel ----

    fn attach_options(&self) -> AttachOptions {
        AttachOptions {
            heartbeat: (self.config.heartbeat_ms > 0).then(|| Self::ms(self.config.heartbeat_ms)),
            heartbeat_timeout: (self.config.heartbeat_timeout_ms > 0)
                .then(|| Self::ms(self.config.heartbeat_timeout_ms)),
        }
    }

    fn open_session(&mut self, id: Id, now: Instant) {
        if matches!(self.want, Want::Off) {
            self.want = Want::On {
                ever_opened: false,
                failures: 0,
                reopen_at: None,
                last_error: None,
            };
        }
        if let Some(entry) = self.ops.get_mut(&id) {
            entry.place = Place::Waiting;
            entry.deadline = Some(now + Self::ms(self.config.open_timeout_ms));
        }
        match &self.channel {
            Some(c) if c.opened => {
                let hello = c.session.hello().cloned().expect("opened");
                self.done(id, Ok(Output::Session(hello)));
            }
            Some(_) => {}
            None => self.start_channel(now),
        }
    }

    /// Starts a channel (the session is wanted and none runs); operations waiting for it and
    /// detached calls go onto it at once (it holds them until its hello).
    fn start_channel(&mut self, now: Instant) {
        let (mut session, command) = match Session::open_with(&self.client, &self.attach_options())
        {
            Ok(s) => s,
            Err(e) => return self.give_up(e, now),
        };
        session.set_redactor(self.secrets.redactor().clone());
        let launching = command.text.ends_with(" --launch");
        let program = self.config.backend.channel(&command.text);
        let proc = self.take_id();
        self.procs.insert(proc, Role::Channel);
        self.actions.push_back(Action::Open { proc, program });
        if let Want::On { reopen_at, .. } = &mut self.want {
            *reopen_at = None;
        }
        self.channel = Some(Channel {
            proc,
            session,
            by_sid: HashMap::new(),
            opened: false,
            launching,
            open_deadline: now + Self::ms(self.config.open_timeout_ms),
            heartbeat: None,
            last_rx: now,
            last_tx: now,
            backend_err: Tail::default(),
            attach_log: Tail::default(),
            err_partial: Vec::new(),
            eof: false,
            exit: None,
            end_deadline: None,
            question: None,
            ending: false,
        });
        let mut waiting: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| {
                matches!(e.place, Place::Waiting | Place::Detached { .. })
                    && matches!(e.job, Job::Op(_))
            })
            .map(|(id, _)| *id)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            self.put_on_new_channel(id, now);
        }
    }

    /// Puts a waiting operation, or a detached call, on the channel just started.
    fn put_on_new_channel(&mut self, id: Id, now: Instant) {
        let grace = Self::ms(self.config.answer_grace_ms);
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        match std::mem::replace(&mut entry.place, Place::Waiting) {
            Place::Detached { call, chunks } => {
                let channel = self.channel.as_mut().expect("just started");
                let Job::Op(op) = &entry.job else { return };
                let sid = channel
                    .session
                    .resume(op.name(), call.clone(), chunks, entry.stream);
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.carry = Carry::Resume;
                self.resumed += 1;
                // The call's own deadline is the gateway's; the answer's limit starts anew.
                entry.deadline = Some(now + op.session_limit() + grace);
            }
            Place::Waiting => {
                let Job::Op(op) = &entry.job else { return };
                match op.session_request(entry.stream) {
                    // A GET that was in flight on the lost channel: sent again.
                    Some(request) => {
                        let channel = self.channel.as_mut().expect("just started");
                        let sid = channel.session.submit_request(request, None);
                        channel.by_sid.insert(sid, id);
                        entry.place = Place::Session(sid);
                        entry.deadline = Some(now + op.session_limit() + grace);
                    }
                    None => self.dispatch(id, now),
                }
            }
            other => entry.place = other,
        }
    }

    fn close_session(&mut self, id: Id, now: Instant) {
        self.end_session(now);
        self.done(id, Ok(Output::Done));
    }

    /// Ends the session, if one is wanted: what its channel carries is cancelled or lost, the
    /// channel's input is closed, and later operations go one-shot. Stopping the gateway ends it
    /// first: its attach would outlive the gateway it relays to.
    fn end_session(&mut self, now: Instant) {
        if matches!(self.want, Want::Off) && self.channel.is_none() {
            return;
        }
        self.want = Want::Off;
        if let Some(channel) = self.channel.as_mut() {
            channel.ending = true;
            // Resumable calls would outlive the channel: the host asked for an end, so they
            // are cancelled in the gateway, and end as lost.
            let sids: Vec<(u64, Id)> = channel.by_sid.iter().map(|(s, i)| (*s, *i)).collect();
            let mut cancelled = Vec::new();
            for (sid, op) in sids {
                if self.ops.get(&op).is_some_and(|e| e.call.is_some()) {
                    channel.session.cancel(sid);
                    channel.by_sid.remove(&sid);
                    cancelled.push(op);
                }
            }
            self.flush(now);
            let channel = self.channel.as_mut().expect("checked");
            channel.session.close();
            self.drain_session(now);
            for op in cancelled {
                self.fail(
                    op,
                    Error::new(ErrorKind::SessionLost, "the session was closed by the host"),
                );
            }
            if let Some(channel) = self.channel.take() {
                self.retire(channel, now, true);
            }
        }
        // Detached calls were the old channel's: they end with it.
        self.settle_all_waiting(None, now);
    }

    /// Retires `channel`: its process is told to end (closing its input, or killed), and its
    /// later events are ignored.
    fn retire(&mut self, channel: Channel, now: Instant, gently: bool) {
        let proc = channel.proc;
        if let Some(q) = channel.question {
            self.kill(q);
        }
        let running = channel.exit.is_none();
        if running {
            self.procs.insert(proc, Role::Retired);
            self.actions.push_back(if gently {
                Action::CloseInput { proc }
            } else {
                Action::Kill { proc }
            });
            if gently {
                // Killed for sure after the grace: see `on_timeout`.
                self.retired
                    .push((proc, now + Self::ms(self.config.close_grace_ms)));
            }
        } else {
            self.procs.remove(&proc);
        }
    }

    /// Writes what the session has to send.
    fn flush(&mut self, now: Instant) {
        if let Some(channel) = self.channel.as_mut() {
            let bytes = channel.session.take_output();
            if !bytes.is_empty() {
                channel.last_tx = now;
                self.actions.push_back(Action::Write {
                    proc: channel.proc,
                    bytes,
                });
            }
        }
    }

    /// Bytes the channel printed on its stdout.
    pub fn on_data(&mut self, proc: ProcId, bytes: &[u8], now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.last_rx = now;
        channel.session.feed(bytes);
        self.drain_session(now);
        self.flush(now);
    }

    /// Bytes the channel printed on its stderr (kept for messages, never shown as output).
    pub fn on_stderr(&mut self, proc: ProcId, bytes: &[u8], _now: Instant) {
        // Also a retired channel's: its last words may still come.
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.err_partial.extend_from_slice(bytes);
        while let Some(at) = channel.err_partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = channel.err_partial.drain(..=at).collect();
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            if is_attach_log(line) {
                channel.attach_log.push(line);
            } else {
                channel.backend_err.push(line);
            }
        }
        if channel.err_partial.len() > STDERR_KEEP {
            let rest = std::mem::take(&mut channel.err_partial);
            channel.backend_err.push(&rest[..STDERR_KEEP]);
        }
    }

    /// The channel's stdout ended.
    pub fn on_eof(&mut self, proc: ProcId, now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.eof = true;
        if channel.exit.is_some() {
            self.finish_channel(now);
        } else {
            channel.end_deadline = Some(now + EXIT_WAIT);
        }
    }

    fn channel_exited(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        if self.channel.as_ref().is_none_or(|c| c.proc != proc) {
            self.procs.remove(&proc);
            return;
        }
        if let Exit::Exited { stderr, .. } = &exit
            && !stderr.is_empty()
        {
            let stderr = stderr.clone();
            self.on_stderr(proc, &stderr, now);
        }
        let channel = self.channel.as_mut().expect("checked");
        channel.exit = Some(exit);
        if channel.eof {
            self.finish_channel(now);
        } else {
            // Something in the sandbox may still hold its stdout: the output is given a moment.
            channel.end_deadline = Some(now + EXIT_WAIT);
        }
    }

    /// The channel ended (its output and its process, or the wait for them): says why, or
    /// asks the backend first when the exit status cannot tell.
    fn finish_channel(&mut self, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        if channel.question.is_some() {
            return;
        }
        channel.end_deadline = None;
        if !channel.err_partial.is_empty() {
            let rest = std::mem::take(&mut channel.err_partial);
            channel.backend_err.push(&rest);
        }
        let stderr = channel.backend_err.0.clone();
        let verdict = match &channel.exit {
            Some(Exit::Exited { code, .. }) => self.config.backend.judge(*code, b"", &stderr, true),
            Some(Exit::Failed(reason)) => match self.config.backend.judge_failed(reason) {
                Some(f) => Verdict::Failed(f),
                None => Verdict::Command,
            },
            None => Verdict::Command,
        };
        match verdict {
            Verdict::Ask(question) => {
                let q = self.ask(question, Role::ChannelQuestion);
                if let Some(channel) = self.channel.as_mut() {
                    channel.question = Some(q);
                }
            }
            Verdict::Failed(f) => self.channel_lost(Some(f), now),
            Verdict::Command => self.channel_lost(None, now),
        }
    }

    fn channel_question_answered(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.question == Some(proc)) else {
            return;
        };
        channel.question = None;
        let code = match &channel.exit {
            Some(Exit::Exited { code, .. }) => *code,
            _ => 137,
        };
        let (answer_exit, answer) = match &exit {
            Exit::Exited { code, stdout, .. } => (*code, stdout.as_slice()),
            Exit::Failed(_) => (-1, &b""[..]),
        };
        let failure = self.config.backend.judge_answer(code, answer_exit, answer);
        self.channel_lost(failure, now);
    }

    /// The message of a channel that ended: its exit, the backend's words, attach's last.
    fn end_reason(channel: &Channel, backend: &Backend) -> String {
        let mut parts = Vec::new();
        match &channel.exit {
            Some(Exit::Exited { code, .. }) => {
                parts.push(format!("{} exited {code}", backend.name()))
            }
            Some(Exit::Failed(reason)) => parts.push(reason.trim().to_owned()),
            None => parts.push(format!("{} did not exit", backend.name())),
        }
        let said = channel.backend_err.text();
        if !said.is_empty() {
            parts.push(said);
        }
        let mut reason = parts.join(": ");
        let logged = channel.attach_log.text();
        if !logged.is_empty() {
            let last = logged.lines().last().unwrap_or("").trim().to_owned();
            reason.push_str(&format!("; attach's last log line: {last}"));
        }
        reason
    }

    /// The channel is gone, for `failure` of the backend or for its own reasons: every
    /// operation it carried is settled, and the session is opened again when it can be.
    fn channel_lost(&mut self, failure: Option<BackendFailure>, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        let reason = Self::end_reason(channel, &self.config.backend);
        let code = match &channel.exit {
            Some(Exit::Exited { code, .. }) => Some(*code),
            _ => None,
        };
        let error = if !channel.opened {
            let said = channel.backend_err.text();
            let e = channel.session.eof_error(&reason);
            match (&failure, code) {
                (Some(f), _) => Error::backend_failed(f.clone()),
                (None, Some(126 | 127)) | (None, _)
                    if said.contains("cannot launch") || code.is_some_and(|c| c >= 126) =>
                {
                    let kind = if channel.launching {
                        ErrorKind::StartFailed
                    } else {
                        ErrorKind::CommandFailed
                    };
                    Error::new(
                        kind,
                        format!(
                            "{}; is the gateway binary at {:?} in the sandbox?",
                            e.message(),
                            self.config.gateway_path
                        ),
                    )
                }
                _ => e,
            }
        } else {
            let mut e = channel.session.eof_error(&reason);
            if let Some(f) = &failure {
                e = Error::new(
                    ErrorKind::SessionLost,
                    format!("the session channel ended: {f}"),
                );
            }
            e
        };
        let reopen = self.config.reopen && failure.is_none();
        self.lose_channel(error, reopen, now);
    }

    /// Finishes with the channel for `error`: what it carried is settled (resumable calls wait
    /// for the next channel), it is retired, and the session goes on or gives up.
    fn lose_channel(&mut self, error: Error, reopen: bool, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        channel.ending = true;
        channel.session.lose_with(error.clone());
        self.drain_session(now);
        let Some(channel) = self.channel.take() else {
            return;
        };
        let opened = channel.opened;
        self.retire(channel, now, false);
        self.after_loss(error, opened, reopen, now);
    }

    /// After a channel was lost: open another, or give up on the session.
    fn after_loss(&mut self, error: Error, opened: bool, reopen: bool, now: Instant) {
        let attempts = self.config.reopen_attempts;
        let Want::On {
            ever_opened,
            failures,
            reopen_at,
            last_error,
        } = &mut self.want
        else {
            return self.settle_all_waiting(Some(error), now);
        };
        if opened {
            *failures = 0;
        } else {
            *failures += 1;
        }
        *last_error = Some(error.clone());
        if !reopen || !*ever_opened || *failures > attempts {
            return self.give_up(error, now);
        }
        let wait = if *failures == 0 {
            Duration::ZERO
        } else {
            (REOPEN_BACKOFF * 2u32.saturating_pow(*failures - 1)).min(REOPEN_BACKOFF_MAX)
        };
        *reopen_at = Some(now + wait);
        self.actions.push_back(Action::Notice(format!(
            "{}; opening the session channel again in {wait:?}",
            error.message()
        )));
        if wait.is_zero() {
            self.start_channel(now);
        }
    }

    /// Gives up on the session: waiting operations go one-shot, detached calls and waiting
    /// opens fail with `error`.
    fn give_up(&mut self, error: Error, now: Instant) {
        self.want = Want::Off;
        self.settle_all_waiting(Some(error), now);
    }

    fn settle_all_waiting(&mut self, error: Option<Error>, now: Instant) {
        let mut waiting: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Waiting | Place::Detached { .. }))
            .map(|(i, _)| *i)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            self.settle_without_channel(id, error.clone(), now);
        }
    }

    /// An operation that waited for a channel that will not come.
    fn settle_without_channel(&mut self, id: Id, error: Option<Error>, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let lost = |why: Option<&Error>, what: &str| {
            Error::new(
                ErrorKind::SessionLost,
                match why {
                    Some(e) => format!("{what}: {}", e.message()),
                    None => format!("{what}: the session was closed by the host"),
                },
            )
        };
        match (&entry.job, &entry.place) {
            (Job::OpenSession, _) => {
                let e = error.unwrap_or_else(|| lost(None, "the session could not be opened"));
                self.fail(id, e);
            }
            (Job::Op(_), Place::Detached { .. }) => {
                let e = lost(
                    error.as_ref(),
                    "the session channel was lost and could not be opened again to resume the \
                     call (it may still be running in the gateway)",
                );
                self.fail(id, e);
            }
            (Job::Op(op), Place::Waiting) if op.is_on_session() => {
                let e = lost(error.as_ref(), "the session channel was lost");
                self.fail(id, e);
            }
            (Job::Op(_), Place::Waiting) => self.run_command(id, now),
            // No channel will name a gateway: prepared as is, it goes one-shot (or says why not).
            (Job::Later(_), _) => self.dispatch(id, now),
            _ => {}
        }
    }

    /// Handles what the session has to say.
    fn drain_session(&mut self, now: Instant) {
        loop {
            let Some(channel) = self.channel.as_mut() else {
                return;
            };
            let Some(event) = channel.session.poll_event() else {
                return;
            };
            match event {
                Event::Opened(hello) => self.hello(hello, now),
                Event::Progress { id: sid, chunk } => {
                    if let Some(op) = channel.by_sid.get(&sid) {
                        self.actions.push_back(Action::Progress { op: *op, chunk });
                    }
                }
                Event::Finished { id: sid, answer } => {
                    let Some(op) = channel.by_sid.remove(&sid) else {
                        continue;
                    };
                    self.answered(op, answer, now);
                }
                Event::Unsent { id: sid } => {
                    if let Some(op) = channel.by_sid.remove(&sid) {
                        self.unsent(op, now);
                    }
                }
                Event::Detached {
                    id: sid,
                    call,
                    chunks,
                } => {
                    if let Some(op) = channel.by_sid.remove(&sid)
                        && let Some(entry) = self.ops.get_mut(&op)
                    {
                        entry.place = Place::Detached { call, chunks };
                        entry.deadline = None;
                    }
                }
                Event::ConnectionOpened { id: sid } => {
                    if let Some(conn) = channel.by_sid.get(&sid) {
                        self.actions
                            .push_back(Action::ConnectionOpened { conn: *conn });
                    }
                }
                Event::ConnectionMessage { id: sid, msg } => {
                    if let Some(conn) = channel.by_sid.get(&sid) {
                        let mut records = Vec::new();
                        let msg = match self.conns.get_mut(conn) {
                            Some(c) => c.screen.answer(&self.config.policy, msg, &mut records, now),
                            None => msg,
                        };
                        self.actions.extend(records.into_iter().map(Action::Audit));
                        self.actions
                            .push_back(Action::ConnectionMessage { conn: *conn, msg });
                    }
                }
                Event::ConnectionClosed {
                    id: sid,
                    reason,
                    status,
                    kind,
                } => {
                    if let Some(conn) = channel.by_sid.remove(&sid) {
                        if let Some(mut c) = self.conns.remove(&conn) {
                            let mut records = Vec::new();
                            c.screen.lost(reason.as_deref(), &mut records, now);
                            self.actions.extend(records.into_iter().map(Action::Audit));
                        }
                        self.actions.push_back(Action::ConnectionClosed {
                            conn,
                            reason,
                            status,
                            kind,
                        });
                    }
                }
                Event::Notice(n) => self.actions.push_back(Action::Notice(n)),
                Event::Lost(e) => {
                    // The session ended itself (a protocol failure, another gateway) or was
                    // ended by the driver (then the channel is already being finished with).
                    let Some(channel) = self.channel.as_ref() else {
                        return;
                    };
                    if channel.ending || channel.eof || channel.exit.is_some() {
                        continue;
                    }
                    let reopen = self.config.reopen && e.kind() == ErrorKind::SessionLost;
                    self.lose_channel(e, reopen, now);
                    return;
                }
            }
        }
    }

    fn hello(&mut self, hello: Hello, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        channel.opened = true;
        channel.last_rx = now;
        // Only a channel that pings can be judged by its silence.
        if hello.heartbeat_ms > 0 {
            let every = Self::ms(hello.heartbeat_ms);
            let timeout = if self.config.heartbeat_timeout_ms > 0 {
                Self::ms(self.config.heartbeat_timeout_ms)
            } else {
                every * 3
            };
            channel.heartbeat = Some(Heartbeat { every, timeout });
        }
        if let Want::On {
            ever_opened,
            failures,
            last_error,
            ..
        } = &mut self.want
        {
            *ever_opened = true;
            if last_error.take().is_some() {
                self.actions.push_back(Action::Notice(
                    "the session channel is open again".to_owned(),
                ));
            }
            *failures = 0;
        }
        let opens: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.job, Job::OpenSession))
            .map(|(i, _)| *i)
            .collect();
        for id in opens {
            self.done(id, Ok(Output::Session(hello.clone())));
        }
        // The hello named the gateway: what waited for it is prepared and sent now.
        let mut later: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.job, Job::Later(_)))
            .map(|(i, _)| *i)
            .collect();
        later.sort_unstable();
        for id in later {
            self.dispatch(id, now);
        }
    }

    fn answered(
        &mut self,
        id: Id,
        answer: Result<crate::client::response::HttpResponse, Error>,
        now: Instant,
    ) {
        let reopening = self.config.reopen && matches!(self.want, Want::On { .. });
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        // A GET the lost channel carried is sent again on the next one.
        if let Err(e) = &answer
            && e.kind() == ErrorKind::SessionLost
            && reopening
            && op.is_idempotent()
        {
            entry.place = Place::Waiting;
            entry.deadline = None;
            return;
        }
        // A resume the gateway answers 404 is a call that never reached it (its channel died
        // first): it is sent again under its own id, which the gateway runs at most once. If
        // the first request reaches the gateway after all, the second is refused (409) and the
        // call is resumed instead. Either way it runs once.
        if let Ok(resp) = &answer
            && matches!(
                (entry.carry, resp.status),
                (Carry::Resume, 404) | (Carry::RequestAgain, 409)
            )
            && let Some(call) = entry.call.clone()
            && let Some(channel) = self.channel.as_mut()
            && !channel.session.is_lost()
        {
            let again = match entry.carry {
                Carry::Resume => op.session_request(entry.stream).map(|request| {
                    (
                        channel.session.submit_request(request, Some(call)),
                        Carry::RequestAgain,
                    )
                }),
                _ => Some((
                    channel.session.resume(op.name(), call, 0, entry.stream),
                    Carry::Resume,
                )),
            };
            if let Some((sid, carry)) = again {
                let grace = Self::ms(self.config.answer_grace_ms);
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.carry = carry;
                entry.deadline = Some(now + op.session_limit() + grace);
                self.flush(now);
                return;
            }
        }
        let answer = match answer {
            Ok(resp) if entry.carry == Carry::Resume && matches!(resp.status, 404 | 410) => {
                let detail = String::from_utf8_lossy(&resp.body).into_owned();
                Err(Error::new(
                    ErrorKind::SessionLost,
                    format!(
                        "the session channel was lost and the call could not be resumed: {}",
                        crate::error::tail(&detail, 500)
                    ),
                )
                .with_http(resp.status, Some(detail)))
            }
            other => other,
        };
        op.deliver(answer);
        let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
            Job::Op(op) => op,
            _ => unreachable!(),
        };
        self.done(id, op.finish());
    }

    fn unsent(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        if let Job::Op(op) = &mut entry.job {
            op.resume();
        }
        entry.place = Place::Waiting;
        entry.deadline = None;
        // Never written: it goes one-shot at once rather than wait for a new channel.
        self.run_command(id, now);
    }

    // ---- virtual connections ----

    /// Opens a virtual MCP connection to MCP `mcp` of the scope (`agent_id`, `session_id`)
    /// over the session channel; [`Action::ConnectionOpened`] says it is ready. With
    /// `own_upstream` the gateway gives it an upstream session of its own, opened with its
    /// client's handshake (`upstream=own`: the client meets the server as it would straight);
    /// else it shares the MCP's. Fails when no session is open or opening, or for an invalid
    /// name.
    pub fn open_connection(
        &mut self,
        mcp: &str,
        agent_id: &str,
        session_id: &str,
        own_upstream: bool,
        now: Instant,
    ) -> Result<Id, Error> {
        crate::wire::spec::check_name(mcp).map_err(Error::invalid_argument)?;
        let Some(channel) = self.channel.as_mut() else {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "virtual MCP connections travel over the session channel: open a session first",
            ));
        };
        let mut path = format!(
            "{}?{}",
            crate::wire::rest::path::connection(mcp),
            crate::wire::rest::Query::scope(agent_id, session_id).to_query_string()
        );
        if own_upstream {
            path.push('&');
            path.push_str(crate::wire::rest::UPSTREAM_OWN);
        }
        let sid = channel.session.open_connection(&path)?;
        let id = self.next;
        self.next += 1;
        channel.by_sid.insert(sid, id);
        let screen = govern::Screen::new(mcp, agent_id, session_id);
        self.conns.insert(id, Conn { sid, screen });
        self.flush(now);
        Ok(id)
    }

    /// Sends one JSON-RPC message on connection `conn`.
    pub fn send(&mut self, conn: Id, msg: &str, now: Instant) -> Result<(), Error> {
        let (Some(c), Some(channel)) = (self.conns.get_mut(&conn), self.channel.as_mut()) else {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!("connection {conn} is not open"),
            ));
        };
        let rules = govern::Rules {
            policy: &self.config.policy,
            audit: self.config.audit,
            audit_arguments: self.config.audit_arguments,
        };
        let mut records = Vec::new();
        let refused = c.screen.request(&rules, msg, &mut records, now);
        self.actions.extend(records.into_iter().map(Action::Audit));
        if let Some(refused) = refused {
            self.actions
                .push_back(Action::ConnectionMessage { conn, msg: refused });
            return Ok(());
        }
        channel.session.send_message(c.sid, msg)?;
        self.flush(now);
        Ok(())
    }

    /// Closes connection `conn` (its [`Action::ConnectionClosed`] follows); returns whether it
    /// was open.
    pub fn close_connection(&mut self, conn: Id, now: Instant) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if let Some(channel) = self.channel.as_mut() {
            channel.session.close_connection(c.sid);
        }
        self.drain_session(now);
        self.flush(now);
        true
    }

    // ---- time ----

    /// When the driver wants [`Host::on_timeout`] next.
    pub fn timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for entry in self.ops.values() {
            if let Some(d) = entry.deadline {
                at(d);
            }
            if let Place::Asking {
                again_at: Some(t), ..
            } = entry.place
            {
                at(t);
            }
        }
        if let Some(c) = &self.channel {
            if !c.opened {
                at(c.open_deadline);
            }
            if let Some(d) = c.end_deadline {
                at(d);
            }
            if let (Some(h), true) = (c.heartbeat, c.opened) {
                if !h.every.is_zero() {
                    at(c.last_tx + h.every);
                }
                at(c.last_rx + h.timeout);
            }
        }
        if let Want::On {
            reopen_at: Some(t), ..
        } = self.want
        {
            at(t);
        }
        for (_, t) in &self.retired {
            at(*t);
        }
        next
    }

    /// Time passed: whatever was due at `now` is done.
    pub fn on_timeout(&mut self, now: Instant) {
        // Operations past their step's limit.
        let mut due: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| e.deadline.is_some_and(|d| d <= now))
            .map(|(i, _)| *i)
            .collect();
        due.sort_unstable();
        for id in due {
            self.overdue(id, now);
        }
        // Questions to ask again.
        let again: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Asking { again_at: Some(t), .. } if t <= now))
            .map(|(i, _)| *i)
            .collect();
        for id in again {
            let question = match self.config.backend.judge(137, b"", b"", false) {
                Verdict::Ask(q) => q,
                _ => continue,
            };
            let proc = self.ask(question, Role::Question(id));
            if let Some(Entry {
                place: Place::Asking {
                    proc: p, again_at, ..
                },
                ..
            }) = self.ops.get_mut(&id)
            {
                *p = Some(proc);
                *again_at = None;
            }
        }
        // The channel's timers.
        if let Some(c) = self.channel.as_mut() {
            if !c.opened && c.open_deadline <= now {
                let e = Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "the session channel did not answer within {:?}; is `mcpgw-gateway \
                         attach` running at the other end?",
                        Self::ms(self.config.open_timeout_ms)
                    ),
                );
                self.lose_channel(e, false, now);
            } else if c.end_deadline.is_some_and(|d| d <= now) {
                self.finish_channel(now);
            } else if let (Some(h), true) = (c.heartbeat, c.opened) {
                if c.last_rx + h.timeout <= now {
                    let e = Error::new(
                        ErrorKind::SessionLost,
                        format!(
                            "the session channel sent nothing for {:?} (its heartbeat stopped)",
                            h.timeout
                        ),
                    );
                    let reopen = self.config.reopen;
                    self.lose_channel(e, reopen, now);
                } else if !h.every.is_zero() && c.last_tx + h.every <= now {
                    c.session.ping();
                    self.flush(now);
                }
            }
        }
        // Opening the channel again.
        if let Want::On {
            reopen_at: Some(t), ..
        } = self.want
            && t <= now
            && self.channel.is_none()
        {
            self.start_channel(now);
        }
        // Channels that did not exit after their input closed.
        let (late, waiting): (Vec<_>, Vec<_>) =
            self.retired.drain(..).partition(|(_, t)| *t <= now);
        self.retired = waiting;
        for (proc, _) in late {
            if self.procs.get(&proc) == Some(&Role::Retired) {
                self.actions.push_back(Action::Kill { proc });
            }
        }
    }

    fn overdue(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let limit = entry.deadline.map(|d| d.saturating_duration_since(now));
        let _ = limit;
        match &entry.place {
            Place::Command(_) => {
                let e = Error::new(
                    ErrorKind::Deadline,
                    "a command in the sandbox did not finish within its time limit; it was killed",
                );
                self.fail(id, e);
            }
            Place::Session(sid) => {
                let sid = *sid;
                if let Some(channel) = self.channel.as_mut() {
                    channel.session.cancel(sid);
                    channel.by_sid.remove(&sid);
                }
                self.flush(now);
                let e = Error::new(
                    ErrorKind::Deadline,
                    "no answer came over the session within the operation's time limit; it \
                     was cancelled",
                );
                self.fail(id, e);
            }
            Place::Waiting => {
                if matches!(entry.job, Job::OpenSession) {
                    let e = Error::new(
                        ErrorKind::Deadline,
                        "the session channel did not open within the open timeout",
                    );
                    self.fail(id, e);
                } else {
                    entry.deadline = None;
                }
            }
            _ => entry.deadline = None,
        }
    }
}
