//! Stdin: lines read with bounded memory and parsed into frames on a thread of their own.
//!
//! A line longer than the limit is refused as soon as it passes the limit and the rest of it is
//! skipped as it arrives, never held. A request's body is not copied: it stays in the line's
//! buffer and goes to the gateway as a slice of it.

use std::io::Read;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;

use bytes::Bytes;
use http::Method;
use http::uri::PathAndQuery;
use mcpgw::wire::frame::HostFrame;
use tokio::sync::mpsc;

/// Frames parsed ahead of the relay; beyond, the reader waits (and stdin with it).
const QUEUE: usize = 64;

/// Bytes read from stdin at a time.
const READ_BYTES: usize = 64 * 1024;

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
}

/// What a line of input asks for.
#[derive(Debug)]
pub enum Input {
    /// Relay a request.
    Request(Call),
    /// Abandon a request.
    Cancel(u64),
    /// A line that is not a valid frame: the `error` frame to answer it with.
    Invalid {
        /// The id the line carried, when it could be read.
        id: Option<u64>,
        /// What is wrong.
        message: String,
    },
}

/// Starts the stdin thread; the receiver ends (`None`) at the end of input.
pub fn start(max_frame_bytes: usize) -> mpsc::Receiver<Input> {
    let (tx, rx) = mpsc::channel(QUEUE);
    std::thread::Builder::new()
        .name("attach-stdin".into())
        .spawn(move || {
            // SAFETY: fd 0 stays open for the life of the process; ManuallyDrop never closes it.
            let stdin = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
            read_frames(&*stdin, max_frame_bytes, &tx);
        })
        .expect("spawning the stdin thread");
    rx
}

fn read_frames(stdin: impl Read, max_frame_bytes: usize, tx: &mpsc::Sender<Input>) {
    let mut lines = Lines::new(stdin, max_frame_bytes);
    loop {
        let input = match lines.next() {
            Ok(Line::Frame(line)) if line.trim_ascii().is_empty() => continue,
            Ok(Line::Frame(line)) => parse(line),
            Ok(Line::TooLong { id }) => Input::Invalid {
                id,
                message: format!(
                    "line longer than {max_frame_bytes} bytes (the max_frame_bytes of hello): skipped"
                ),
            },
            Ok(Line::End) => return,
            Err(e) => {
                // A terminal whose other end went away reads EIO: that too ends the session.
                tracing::debug!("reading stdin failed, ending the session: {e}");
                return;
            }
        };
        if tx.blocking_send(input).is_err() {
            return;
        }
    }
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
        Err(e) => {
            return Input::Invalid {
                id: e.id,
                message: e.message,
            };
        }
    };
    let method = Method::from_bytes(request.method.as_bytes()).expect("checked by the frame");
    // A fragment would be cut off and raw non-ASCII sent as is: both are a host's encoding bug.
    let target = match request.path.bytes().find(|&b| b == b'#' || !b.is_ascii()) {
        Some(_) => Err("percent-encode # and every non-ASCII byte".to_string()),
        None => PathAndQuery::try_from(&*request.path).map_err(|e| e.to_string()),
    };
    let path = match target {
        Ok(p) => p,
        Err(e) => {
            return Input::Invalid {
                id: Some(request.id),
                message: format!("path {:?} is not a valid request target: {e}", request.path),
            };
        }
    };
    // The body borrows from the line: remember where, then hand the line over as its buffer.
    let body = request.body.map(|raw| {
        let at = raw.get().as_ptr() as usize - text.as_ptr() as usize;
        at..at + raw.get().len()
    });
    let (id, stream) = (request.id, request.stream);
    drop(request);
    Input::Request(Call {
        id,
        method,
        path,
        body: body.map(|range| Bytes::from(line).slice(range)),
        stream,
    })
}

/// What [`Lines::next`] read.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A line, without its `\n`.
    Frame(Vec<u8>),
    /// A line longer than the limit; the rest of it is skipped by the next read.
    TooLong {
        /// The request id at its start, when it has one.
        id: Option<u64>,
    },
    /// The end of input.
    End,
}

/// Reads lines of at most `max` bytes (without the `\n`).
pub struct Lines<R> {
    inner: R,
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    max: usize,
    skipping: bool,
}

impl<R: Read> Lines<R> {
    /// Lines of `inner`, each at most `max` bytes long.
    pub fn new(inner: R, max: usize) -> Self {
        Lines {
            inner,
            buf: vec![0; READ_BYTES].into_boxed_slice(),
            start: 0,
            end: 0,
            max,
            skipping: false,
        }
    }

    /// Fills the buffer when it is empty; false at the end of input.
    fn fill(&mut self) -> std::io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => {
                    (self.start, self.end) = (0, n);
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The next line; a line cut by the end of input counts as a line.
    pub fn next(&mut self) -> std::io::Result<Line> {
        while self.skipping {
            if !self.fill()? {
                return Ok(Line::End);
            }
            let avail = &self.buf[self.start..self.end];
            match memchr::memchr(b'\n', avail) {
                Some(i) => {
                    self.start += i + 1;
                    self.skipping = false;
                }
                None => self.start = self.end,
            }
        }
        let mut line = Vec::new();
        loop {
            if !self.fill()? {
                return Ok(if line.is_empty() {
                    Line::End
                } else {
                    Line::Frame(line)
                });
            }
            let avail = &self.buf[self.start..self.end];
            let newline = memchr::memchr(b'\n', avail);
            let take = newline.unwrap_or(avail.len());
            if line.len() + take > self.max {
                let mut head = line;
                head.truncate(ID_SEARCH_BYTES);
                let more = ID_SEARCH_BYTES.saturating_sub(head.len()).min(avail.len());
                head.extend_from_slice(&avail[..more]);
                match newline {
                    Some(i) => self.start += i + 1,
                    None => {
                        self.start = self.end;
                        self.skipping = true;
                    }
                }
                return Ok(Line::TooLong {
                    id: top_level_id(&head),
                });
            }
            line.extend_from_slice(&avail[..take]);
            match newline {
                Some(i) => {
                    self.start += i + 1;
                    return Ok(Line::Frame(line));
                }
                None => self.start = self.end,
            }
        }
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

    /// Reads in pieces of `step` bytes, like a pipe.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn all(input: &[u8], step: usize, max: usize) -> Vec<Line> {
        let mut lines = Lines::new(Trickle(input, step), max);
        let mut out = Vec::new();
        loop {
            let line = lines.next().unwrap();
            if line == Line::End {
                return out;
            }
            out.push(line);
        }
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
        let huge = vec![b'x'; 3 * READ_BYTES + 5];
        let mut lines = Lines::new(Trickle(&huge, READ_BYTES), 10);
        assert_eq!(lines.next().unwrap(), Line::TooLong { id: None });
        assert_eq!(lines.next().unwrap(), Line::End);
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
