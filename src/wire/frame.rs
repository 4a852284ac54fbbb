//! The session channel's frames (format version [`VERSION`]).
//!
//! One long-lived exec runs `mcpgw-gateway attach` inside the sandbox; its stdin and stdout carry
//! every request of a host, multiplexed by id. A frame is one JSON object on one line (UTF-8,
//! ended by `\n`, no raw newline inside), so text-only channels carry it unchanged. Fields a
//! reader does not know are ignored.
//!
//! Host to `attach`:
//! ```text
//! {"t":"req","id":7,"method":"POST","path":"/mcps/m/tools/t?agent_id=&session_id=","body":{...},"stream":true,"call":"<32 hex>"}
//! {"t":"cancel","id":7}
//! {"t":"resume","id":8,"call":"<32 hex>","after":3,"stream":true}
//! {"t":"ack","call":"<32 hex>"}
//! {"t":"open","id":9,"path":"/mcps/m/connection?agent_id=&session_id="}
//! {"t":"msg","id":9,"msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}
//! {"t":"close","id":9}
//! {"t":"ping"}
//! ```
//! `attach` to host:
//! ```text
//! {"t":"hello","v":2,"version":"0.3.0","port":41000,"pid":77,"instance_nonce":"...","token_file":"...","launched":false,"max_frame_bytes":67174400,"heartbeat_ms":5000,"retention_ms":600000}
//! {"t":"chunk","id":7,"chunk":{ToolChunk},"seq":1}
//! {"t":"res","id":7,"status":200,"body":{...}}
//! {"t":"cancelled","id":7}
//! {"t":"error","id":7,"message":"..."}
//! {"t":"opened","id":9}
//! {"t":"msg","id":9,"msg":{"jsonrpc":"2.0","id":1,"result":{...}}}
//! {"t":"closed","id":9,"reason":"..."}
//! {"t":"ping"}
//! ```
//! Requests:
//! - `hello` comes first, once; a host skips whatever precedes it (a login shell's banner).
//! - `req` is one REST request; `path` carries the query; `body` is its JSON body. With
//!   `"stream":true` a tool call answers with a `chunk` frame per ToolChunk as it arrives
//!   (progress chunks, then the last one), then a `res` with the status and no body. A request
//!   that fails before streaming answers with `res` and the gateway's error body.
//! - `res` ends a request: `body` holds a JSON body as the gateway sent it, `text` a body that
//!   is not JSON, neither an empty one.
//! - `cancel` abandons a request: its final frame is then `cancelled`, unless its `res` (or
//!   `error`) was already on the way, in which case no `cancelled` follows. For a request that
//!   is not resumable, `cancelled` comes once `attach` has dropped the request's exchange: the
//!   gateway notices the closed connection and sends the upstream `notifications/cancelled`
//!   right after. For a resumable call it comes once the gateway has cancelled the call
//!   (`DELETE /calls/{id}` answered); should that fail, the final frame is an `error` saying so.
//! - `error` with an id: the request could not be relayed (its final answer), or the line
//!   with that id was not a valid frame. Without an id: a line that is not a valid frame and
//!   has no readable id, or whose id is that of a request in flight (which goes on, to its own
//!   final frame). Every invalid line gets exactly one `error`, which quotes at most a short
//!   prefix of what it refuses; the session goes on.
//! - Every id in flight (a request, a resume or a connection) gets exactly one final frame:
//!   `res`, `cancelled` or `error` for a request or a resume, `closed` (or `error`) for a
//!   connection. An id is the host's to reuse once its final frame came.
//!
//! Calls that outlive their channel:
//! - A `req` with `call` (a [`CallId`]: 32 to 64 lowercase hex digits the host draws at random,
//!   so no other host can guess it) is resumable: when the channel ends without a `cancel`, the
//!   gateway keeps running it and keeps its progress and outcome, for `retention_ms` once
//!   nobody follows it or once it ended (bounded in memory too). Its `chunk` frames carry
//!   `seq`, the 1-based index of the chunk in the call; a `seq` that skips numbers says the
//!   chunks between were dropped (the call's progress outgrew the memory kept for it). A call
//!   id is never used twice: a `req` with one that ran already answers `res` 409.
//! - `resume` continues call `call` on this channel under a new frame id: the chunks after the
//!   first `after` (those the host already has), then its final frame, exactly as the `req`
//!   would have answered. A call that is unknown or no longer kept answers `res` with status 404
//!   or 410 and the gateway's detail. `cancel` of a resume's id, as of a resumable `req`'s,
//!   cancels the call itself.
//! - `ack` tells the gateway that the host has the call's final answer, so it may forget it
//!   before its retention ends (a call still running is left running). It has no answer.
//!
//! Virtual MCP connections:
//! - `open` opens a JSON-RPC connection to one registered MCP of a scope (`path` names it, as a
//!   REST path would); `opened` says it is ready. Then `msg` frames carry JSON-RPC messages in
//!   both directions, each one message as the MCP peer sent it, untouched; the gateway is the
//!   MCP server of each connection. A `msg` may hold any JSON value: one that is not a JSON-RPC
//!   message is answered with a JSON-RPC error on the connection, which stays open. `close` ends it; `closed` is its final frame, also when
//!   the gateway ends it (`reason` says why; `status` is set when `open` was refused, e.g. 404
//!   for an unknown MCP).
//!
//! Liveness:
//! - Each side sends `ping` when it has sent nothing for `heartbeat_ms` (from the hello; 0: no
//!   heartbeat) and declares the channel dead when nothing at all arrived for its own timeout,
//!   so a channel that stops moving without an end of file (a half-open `kubectl exec` stream, a
//!   frozen exec) is noticed. `ping` has no answer. `attach`'s timeout applies once the host
//!   has sent a `ping`: a host that sends none is never cut off for being quiet.
//! - End of input ends the session, and so does `attach`'s heartbeat timeout or a signal: a
//!   request not sent yet gets `cancelled` (a `resume` not sent yet gets none: its call runs
//!   on); a request in flight that is not resumable is
//!   cancelled (`cancelled`); a resumable call in flight gets no frame and keeps running in the
//!   gateway, for another channel to resume; a cancel under way is carried out. Every
//!   connection is closed, and `attach` exits.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The frame format version a `hello` carries.
pub const VERSION: u32 = 2;

/// Bytes a frame may carry beyond its request or response body, for the envelope.
pub const ENVELOPE_BYTES: usize = 64 * 1024;

/// How much of a value an error message quotes: a refused frame's error stays short whatever
/// it refuses.
pub const QUOTE_BYTES: usize = 120;

/// The id of a resumable call: 32 to 64 lowercase hex digits, drawn at random by the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(String);

impl CallId {
    /// The shortest call id accepted, in hex digits (128 bits).
    pub const MIN_LEN: usize = 32;
    /// The longest call id accepted, in hex digits.
    pub const MAX_LEN: usize = 64;

    /// A new call id of 128 random bits from the OS's CSPRNG.
    pub fn random() -> CallId {
        CallId(crate::random::hex_id())
    }

    /// Checks `text` is a call id.
    pub fn parse(text: &str) -> Result<CallId, String> {
        let ok = (Self::MIN_LEN..=Self::MAX_LEN).contains(&text.len())
            && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if ok {
            Ok(CallId(text.to_owned()))
        } else {
            Err(format!(
                "a call id is {} to {} lowercase hex digits, not {}",
                Self::MIN_LEN,
                Self::MAX_LEN,
                quoted(text)
            ))
        }
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for CallId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` quoted for an error message, cut to [`QUOTE_BYTES`] (on a character boundary) with
/// its full length said when it was cut.
pub fn quoted(text: &str) -> String {
    if text.len() <= QUOTE_BYTES {
        return format!("{text:?}");
    }
    let mut end = QUOTE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}... ({} bytes)", &text[..end], text.len())
}

/// A frame from the host to `attach`.
#[derive(Debug, Clone)]
pub enum HostFrame<'a> {
    /// A REST request.
    Request(Request<'a>),
    /// Abandon request (or resume, or resumable call) `id`.
    Cancel {
        /// The request's id.
        id: u64,
    },
    /// Continue a resumable call on this channel.
    Resume {
        /// The frame id its answer comes under.
        id: u64,
        /// The call.
        call: CallId,
        /// How many of its chunks the host already has.
        after: u64,
        /// Whether to answer with `chunk` frames (as the call's `req` asked).
        stream: bool,
    },
    /// The host has the final answer of `call`: the gateway may forget it.
    Ack {
        /// The call.
        call: CallId,
    },
    /// Open a virtual MCP connection.
    Open {
        /// The connection's id.
        id: u64,
        /// `/mcps/{name}/connection` with the scope's query.
        path: Cow<'a, str>,
    },
    /// A JSON-RPC message for connection `id`.
    Message {
        /// The connection's id.
        id: u64,
        /// The message, as the host's MCP client sent it.
        msg: &'a RawValue,
    },
    /// Close connection `id`.
    Close {
        /// The connection's id.
        id: u64,
    },
    /// A heartbeat.
    Ping,
}

/// One REST request carried by a session.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// Chosen by the host, unique among its requests in flight.
    pub id: u64,
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: Cow<'a, str>,
    /// Path and query, percent-encoded, e.g. `/mcps?agent_id=&session_id=`.
    pub path: Cow<'a, str>,
    /// The JSON body, if any.
    pub body: Option<&'a RawValue>,
    /// Whether a tool call should answer as a stream of `chunk` frames.
    pub stream: bool,
    /// Makes the request resumable: it outlives the channel (tool calls).
    pub call: Option<CallId>,
}

/// A frame from `attach` to the host.
#[derive(Debug, Clone)]
pub enum GatewayFrame<'a> {
    /// The first frame: who answers.
    Hello(Hello),
    /// One ToolChunk of a streamed call.
    Chunk {
        /// The request's id.
        id: u64,
        /// The ToolChunk's JSON.
        chunk: &'a RawValue,
        /// Its 1-based index in a resumable call.
        seq: Option<u64>,
    },
    /// The answer that ends a request.
    Response {
        /// The request's id.
        id: u64,
        /// The HTTP status.
        status: u16,
        /// The body.
        body: Body<'a>,
    },
    /// A `cancel` was carried out.
    Cancelled {
        /// The request's id.
        id: u64,
    },
    /// A request that could not be relayed (with its id), or a line that was not a frame.
    Error {
        /// The request it ends, if any.
        id: Option<u64>,
        /// What went wrong.
        message: Cow<'a, str>,
    },
    /// A virtual connection is ready.
    Opened {
        /// The connection's id.
        id: u64,
    },
    /// A JSON-RPC message from the gateway on connection `id`.
    Message {
        /// The connection's id.
        id: u64,
        /// The message.
        msg: &'a RawValue,
    },
    /// A virtual connection ended (its final frame).
    Closed {
        /// The connection's id.
        id: u64,
        /// Why, when it was not the host's `close`.
        reason: Option<Cow<'a, str>>,
        /// The HTTP status of a refused `open` (404: no such MCP).
        status: Option<u16>,
    },
    /// A heartbeat.
    Ping,
}

/// The body of a `res` frame.
#[derive(Debug, Clone)]
pub enum Body<'a> {
    /// No body.
    Empty,
    /// A JSON body, as the gateway sent it.
    Json(&'a RawValue),
    /// A body that is not JSON (e.g. `ok`, `invalid gateway token`).
    Text(Cow<'a, str>),
}

impl Body<'_> {
    /// The body's bytes, as the gateway sent them.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Body::Empty => b"",
            Body::Json(raw) => raw.get().as_bytes(),
            Body::Text(text) => text.as_bytes(),
        }
    }
}

/// What `attach` says first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The frame format version, [`VERSION`].
    pub v: u32,
    /// The gateway binary's version.
    pub version: String,
    /// The port of the gateway it relays to.
    pub port: u16,
    /// The gateway's process id.
    pub pid: u32,
    /// The gateway's instance nonce, if it has one.
    #[serde(default)]
    pub instance_nonce: Option<String>,
    /// The gateway's token file (the token itself never crosses the channel).
    #[serde(default)]
    pub token_file: Option<String>,
    /// Whether this `attach` launched the gateway (`--launch` found none answering).
    #[serde(default)]
    pub launched: bool,
    /// The longest line `attach` accepts.
    pub max_frame_bytes: u64,
    /// How often `attach` sends a `ping` when it has nothing else to send; 0: never.
    #[serde(default)]
    pub heartbeat_ms: u64,
    /// How long the gateway keeps a resumable call once nobody follows it, or once it ended;
    /// 0: the gateway keeps none (calls end with their channel).
    #[serde(default)]
    pub retention_ms: u64,
}

/// A line that is not a valid frame: why, and the id it carried, when it had one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameError {
    /// The id of the frame, when it could be read.
    pub id: Option<u64>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every field of every frame, for reading: a flat form parses in one pass and borrows what it
/// can from the line.
#[derive(Deserialize)]
struct Flat<'a> {
    #[serde(borrow)]
    t: Cow<'a, str>,
    #[serde(default)]
    id: Option<u64>,
    #[serde(default, borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    path: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    body: Option<&'a RawValue>,
    #[serde(default)]
    stream: bool,
    #[serde(default, borrow)]
    call: Option<Cow<'a, str>>,
    #[serde(default)]
    after: Option<u64>,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default, borrow)]
    msg: Option<&'a RawValue>,
    #[serde(default, borrow)]
    chunk: Option<&'a RawValue>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reason: Option<Cow<'a, str>>,
}

/// Only the id of a line, read when the whole frame does not parse (a field of the wrong type):
/// the error then still names the request it ends.
#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<u64>,
}

/// Every field of every frame, for writing, in the order written: a `res` frame's status comes
/// before its body, so a reader knows it without going through a body of many megabytes.
#[derive(Serialize, Default)]
struct Out<'a> {
    t: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    call: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seq: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    body: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    msg: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
}

fn bad(id: Option<u64>, message: impl Into<String>) -> FrameError {
    FrameError {
        id,
        message: message.into(),
    }
}

fn parse_flat(line: &str) -> Result<Flat<'_>, FrameError> {
    let line = line.trim_end_matches(['\n', '\r']);
    serde_json::from_str(line).map_err(|e| {
        let id = serde_json::from_str::<IdOnly>(line).ok().and_then(|i| i.id);
        bad(
            id,
            format!("not a frame (one JSON object with a \"t\" field a line): {e}"),
        )
    })
}

fn need_id(f: &Flat<'_>) -> Result<u64, FrameError> {
    f.id.ok_or_else(|| bad(None, format!("a {} frame needs an \"id\"", quoted(&f.t))))
}

fn need_call(f: &Flat<'_>, id: Option<u64>) -> Result<CallId, FrameError> {
    let call = f
        .call
        .as_deref()
        .ok_or_else(|| bad(id, format!("a {} frame needs a \"call\"", quoted(&f.t))))?;
    CallId::parse(call).map_err(|e| bad(id, e))
}

fn need_msg<'a>(f: &Flat<'a>, id: u64) -> Result<&'a RawValue, FrameError> {
    let msg = f
        .msg
        .ok_or_else(|| bad(Some(id), "a \"msg\" frame needs a \"msg\""))?;
    // Whatever JSON value it is goes to the gateway, which answers one that is not a JSON-RPC
    // message with a JSON-RPC error on the connection: the connection stays usable.
    let _ = id;
    Ok(msg)
}

fn check_path(id: u64, path: &str) -> Result<(), FrameError> {
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad(
            Some(id),
            format!(
                "path must start with / and hold no spaces or control characters: {}",
                quoted(path)
            ),
        ));
    }
    Ok(())
}

/// Writes `value` as one line: JSON text never needs a raw newline (inside strings it is
/// escaped), so any that a raw body holds is whitespace between tokens and becomes a space.
fn write_line(out: &mut Vec<u8>, value: &Out<'_>) {
    let start = out.len();
    serde_json::to_writer(&mut *out, value).expect("frames serialize");
    for b in &mut out[start..] {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
    out.push(b'\n');
}

impl<'a> HostFrame<'a> {
    /// Reads one line (its `\n` may be included).
    pub fn parse(line: &'a str) -> Result<HostFrame<'a>, FrameError> {
        let f = parse_flat(line)?;
        match &*f.t {
            "req" => {
                let id = need_id(&f)?;
                let method = f
                    .method
                    .clone()
                    .ok_or_else(|| bad(Some(id), "a \"req\" frame needs a \"method\""))?;
                if !matches!(&*method, "GET" | "POST" | "PUT" | "DELETE") {
                    return Err(bad(
                        Some(id),
                        format!(
                            "method must be GET, POST, PUT or DELETE, not {}",
                            quoted(&method)
                        ),
                    ));
                }
                let path = f
                    .path
                    .clone()
                    .ok_or_else(|| bad(Some(id), "a \"req\" frame needs a \"path\""))?;
                check_path(id, &path)?;
                let call = match f.call {
                    Some(_) => Some(need_call(&f, Some(id))?),
                    None => None,
                };
                Ok(HostFrame::Request(Request {
                    id,
                    method,
                    path,
                    body: f.body,
                    stream: f.stream,
                    call,
                }))
            }
            "cancel" => Ok(HostFrame::Cancel { id: need_id(&f)? }),
            "resume" => {
                let id = need_id(&f)?;
                Ok(HostFrame::Resume {
                    id,
                    call: need_call(&f, Some(id))?,
                    after: f.after.unwrap_or(0),
                    stream: f.stream,
                })
            }
            "ack" => Ok(HostFrame::Ack {
                call: need_call(&f, f.id)?,
            }),
            "open" => {
                let id = need_id(&f)?;
                let path = f
                    .path
                    .clone()
                    .ok_or_else(|| bad(Some(id), "an \"open\" frame needs a \"path\""))?;
                check_path(id, &path)?;
                Ok(HostFrame::Open { id, path })
            }
            "msg" => {
                let id = need_id(&f)?;
                Ok(HostFrame::Message {
                    id,
                    msg: need_msg(&f, id)?,
                })
            }
            "close" => Ok(HostFrame::Close { id: need_id(&f)? }),
            "ping" => Ok(HostFrame::Ping),
            other => Err(bad(
                f.id,
                format!(
                    "unknown frame type {} (expected \"req\", \"cancel\", \"resume\", \"ack\", \
                     \"open\", \"msg\", \"close\" or \"ping\")",
                    quoted(other)
                ),
            )),
        }
    }

    /// Appends the frame as one line to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let frame = match self {
            HostFrame::Request(r) => Out {
                t: "req",
                id: Some(r.id),
                method: Some(&r.method),
                path: Some(&r.path),
                body: r.body,
                stream: r.stream,
                call: r.call.as_ref().map(CallId::as_str),
                ..Out::default()
            },
            HostFrame::Cancel { id } => Out {
                t: "cancel",
                id: Some(*id),
                ..Out::default()
            },
            HostFrame::Resume {
                id,
                call,
                after,
                stream,
            } => Out {
                t: "resume",
                id: Some(*id),
                call: Some(call.as_str()),
                after: Some(*after),
                stream: *stream,
                ..Out::default()
            },
            HostFrame::Ack { call } => Out {
                t: "ack",
                call: Some(call.as_str()),
                ..Out::default()
            },
            HostFrame::Open { id, path } => Out {
                t: "open",
                id: Some(*id),
                path: Some(path),
                ..Out::default()
            },
            HostFrame::Message { id, msg } => Out {
                t: "msg",
                id: Some(*id),
                msg: Some(msg),
                ..Out::default()
            },
            HostFrame::Close { id } => Out {
                t: "close",
                id: Some(*id),
                ..Out::default()
            },
            HostFrame::Ping => Out {
                t: "ping",
                ..Out::default()
            },
        };
        write_line(out, &frame);
    }
}

impl<'a> GatewayFrame<'a> {
    /// Reads one line (its `\n` may be included).
    pub fn parse(line: &'a str) -> Result<GatewayFrame<'a>, FrameError> {
        let f = parse_flat(line)?;
        match &*f.t {
            "hello" => serde_json::from_str(line)
                .map(GatewayFrame::Hello)
                .map_err(|e| bad(None, format!("invalid hello frame: {e}"))),
            "chunk" => {
                let id = need_id(&f)?;
                let chunk = f
                    .chunk
                    .ok_or_else(|| bad(Some(id), "a \"chunk\" frame needs a \"chunk\""))?;
                Ok(GatewayFrame::Chunk {
                    id,
                    chunk,
                    seq: f.seq,
                })
            }
            "res" => {
                let id = need_id(&f)?;
                let status = f
                    .status
                    .ok_or_else(|| bad(Some(id), "a \"res\" frame needs a \"status\""))?;
                let body = match (f.body, f.text) {
                    (Some(raw), _) => Body::Json(raw),
                    (None, Some(text)) => Body::Text(text),
                    (None, None) => Body::Empty,
                };
                Ok(GatewayFrame::Response { id, status, body })
            }
            "cancelled" => Ok(GatewayFrame::Cancelled { id: need_id(&f)? }),
            "error" => Ok(GatewayFrame::Error {
                id: f.id,
                message: f.message.unwrap_or(Cow::Borrowed("(no message)")),
            }),
            "opened" => Ok(GatewayFrame::Opened { id: need_id(&f)? }),
            "msg" => {
                let id = need_id(&f)?;
                Ok(GatewayFrame::Message {
                    id,
                    msg: need_msg(&f, id)?,
                })
            }
            "closed" => Ok(GatewayFrame::Closed {
                id: need_id(&f)?,
                reason: f.reason,
                status: f.status,
            }),
            "ping" => Ok(GatewayFrame::Ping),
            other => Err(bad(f.id, format!("unknown frame type {}", quoted(other)))),
        }
    }

    /// Appends the frame as one line to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let frame = match self {
            GatewayFrame::Hello(hello) => {
                #[derive(Serialize)]
                struct Tagged<'h> {
                    t: &'static str,
                    #[serde(flatten)]
                    hello: &'h Hello,
                }
                serde_json::to_writer(&mut *out, &Tagged { t: "hello", hello })
                    .expect("frames serialize");
                out.push(b'\n');
                return;
            }
            GatewayFrame::Chunk { id, chunk, seq } => Out {
                t: "chunk",
                id: Some(*id),
                chunk: Some(chunk),
                seq: *seq,
                ..Out::default()
            },
            GatewayFrame::Response { id, status, body } => {
                let (json, text) = match body {
                    Body::Empty => (None, None),
                    Body::Json(raw) => (Some(*raw), None),
                    Body::Text(t) => (None, Some(&**t)),
                };
                Out {
                    t: "res",
                    id: Some(*id),
                    status: Some(*status),
                    body: json,
                    text,
                    ..Out::default()
                }
            }
            GatewayFrame::Cancelled { id } => Out {
                t: "cancelled",
                id: Some(*id),
                ..Out::default()
            },
            GatewayFrame::Error { id, message } => Out {
                t: "error",
                id: *id,
                message: Some(message),
                ..Out::default()
            },
            GatewayFrame::Opened { id } => Out {
                t: "opened",
                id: Some(*id),
                ..Out::default()
            },
            GatewayFrame::Message { id, msg } => Out {
                t: "msg",
                id: Some(*id),
                msg: Some(msg),
                ..Out::default()
            },
            GatewayFrame::Closed { id, reason, status } => Out {
                t: "closed",
                id: Some(*id),
                reason: reason.as_deref(),
                status: *status,
                ..Out::default()
            },
            GatewayFrame::Ping => Out {
                t: "ping",
                ..Out::default()
            },
        };
        write_line(out, &frame);
    }
}

/// `bytes` as a body for a `res` frame: JSON when it parses as JSON, else text (lossy UTF-8).
pub fn body_of(bytes: &[u8]) -> Body<'_> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Body::Empty;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => match serde_json::from_str::<&RawValue>(text) {
            Ok(raw) => Body::Json(raw),
            Err(_) => Body::Text(Cow::Borrowed(text)),
        },
        Err(_) => Body::Text(String::from_utf8_lossy(bytes)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn host_frames_round_trip_on_one_line() {
        let body: &RawValue =
            serde_json::from_str("{\"arguments\":\n  {\"text\": \"a\\nb\"}\n}").unwrap();
        let req = HostFrame::Request(Request {
            id: 7,
            method: "POST".into(),
            path: "/mcps/m/tools/t?agent_id=&session_id=".into(),
            body: Some(body),
            stream: true,
            call: None,
        });
        let text = line(|o| req.encode(o));
        assert_eq!(text.matches('\n').count(), 1);
        assert!(text.ends_with('\n'));
        let HostFrame::Request(back) = HostFrame::parse(&text).unwrap() else {
            panic!("not a request")
        };
        assert_eq!((back.id, &*back.method, back.stream), (7, "POST", true));
        let args: serde_json::Value = serde_json::from_str(back.body.unwrap().get()).unwrap();
        assert_eq!(args["arguments"]["text"], "a\nb");
        let cancel = line(|o| HostFrame::Cancel { id: 9 }.encode(o));
        assert_eq!(cancel, "{\"t\":\"cancel\",\"id\":9}\n");
        assert!(matches!(
            HostFrame::parse(&cancel).unwrap(),
            HostFrame::Cancel { id: 9 }
        ));
    }

    #[test]
    fn bad_host_frames_are_named() {
        for (text, id, says) in [
            ("garbage", None, "not a frame"),
            ("{\"id\":1}", Some(1), "not a frame"),
            ("{\"t\":\"req\",\"id\":3}", Some(3), "needs a \"method\""),
            (
                "{\"t\":\"req\",\"id\":3,\"method\":\"PATCH\",\"path\":\"/x\"}",
                Some(3),
                "method",
            ),
            (
                "{\"t\":\"req\",\"id\":3,\"method\":\"GET\",\"path\":\"/x y\"}",
                Some(3),
                "path",
            ),
            ("{\"t\":\"cancel\"}", None, "needs an \"id\""),
            ("{\"t\":\"boom\",\"id\":4}", Some(4), "unknown frame type"),
        ] {
            let e = HostFrame::parse(text).unwrap_err();
            assert_eq!(e.id, id, "{text}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn gateway_frames_round_trip() {
        let hello = GatewayFrame::Hello(Hello {
            v: VERSION,
            version: "0.2.0".into(),
            port: 41000,
            pid: 77,
            instance_nonce: Some("n".into()),
            token_file: Some("/t".into()),
            launched: true,
            max_frame_bytes: 1 << 20,
            heartbeat_ms: 5000,
            retention_ms: 600_000,
        });
        let text = line(|o| hello.encode(o));
        assert!(text.starts_with("{\"t\":\"hello\",\"v\":2,"), "{text}");
        let GatewayFrame::Hello(back) = GatewayFrame::parse(&text).unwrap() else {
            panic!("not a hello")
        };
        assert_eq!(back.port, 41000);
        assert_eq!(line(|o| GatewayFrame::Hello(back).encode(o)), text);

        let chunk: &RawValue = serde_json::from_str("{\"is_last\":false}").unwrap();
        for frame in [
            GatewayFrame::Chunk {
                id: 1,
                chunk,
                seq: None,
            },
            GatewayFrame::Chunk {
                id: 1,
                chunk,
                seq: Some(3),
            },
            GatewayFrame::Response {
                id: 1,
                status: 200,
                body: body_of(b"[{\"a\":1}]"),
            },
            GatewayFrame::Response {
                id: 2,
                status: 401,
                body: body_of(b"invalid gateway token"),
            },
            GatewayFrame::Response {
                id: 3,
                status: 204,
                body: body_of(b""),
            },
            GatewayFrame::Cancelled { id: 4 },
            GatewayFrame::Error {
                id: None,
                message: "line 3: not a frame".into(),
            },
        ] {
            let text = line(|o| frame.encode(o));
            assert_eq!(text.matches('\n').count(), 1, "{text}");
            let back = GatewayFrame::parse(&text).unwrap();
            assert_eq!(line(|o| back.encode(o)), text);
        }
        // As documented: the status before the body.
        let res = GatewayFrame::Response {
            id: 7,
            status: 200,
            body: body_of(b"{\"a\":1}"),
        };
        assert_eq!(
            line(|o| res.encode(o)),
            "{\"t\":\"res\",\"id\":7,\"status\":200,\"body\":{\"a\":1}}\n"
        );
        assert_eq!(body_of(b"ok").as_bytes(), b"ok");
        assert_eq!(body_of(b"\xff").as_bytes(), "\u{fffd}".as_bytes());
    }

    #[test]
    fn v2_host_frames_round_trip() {
        let call = CallId::random();
        assert_eq!(call.as_str().len(), 32);
        let msg: &RawValue =
            serde_json::from_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}").unwrap();
        for frame in [
            HostFrame::Request(Request {
                id: 1,
                method: "POST".into(),
                path: "/mcps/m/tools/t".into(),
                body: None,
                stream: true,
                call: Some(call.clone()),
            }),
            HostFrame::Resume {
                id: 2,
                call: call.clone(),
                after: 3,
                stream: true,
            },
            HostFrame::Ack { call: call.clone() },
            HostFrame::Open {
                id: 4,
                path: "/mcps/m/connection?agent_id=&session_id=".into(),
            },
            HostFrame::Message { id: 4, msg },
            HostFrame::Close { id: 4 },
            HostFrame::Ping,
        ] {
            let text = line(|o| frame.encode(o));
            assert_eq!(text.matches('\n').count(), 1, "{text}");
            let back = HostFrame::parse(&text).unwrap();
            assert_eq!(line(|o| back.encode(o)), text);
        }
        assert_eq!(line(|o| HostFrame::Ping.encode(o)), "{\"t\":\"ping\"}\n");
    }

    #[test]
    fn v2_gateway_frames_round_trip() {
        let msg: &RawValue =
            serde_json::from_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}").unwrap();
        for frame in [
            GatewayFrame::Opened { id: 4 },
            GatewayFrame::Message { id: 4, msg },
            GatewayFrame::Closed {
                id: 4,
                reason: Some("the upstream restarted".into()),
                status: None,
            },
            GatewayFrame::Closed {
                id: 5,
                reason: Some("no MCP named x".into()),
                status: Some(404),
            },
            GatewayFrame::Closed {
                id: 6,
                reason: None,
                status: None,
            },
            GatewayFrame::Ping,
        ] {
            let text = line(|o| frame.encode(o));
            let back = GatewayFrame::parse(&text).unwrap();
            assert_eq!(line(|o| back.encode(o)), text);
        }
    }

    #[test]
    fn errors_carry_the_id_and_quote_little() {
        // A field of the wrong type still gives the id.
        let e = HostFrame::parse(
            "{\"t\":\"req\",\"id\":5,\"method\":\"GET\",\"path\":\"/x\",\"stream\":\"yes\"}",
        )
        .unwrap_err();
        assert_eq!(e.id, Some(5), "{e}");
        // A huge value is quoted by its start only.
        let long = format!(
            "{{\"t\":\"req\",\"id\":6,\"method\":\"GET\",\"path\":\"x{}\"}}",
            "a".repeat(1 << 20)
        );
        let e = HostFrame::parse(&long).unwrap_err();
        assert_eq!(e.id, Some(6));
        assert!(e.message.len() < 400, "{} bytes", e.message.len());
        assert!(e.message.contains("(1048577 bytes)"), "{e}");
        for (text, id, says) in [
            ("{\"t\":\"resume\",\"id\":1}", Some(1), "needs a \"call\""),
            (
                "{\"t\":\"resume\",\"id\":1,\"call\":\"XYZ\"}",
                Some(1),
                "hex digits",
            ),
            ("{\"t\":\"ack\"}", None, "needs a \"call\""),
            ("{\"t\":\"msg\",\"id\":2}", Some(2), "needs a \"msg\""),
            ("{\"t\":\"open\",\"id\":3}", Some(3), "needs a \"path\""),
            ("{\"t\":\"close\"}", None, "needs an \"id\""),
        ] {
            let e = HostFrame::parse(text).unwrap_err();
            assert_eq!(e.id, id, "{text}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
        // Any JSON value is a message for the gateway to judge.
        assert!(matches!(
            HostFrame::parse("{\"t\":\"msg\",\"id\":2,\"msg\":[1]}"),
            Ok(HostFrame::Message { id: 2, .. })
        ));
        assert!(CallId::parse(&"a".repeat(31)).is_err());
        assert!(CallId::parse(&"a".repeat(65)).is_err());
        assert!(CallId::parse(&"0".repeat(64)).is_ok());
    }
}
