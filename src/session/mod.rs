//! The session channel, sans-IO: one long-lived exec (`docker exec -i`, `kubectl exec -i`, an
//! E2B background command with stdin, a local pipe) runs `mcpgw-gateway attach` in the sandbox,
//! and every REST operation of a client travels over its stdin and stdout as frames
//! ([`crate::wire::frame`]), many at once, with live progress and real cancellation.
//!
//! A [`Session`] does no I/O. The host runs [`Session::open`]'s command with its stdin and stdout
//! piped, writes [`Session::take_output`] to the channel's stdin, feeds what it reads from the
//! channel's stdout to [`Session::feed`] (and [`Session::feed_eof`] at its end), and handles
//! [`Session::poll_event`]'s events: a progress chunk for an operation, an operation's answer
//! (which it hands to [`Operation::deliver`]), an operation the session never wrote (which may go
//! over one-shot commands: [`Operation::resume`]), the channel lost. [`blocking`] drives a session
//! over a pair of pipes for hosts with threads.
//!
//! Operations in flight on a channel that dies fail with [`ErrorKind::SessionLost`]; they are
//! never replayed, since a tool call may have had effects.

pub mod blocking;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::client::response::HttpResponse;
use crate::client::{Client, GatewayInfo, Operation, Shared};
use crate::command::{Command, gateway as text};
use crate::error::{Error, ErrorKind, tail};
use crate::wire::frame::{self, Body, GatewayFrame, Hello, HostFrame};
use crate::wire::{ErrorBody, ToolChunk};

/// The longest line a session accepts from the channel: a tool result as large as the gateway
/// relays (its `--max-reply-bytes`), with room for the frame around it.
pub const MAX_ANSWER_LINE_BYTES: usize = 512 << 20;

/// How much of what precedes the hello frame (a login shell's banner, or the error of a shell
/// that could not start `attach`) is kept for the message when the session never opens.
const PREAMBLE_KEEP: usize = 2048;

/// What a session has to say.
#[derive(Debug)]
pub enum Event {
    /// The channel answered: `attach` runs and relays to this gateway.
    Opened(Hello),
    /// A progress chunk of streamed operation `id`, as it happened.
    Progress {
        /// The operation's id, from [`Session::submit`].
        id: u64,
        /// The chunk (`is_last: false`; the progress under `metadata.mcp_progress`).
        chunk: ToolChunk,
    },
    /// Operation `id` has its answer (or failed): hand it to the operation's
    /// [`Operation::deliver`].
    Finished {
        /// The operation's id.
        id: u64,
        /// The gateway's answer, or why none came.
        answer: Result<HttpResponse, Error>,
    },
    /// Operation `id` was never written to the channel, which is now lost: it may go over
    /// one-shot commands ([`Operation::resume`]) or fail.
    Unsent {
        /// The operation's id.
        id: u64,
    },
    /// Something the channel said that concerns no operation (a frame `attach` refused, a
    /// frame for an unknown id): worth a log line.
    Notice(String),
    /// The channel is gone; every operation it carried got its `Finished` or `Unsent` first.
    Lost(Error),
}

#[derive(Debug)]
struct InFlight {
    what: String,
    stream: bool,
    /// The last chunk of a streamed call, the result once its `res` arrives.
    last_chunk: Option<Box<RawValue>>,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for the hello frame; requests wait too (they are not written yet).
    Opening {
        preamble: String,
    },
    Open(Hello),
    Lost,
}

/// Who the session expects at the other end, from the command that opened it.
#[derive(Debug, Clone)]
struct Expect {
    nonce: Option<String>,
    state_dir: Option<String>,
}

/// One session channel, sans-IO. `Send`; not for concurrent use (wrap it in a mutex, as
/// [`blocking::BlockingSession`] does).
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    expect: Expect,
    phase: Phase,
    next_id: u64,
    in_flight: HashMap<u64, InFlight>,
    /// Requests submitted before the hello, in order: written once it comes.
    queued: Vec<(u64, crate::client::SessionRequest)>,
    output: Vec<u8>,
    line: Vec<u8>,
    /// Skipping the rest of a line longer than [`MAX_ANSWER_LINE_BYTES`].
    discarding: bool,
    events: VecDeque<Event>,
}

impl Session {
    /// A session for `client`, and the command that opens its channel: run it with `sh -c`
    /// inside the sandbox with stdin and stdout piped, and keep it running. For a gateway the
    /// client knows (launched, or configured by port and token file), `attach` relays to it; for
    /// a client that knows none, `attach --launch` starts one first (the hello says so), so one
    /// exec gives a ready session.
    pub fn open(client: &Client) -> Result<(Session, Command), Error> {
        let shared = client.shared().clone();
        let c = &shared.config;
        let (text, expect) = match client.gateway() {
            Some(info) => {
                let launch = text::Launch {
                    gateway_path: &c.gateway_path,
                    host: &c.host,
                    port: info.port,
                    state_dir: &info.state_dir,
                    token_file: &info.token_file,
                    nonce: &info.instance_nonce,
                };
                (
                    text::attach(&launch, true)?,
                    Expect {
                        nonce: Some(info.instance_nonce.clone()),
                        state_dir: Some(info.state_dir.clone()),
                    },
                )
            }
            None => match shared.route() {
                Ok(route) if !route.token_file.is_empty() => {
                    let nonce = shared.known_nonce();
                    (
                        text::attach_running(
                            &c.gateway_path,
                            &c.host,
                            route.port,
                            &route.token_file,
                            nonce.as_deref(),
                        )?,
                        Expect {
                            nonce,
                            state_dir: None,
                        },
                    )
                }
                _ => {
                    let new = shared.new_launch();
                    (
                        text::attach(&new.launch(&shared), true)?,
                        Expect {
                            nonce: Some(new.nonce.clone()),
                            state_dir: Some(new.state_dir.clone()),
                        },
                    )
                }
            },
        };
        // The channel lives as long as the host keeps it: no time limit of its own.
        let command = Command::new(text, std::time::Duration::MAX);
        Ok((
            Session {
                shared,
                expect,
                phase: Phase::Opening {
                    preamble: String::new(),
                },
                next_id: 1,
                in_flight: HashMap::new(),
                queued: Vec::new(),
                output: Vec::new(),
                line: Vec::new(),
                discarding: false,
                events: VecDeque::new(),
            },
            command,
        ))
    }

    /// The hello of an open session.
    pub fn hello(&self) -> Option<&Hello> {
        match &self.phase {
            Phase::Open(h) => Some(h),
            _ => None,
        }
    }

    /// Whether the channel is gone.
    pub fn is_lost(&self) -> bool {
        matches!(self.phase, Phase::Lost)
    }

    /// How many operations the session carries (queued or in flight).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Takes `op`'s request (a REST operation that has run no command yet) and returns the id
    /// its events will carry; `op` then wants no command until the session delivers its answer.
    /// With `stream`, a tool call reports each progress chunk as it happens.
    ///
    /// Fails, leaving `op` as it was, for an operation a session cannot carry (the launch, the
    /// stop, the install, or one already under way), and on a lost session.
    pub fn submit<T>(&mut self, op: &mut Operation<T>, stream: bool) -> Result<u64, Error> {
        if self.is_lost() {
            return Err(Error::new(
                ErrorKind::SessionLost,
                format!("{}: the session channel is lost", op.name()),
            ));
        }
        let request = op.send_over_session(stream).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{}: only a REST operation that has run no command can go over a session",
                    op.name()
                ),
            )
        })?;
        if let (Phase::Open(hello), Some(body)) = (&self.phase, &request.body)
            && body.len() + frame::ENVELOPE_BYTES > hello.max_frame_bytes as usize
        {
            let e = Error::invalid_argument(format!(
                "{}: the request body ({} bytes) exceeds the session's frame limit of {} bytes",
                request.what,
                body.len(),
                hello.max_frame_bytes
            ));
            op.deliver(Err(e.clone()));
            return Err(e);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.in_flight.insert(
            id,
            InFlight {
                what: request.what.clone(),
                stream: request.stream,
                last_chunk: None,
            },
        );
        match self.phase {
            Phase::Open(_) => self.write_request(id, &request),
            _ => self.queued.push((id, request)),
        }
        Ok(id)
    }

    fn write_request(&mut self, id: u64, request: &crate::client::SessionRequest) {
        let body = request
            .body
            .as_deref()
            .and_then(|b| serde_json::from_str::<&RawValue>(b).ok());
        HostFrame::Request(frame::Request {
            id,
            method: request.method.as_str().into(),
            path: request.path.as_str().into(),
            body,
            stream: request.stream,
            call: None,
        })
        .encode(&mut self.output);
    }

    /// Abandons operation `id`: the gateway cancels it upstream (`notifications/cancelled`), and
    /// the session forgets it (its answer, if one crosses the cancel, is dropped). The caller
    /// ends the operation itself ([`Operation::abandon`]). Returns whether `id` was in flight.
    pub fn cancel(&mut self, id: u64) -> bool {
        if self.in_flight.remove(&id).is_none() {
            return false;
        }
        if let Some(at) = self.queued.iter().position(|(q, _)| *q == id) {
            self.queued.remove(at);
        } else if !self.is_lost() {
            HostFrame::Cancel { id }.encode(&mut self.output);
        }
        true
    }

    /// The bytes to write to the channel's stdin, in order.
    pub fn pending_output(&self) -> &[u8] {
        &self.output
    }

    /// Marks the first `n` bytes of [`Session::pending_output`] as written.
    pub fn consume_output(&mut self, n: usize) {
        self.output.drain(..n.min(self.output.len()));
    }

    /// Takes every byte to write to the channel's stdin.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Takes bytes read from the channel's stdout.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.is_lost() {
            let newline = bytes.iter().position(|&b| b == b'\n');
            let (part, rest, complete) = match newline {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.discarding {
                self.discarding = !complete;
                continue;
            }
            if self.line.len() + part.len() > MAX_ANSWER_LINE_BYTES {
                self.line = Vec::new();
                self.discarding = !complete;
                self.lose(Error::protocol(format!(
                    "the session channel sent a line longer than {MAX_ANSWER_LINE_BYTES} bytes"
                )));
                return;
            }
            if !complete {
                self.line.extend_from_slice(part);
                return;
            }
            if self.line.is_empty() {
                self.take_line(part);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(part);
                self.take_line(&line);
                // Keep the allocation only when it is small.
                if line.capacity() <= 64 * 1024 {
                    line.clear();
                    self.line = line;
                }
            }
        }
    }

    /// The channel's stdout ended (its process exited, the exec backend dropped it, the host
    /// closed it): every operation it carried fails, and the session is lost. `reason` (e.g. the
    /// exec's exit status and stderr) goes into the message.
    pub fn feed_eof(&mut self, reason: &str) {
        if self.is_lost() {
            return;
        }
        let reason = reason.trim();
        let message = match &self.phase {
            Phase::Opening { preamble } => {
                let said = tail(preamble, PREAMBLE_KEEP);
                format!(
                    "the session channel ended before `mcpgw-gateway attach` answered{}{}; is \
                     the gateway binary at the configured path in the sandbox?",
                    if reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({reason})")
                    },
                    if said.is_empty() {
                        String::new()
                    } else {
                        format!("; it printed: {said}")
                    },
                )
            }
            _ => format!(
                "the session channel ended{}",
                if reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({reason})")
                }
            ),
        };
        self.lose(Error::new(ErrorKind::SessionLost, message));
    }

    /// Ends the session from the host's side: operations in flight fail with
    /// [`ErrorKind::SessionLost`] (close the channel's stdin then: `attach` cancels them in the
    /// gateway too).
    pub fn close(&mut self) {
        self.lose(Error::new(
            ErrorKind::SessionLost,
            "the session was closed by the host",
        ));
    }

    fn lose(&mut self, error: Error) {
        if self.is_lost() {
            return;
        }
        self.phase = Phase::Lost;
        self.output.clear();
        let queued: Vec<u64> = self.queued.drain(..).map(|(id, _)| id).collect();
        for id in &queued {
            self.in_flight.remove(id);
            self.events.push_back(Event::Unsent { id: *id });
        }
        let mut ids: Vec<u64> = self.in_flight.drain().map(|(id, _)| id).collect();
        ids.sort_unstable();
        for id in ids {
            self.events.push_back(Event::Finished {
                id,
                answer: Err(error.clone()),
            });
        }
        self.events.push_back(Event::Lost(error));
    }

    fn take_line(&mut self, line: &[u8]) {
        let text = match std::str::from_utf8(line) {
            Ok(t) => t.trim_end_matches('\r'),
            Err(_) => {
                if let Phase::Opening { preamble } = &mut self.phase {
                    keep_preamble(preamble, &String::from_utf8_lossy(line));
                } else {
                    self.events.push_back(Event::Notice(
                        "the channel sent a line that is not UTF-8".into(),
                    ));
                }
                return;
            }
        };
        if let Phase::Opening { preamble } = &mut self.phase {
            match GatewayFrame::parse(text) {
                Ok(GatewayFrame::Hello(hello)) => self.opened(hello),
                // Anything before the hello is a login shell's chatter: skipped, kept for a
                // message should the session never open.
                _ => keep_preamble(preamble, text),
            }
            return;
        }
        match GatewayFrame::parse(text) {
            Ok(frame) => self.take_frame(frame),
            Err(e) => self.events.push_back(Event::Notice(format!(
                "the channel sent a line that is not a frame: {e}"
            ))),
        }
    }

    fn opened(&mut self, hello: Hello) {
        if hello.v != frame::VERSION {
            return self.lose(Error::protocol(format!(
                "the gateway speaks session frame version {}, this library version {}; use a \
                 gateway binary of the same release",
                hello.v,
                frame::VERSION
            )));
        }
        if let Some(expected) = &self.expect.nonce
            && hello.instance_nonce.as_deref() != Some(expected.as_str())
        {
            return self.lose(Error::new(
                ErrorKind::GatewayNotRunning,
                format!(
                    "the session reached another gateway (instance nonce {:?}, expected {expected:?})",
                    hello.instance_nonce.as_deref().unwrap_or("none")
                ),
            ));
        }
        if let (Some(state_dir), Some(nonce), Some(token_file)) = (
            &self.expect.state_dir,
            &hello.instance_nonce,
            &hello.token_file,
        ) {
            self.shared.learn_launch(&GatewayInfo {
                port: hello.port,
                pid: hello.pid,
                token_file: token_file.clone(),
                instance_nonce: nonce.clone(),
                state_dir: state_dir.clone(),
            });
        }
        self.phase = Phase::Open(hello.clone());
        for (id, request) in std::mem::take(&mut self.queued) {
            self.write_request(id, &request);
        }
        self.events.push_back(Event::Opened(hello));
    }

    fn take_frame(&mut self, frame: GatewayFrame<'_>) {
        match frame {
            GatewayFrame::Hello(_) => self
                .events
                .push_back(Event::Notice("a second hello frame was ignored".into())),
            GatewayFrame::Chunk { id, chunk, .. } => {
                let Some(flight) = self.in_flight.get_mut(&id) else {
                    return self.unknown(id);
                };
                if !flight.stream {
                    // Only a streamed call answers in chunks.
                    return self.events.push_back(Event::Notice(format!(
                        "a chunk frame for operation {id}, which does not stream, was ignored"
                    )));
                }
                match serde_json::from_str::<ToolChunk>(chunk.get()) {
                    Ok(parsed) if parsed.is_last => flight.last_chunk = Some(chunk.to_owned()),
                    Ok(parsed) => self.events.push_back(Event::Progress { id, chunk: parsed }),
                    Err(e) => {
                        let what = flight.what.clone();
                        self.finish(
                            id,
                            Err(Error::protocol(format!(
                                "{what}: the session brought a chunk that is not a ToolChunk: {e}"
                            ))),
                        );
                    }
                }
            }
            GatewayFrame::Response { id, status, body } => {
                let Some(flight) = self.in_flight.remove(&id) else {
                    return self.unknown(id);
                };
                let answer = match (flight.stream, body, flight.last_chunk) {
                    (true, Body::Empty, Some(last)) => Ok(streamed_answer(&last)),
                    (true, Body::Empty, None) if (200..300).contains(&status) => {
                        Err(Error::protocol(format!(
                            "{}: the streamed call ended without its last chunk",
                            flight.what
                        )))
                    }
                    (_, body, _) => Ok(HttpResponse {
                        status,
                        body: body.as_bytes().to_vec(),
                    }),
                };
                self.events.push_back(Event::Finished { id, answer });
            }
            GatewayFrame::Cancelled { .. } => {}
            GatewayFrame::Error {
                id: Some(id),
                message,
            } => {
                let Some(flight) = self.in_flight.get(&id) else {
                    return self.unknown(id);
                };
                let e = Error::new(
                    ErrorKind::GatewayNotRunning,
                    format!(
                        "{}: the session could not relay the request: {message}",
                        flight.what
                    ),
                );
                self.finish(id, Err(e));
            }
            GatewayFrame::Error { id: None, message } => self.events.push_back(Event::Notice(
                format!("the gateway's attach says: {message}"),
            )),
            GatewayFrame::Ping => {}
            GatewayFrame::Opened { id }
            | GatewayFrame::Message { id, .. }
            | GatewayFrame::Closed { id, .. } => self.unknown(id),
        }
    }

    fn finish(&mut self, id: u64, answer: Result<HttpResponse, Error>) {
        self.in_flight.remove(&id);
        self.events.push_back(Event::Finished { id, answer });
    }

    fn unknown(&mut self, id: u64) {
        // A cancelled operation's answer may cross its cancel: not worth more than a notice.
        self.events.push_back(Event::Notice(format!(
            "a frame for operation {id}, which is not in flight, was ignored"
        )));
    }
}

fn keep_preamble(preamble: &mut String, line: &str) {
    preamble.push_str(line);
    preamble.push('\n');
    if preamble.len() > 2 * PREAMBLE_KEEP {
        let cut = preamble.len() - PREAMBLE_KEEP;
        let cut = (cut..preamble.len())
            .find(|&i| preamble.is_char_boundary(i))
            .unwrap_or(preamble.len());
        preamble.drain(..cut);
    }
}

/// The answer of a streamed call from its last chunk: `{"chunk": ...}` with status 200, or, for a
/// call that failed after progress, the status and detail it would have answered with.
fn streamed_answer(last: &RawValue) -> HttpResponse {
    if let Ok(chunk) = serde_json::from_str::<ToolChunk>(last.get())
        && let Some((status, detail)) = chunk.stream_failure()
    {
        return HttpResponse {
            status,
            body: serde_json::to_vec(&ErrorBody { detail }).expect("serializes"),
        };
    }
    let mut body = Vec::with_capacity(last.get().len() + 10);
    body.extend_from_slice(b"{\"chunk\":");
    body.extend_from_slice(last.get().as_bytes());
    body.push(b'}');
    HttpResponse { status: 200, body }
}

#[cfg(test)]
mod tests;
