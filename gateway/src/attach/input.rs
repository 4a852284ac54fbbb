//! Stdin: lines read with bounded memory and parsed into frames, on the runtime's thread when
//! stdin can be polled (a pipe, a socket, a terminal), else through tokio's blocking pool (a
//! file, `/dev/null`).
//!
//! A line longer than the limit is refused as soon as it passes the limit and the rest of it is
//! skipped as it arrives, never held: at most the limit's worth of a line is in memory, once. A request's body is not copied: it stays in the line's
//! buffer and goes to the gateway as a slice of it.

use std::pin::Pin;

use bytes::Bytes;
use http::Method;
use http::uri::PathAndQuery;
use mcpgw::wire::frame::{CallId, HostFrame, quoted};
use mcpgw::wire::lines::{Line, Splitter, top_level_id};
use mcpgw_sys::stdio::{self, Kinds};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

use super::liveness::Moment;

/// Frames parsed ahead of the relay; beyond, the reader waits (and stdin with it).
const QUEUE: usize = 64;

/// Bytes read from stdin at a time.
const READ_BYTES: usize = 64 * 1024;

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

/// This process's stdin, on the reactor when it can be polled.
pub fn stdin() -> Pin<Box<dyn AsyncRead + Send>> {
    stdio::stdin(Kinds::Pollable)
}

/// Starts reading `stdin` (call it inside the runtime), touching `read` whenever bytes arrive;
/// the receiver ends (`None`) at the end of input. Aborting the reader drops `stdin`.
pub fn start(
    mut stdin: Pin<Box<dyn AsyncRead + Send>>,
    max_frame_bytes: usize,
    read: Moment,
) -> (mpsc::Receiver<Input>, AbortHandle) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let reader = tokio::spawn(async move {
        let mut buf = vec![0; READ_BYTES];
        let mut lines = Splitter::new(max_frame_bytes);
        loop {
            let n = match stdin.read(&mut buf).await {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    ended(&e);
                    0
                }
            };
            read.touch();
            for input in inputs(&mut lines, &buf[..n]) {
                if tx.send(input).await.is_err() {
                    return;
                }
            }
            if n == 0 {
                return;
            }
        }
    });
    (rx, reader.abort_handle())
}

fn ended(e: &std::io::Error) {
    // A terminal whose other end went away reads EIO: that too ends the session.
    tracing::debug!("reading stdin failed, ending the session: {e}");
}

/// Turns one line into what it asks for.
pub fn parse(line: Vec<u8>) -> Input {
    let Ok(text) = std::str::from_utf8(&line) else {
        return Input::Invalid {
            id: frame_id(&line),
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

/// What `data` asks for, in order; empty `data` is the end of input, which ends a last line
/// that has no `\n`. Blank lines ask for nothing.
pub fn inputs(lines: &mut Splitter, data: &[u8]) -> Vec<Input> {
    let max = lines.max();
    lines
        .lines(data)
        .into_iter()
        .filter_map(|line| match line {
            Line::Whole(line) if line.trim_ascii().is_empty() => None,
            Line::Whole(line) => Some(parse(line)),
            Line::TooLong { head } => Some(Input::Invalid {
                id: frame_id(&head),
                message: format!(
                    "line longer than {max} bytes (the max_frame_bytes of hello): skipped"
                ),
            }),
        })
        .collect()
}

/// The frame id at the start of a line (the frame encoder writes it second, right after
/// `"t"`), when it can be read.
fn frame_id(head: &[u8]) -> Option<u64> {
    top_level_id(head)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feeding_skips_blank_lines_and_ends_a_last_line_at_the_end_of_input() {
        let mut splitter = Splitter::new(1024);
        let got = inputs(
            &mut splitter,
            b"\n \r\n{\"t\":\"cancel\",\"id\":1}\n{\"t\":\"cancel\",",
        );
        assert!(matches!(got[..], [Input::Cancel(1)]), "{got:?}");
        let got = inputs(&mut splitter, b"\"id\":2}");
        assert!(got.is_empty(), "{got:?}");
        let got = inputs(&mut splitter, b"");
        assert!(matches!(got[..], [Input::Cancel(2)]), "{got:?}");
    }

    #[test]
    fn an_oversized_line_is_refused_with_its_frame_id() {
        let mut splitter = Splitter::new(16);
        let got = inputs(
            &mut splitter,
            b"{\"t\":\"req\",\"id\":7,\"body\":{\"x\":\"long enough\"}}\n",
        );
        let [Input::Invalid { id, message }] = &got[..] else {
            panic!("{got:?}")
        };
        assert_eq!(*id, Some(7));
        assert!(message.contains("longer than 16 bytes"), "{message}");
        assert_eq!(frame_id(br#"{"id":"7"}"#), None, "a frame id is a number");
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
