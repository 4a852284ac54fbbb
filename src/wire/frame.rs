//! The session channel's frames (format version [`VERSION`]).
//!
//! One long-lived exec runs `mcpgw-gateway attach` inside the sandbox; its stdin and stdout carry
//! every request of a host, multiplexed by id. A frame is one JSON object on one line (UTF-8,
//! ended by `\n`, no raw newline inside), so text-only channels carry it unchanged. Fields a
//! reader does not know are ignored.
//!
//! Host to `attach`:
//! ```text
//! {"t":"req","id":7,"method":"POST","path":"/mcps/m/tools/t?agent_id=&session_id=","body":{...},"stream":true}
//! {"t":"cancel","id":7}
//! ```
//! `attach` to host:
//! ```text
//! {"t":"hello","v":1,"version":"0.2.0","port":41000,"pid":77,"instance_nonce":"...","token_file":"...","launched":false,"max_frame_bytes":67174400}
//! {"t":"chunk","id":7,"chunk":{ToolChunk}}
//! {"t":"res","id":7,"status":200,"body":{...}}
//! {"t":"cancelled","id":7}
//! {"t":"error","id":7,"message":"..."}
//! ```
//! - `hello` comes first, once; a host skips whatever precedes it (a login shell's banner).
//! - `req` is one REST request; `path` carries the query; `body` is its JSON body. With
//!   `"stream":true` a tool call answers with a `chunk` frame per ToolChunk as it arrives
//!   (progress chunks, then the last one), then a `res` with the status and no body. A request
//!   that fails before streaming answers with `res` and the gateway's error body.
//! - `res` ends a request: `body` holds a JSON body as the gateway sent it, `text` a body that
//!   is not JSON, neither an empty one.
//! - `cancel` abandons a request: the gateway tells the upstream `notifications/cancelled`;
//!   `cancelled` confirms it (a `res` that crossed it on the way may still arrive).
//! - `error` with an id: the request could not be relayed (its final answer); without one: a
//!   line that is not a valid frame, which `attach` names and skips.
//! - End of input ends the session: `attach` cancels every request in flight and exits.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The frame format version a `hello` carries.
pub const VERSION: u32 = 1;

/// Bytes a frame may carry beyond its request or response body, for the envelope.
pub const ENVELOPE_BYTES: usize = 64 * 1024;

/// A frame from the host to `attach`.
#[derive(Debug, Clone)]
pub enum HostFrame<'a> {
    /// A REST request.
    Request(Request<'a>),
    /// Abandon request `id`.
    Cancel {
        /// The request's id.
        id: u64,
    },
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
    chunk: Option<&'a RawValue>,
    #[serde(default)]
    status: Option<u16>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
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
    body: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    chunk: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

fn bad(id: Option<u64>, message: impl Into<String>) -> FrameError {
    FrameError {
        id,
        message: message.into(),
    }
}

fn parse_flat(line: &str) -> Result<Flat<'_>, FrameError> {
    serde_json::from_str(line.trim_end_matches(['\n', '\r'])).map_err(|e| {
        bad(
            None,
            format!("not a frame (one JSON object with a \"t\" field a line): {e}"),
        )
    })
}

fn need_id(f: &Flat<'_>) -> Result<u64, FrameError> {
    f.id.ok_or_else(|| bad(None, format!("a {:?} frame needs an \"id\"", f.t)))
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
                    .ok_or_else(|| bad(Some(id), "a \"req\" frame needs a \"method\""))?;
                if !matches!(&*method, "GET" | "POST" | "PUT" | "DELETE") {
                    return Err(bad(
                        Some(id),
                        format!("method must be GET, POST, PUT or DELETE, not {method:?}"),
                    ));
                }
                let path = f
                    .path
                    .ok_or_else(|| bad(Some(id), "a \"req\" frame needs a \"path\""))?;
                if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                    return Err(bad(
                        Some(id),
                        format!(
                            "path must start with / and hold no spaces or control characters: {path:?}"
                        ),
                    ));
                }
                Ok(HostFrame::Request(Request {
                    id,
                    method,
                    path,
                    body: f.body,
                    stream: f.stream,
                }))
            }
            "cancel" => Ok(HostFrame::Cancel { id: need_id(&f)? }),
            other => Err(bad(
                f.id,
                format!("unknown frame type {other:?} (expected \"req\" or \"cancel\")"),
            )),
        }
    }

    /// Appends the frame as one line to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            HostFrame::Request(r) => write_line(
                out,
                &Out {
                    t: "req",
                    id: Some(r.id),
                    method: Some(&r.method),
                    path: Some(&r.path),
                    body: r.body,
                    stream: r.stream,
                    ..Out::default()
                },
            ),
            HostFrame::Cancel { id } => write_line(
                out,
                &Out {
                    t: "cancel",
                    id: Some(*id),
                    ..Out::default()
                },
            ),
        }
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
                Ok(GatewayFrame::Chunk { id, chunk })
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
            other => Err(bad(f.id, format!("unknown frame type {other:?}"))),
        }
    }

    /// Appends the frame as one line to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
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
            }
            GatewayFrame::Chunk { id, chunk } => write_line(
                out,
                &Out {
                    t: "chunk",
                    id: Some(*id),
                    chunk: Some(chunk),
                    ..Out::default()
                },
            ),
            GatewayFrame::Response { id, status, body } => {
                let (json, text) = match body {
                    Body::Empty => (None, None),
                    Body::Json(raw) => (Some(*raw), None),
                    Body::Text(t) => (None, Some(&**t)),
                };
                write_line(
                    out,
                    &Out {
                        t: "res",
                        id: Some(*id),
                        status: Some(*status),
                        body: json,
                        text,
                        ..Out::default()
                    },
                )
            }
            GatewayFrame::Cancelled { id } => write_line(
                out,
                &Out {
                    t: "cancelled",
                    id: Some(*id),
                    ..Out::default()
                },
            ),
            GatewayFrame::Error { id, message } => write_line(
                out,
                &Out {
                    t: "error",
                    id: *id,
                    message: Some(message),
                    ..Out::default()
                },
            ),
        }
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
            ("{\"id\":1}", None, "not a frame"),
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
        });
        let text = line(|o| hello.encode(o));
        assert!(text.starts_with("{\"t\":\"hello\",\"v\":1,"), "{text}");
        let GatewayFrame::Hello(back) = GatewayFrame::parse(&text).unwrap() else {
            panic!("not a hello")
        };
        assert_eq!(back.port, 41000);
        assert_eq!(line(|o| GatewayFrame::Hello(back).encode(o)), text);

        let chunk: &RawValue = serde_json::from_str("{\"is_last\":false}").unwrap();
        for frame in [
            GatewayFrame::Chunk { id: 1, chunk },
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
}
