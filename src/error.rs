//! The library's one error type.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Declares [`ErrorKind`] and [`CODES`] from one table: every result code of the library, its C
/// name (after `MCPGW_RESULT_`), its value and its message. The C enum of `include/mcpgw.h`, the
/// Go constants generated from the header, and the Node and Python error classes built at load
/// from `mcpgw_result_codes` all come from it (the C ABI's tests check its enum against it).
macro_rules! codes {
    (
        abi { $( $aname:literal = $avalue:literal, $amessage:literal; )* }
        kinds { $( $(#[$doc:meta])* $kind:ident = $kname:literal, $kvalue:literal, $kmessage:literal; )* }
    ) => {
        /// What kind of failure an [`Error`] is; each kind has its own C result code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $kind, )*
        }

        impl ErrorKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [ErrorKind] = &[ $( ErrorKind::$kind, )* ];

            /// The kind's entry in [`CODES`].
            pub fn code(self) -> &'static Code {
                match self {
                    $( ErrorKind::$kind => &Code { name: $kname, value: $kvalue, message: $kmessage, kind: Some(ErrorKind::$kind) }, )*
                }
            }
        }

        /// Every result code, in ascending order: the C ABI's own (success, a NULL argument, a
        /// panic) and one per [`ErrorKind`].
        pub const CODES: &[Code] = &[
            $( Code { name: $aname, value: $avalue, message: $amessage, kind: None }, )*
            $( Code { name: $kname, value: $kvalue, message: $kmessage, kind: Some(ErrorKind::$kind) }, )*
        ];
    };
}

/// One result code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// The name after `MCPGW_RESULT_`, e.g. `NOT_FOUND`; bindings name their errors after it.
    pub name: &'static str,
    /// The value (7000 and up).
    pub value: u32,
    /// What it means, in a few words.
    pub message: &'static str,
    /// The error kind, for codes other than the C ABI's own.
    pub kind: Option<ErrorKind>,
}

codes! {
    abi {
        "OK" = 7000, "ok";
        "NULL_PARAMETER" = 7001, "a required pointer argument was NULL";
        "PANIC" = 7002, "the library panicked (a bug: please report it)";
    }
    kinds {
        /// A value given to the library is unusable (bad name, malformed JSON, NUL byte), or the
        /// gateway refused the request as invalid (HTTP 400, 413, 422).
        InvalidArgument = "INVALID_ARGUMENT", 7003, "invalid argument";
        /// A sans-IO operation was driven out of order, or a call came in a state that cannot
        /// take it (a connection opened without a session, a message on a connection that is
        /// not open).
        InvalidState = "INVALID_STATE", 7004, "the operation was driven out of order";
        /// A file on the host could not be read.
        HostIo = "HOST_IO", 7005, "a file on the host could not be read";
        /// The sandbox backend could not run a command at all: the sandbox is gone, not
        /// running or unreachable (see [`Error::backend`]), or the exec function failed.
        ExecFailed = "EXEC_FAILED", 7100, "the sandbox backend could not run the command";
        /// A command ran in the sandbox but failed for a reason outside the HTTP exchange: a
        /// missing program, a full disk, a failed upload check.
        CommandFailed = "COMMAND_FAILED", 7101, "a command failed in the sandbox";
        /// No gateway answers on the configured port, or a different one than this client
        /// launched.
        GatewayNotRunning = "GATEWAY_NOT_RUNNING", 7102, "the gateway is not running";
        /// The gateway could not be launched; the message carries its reason and log tail.
        StartFailed = "START_FAILED", 7103, "the gateway could not be started";
        /// The gateway refused the token (HTTP 401), or the token file could not be read.
        Unauthorized = "UNAUTHORIZED", 7104, "the gateway refused the token";
        /// Unknown MCP or tool in this scope (HTTP 404).
        NotFound = "NOT_FOUND", 7105, "no such MCP or tool";
        /// An MCP of that name already exists in this scope (HTTP 409).
        Conflict = "CONFLICT", 7106, "an MCP of that name already exists";
        /// The upstream MCP server failed to connect or to answer (HTTP 500, 502, 503).
        UpstreamError = "UPSTREAM_ERROR", 7107, "the upstream MCP server failed";
        /// A deadline passed: the tool call's (HTTP 504) or the request's own.
        Deadline = "DEADLINE", 7108, "a deadline passed";
        /// What came back is not what the gateway protocol promises.
        ProtocolError = "PROTOCOL_ERROR", 7109, "unexpected answer from the gateway";
        /// The session channel carrying the operation died (its process was killed, the
        /// sandbox went away, the host closed it) before the answer came, and the operation
        /// could not be resumed. It is not replayed: a tool call may have had effects.
        SessionLost = "SESSION_LOST", 7110, "the session channel was lost";
        /// The caller gave up on the operation (a cancelled context, an aborted signal); the
        /// gateway was told to cancel it upstream when it was under way.
        Cancelled = "CANCELLED", 7111, "the operation was cancelled";
        /// A rule refused it: the MCP's `enable_tools`/`disable_tools` (HTTP 403), or the
        /// host's policy, before anything reached the sandbox.
        PolicyDenied = "POLICY_DENIED", 7112, "a policy refused it";
    }
}

impl ErrorKind {
    /// What the kind means, in a few words (the C ABI's `mcpgw_result_message`).
    pub fn as_str(self) -> &'static str {
        self.code().message
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
    backend: Option<Box<BackendFailure>>,
}

impl Error {
    /// A new error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: message.into(),
            status: None,
            detail: None,
            backend: None,
        }
    }

    /// An [`ErrorKind::ExecFailed`] error for a failure of the sandbox backend.
    pub fn backend_failed(failure: BackendFailure) -> Error {
        let mut e = Error::new(ErrorKind::ExecFailed, failure.to_string());
        e.backend = Some(Box::new(failure));
        e
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

    /// The error with `redact` run over each of its texts (the message, the detail, the
    /// backend's reason): a redactor replaces the secret values in them.
    pub fn redacted(mut self, redact: impl Fn(&mut String)) -> Error {
        redact(&mut self.message);
        if let Some(d) = self.detail.as_mut() {
            redact(d);
        }
        if let Some(b) = self.backend.as_mut() {
            redact(&mut b.reason);
        }
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

    /// What failed in the sandbox backend, for an [`ErrorKind::ExecFailed`] error it reported.
    pub fn backend(&self) -> Option<&BackendFailure> {
        self.backend.as_deref()
    }
}

impl Error {
    /// The error as JSON, for hosts that build their own error values from it:
    /// `{"code":7105,"name":"NOT_FOUND","message":...,"http_status":404,"detail":...,"backend":
    /// {"backend","target","exit_code","state","reason"}}` (absent fields omitted).
    pub fn to_json(&self) -> String {
        #[derive(serde::Serialize)]
        struct Json<'a> {
            code: u32,
            name: &'static str,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            http_status: Option<u16>,
            #[serde(skip_serializing_if = "Option::is_none")]
            detail: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            backend: Option<&'a BackendFailure>,
        }
        let code = self.kind.code();
        serde_json::to_string(&Json {
            code: code.value,
            name: code.name,
            message: &self.message,
            http_status: self.status,
            detail: self.detail.as_deref(),
            backend: self.backend.as_deref(),
        })
        .expect("errors serialize")
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

/// Why a run was the backend's failure rather than the command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureState {
    /// The container or pod does not exist, or it was killed or removed during the command.
    Gone,
    /// It exists but is not running (stopped, paused).
    NotRunning,
    /// The daemon or API server cannot be reached.
    Unreachable,
    /// The backend could not start the command (no `sh` in the image, a refused option).
    CannotRun,
}

/// A failure of the backend, for messages and for the bindings' one backend-error type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendFailure {
    /// `docker`, `podman`, `kubectl`, or the prefix's program.
    pub backend: String,
    /// The container or pod.
    pub target: String,
    /// The backend client's exit status.
    pub exit_code: i32,
    /// What kind of failure.
    pub state: FailureState,
    /// What the backend said, or what was found out.
    pub reason: String,
}

impl std::fmt::Display for BackendFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} exec in {} failed (exit {}): {}",
            self.backend, self.target, self.exit_code, self.reason
        )
    }
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

    #[test]
    fn codes_ascend_and_each_is_its_own() {
        let values: Vec<u32> = CODES.iter().map(|c| c.value).collect();
        let mut sorted = values.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(values, sorted);
        let mut messages: Vec<&str> = CODES.iter().map(|c| c.message).collect();
        messages.sort_unstable();
        messages.dedup();
        assert_eq!(messages.len(), CODES.len());
        for kind in ErrorKind::ALL {
            assert!(CODES.contains(kind.code()), "{kind:?}");
            assert_eq!(kind.code().kind, Some(*kind));
        }
    }
}
