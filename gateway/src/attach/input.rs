//! Stdin: lines read with bounded memory and parsed into frames, on the runtime's thread when
//! stdin can be polled, else on a thread of its own.
//!
//! A line longer than the limit is refused as soon as it passes the limit and the rest of it is
//! skipped as it arrives, never held: at most the limit's worth of a line is in memory, once. A request's body is not copied: it stays in the line's
//! buffer and goes to the gateway as a slice of it.

use std::io::Read;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

use bytes::Bytes;
use http::Method;
use http::uri::PathAndQuery;
use mcpgw::wire::frame::{CallId, HostFrame, quoted};
use tokio::sync::mpsc;

use super::liveness::Moment;
use super::stdio;

/// Frames parsed ahead of the relay; beyond, the reader waits (and stdin with it).
const QUEUE: usize = 64;

/// Bytes read from stdin at a time.
const READ_BYTES: usize = 64 * 1024;

/// Past this length a line's buffer grows to the limit in one step.
const EXACT_GROWTH_BYTES: usize = 1 << 20;

/// How much of an oversized line is searched for its request id.
const ID_SEARCH_BYTES: usize = 4096;

/// One `req` frame, ready to send.
#[derive(Debug)]
pub struct Call {
    /// The host's id.
    pub id: u64,
    /// The HTTP method.
    pub method: Method,
    /// Path and query.
    pub path: PathAndQuery,
    /// The JSON body, a slice of the line it came in.
    pub body: Option<Bytes>,
    /// Whether a tool call should answer as a stream of chunks.
    pub stream: bool,
    /// The resumable call it makes or resumes.
    pub resumable: Option<Resumable>,
}

/// The resumable call of a request.
#[derive(Debug, Clone)]
pub struct Resumable {
    /// Its id.
    pub call: CallId,
    /// Whether the request resumes it (`GET /calls/{id}`) rather than makes it.
    pub resume: bool,
}

/// What a line of input asks for.
#[derive(Debug)]
pub enum Input {
    /// Relay a request.
    Request(Call),
    /// Abandon a request.
    Cancel(u64),
    /// Open a virtual MCP connection.
    Open {
        /// The connection's id.
        id: u64,
        /// `/mcps/{name}/connection` with its query.
        path: PathAndQuery,
    },
    /// A JSON-RPC message for connection `id`, a slice of its line.
    Message {
        /// The connection's id.
        id: u64,
        /// The message's bytes, as the host sent them.
        msg: Bytes,
    },
    /// Close a virtual MCP connection.
    Close(u64),
    /// A heartbeat.
    Ping,
    /// The host has the final answer of a resumable call.
    Ack(CallId),
    /// A line that is not a valid frame: the `error` frame to answer it with.
    Invalid {
        /// The id the line carried, when it could be read.
        id: Option<u64>,
        /// What is wrong.
        message: String,
    },
}

/// Starts reading stdin (call it inside the runtime), touching `read` whenever bytes arrive;
/// the receiver ends (`None`) at the end of input.
pub fn start(max_frame_bytes: usize, read: Moment) -> mpsc::Receiver<Input> {
    let (tx, rx) = mpsc::channel(QUEUE);
    match stdio::pollable(0, tokio::io::Interest::READABLE) {
        Some(stdin) => {
            tokio::spawn(async move {
                let mut buf = vec![0; READ_BYTES];
                let mut lines = Splitter::new(max_frame_bytes);
                loop {
                    let n = match stdio::read(&stdin, &mut buf).await {
                        Ok(n) => n,
                        Err(e) => {
                            ended(&e);
                            0
                        }
                    };
                    read.touch();
                    for input in lines.feed(&buf[..n]) {
                        if tx.send(input).await.is_err() {
                            return;
                        }
                    }
                    if n == 0 {
                        return;
                    }
                }
            });
        }
        None => {
            std::thread::Builder::new()
                .name("attach-stdin".into())
                .spawn(move || {
                    // SAFETY: fd 0 stays open for the life of the process; ManuallyDrop never
                    // closes it.
                    let mut stdin = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
                    let mut buf = vec![0; READ_BYTES];
                    let mut lines = Splitter::new(max_frame_bytes);
                    loop {
                        let n = match stdin.read(&mut buf) {
                            Ok(n) => n,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                            Err(e) => {
                                ended(&e);
                                0
                            }
                        };
                        read.touch();
                        for input in lines.feed(&buf[..n]) {
                            if tx.blocking_send(input).is_err() {
                                return;
                            }
                        }
                        if n == 0 {
                            return;
                        }
                    }
                })
                .expect("spawning the stdin thread");
        }
    }
    rx
}

fn ended(e: &std::io::Error) {
    // A terminal whose other end went away reads EIO: that too ends the session.
    tracing::debug!("reading stdin failed, ending the session: {e}");
}

/// Turns one line into what it asks for.
pub fn parse(line: Vec<u8>) -> Input {
    let Ok(text) = std::str::from_utf8(&line) else {
        return Input::Invalid {
            id: top_level_id(&line),
            message: "not a frame: the line is not UTF-8".into(),
        };
    };
    let request = match HostFrame::parse(text) {
        Ok(HostFrame::Request(r)) => r,
        Ok(HostFrame::Cancel { id }) => return Input::Cancel(id),
        Ok(HostFrame::Ping) => return Input::Ping,
        Ok(HostFrame::Open { id, path }) => {
            return match target(&path) {
                Ok(path) => Input::Open { id, path },
                Err(e) => Input::Invalid {
                    id: Some(id),
                    message: format!("path {} is not a valid request target: {e}", quoted(&path)),
                },
            };
        }
        Ok(HostFrame::Message { id, msg }) => {
            let at = msg.get().as_ptr() as usize - text.as_ptr() as usize;
            let range = at..at + msg.get().len();
            return Input::Message {
                id,
                msg: Bytes::from(line).slice(range),
            };
        }
        Ok(HostFrame::Close { id }) => return Input::Close(id),
        Ok(HostFrame::Resume {
            id,
            call,
            after,
            stream,
        }) => {
            let path = format!("{}?after={after}", mcpgw::wire::rest::path::call(&call));
            return Input::Request(Call {
                id,
                method: Method::GET,
                path: PathAndQuery::try_from(path).expect("hex digits and a number"),
                body: None,
                stream,
                resumable: Some(Resumable { call, resume: true }),
            });
        }
        Ok(HostFrame::Ack { call }) => return Input::Ack(call),
        Err(e) => {
            return Input::Invalid {
                id: e.id,
                message: e.message,
            };
        }
    };
    let method = Method::from_bytes(request.method.as_bytes()).expect("checked by the frame");
    let path = match target(&request.path) {
        Ok(p) => p,
        Err(e) => {
            return Input::Invalid {
                id: Some(request.id),
                message: format!(
                    "path {} is not a valid request target: {e}",
                    quoted(&request.path)
                ),
            };
        }
    };
    // The body borrows from the line: remember where, then hand the line over as its buffer.
    let body = request.body.map(|raw| {
        let at = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        at..at + raw.get().len()
    });
    let (id, stream) = (request.id, request.stream);
    let resumable = request.call.clone().map(|call| Resumable {
        call,
        resume: false,
    });
    drop(request);
    Input::Request(Call {
        id,
        method,
        path,
        body: body.map(|range| Bytes::from(line).slice(range)),
        stream,
        resumable,
    })
}

/// A frame's path as a request target. A fragment would be cut off and raw non-ASCII sent as
/// is: both are a host's encoding bug.
fn target(path: &str) -> Result<PathAndQuery, String> {
    match path.bytes().find(|&b| b == b'#' || !b.is_ascii()) {
        Some(_) => Err("percent-encode # and every non-ASCII byte".to_string()),
        None => PathAndQuery::try_from(path).map_err(|e| e.to_string()),
    }
}

/// What [`Splitter::split`] found.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line, without its `\n`.
    Frame(Vec<u8>),
    /// A line longer than the limit; the rest of it is skipped as it arrives.
    TooLong {
        /// The request id at its start, when it has one.
        id: Option<u64>,
    },
}

/// Cuts input into lines of at most `max` bytes (without the `\n`), whatever pieces it comes
/// in: it holds at most one line, and none of a line past the limit.
pub struct Splitter {
    max: usize,
    line: Vec<u8>,
    skipping: bool,
}

impl Splitter {
    /// Lines of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        Splitter {
            max,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// Takes bytes from the front of `data`: how many it used, and the line they ended, if any.
    pub fn split(&mut self, data: &[u8]) -> (usize, Option<Line>) {
        let newline = memchr::memchr(b'\n', data);
        if self.skipping {
            return match newline {
                Some(at) => {
                    self.skipping = false;
                    (at + 1, None)
                }
                None => (data.len(), None),
            };
        }
        let take = newline.unwrap_or(data.len());
        if self.line.len() + take > self.max {
            let mut head = std::mem::take(&mut self.line);
            head.truncate(ID_SEARCH_BYTES);
            let more = ID_SEARCH_BYTES.saturating_sub(head.len()).min(data.len());
            head.extend_from_slice(&data[..more]);
            let id = top_level_id(&head);
            let used = match newline {
                Some(at) => at + 1,
                None => {
                    self.skipping = true;
                    data.len()
                }
            };
            return (used, Some(Line::TooLong { id }));
        }
        let needed = self.line.len() + take;
        if needed > self.line.capacity() && needed > EXACT_GROWTH_BYTES {
            // A long line gets the limit's capacity at once: growing by doubling would copy it
            // over and over and hold up to twice the limit (the pages of a large allocation
            // cost memory only once written).
            self.line.reserve_exact(self.max - self.line.len());
        }
        self.line.extend_from_slice(&data[..take]);
        match newline {
            Some(at) => (at + 1, Some(Line::Frame(std::mem::take(&mut self.line)))),
            None => (data.len(), None),
        }
    }

    /// What `data` asks for, in order; empty `data` is the end of input, which ends a last line
    /// that has no `\n`. Blank lines ask for nothing.
    pub fn feed(&mut self, mut data: &[u8]) -> Vec<Input> {
        let mut out = Vec::new();
        let max = self.max;
        let mut found = |line: Line| match line {
            Line::Frame(line) if line.trim_ascii().is_empty() => {}
            Line::Frame(line) => out.push(parse(line)),
            Line::TooLong { id } => out.push(Input::Invalid {
                id,
                message: format!(
                    "line longer than {max} bytes (the max_frame_bytes of hello): skipped"
                ),
            }),
        };
        if data.is_empty() && !self.skipping {
            found(Line::Frame(std::mem::take(&mut self.line)));
        }
        while !data.is_empty() {
            let (used, line) = self.split(data);
            data = &data[used..];
            if let Some(line) = line {
                found(line);
            }
        }
        out
    }
}

/// The `"id"` member of the JSON object that `head` begins, when `head` holds all of its digits
/// (the frame encoder writes it second, right after `"t"`). Nested objects and strings are
/// skipped, so an `"id"` inside a body is never taken for the frame's.
pub fn top_level_id(head: &[u8]) -> Option<u64> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < head.len() {
        match head[i] {
            b'"' => {
                let start = i + 1;
                i = start;
                while i < head.len() && head[i] != b'"' {
                    i += if head[i] == b'\\' { 2 } else { 1 };
                }
                if i >= head.len() {
                    return None;
                }
                let key = &head[start..i];
                i += 1;
                if depth == 1 && key == b"id" {
                    let rest = &head[i..];
                    let rest = rest
                        .trim_ascii_start()
                        .strip_prefix(b":")?
                        .trim_ascii_start();
                    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                    if digits == 0 || digits == rest.len() {
                        return None;
                    }
                    return std::str::from_utf8(&rest[..digits]).ok()?.parse().ok();
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line of `input` fed in pieces of `step` bytes, like a pipe delivers them.
    fn all(input: &[u8], step: usize, max: usize) -> Vec<Line> {
        let mut splitter = Splitter::new(max);
        let mut out = Vec::new();
        for mut piece in input.chunks(step) {
            while !piece.is_empty() {
                let (used, line) = splitter.split(piece);
                piece = &piece[used..];
                out.extend(line);
            }
        }
        out.extend((!splitter.line.is_empty()).then(|| Line::Frame(splitter.line.clone())));
        out
    }

    #[test]
    fn lines_are_split_and_bounded_whatever_the_read_sizes() {
        let long = format!("{{\"t\":\"req\",\"id\":42,\"x\":\"{}\"}}", "a".repeat(300));
        let input = format!("ab\n\n{long}\ncd\n{}\nlast", "b".repeat(20));
        for step in [1, 3, 7, 64, 100_000] {
            let got = all(input.as_bytes(), step, 20);
            assert_eq!(
                got,
                [
                    Line::Frame(b"ab".to_vec()),
                    Line::Frame(vec![]),
                    Line::TooLong { id: Some(42) },
                    Line::Frame(b"cd".to_vec()),
                    Line::Frame(vec![b'b'; 20]),
                    Line::Frame(b"last".to_vec()),
                ],
                "step {step}"
            );
        }
        // Nothing past the limit is kept, however long the line.
        let mut splitter = Splitter::new(10);
        let piece = vec![b'x'; READ_BYTES];
        assert_eq!(
            splitter.split(&piece),
            (READ_BYTES, Some(Line::TooLong { id: None }))
        );
        for _ in 0..3 {
            assert_eq!(splitter.split(&piece), (READ_BYTES, None));
            assert!(splitter.line.capacity() <= 10);
        }
        assert_eq!(splitter.split(b"x\nok\n"), (2, None));
        assert_eq!(
            splitter.split(b"ok\n"),
            (3, Some(Line::Frame(b"ok".to_vec())))
        );
    }

    #[test]
    fn feeding_skips_blank_lines_and_ends_a_last_line_at_the_end_of_input() {
        let mut splitter = Splitter::new(1024);
        let got = splitter.feed(b"\n \r\n{\"t\":\"cancel\",\"id\":1}\n{\"t\":\"cancel\",");
        assert!(matches!(got[..], [Input::Cancel(1)]), "{got:?}");
        let got = splitter.feed(b"\"id\":2}");
        assert!(got.is_empty(), "{got:?}");
        let got = splitter.feed(b"");
        assert!(matches!(got[..], [Input::Cancel(2)]), "{got:?}");
    }

    #[test]
    fn the_id_of_an_oversized_line_is_the_frames_own() {
        assert_eq!(top_level_id(br#"{"t":"req","id":7,"body":{"#), Some(7));
        assert_eq!(top_level_id(br#"{ "id" : 12 ,"#), Some(12));
        assert_eq!(top_level_id(br#"{"body":{"id":5},"id":6,"#), Some(6));
        assert_eq!(top_level_id(br#"{"path":"\"id\":5","id":9}"#), Some(9));
        assert_eq!(
            top_level_id(br#"{"t":"req","id":12"#),
            None,
            "digits cut off"
        );
        assert_eq!(top_level_id(br#"{"body":{"id":5"#), None);
        assert_eq!(top_level_id(b"garbage"), None);
        assert_eq!(top_level_id(br#"{"id":"7"}"#), None);
    }

    #[test]
    fn requests_keep_their_body_in_the_line() {
        let line = br#"{"t":"req","id":3,"method":"POST","path":"/mcps?agent_id=a","body":{"name":"x\ny"},"stream":true}"#;
        let Input::Request(call) = parse(line.to_vec()) else {
            panic!("not a request")
        };
        assert_eq!(
            (call.id, call.method.as_str(), call.stream),
            (3, "POST", true)
        );
        assert_eq!(call.path.as_str(), "/mcps?agent_id=a");
        assert_eq!(call.body.as_deref(), Some(&br#"{"name":"x\ny"}"#[..]));
        assert!(matches!(
            parse(br#"{"t":"cancel","id":4}"#.to_vec()),
            Input::Cancel(4)
        ));
        for (line, id, says) in [
            (
                &br#"{"t":"req","id":5,"method":"GET","path":"/caf\u00e9"}"#[..],
                Some(5),
                "path",
            ),
            (
                br#"{"t":"req","id":5,"method":"GET","path":"/a#b"}"#,
                Some(5),
                "path",
            ),
            (
                br#"{"t":"req","id":5,"method":"GET","path":"/a<b"}"#,
                Some(5),
                "path",
            ),
            (b"\xff\xfe", None, "UTF-8"),
            (b"nope", None, "not a frame"),
            (br#"{"t":"res","id":6}"#, Some(6), "unknown frame type"),
        ] {
            let Input::Invalid { id: got, message } = parse(line.to_vec()) else {
                panic!("accepted {line:?}")
            };
            assert_eq!(got, id, "{message}");
            assert!(message.contains(says), "{message}");
        }
    }
}
