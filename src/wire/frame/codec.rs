//! Frames read and written: each line parsed through one flat envelope and checked, and written
//! with the same field names.

use super::*;

/// Every field of every frame, for reading: a flat form parses in one pass and borrows what it
/// can from the line.
#[derive(Deserialize)]
pub(super) struct Flat<'a> {
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
pub(super) struct IdOnly {
    #[serde(default)]
    id: Option<u64>,
}

/// Every field of every frame, for writing, in the order written: a `res` frame's status comes
/// before its body, so a reader knows it without going through a body of many megabytes.
#[derive(Serialize, Default)]
pub(super) struct Out<'a> {
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

pub(super) fn bad(id: Option<u64>, message: impl Into<String>) -> FrameError {
    FrameError {
        id,
        message: message.into(),
    }
}

pub(super) fn parse_flat(line: &str) -> Result<Flat<'_>, FrameError> {
    let line = line.trim_end_matches(['\n', '\r']);
    serde_json::from_str(line).map_err(|e| {
        let id = serde_json::from_str::<IdOnly>(line).ok().and_then(|i| i.id);
        bad(
            id,
            format!("not a frame (one JSON object with a \"t\" field a line): {e}"),
        )
    })
}

pub(super) fn need_id(f: &Flat<'_>) -> Result<u64, FrameError> {
    f.id.ok_or_else(|| bad(None, format!("a {} frame needs an \"id\"", quoted(&f.t))))
}

pub(super) fn need_call(f: &Flat<'_>, id: Option<u64>) -> Result<CallId, FrameError> {
    let call = f
        .call
        .as_deref()
        .ok_or_else(|| bad(id, format!("a {} frame needs a \"call\"", quoted(&f.t))))?;
    CallId::parse(call).map_err(|e| bad(id, e))
}

pub(super) fn need_msg<'a>(f: &Flat<'a>, id: u64) -> Result<&'a RawValue, FrameError> {
    let msg = f
        .msg
        .ok_or_else(|| bad(Some(id), "a \"msg\" frame needs a \"msg\""))?;
    // Whatever JSON value it is goes to the gateway, which answers one that is not a JSON-RPC
    // message with a JSON-RPC error on the connection: the connection stays usable.
    let _ = id;
    Ok(msg)
}

pub(super) fn check_path(id: u64, path: &str) -> Result<(), FrameError> {
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
pub(super) fn write_line(out: &mut Vec<u8>, value: &Out<'_>) {
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
