//! The session channel, sans-IO: one long-lived exec (`docker exec -i`, `kubectl exec -i`, an
//! E2B background command with stdin, a local pipe) runs `mcpgw-gateway attach` in the sandbox,
//! and every REST operation of a client travels over its stdin and stdout as frames
//! ([`crate::wire::frame`]), many at once, with live progress and real cancellation; virtual MCP
//! connections carry raw JSON-RPC over the same channel.
//!
//! A [`Session`] does no I/O and keeps no policy: the host driver ([`crate::driver`]) decides what
//! goes over it, when to ping, when to give up and what to resume. The host runs
//! [`Session::open`]'s command with its stdin and stdout piped, writes [`Session::take_output`]
//! to the channel's stdin, feeds what it reads from the channel's stdout to [`Session::feed`]
//! (and [`Session::feed_eof`] at its end), and handles [`Session::poll_event`]'s events.
//!
//! Operations in flight on a channel that dies fail with [`ErrorKind::SessionLost`], except
//! resumable calls (submitted with a [`CallId`]), which the gateway keeps running: they come
//! back as [`Event::Detached`], to be resumed on a new channel with [`Session::resume`]. Nothing
//! is ever replayed by the session itself.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;

use crate::client::response::{HttpResponse, kind_of_status};
use crate::client::{Client, GatewayInfo, Operation, SessionRequest, Shared};
pub use crate::command::gateway::AttachOptions;
use crate::command::{Command, gateway as text};
use crate::error::{Error, ErrorKind, tail};
use crate::secret::Redactor;
use crate::wire::frame::{self, Body, CallId, GatewayFrame, Hello, HostFrame};
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
    /// A progress chunk of streamed operation `id`, as it happened (a ToolChunk's JSON, as the
    /// gateway sent it, with `is_last: false`).
    Progress {
        /// The operation's id, from [`Session::submit`] or [`Session::resume`].
        id: u64,
        /// The chunk.
        chunk: Box<RawValue>,
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
    /// Resumable call `id` was in flight when the channel was lost: the gateway keeps running
    /// it, and a new channel can [`Session::resume`] it.
    Detached {
        /// The operation's id on this session.
        id: u64,
        /// The call.
        call: CallId,
        /// How many progress chunks of it the host has.
        chunks: u64,
    },
    /// Virtual connection `id` is open.
    ConnectionOpened {
        /// The connection's id.
        id: u64,
    },
    /// A JSON-RPC message from the gateway on connection `id`.
    ConnectionMessage {
        /// The connection's id.
        id: u64,
        /// The message, as the gateway sent it.
        msg: Box<RawValue>,
    },
    /// Connection `id` ended.
    ConnectionClosed {
        /// The connection's id.
        id: u64,
        /// Why, unless the host closed it.
        reason: Option<String>,
        /// The HTTP status of a refused open.
        status: Option<u16>,
        /// What kind of failure the end is, unless the host closed it: a refused open's by its
        /// status ([`kind_of_status`]), `UpstreamError` when the gateway ended it (its server
        /// exited or was removed), `GatewayNotRunning` when `attach` could not carry it, the
        /// channel's own when the channel was lost.
        kind: Option<ErrorKind>,
    },
    /// Something the channel said that concerns no operation (a frame `attach` refused, a
    /// frame for an unknown id): worth a log line.
    Notice(String),
    /// The channel is gone; every operation and connection it carried got its `Finished`,
    /// `Unsent`, `Detached` or `ConnectionClosed` first.
    Lost(Error),
}

#[derive(Debug)]
struct InFlight {
    what: String,
    stream: bool,
    /// The resumable call this request carries.
    call: Option<CallId>,
    /// Progress chunks of it seen so far (on this channel and before).
    chunks: u64,
    /// A resume of a call an earlier channel carried: the gateway keeps it, whatever this
    /// channel's hello says.
    resumed: bool,
    /// The last chunk of a streamed call, the result once its `res` arrives.
    last_chunk: Option<Box<RawValue>>,
}

/// A frame waiting for the hello.
#[derive(Debug)]
enum Queued {
    Request(SessionRequest, Option<CallId>),
    Resume {
        call: CallId,
        after: u64,
        stream: bool,
    },
    Open(String),
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

/// One session channel, sans-IO. `Send`; not for concurrent use.
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    expect: Expect,
    phase: Phase,
    next_id: u64,
    in_flight: HashMap<u64, InFlight>,
    /// Open (or opening) virtual connections.
    connections: HashMap<u64, bool>,
    /// Frames submitted before the hello, in order: written once it comes.
    queued: Vec<(u64, Queued)>,
    output: Vec<u8>,
    /// `ack` frames not written yet: they go with the next frames written, or when
    /// [`Session::write_acks`] says so, so that an answer's acknowledgement costs the channel
    /// no write of its own.
    acks: Vec<u8>,
    line: Vec<u8>,
    /// Skipping the rest of a line longer than [`MAX_ANSWER_LINE_BYTES`].
    discarding: bool,
    events: VecDeque<Event>,
    /// Replaces the values of the host's secrets in every line before it is read.
    redactor: Redactor,
}

impl Session {
    /// A session for `client`, and the command that opens its channel: run it with `sh -c`
    /// inside the sandbox with stdin and stdout piped, and keep it running. For a gateway the
    /// client knows (launched, or configured by port and token file), `attach` relays to it; for
    /// a client that knows none, `attach --launch` starts one first (the hello says so), so one
    /// exec gives a ready session.
    pub fn open(client: &Client) -> Result<(Session, Command), Error> {
        Session::open_with(client, &AttachOptions::default())
    }

    /// [`Session::open`] with `attach`'s options.
    pub fn open_with(
        client: &Client,
        options: &AttachOptions,
    ) -> Result<(Session, Command), Error> {
        let shared = client.shared().clone();
        let c = &shared.config;
        let (mut text, expect) = match client.gateway() {
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
        text.push_str(&text::attach_options(options));
        // The channel lives as long as the host keeps it: no time limit of its own.
        let command = Command::new(text, Duration::MAX);
        Ok((
            Session {
                shared,
                expect,
                phase: Phase::Opening {
                    preamble: String::new(),
                },
                next_id: 1,
                in_flight: HashMap::new(),
                connections: HashMap::new(),
                queued: Vec::new(),
                output: Vec::new(),
                acks: Vec::new(),
                line: Vec::new(),
                discarding: false,
                events: VecDeque::new(),
                redactor: Redactor::default(),
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

    /// How many operations and connections the session carries (queued or in flight).
    pub fn in_flight(&self) -> usize {
        self.in_flight.len() + self.connections.len()
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Takes `op`'s request (a REST operation that has run no command yet) and returns the id
    /// its events will carry; `op` then wants no command until the session delivers its answer.
    /// With `stream`, a tool call reports each progress chunk as it happens; with `call`, the
    /// request is resumable (it outlives the channel; see [`Event::Detached`]).
    ///
    /// Fails, leaving `op` exactly as it was (so it can go over one-shot commands), for an
    /// operation a session cannot carry (the launch, the stop, the install, one already under
    /// way), for a body larger than the session's frames, and on a lost session.
    pub fn submit<T>(
        &mut self,
        op: &mut Operation<T>,
        stream: bool,
        call: Option<CallId>,
    ) -> Result<u64, Error> {
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
            op.resume();
            return Err(Error::invalid_argument(format!(
                "{}: the request body ({} bytes) exceeds the session's frame limit of {} bytes",
                request.what,
                body.len(),
                hello.max_frame_bytes
            )));
        }
        Ok(self.submit_request(request, call))
    }

    /// Sends `request` (from [`Operation::session_request`]), e.g. an idempotent request again on
    /// a new channel; see [`Session::submit`].
    pub fn submit_request(&mut self, request: SessionRequest, call: Option<CallId>) -> u64 {
        let id = self.take_id();
        self.in_flight.insert(
            id,
            InFlight {
                what: request.what.clone(),
                stream: request.stream,
                call: call.clone(),
                chunks: 0,
                resumed: false,
                last_chunk: None,
            },
        );
        match self.phase {
            Phase::Open(_) => self.write_request(id, &request, call),
            _ => self.queued.push((id, Queued::Request(request, call))),
        }
        id
    }

    /// Continues resumable call `call` (of the operation `what`) on this channel: the chunks
    /// after the first `after`, then its answer, under the returned id.
    pub fn resume(&mut self, what: &str, call: CallId, after: u64, stream: bool) -> u64 {
        let id = self.take_id();
        self.in_flight.insert(
            id,
            InFlight {
                what: what.to_owned(),
                stream,
                call: Some(call.clone()),
                chunks: after,
                resumed: true,
                last_chunk: None,
            },
        );
        match self.phase {
            Phase::Open(_) => HostFrame::Resume {
                id,
                call,
                after,
                stream,
            }
            .encode(&mut self.output),
            _ => self.queued.push((
                id,
                Queued::Resume {
                    call,
                    after,
                    stream,
                },
            )),
        }
        id
    }

    fn write_request(&mut self, id: u64, request: &SessionRequest, call: Option<CallId>) {
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
            call,
        })
        .encode(&mut self.output);
    }

    /// Abandons operation `id`: the gateway cancels it upstream (`notifications/cancelled`, and
    /// for a resumable call the call itself), and the session forgets it (its answer, if one
    /// crosses the cancel, is dropped). The caller ends the operation itself
    /// ([`Operation::abandon`]). Returns whether `id` was in flight.
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

    /// Opens a virtual MCP connection to `path` (`/mcps/{name}/connection?agent_id=&session_id=`);
    /// its events carry the returned id.
    pub fn open_connection(&mut self, path: &str) -> Result<u64, Error> {
        if self.is_lost() {
            return Err(Error::new(
                ErrorKind::SessionLost,
                "the session channel is lost",
            ));
        }
        let id = self.take_id();
        self.connections.insert(id, false);
        match self.phase {
            Phase::Open(_) => HostFrame::Open {
                id,
                path: path.into(),
            }
            .encode(&mut self.output),
            _ => self.queued.push((id, Queued::Open(path.to_owned()))),
        }
        Ok(id)
    }

    /// Sends one JSON-RPC message (a JSON object) on connection `id`. Fails for a connection
    /// that is not open (yet or any more) and for a message that is not one JSON object.
    pub fn send_message(&mut self, id: u64, msg: &str) -> Result<(), Error> {
        match self.connections.get(&id) {
            Some(true) => {}
            Some(false) => {
                return Err(Error::new(
                    ErrorKind::InvalidState,
                    format!("connection {id} is not open yet"),
                ));
            }
            None => {
                return Err(Error::new(
                    ErrorKind::InvalidState,
                    format!("connection {id} is not open"),
                ));
            }
        }
        if let Phase::Open(hello) = &self.phase
            && msg.len() + frame::ENVELOPE_BYTES > hello.max_frame_bytes as usize
        {
            return Err(Error::invalid_argument(format!(
                "the message ({} bytes) exceeds the session's frame limit of {} bytes",
                msg.len(),
                hello.max_frame_bytes
            )));
        }
        let raw: &RawValue = serde_json::from_str(msg.trim())
            .map_err(|e| Error::invalid_argument(format!("the message is not valid JSON: {e}")))?;
        if !raw.get().starts_with('{') {
            return Err(Error::invalid_argument(
                "the message must be one JSON-RPC message (a JSON object)",
            ));
        }
        HostFrame::Message { id, msg: raw }.encode(&mut self.output);
        Ok(())
    }

    /// Closes connection `id`; its [`Event::ConnectionClosed`] follows. Returns whether it was
    /// open.
    pub fn close_connection(&mut self, id: u64) -> bool {
        if self.connections.remove(&id).is_none() {
            return false;
        }
        if let Some(at) = self.queued.iter().position(|(q, _)| *q == id) {
            self.queued.remove(at);
            self.events.push_back(Event::ConnectionClosed {
                id,
                reason: None,
                status: None,
                kind: None,
            });
        } else if !self.is_lost() {
            HostFrame::Close { id }.encode(&mut self.output);
            self.events.push_back(Event::ConnectionClosed {
                id,
                reason: None,
                status: None,
                kind: None,
            });
        }
        true
    }

    /// Writes a heartbeat.
    pub fn ping(&mut self) {
        if let Phase::Open(_) = self.phase {
            HostFrame::Ping.encode(&mut self.output);
        }
    }

    /// Takes every byte to write to the channel's stdin, in order, with the acknowledgements
    /// waiting after them when there is anything else to write.
    pub fn take_output(&mut self) -> Vec<u8> {
        if !self.output.is_empty() {
            self.output.append(&mut self.acks);
        }
        std::mem::take(&mut self.output)
    }

    /// Whether acknowledgements wait for the next write.
    pub fn acks_waiting(&self) -> bool {
        !self.acks.is_empty()
    }

    /// Makes the waiting acknowledgements output of their own.
    pub fn write_acks(&mut self) {
        self.output.append(&mut self.acks);
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Whether the hello has come.
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open(_))
    }

    /// Ends the session with `error` (the host closed it, or gave up on it): operations in
    /// flight fail with it, resumable calls are detached, connections close. Close the
    /// channel's stdin then: `attach` ends what it carried in the gateway too.
    pub fn lose_with(&mut self, error: Error) {
        self.lose(error);
    }

    /// Ends the session from the host's side: operations in flight fail with
    /// [`ErrorKind::SessionLost`].
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
        // Calls outlive the channel only when the gateway keeps them.
        let keeps = self.hello().is_some_and(|h| h.retention_ms > 0);
        self.phase = Phase::Lost;
        self.output.clear();
        self.acks.clear();
        for (id, queued) in std::mem::take(&mut self.queued) {
            match queued {
                Queued::Request(..) => {
                    self.in_flight.remove(&id);
                    self.events.push_back(Event::Unsent { id });
                }
                // A resume not yet written: still the gateway's call, still resumable.
                Queued::Resume { .. } => {}
                Queued::Open(_) => {}
            }
        }
        let mut ids: Vec<u64> = self.in_flight.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let flight = self.in_flight.remove(&id).expect("listed");
            match flight.call.filter(|_| keeps || flight.resumed) {
                Some(call) => self.events.push_back(Event::Detached {
                    id,
                    call,
                    chunks: flight.chunks,
                }),
                None => self.events.push_back(Event::Finished {
                    id,
                    answer: Err(error.clone()),
                }),
            }
        }
        let mut conns: Vec<u64> = self.connections.drain().map(|(id, _)| id).collect();
        conns.sort_unstable();
        for id in conns {
            self.events.push_back(Event::ConnectionClosed {
                id,
                reason: Some(error.message().to_owned()),
                status: None,
                kind: Some(error.kind()),
            });
        }
        self.events.push_back(Event::Lost(error));
    }

    /// Has every line read from now on pass through `redactor` first.
    pub fn set_redactor(&mut self, redactor: Redactor) {
        self.redactor = redactor;
    }
}

mod read;
#[cfg(test)]
mod tests;
