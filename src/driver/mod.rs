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
mod channel;
mod config;
mod connections;
mod dispatch;
mod frames;
mod govern;
mod loss;
mod oneshot;
#[cfg(test)]
mod tests;
mod time;

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

/// How long an answered call's acknowledgement may wait for the next frame to the channel
/// before it is written alone (the gateway keeps the answer until then).
const ACK_DELAY: Duration = Duration::from_millis(20);

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
    /// When the session's waiting acknowledgements are written, if nothing else carried them
    /// before.
    acks_due: Option<Instant>,
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
                result: Err(e.redacted(|text| r.redact_in_place(text))),
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
}
