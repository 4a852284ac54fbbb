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
//!   before its retention ends (a call still running is left running). It has no answer. The
//!   host writes it after its next frame, or alone after a short delay, so that it never costs
//!   a request's round trip a write of its own; `attach` passes acknowledgements on once no
//!   request is in flight (or many wait).
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

mod codec;
#[cfg(test)]
mod tests;
