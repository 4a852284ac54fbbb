//! Operations as sans-IO state machines.
//!
//! An [`Operation`] never runs anything: [`Operation::command`] says which `sh -c` command to run
//! next in the sandbox, [`Operation::complete`] takes its exit status and output, and this
//! repeats until [`Operation::finish`] yields the result. An operation may need several rounds:
//! detecting curl, staging a large body, uploading a binary, confirming a launch. The blocking
//! calls of [`crate::exec`] are a loop over exactly this.
//!
//! A REST operation (every one but the launch, the stop and the install) may instead travel over
//! a session channel ([`crate::session`]): the session takes its request, and hands back the
//! gateway's answer, which the operation decodes exactly as it would the one-shot command's.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::output::Output;
use super::request::{RestJob, SessionRequest};
use super::response::HttpResponse;
use crate::command::Command;
use crate::error::{Error, ErrorKind};

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its exit status (128 + N when a signal N ended it).
    pub exit_code: i32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// What running a command gave: its output, or why the backend could not run it.
pub type ExecResult = Result<ExecOutput, String>;

/// The next move of a job: run a command, or done with a result.
pub(crate) enum Step<T> {
    Exec(Command),
    Done(T),
}

/// A job of several commands that is not a REST request: the launch, the stop, the install.
pub(crate) trait Job<T>: Send + fmt::Debug {
    /// Takes what the last command did and says what comes next.
    fn advance(&mut self, shared: &Shared, out: ExecOutput) -> Result<Step<T>, Error>;
}

/// A job whose result is converted into [`Output`].
struct Erased<T>(Box<dyn Job<T>>);

impl<T> fmt::Debug for Erased<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: Into<Output> + 'static> Job<Output> for Erased<T> {
    fn advance(&mut self, shared: &Shared, out: ExecOutput) -> Result<Step<Output>, Error> {
        Ok(match self.0.advance(shared, out)? {
            Step::Exec(c) => Step::Exec(c),
            Step::Done(v) => Step::Done(v.into()),
        })
    }
}

pub(crate) enum State<T> {
    /// A REST request, over one-shot commands until a session takes it.
    Rest(Box<RestJob<T>>),
    /// Another job.
    Job(Box<dyn Job<T>>),
    /// Nothing left to do: the outcome is set.
    Finished,
}

impl<T> fmt::Debug for State<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            State::Rest(r) => r.fmt(f),
            State::Job(j) => j.fmt(f),
            State::Finished => f.write_str("Finished"),
        }
    }
}

/// One operation on the gateway, as a sans-IO state machine whose result is a `T`.
///
/// `Send`; it shares the client's learned state (detected transport, launched gateway), which a
/// finished operation updates. [`Operation::erase`] gives the same operation with its result as
/// an [`Output`], for hosts that keep operations of every kind in one place.
pub struct Operation<T> {
    shared: Arc<Shared>,
    name: &'static str,
    state: State<T>,
    command: Option<Command>,
    outcome: Option<Result<T, Error>>,
    /// Whether a command was completed: a session can only take an operation that has not run
    /// anything yet.
    started: bool,
    /// The one-shot command put aside while a session carries the request.
    parked: Option<Command>,
    /// How long the answer may take over a session.
    session_limit: Duration,
}

impl<T> fmt::Debug for Operation<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Operation")
            .field("name", &self.name)
            .field("state", &self.state)
            .field("command", &self.command)
            .field("finished", &self.outcome.is_some())
            .finish()
    }
}

impl<T> Operation<T> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        name: &'static str,
        start: Result<(State<T>, Command), Error>,
    ) -> Operation<T> {
        let mut op = Operation {
            shared,
            name,
            state: State::Finished,
            command: None,
            outcome: None,
            started: false,
            parked: None,
            session_limit: Duration::ZERO,
        };
        match start {
            Ok((state, command)) => {
                op.state = state;
                op.command = Some(command);
            }
            Err(e) => op.outcome = Some(Err(e.context(name))),
        }
        op
    }

    /// The name of the operation (`call_tool`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The command to run next, or `None` once the operation has finished (or while a session
    /// carries it).
    pub fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// Whether the operation has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// The result, once finished.
    pub fn outcome(&self) -> Option<&Result<T, Error>> {
        self.outcome.as_ref()
    }

    /// Hands back what running [`Operation::command`] gave. Fails with
    /// [`ErrorKind::InvalidState`] when no command was pending; the operation is then unchanged.
    pub fn complete(&mut self, result: ExecResult) -> Result<(), Error> {
        if self.command.is_none() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!(
                    "{}: complete was called, but no command is pending ({})",
                    self.name,
                    if self.outcome.is_some() {
                        "the operation has finished"
                    } else {
                        "a session carries the operation"
                    }
                ),
            ));
        }
        self.command = None;
        self.started = true;
        let step = match result {
            Ok(out) => self.advance(out),
            Err(reason) => Err(Error::new(
                ErrorKind::ExecFailed,
                format!(
                    "the exec function could not run a command in the sandbox ({}); \
                     is the sandbox alive and the backend reachable?",
                    reason.trim()
                ),
            )),
        };
        match step {
            Ok(Step::Exec(c)) => self.command = Some(c),
            Ok(Step::Done(v)) => self.finish_with(Ok(v)),
            Err(e) => self.finish_with(Err(e)),
        }
        Ok(())
    }

    fn advance(&mut self, out: ExecOutput) -> Result<Step<T>, Error> {
        let shared = &*self.shared;
        match &mut self.state {
            State::Rest(job) => job.advance(shared, out),
            State::Job(job) => job.advance(shared, out),
            State::Finished => Err(Error::new(ErrorKind::InvalidState, "finished")),
        }
    }

    fn finish_with(&mut self, outcome: Result<T, Error>) {
        self.state = State::Finished;
        self.command = None;
        self.parked = None;
        self.outcome = Some(outcome.map_err(|e| e.context(self.name)));
    }

    /// Ends an unfinished operation with `error` (of kind [`ErrorKind::Cancelled`] for a caller
    /// that gave up). A finished operation keeps its outcome.
    pub fn abandon(&mut self, error: Error) {
        if self.outcome.is_none() {
            self.finish_with(Err(error));
        }
    }

    /// The result. Fails with [`ErrorKind::InvalidState`] when the operation has not finished.
    pub fn finish(self) -> Result<T, Error> {
        match self.outcome {
            Some(o) => o,
            None => Err(Error::new(
                ErrorKind::InvalidState,
                format!("{}: the operation has not finished", self.name),
            )),
        }
    }

    /// Moves the request to a session: `None` unless this is a REST operation that has run no
    /// command yet. Until [`Operation::deliver`] or [`Operation::resume`], it wants no command.
    pub(crate) fn send_over_session(&mut self, stream: bool) -> Option<SessionRequest> {
        if self.started || self.outcome.is_some() || self.parked.is_some() {
            return None;
        }
        let State::Rest(job) = &self.state else {
            return None;
        };
        let request = job.session_request(stream);
        self.parked = self.command.take();
        self.session_limit = request.max_time;
        Some(request)
    }

    /// The request of an operation a session carries, to send again on another channel (only
    /// ever done for a request that is safe to repeat: see [`Operation::is_idempotent`]).
    pub fn session_request(&self, stream: bool) -> Option<SessionRequest> {
        match &self.state {
            State::Rest(job) if self.is_on_session() => Some(job.session_request(stream)),
            _ => None,
        }
    }

    /// Whether the operation is a REST request.
    pub fn is_rest(&self) -> bool {
        matches!(self.state, State::Rest(_))
    }

    /// Whether the operation is a REST request that is safe to repeat (a `GET`).
    pub fn is_idempotent(&self) -> bool {
        matches!(&self.state, State::Rest(job) if job.method() == crate::command::Method::Get)
    }

    /// How long the answer of an operation a session carries may take: its request's limit.
    pub fn session_limit(&self) -> Duration {
        self.session_limit
    }

    /// Whether a session carries the operation.
    pub fn is_on_session(&self) -> bool {
        self.parked.is_some() && self.outcome.is_none()
    }

    /// Takes the answer a session brought for it ([`crate::session::Event::Finished`]), or why
    /// none came, and finishes the operation.
    pub fn deliver(&mut self, answer: Result<HttpResponse, Error>) {
        if self.outcome.is_some() {
            return;
        }
        let result = match &mut self.state {
            State::Rest(job) => answer.and_then(|r| job.decode_session_answer(&self.shared, r)),
            _ => Err(Error::new(
                ErrorKind::InvalidState,
                "only a REST operation takes a session's answer",
            )),
        };
        self.finish_with(result);
    }

    /// Takes the operation back from a session that never wrote its request
    /// ([`crate::session::Event::Unsent`]): it continues over one-shot commands.
    pub fn resume(&mut self) {
        if self.outcome.is_none()
            && let Some(c) = self.parked.take()
        {
            self.command = Some(c);
        }
    }
}

impl<T: Into<Output> + 'static> Operation<T> {
    /// The same operation with its result as an [`Output`].
    pub fn erase(self) -> Operation<Output> {
        Operation {
            shared: self.shared,
            name: self.name,
            state: match self.state {
                State::Rest(job) => State::Rest(Box::new(job.erase())),
                State::Job(job) => State::Job(Box::new(Erased(job))),
                State::Finished => State::Finished,
            },
            command: self.command,
            outcome: self.outcome.map(|o| o.map(Into::into)),
            started: self.started,
            parked: self.parked,
            session_limit: self.session_limit,
        }
    }
}
