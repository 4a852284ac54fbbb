//! Decoding a gateway answer: what a request command printed (its exit status and output
//! framing), the HTTP status, and the gateway's `{"detail"}` errors. A session's answers skip the
//! first step.

use serde::de::DeserializeOwned;

use crate::command::Transport;
use crate::error::{Error, ErrorKind, head, tail};
use crate::wire::output::{self, STATUS_TRAILER, exit};

/// Longest piece of stderr or body quoted in an error message.
const QUOTE_MAX: usize = 2000;

/// A gateway response, recovered from a request command's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The HTTP status.
    pub status: u16,
    /// The body bytes, exactly as sent.
    pub body: Vec<u8>,
}

/// What a request was and whom it went to, for messages.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// `GET /mcps`, without the query.
    pub what: &'a str,
    /// The gateway's port.
    pub port: u16,
    /// The token file that authenticated it.
    pub token_file: &'a str,
}

/// How a request command ran, for messages.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    /// The request.
    pub exchange: Exchange<'a>,
    /// How it was sent.
    pub transport: Transport,
    /// The gateway binary (the built-in client).
    pub gateway_path: &'a str,
    /// Its time limit in seconds, as sent.
    pub max_time: &'a str,
}

/// Turns one finished request command into the gateway's response, or the error its exit status
/// and output mean. A non-2xx response is returned as is; see [`check_status`].
pub fn decode_output(
    info: &RequestInfo<'_>,
    exit_code: i32,
    mut stdout: Vec<u8>,
    stderr: &[u8],
) -> Result<HttpResponse, Error> {
    let Exchange { what, port, .. } = info.exchange;
    let err_text = String::from_utf8_lossy(stderr);
    let err_tail = tail(&err_text, QUOTE_MAX);
    let with_stderr = |msg: String| {
        if err_tail.is_empty() {
            msg
        } else {
            format!("{msg}: {err_tail}")
        }
    };
    let client = match info.transport {
        Transport::Curl => "curl".to_owned(),
        Transport::BuiltIn => format!("{} request", info.gateway_path),
    };
    if let Some((kind, message)) = exit_failure(info, exit_code, &client) {
        return Err(Error::new(kind, with_stderr(message)));
    }
    let Some((status, body)) = output::split(&stdout) else {
        let out = String::from_utf8_lossy(&stdout);
        return Err(Error::protocol(with_stderr(format!(
            "{}: the output of {client} lacks the trailing `{STATUS_TRAILER}NNN` line; \
             got {:?}",
            what,
            tail(&out, 200)
        ))));
    };
    if status == 0 {
        return Err(Error::new(
            ErrorKind::GatewayNotRunning,
            with_stderr(format!(
                "{}: no HTTP answer from port {} in the sandbox",
                what, port
            )),
        ));
    }
    let len = body.len();
    stdout.truncate(len);
    Ok(HttpResponse {
        status,
        body: stdout,
    })
}

/// The error kind and message an exit status other than 0 means (`None` for 0).
fn exit_failure(
    info: &RequestInfo<'_>,
    exit_code: i32,
    client: &str,
) -> Option<(ErrorKind, String)> {
    let Exchange {
        what,
        port,
        token_file,
    } = info.exchange;
    Some(match exit_code {
        0 => return None,
        exit::CONNECT => (
            ErrorKind::GatewayNotRunning,
            format!(
                "{}: no gateway listens on port {} in the sandbox (connection refused); \
                     start it with start_gateway or check the port",
                what, port
            ),
        ),
        exit::TIMEOUT => (
            ErrorKind::Deadline,
            format!(
                "{}: the gateway did not answer within {} s; raise the call's timeout",
                what, info.max_time
            ),
        ),
        exit::EMPTY_REPLY | exit::RECV_ERROR if info.transport == Transport::Curl => (
            ErrorKind::GatewayNotRunning,
            format!(
                "{}: the gateway on port {} closed the connection without an answer \
                     (curl exit {exit_code}); it may have exited, see its log",
                what, port
            ),
        ),
        exit::TOKEN_UNREADABLE => (
            ErrorKind::Unauthorized,
            format!(
                "{}: the token file {} cannot be read in the sandbox; \
                     was the gateway started with --token-file {}?",
                what, token_file, token_file
            ),
        ),
        exit::NOT_EXECUTABLE | exit::NOT_FOUND => {
            let hint = match info.transport {
                Transport::Curl => "install curl in the sandbox or use the built-in client",
                Transport::BuiltIn => {
                    "set the gateway path, or install the binary with ensure_gateway_binary"
                }
            };
            (
                ErrorKind::CommandFailed,
                format!(
                    "{}: {client} cannot be run in the sandbox (exit {exit_code}); {hint}",
                    what
                ),
            )
        }
        code => (
            ErrorKind::CommandFailed,
            format!(
                "{}: {client} failed in the sandbox with exit status {code}",
                what
            ),
        ),
    })
}

/// The `detail` of a gateway error body, or the body's text when it is not `{"detail": ...}`.
pub fn detail_of(body: &[u8]) -> Option<String> {
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_slice(body)
        && let Some(detail) = map.get("detail")
    {
        return Some(match detail {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let text = String::from_utf8_lossy(body);
    let text = head(&text, QUOTE_MAX);
    (!text.is_empty()).then_some(text)
}

/// The kind of error a gateway's HTTP status of failure stands for (a REST answer's, a refused
/// connection's).
pub fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        401 => ErrorKind::Unauthorized,
        403 => ErrorKind::PolicyDenied,
        404 => ErrorKind::NotFound,
        409 => ErrorKind::Conflict,
        400..=499 => ErrorKind::InvalidArgument,
        504 => ErrorKind::Deadline,
        500..=503 => ErrorKind::UpstreamError,
        _ => ErrorKind::ProtocolError,
    }
}

/// Passes a 2xx response through; turns any other status into the error of its kind, carrying
/// the status and the gateway's detail.
pub fn check_status(info: &Exchange<'_>, response: HttpResponse) -> Result<HttpResponse, Error> {
    let status = response.status;
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let detail = detail_of(&response.body);
    let said = detail.as_deref().unwrap_or("(no detail)");
    let what = info.what;
    let kind = kind_of_status(status);
    let message = match kind {
        ErrorKind::Unauthorized => format!(
            "{what}: the gateway refused the token in {} (HTTP {status}: {said}); \
             the file must belong to the gateway listening on port {}",
            info.token_file, info.port
        ),
        ErrorKind::NotFound => format!("{what}: not found: {said}"),
        ErrorKind::PolicyDenied => format!("{what}: refused by a rule: {said}"),
        ErrorKind::Conflict => {
            format!("{what}: conflict: {said}; remove the existing MCP first or pick another name")
        }
        ErrorKind::InvalidArgument if status == 413 => {
            format!("{what}: the request body exceeds the gateway's limit: {said}")
        }
        ErrorKind::InvalidArgument => {
            format!("{what}: the gateway refused the request (HTTP {status}): {said}")
        }
        ErrorKind::Deadline => format!("{what}: deadline: {said}"),
        ErrorKind::UpstreamError => {
            format!("{what}: upstream MCP failed (HTTP {status}): {said}")
        }
        _ => format!("{what}: unexpected HTTP status {status}: {said}"),
    };
    Err(Error::new(kind, message).with_http(status, detail))
}

/// Parses a JSON body into `T`.
pub fn json_body<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| {
        Error::protocol(format!(
            "{what}: the gateway's answer is not the expected JSON ({e}): {}",
            head(&String::from_utf8_lossy(body), 200)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> RequestInfo<'static> {
        RequestInfo {
            exchange: Exchange {
                what: "GET /mcps",
                port: 5600,
                token_file: "/t/token",
            },
            transport: Transport::Curl,
            gateway_path: "mcpgw-gateway",
            max_time: "30",
        }
    }

    #[test]
    fn exit_statuses_map_to_kinds() {
        let kind = |code, out: &[u8]| {
            decode_output(&info(), code, out.to_vec(), b"curl: (7) Failed to connect")
                .unwrap_err()
                .kind()
        };
        assert_eq!(kind(7, b""), ErrorKind::GatewayNotRunning);
        assert_eq!(kind(28, b""), ErrorKind::Deadline);
        assert_eq!(kind(121, b""), ErrorKind::Unauthorized);
        assert_eq!(kind(127, b""), ErrorKind::CommandFailed);
        assert_eq!(kind(3, b""), ErrorKind::CommandFailed);
        assert_eq!(kind(0, b"garbage"), ErrorKind::ProtocolError);
        assert_eq!(
            kind(0, b"\nmcpgw-http-status:000\n"),
            ErrorKind::GatewayNotRunning
        );
        let ok = decode_output(&info(), 0, b"[]\nmcpgw-http-status:200\n".to_vec(), b"").unwrap();
        assert_eq!(ok.status, 200);
        assert_eq!(ok.body, b"[]");
    }

    #[test]
    fn statuses_map_to_kinds_with_detail() {
        let err = |status, body: &str| {
            check_status(
                &info().exchange,
                HttpResponse {
                    status,
                    body: body.as_bytes().to_vec(),
                },
            )
            .unwrap_err()
        };
        let e = err(401, "invalid gateway token");
        assert_eq!(e.kind(), ErrorKind::Unauthorized);
        assert_eq!(e.detail(), Some("invalid gateway token"));
        assert!(e.message().contains("/t/token"), "{e}");
        let e = err(
            403,
            r#"{"detail":"tool \"echo\" of MCP \"t\" is disabled by its spec (disable_tools)"}"#,
        );
        assert_eq!(
            (e.kind(), e.http_status()),
            (ErrorKind::PolicyDenied, Some(403))
        );
        assert!(
            e.message().contains("refused by a rule: tool \"echo\""),
            "{e}"
        );
        assert!(!e.message().contains("token"), "{e}");
        let e = err(404, r#"{"detail":"unknown MCP 'x'"}"#);
        assert_eq!(
            (e.kind(), e.http_status(), e.detail()),
            (ErrorKind::NotFound, Some(404), Some("unknown MCP 'x'"))
        );
        assert_eq!(err(409, "{}").kind(), ErrorKind::Conflict);
        assert_eq!(err(400, "{}").kind(), ErrorKind::InvalidArgument);
        assert_eq!(err(413, "{}").kind(), ErrorKind::InvalidArgument);
        assert_eq!(err(500, "{}").kind(), ErrorKind::UpstreamError);
        assert_eq!(err(502, "{}").kind(), ErrorKind::UpstreamError);
        assert_eq!(err(504, "{}").kind(), ErrorKind::Deadline);
        assert_eq!(err(302, "").kind(), ErrorKind::ProtocolError);
        assert_eq!(
            err(400, r#"{"detail":[{"loc":1}]}"#).detail(),
            Some(r#"[{"loc":1}]"#)
        );
    }
}
