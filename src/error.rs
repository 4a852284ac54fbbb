//! The library's one error type.

use std::fmt;

/// What kind of failure an [`Error`] is; each kind has its own C result code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A value given to the library is unusable (bad name, malformed JSON, NUL byte), or the
    /// gateway refused the request as invalid (HTTP 400, 413, 422).
    InvalidArgument,
    /// The exec callback could not run a command in the sandbox at all.
    ExecFailed,
    /// A command ran in the sandbox but failed for a reason outside the HTTP exchange: a missing
    /// program, a full disk, a failed upload check.
    CommandFailed,
    /// No gateway answers on the configured port, or a different one than this client launched.
    GatewayNotRunning,
    /// The gateway could not be launched; the message carries its reason and log tail.
    StartFailed,
    /// The gateway refused the token (HTTP 401), or the token file could not be read.
    Unauthorized,
    /// Unknown MCP or tool in this scope (HTTP 404).
    NotFound,
    /// An MCP of that name already exists in this scope (HTTP 409).
    Conflict,
    /// The upstream MCP server failed to connect or to answer (HTTP 500, 502, 503).
    UpstreamError,
    /// A deadline passed: the tool call's (HTTP 504) or the request's own.
    Deadline,
    /// What came back is not what the gateway protocol promises.
    ProtocolError,
    /// A file on the host could not be read.
    HostIo,
    /// A sans-IO operation was driven out of order.
    InvalidState,
    /// The session channel carrying the operation died (its process was killed, the sandbox
    /// went away, the host closed it) before the answer came. The operation is not replayed:
    /// a tool call may have had effects.
    SessionLost,
    /// The caller gave up on the operation (a cancelled context, an aborted signal); the gateway
    /// was told to cancel it upstream when it was under way.
    Cancelled,
}

impl ErrorKind {
    /// Every kind, in declaration order.
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::InvalidArgument,
        ErrorKind::ExecFailed,
        ErrorKind::CommandFailed,
        ErrorKind::GatewayNotRunning,
        ErrorKind::StartFailed,
        ErrorKind::Unauthorized,
        ErrorKind::NotFound,
        ErrorKind::Conflict,
        ErrorKind::UpstreamError,
        ErrorKind::Deadline,
        ErrorKind::ProtocolError,
        ErrorKind::HostIo,
        ErrorKind::InvalidState,
        ErrorKind::SessionLost,
        ErrorKind::Cancelled,
    ];

    /// A short name of the kind, for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::ExecFailed => "exec failed",
            ErrorKind::CommandFailed => "command failed in the sandbox",
            ErrorKind::GatewayNotRunning => "gateway not running",
            ErrorKind::StartFailed => "gateway start failed",
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::NotFound => "not found",
            ErrorKind::Conflict => "conflict",
            ErrorKind::UpstreamError => "upstream error",
            ErrorKind::Deadline => "deadline exceeded",
            ErrorKind::ProtocolError => "protocol error",
            ErrorKind::HostIo => "host I/O error",
            ErrorKind::InvalidState => "invalid state",
            ErrorKind::SessionLost => "session lost",
            ErrorKind::Cancelled => "cancelled",
        }
    }
}

/// A failure, with a message a person can act on and, when the gateway answered, its HTTP status
/// and `detail`.
///
/// No message ever contains the gateway token: the library never holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    status: Option<u16>,
    detail: Option<String>,
}

impl Error {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            status: None,
            detail: None,
        }
    }

    /// An [`ErrorKind::InvalidArgument`] error.
    pub fn invalid_argument(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// An [`ErrorKind::ProtocolError`] error.
    pub fn protocol(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::ProtocolError, message)
    }

    /// Attaches the gateway's HTTP status and `detail`.
    pub fn with_http(mut self, status: u16, detail: Option<String>) -> Error {
        self.status = Some(status);
        self.detail = detail;
        self
    }

    /// Puts `context` in front of the message.
    pub fn context(mut self, context: &str) -> Error {
        self.message = format!("{context}: {}", self.message);
        self
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The full message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The gateway's HTTP status, when it answered.
    pub fn http_status(&self) -> Option<u16> {
        self.status
    }

    /// The gateway's `detail` (or plain-text body), when it answered with one.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Shortens `text` to at most `max` bytes (on a character boundary), keeping its end: the end of
/// a log or of stderr says what went wrong.
pub(crate) fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("...{}", &text[start..])
}

/// Shortens `text` to at most `max` bytes, keeping its start.
pub(crate) fn head(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_head_cut_on_char_boundaries() {
        assert_eq!(tail("  short \n", 10), "short");
        assert_eq!(tail("abcdéf", 3), "...éf");
        assert_eq!(head("abcdéf", 5), "abcd...");
        assert_eq!(tail("0123456789", 4), "...6789");
    }

    #[test]
    fn http_fields_and_context() {
        let e = Error::new(ErrorKind::NotFound, "unknown MCP")
            .with_http(404, Some("no such MCP".into()))
            .context("list_tools");
        assert_eq!(e.kind(), ErrorKind::NotFound);
        assert_eq!(e.http_status(), Some(404));
        assert_eq!(e.detail(), Some("no such MCP"));
        assert_eq!(e.to_string(), "list_tools: unknown MCP");
    }

    #[test]
    fn all_lists_the_kinds_in_declaration_order() {
        for (i, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind:?}");
        }
    }
}
