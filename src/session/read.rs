//! What the channel's stdout says: lines read, the hello, frames taken, answers and progress
//! delivered as events.

use super::*;

impl Session {
    /// Takes bytes read from the channel's stdout.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() && !self.is_lost() {
            let newline = memchr(bytes);
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
    /// closed it): every operation it carried fails (resumable calls are detached), and the
    /// session is lost. `reason` (e.g. the exec's exit status and stderr) goes into the message.
    pub fn feed_eof(&mut self, reason: &str) {
        if self.is_lost() {
            return;
        }
        let error = self.eof_error(reason);
        self.lose(error);
    }

    /// The error an end of the channel now means (see [`Session::feed_eof`]).
    pub fn eof_error(&self, reason: &str) -> Error {
        let reason = reason.trim();
        let because = if reason.is_empty() {
            String::new()
        } else {
            format!(" ({reason})")
        };
        match &self.phase {
            Phase::Opening { preamble } => {
                let said = tail(preamble, PREAMBLE_KEEP);
                Error::new(
                    ErrorKind::SessionLost,
                    format!(
                        "the session channel ended before `mcpgw-gateway attach` answered{because}{}",
                        if said.is_empty() {
                            String::new()
                        } else {
                            format!("; it printed: {said}")
                        },
                    ),
                )
            }
            _ => Error::new(
                ErrorKind::SessionLost,
                format!("the session channel ended{because}"),
            ),
        }
    }

    pub(super) fn take_line(&mut self, line: &[u8]) {
        if self.redactor.is_empty() {
            return self.read_line(line);
        }
        let redactor = std::mem::take(&mut self.redactor);
        self.read_line(&redactor.redact(line));
        self.redactor = redactor;
    }

    pub(super) fn read_line(&mut self, line: &[u8]) {
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

    pub(super) fn opened(&mut self, hello: Hello) {
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
        for (id, queued) in std::mem::take(&mut self.queued) {
            match queued {
                Queued::Request(request, call) => self.write_request(id, &request, call),
                Queued::Resume {
                    call,
                    after,
                    stream,
                } => HostFrame::Resume {
                    id,
                    call,
                    after,
                    stream,
                }
                .encode(&mut self.output),
                Queued::Open(path) => HostFrame::Open {
                    id,
                    path: path.into(),
                }
                .encode(&mut self.output),
            }
        }
        self.events.push_back(Event::Opened(hello));
    }

    pub(super) fn take_frame(&mut self, frame: GatewayFrame<'_>) {
        match frame {
            GatewayFrame::Hello(_) => self
                .events
                .push_back(Event::Notice("a second hello frame was ignored".into())),
            GatewayFrame::Chunk { id, chunk, seq } => self.chunk(id, chunk, seq),
            GatewayFrame::Response { id, status, body } => self.response(id, status, body),
            GatewayFrame::Cancelled { .. } | GatewayFrame::Ping => {}
            GatewayFrame::Error {
                id: Some(id),
                message,
            } => self.error_frame(id, &message),
            GatewayFrame::Error { id: None, message } => self.events.push_back(Event::Notice(
                format!("the gateway's attach says: {message}"),
            )),
            GatewayFrame::Opened { id } => match self.connections.get_mut(&id) {
                Some(open) => {
                    *open = true;
                    self.events.push_back(Event::ConnectionOpened { id });
                }
                None => self.unknown(id),
            },
            GatewayFrame::Message { id, msg } => match self.connections.get(&id) {
                Some(true) => self.events.push_back(Event::ConnectionMessage {
                    id,
                    msg: msg.to_owned(),
                }),
                _ => self.unknown(id),
            },
            GatewayFrame::Closed { id, reason, status } => {
                if self.connections.remove(&id).is_some() {
                    self.events.push_back(Event::ConnectionClosed {
                        id,
                        reason: Some(
                            reason
                                .map(|r| r.into_owned())
                                .unwrap_or_else(|| "the gateway closed the connection".into()),
                        ),
                        status,
                        kind: Some(status.map_or(ErrorKind::UpstreamError, kind_of_status)),
                    });
                }
                // Else: the answer to the host's own close, already reported.
            }
        }
    }

    /// A chunk of a streamed call: progress, or its last chunk (kept for its answer).
    fn chunk(&mut self, id: u64, chunk: &RawValue, seq: Option<u64>) {
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
            Ok(_) => {
                // A resumed call's chunk the host already has comes again: skipped.
                let seq = seq.unwrap_or(flight.chunks + 1);
                if seq > flight.chunks {
                    flight.chunks = seq;
                    self.events.push_back(Event::Progress {
                        id,
                        chunk: chunk.to_owned(),
                    });
                }
            }
            Err(e) => {
                let what = flight.what.clone();
                self.cancel(id);
                self.events.push_back(Event::Finished {
                    id,
                    answer: Err(Error::protocol(format!(
                        "{what}: the session brought a chunk that is not a ToolChunk: {e}"
                    ))),
                });
            }
        }
    }

    /// The answer to operation `id`: acknowledged when it is a call's, and delivered.
    fn response(&mut self, id: u64, status: u16, body: Body<'_>) {
        let Some(flight) = self.in_flight.remove(&id) else {
            return self.unknown(id);
        };
        // The host has the call's answer: the gateway need not keep it. (404, 409 and
        // 410 say the gateway keeps no answer of that id: nothing to acknowledge.)
        if let Some(call) = &flight.call
            && !matches!(status, 404 | 409 | 410)
        {
            HostFrame::Ack { call: call.clone() }.encode(&mut self.acks);
        }
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

    /// The gateway's attach could not relay request or connection `id`.
    fn error_frame(&mut self, id: u64, message: &str) {
        if self.connections.remove(&id).is_some() {
            return self.events.push_back(Event::ConnectionClosed {
                id,
                reason: Some(message.to_owned()),
                status: None,
                kind: Some(ErrorKind::GatewayNotRunning),
            });
        }
        let Some(flight) = self.in_flight.remove(&id) else {
            return self.unknown(id);
        };
        let e = Error::new(
            ErrorKind::GatewayNotRunning,
            format!(
                "{}: the session could not relay the request: {message}",
                flight.what
            ),
        );
        self.events
            .push_back(Event::Finished { id, answer: Err(e) });
    }

    pub(super) fn unknown(&mut self, id: u64) {
        // A cancelled operation's answer may cross its cancel: not worth more than a notice.
        self.events.push_back(Event::Notice(format!(
            "a frame for operation {id}, which is not in flight, was ignored"
        )));
    }
}

pub(super) fn memchr(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

pub(super) fn keep_preamble(preamble: &mut String, line: &str) {
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
pub(super) fn streamed_answer(last: &RawValue) -> HttpResponse {
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
