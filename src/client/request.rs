//! A REST request to the gateway and how it travels: over one-shot commands (detecting curl,
//! staging or piping a large body, sending), or over a session; and the decoding of its answer,
//! the same either way.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Shared;
use super::operation::{ExecOutput, Step};
use super::output::Output;
use super::response::{self, Exchange, HttpResponse, RequestInfo};
use crate::command::{self, Body, Command, Method, Request, Target, Transport, staging};
use crate::error::{Error, ErrorKind, tail};
use crate::random;
use crate::wire::output::seconds;

/// Time a command gets beyond the request's own limit, so that the gateway's or curl's deadline
/// fires (and is reported precisely) before the exec backend gives up.
pub(crate) const EXEC_GRACE: Duration = Duration::from_secs(5);

/// Turns the gateway's 2xx answer into the operation's result.
pub(crate) type Decoder<T> =
    Box<dyn FnOnce(&Shared, &str, HttpResponse) -> Result<T, Error> + Send>;

/// Where the gateway is and how commands reach it, fixed when the operation is prepared.
#[derive(Debug, Clone)]
pub(crate) struct Route {
    pub host: String,
    pub port: u16,
    pub token_file: String,
    pub gateway_path: String,
    pub staging_dir: String,
    pub max_command: usize,
    pub exec_stdin: bool,
    pub transport: Option<Transport>,
}

/// A request as a session carries it.
#[derive(Debug, Clone)]
pub struct SessionRequest {
    /// `GET /mcps`, for messages.
    pub what: String,
    /// The method.
    pub method: Method,
    /// Path and query, percent-encoded.
    pub path: String,
    /// The JSON body.
    pub body: Option<Arc<str>>,
    /// Whether a tool call should stream its chunks.
    pub stream: bool,
    /// How long the answer may take (the call's deadline and a grace).
    pub max_time: Duration,
}

#[derive(Debug)]
enum Phase {
    Probe,
    Stage { path: String, offset: usize },
    Sent,
}

/// One REST request and the decoding of its answer.
pub(crate) struct RestJob<T> {
    what: String,
    method: Method,
    path_and_query: String,
    authenticated: bool,
    body: Option<Arc<str>>,
    max_time: Duration,
    route: Route,
    phase: Phase,
    decode: Option<Decoder<T>>,
}

impl<T> fmt::Debug for RestJob<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestJob")
            .field("what", &self.what)
            .field("phase", &self.phase)
            .finish()
    }
}

impl<T> RestJob<T> {
    pub(crate) fn new(
        method: Method,
        path_and_query: String,
        body: Option<String>,
        max_time: Duration,
        route: Route,
        decode: Decoder<T>,
    ) -> RestJob<T> {
        let path = path_and_query
            .split_once('?')
            .map_or(path_and_query.as_str(), |(p, _)| p);
        RestJob {
            what: format!("{} {path}", method.as_str()),
            authenticated: path != crate::wire::rest::route::HEALTH,
            method,
            body: body.map(Arc::from),
            path_and_query,
            max_time,
            route,
            phase: Phase::Probe,
            decode: Some(decode),
        }
    }

    pub(crate) fn method(&self) -> Method {
        self.method
    }

    fn exec_timeout(&self) -> Duration {
        self.max_time + EXEC_GRACE
    }

    fn target(&self) -> Target<'_> {
        Target {
            host: &self.route.host,
            port: self.route.port,
            token_file: &self.route.token_file,
            gateway_path: &self.route.gateway_path,
        }
    }

    fn exchange(&self) -> Exchange<'_> {
        Exchange {
            what: &self.what,
            port: self.route.port,
            token_file: &self.route.token_file,
        }
    }

    /// The first command: a probe for curl when the transport is still unknown, else the request
    /// (or the first piece of its staged body).
    pub(crate) fn begin(&mut self) -> Result<Command, Error> {
        if self.route.transport.is_none() {
            self.phase = Phase::Probe;
            return Ok(Command::new(command::request::probe(), self.exec_timeout()));
        }
        self.send_or_stage()
    }

    fn request_text(&self, body: Body<'_>) -> Result<String, Error> {
        command::request::request_command(
            self.route.transport.unwrap_or(Transport::Curl),
            &self.target(),
            &Request {
                method: self.method,
                path_and_query: &self.path_and_query,
                authenticated: self.authenticated,
                body,
                max_time: self.max_time,
            },
        )
    }

    fn send_or_stage(&mut self) -> Result<Command, Error> {
        let text = self.request_text(self.body.as_deref().map_or(Body::None, Body::Inline))?;
        if text.len() <= self.route.max_command {
            self.phase = Phase::Sent;
            return Ok(Command::new(text, self.exec_timeout()));
        }
        if self.route.exec_stdin {
            // One exec with the body on stdin instead of staged pieces.
            let body: Arc<[u8]> = Arc::from(self.body.as_deref().unwrap_or("").as_bytes());
            self.phase = Phase::Sent;
            return Ok(
                Command::new(self.request_text(Body::Stdin)?, self.exec_timeout()).with_stdin(body),
            );
        }
        let path = format!(
            "{}/mcpgw-body-{}",
            self.route.staging_dir.trim_end_matches('/'),
            random::uuid4_hex()
        );
        self.stage_piece(path, 0)
    }

    fn stage_piece(&mut self, path: String, offset: usize) -> Result<Command, Error> {
        let body = self.body.as_deref().unwrap_or("");
        let budget = self
            .route
            .max_command
            .saturating_sub(staging::stage_text_overhead(&path));
        let end = staging::next_text_piece(body, offset, budget);
        let text = staging::stage_text_command(&path, &body[offset..end], offset == 0)?;
        self.phase = Phase::Stage { path, offset: end };
        Ok(Command::new(text, self.exec_timeout()))
    }

    /// Takes what the last command did.
    pub(crate) fn advance(&mut self, shared: &Shared, out: ExecOutput) -> Result<Step<T>, Error> {
        match std::mem::replace(&mut self.phase, Phase::Sent) {
            Phase::Probe => {
                let transport = command::request::parse_probe(&out.stdout).ok_or_else(|| {
                    Error::new(
                        ErrorKind::CommandFailed,
                        format!(
                            "detecting curl in the sandbox failed (exit {}): {}",
                            out.exit_code,
                            tail(&String::from_utf8_lossy(&out.stderr), 500)
                        ),
                    )
                })?;
                self.route.transport = Some(transport);
                shared.learn_transport(transport);
                self.send_or_stage().map(Step::Exec)
            }
            Phase::Stage { path, offset } => {
                if out.exit_code != 0 {
                    return Err(Error::new(
                        ErrorKind::CommandFailed,
                        format!(
                            "staging the request body in {} failed (exit {}): {}; \
                             is the staging directory writable?",
                            path,
                            out.exit_code,
                            tail(&String::from_utf8_lossy(&out.stderr), 500)
                        ),
                    ));
                }
                if offset < self.body.as_deref().map_or(0, str::len) {
                    return self.stage_piece(path, offset).map(Step::Exec);
                }
                let text = self.request_text(Body::Staged(&path))?;
                Ok(Step::Exec(Command::new(text, self.exec_timeout())))
            }
            Phase::Sent => {
                let max_time = seconds(self.max_time);
                let info = RequestInfo {
                    exchange: self.exchange(),
                    transport: self.route.transport.unwrap_or(Transport::Curl),
                    gateway_path: &self.route.gateway_path,
                    max_time: &max_time,
                };
                let resp = response::decode_output(&info, out.exit_code, out.stdout, &out.stderr)?;
                self.decode(shared, resp).map(Step::Done)
            }
        }
    }

    fn decode(&mut self, shared: &Shared, resp: HttpResponse) -> Result<T, Error> {
        let resp = response::check_status(&self.exchange(), resp)?;
        let decode = self
            .decode
            .take()
            .ok_or_else(|| Error::new(ErrorKind::InvalidState, "the answer was decoded already"))?;
        decode(shared, &self.what, resp)
    }

    /// The request for a session.
    pub(crate) fn session_request(&self, stream: bool) -> SessionRequest {
        SessionRequest {
            what: self.what.clone(),
            method: self.method,
            path: self.path_and_query.clone(),
            body: self.body.clone(),
            stream,
            max_time: self.max_time,
        }
    }

    /// Decodes the answer a session brought.
    pub(crate) fn decode_session_answer(
        &mut self,
        shared: &Shared,
        resp: HttpResponse,
    ) -> Result<T, Error> {
        self.decode(shared, resp)
    }
}

impl<T: Into<Output> + 'static> RestJob<T> {
    /// The same job with its result as an [`Output`].
    pub(crate) fn erase(self) -> RestJob<Output> {
        let decode = self.decode.map(|d| -> Decoder<Output> {
            Box::new(move |shared, what, resp| d(shared, what, resp).map(Into::into))
        });
        RestJob {
            what: self.what,
            method: self.method,
            path_and_query: self.path_and_query,
            authenticated: self.authenticated,
            body: self.body,
            max_time: self.max_time,
            route: self.route,
            phase: self.phase,
            decode,
        }
    }
}
