//! The gateway's one error type, what the registry and the upstreams return, and its one mapping
//! to HTTP (`impl IntoResponse`): a status and `{"detail": ...}`.
//!
//! Details are worded as AgentScope's gateway words them where it has the same error
//! (`'fs' not found for agent='' session=''`): its host client and its users read them.

use std::fmt;
use std::time::Duration;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpgw::wire::ErrorBody;
use mcpgw::wire::output::seconds;

use crate::scope::{Scope, py_repr};

/// Everything that can go wrong in a request, in the domain's terms.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The request is malformed or names something invalid; the text says what.
    Invalid(String),
    /// An MCP connection was asked for without the upgrade it needs.
    UpgradeRequired,
    /// As many MCP connections as the gateway allows are open.
    TooManyConnections {
        /// The bound (`--max-mcp-connections`).
        max: usize,
    },
    /// The request body is larger than the gateway accepts.
    PayloadTooLarge,
    /// No route matches the path.
    NoRoute,
    /// The route exists, but not with this method.
    MethodNotAllowed,
    /// No MCP of that name in the scope.
    NotFound {
        /// The MCP's name.
        name: String,
        /// The scope it was looked up in.
        scope: Scope,
    },
    /// The MCP has no tool of that name.
    ToolNotFound {
        /// The tool's name.
        tool: String,
        /// The MCP's name.
        mcp: String,
    },
    /// The MCP's spec filters the tool out (`enable_tools` / `disable_tools`): it is not
    /// called.
    ToolDisabled {
        /// The tool's name.
        tool: String,
        /// The MCP's name.
        mcp: String,
        /// The filter that excludes it, as `McpSpec::tool_excluded_by` names it.
        rule: &'static str,
    },
    /// The MCP was unregistered while the request was under way.
    Removed {
        /// The MCP's name.
        name: String,
    },
    /// The MCP was unregistered while its registration was still connecting.
    RemovedWhileConnecting {
        /// The MCP's name.
        name: String,
    },
    /// The MCP is registered but its first connection is not up yet.
    StillConnecting {
        /// The MCP's name.
        name: String,
    },
    /// The name is taken in the scope.
    Conflict {
        /// The MCP's name.
        name: String,
        /// The scope it is taken in.
        scope: Scope,
    },
    /// Registering failed: the upstream could not be started, reached or initialized.
    ConnectFailed(String),
    /// A stateless MCP's session for one operation could not be opened.
    SessionFailed {
        /// The MCP's name.
        mcp: String,
        /// Why.
        reason: String,
    },
    /// A dead upstream could not be started again.
    RestartFailed {
        /// The MCP's name.
        mcp: String,
        /// Why.
        reason: String,
    },
    /// The upstream died too often within the restart window; calls fail until it has passed.
    Crashing {
        /// The MCP's name.
        mcp: String,
        /// Restarts allowed within the window.
        restarts: usize,
        /// The window.
        window: Duration,
        /// Why it last failed.
        last_error: Option<String>,
    },
    /// A tool call did not finish within its deadline; the upstream was told to cancel it.
    Deadline {
        /// The tool.
        tool: String,
        /// The MCP.
        mcp: String,
        /// The deadline that passed.
        limit: Duration,
        /// Where the deadline came from.
        source: DeadlineSource,
    },
    /// Setting up a session (listing its tools) took longer than allowed.
    SetupTimeout {
        /// What took too long, e.g. "listing the tools of 'x'".
        what: String,
        /// The limit.
        limit: Duration,
    },
    /// The upstream died or closed its connection during a call, which is not retried.
    Died {
        /// The MCP.
        mcp: String,
        /// The tool being called.
        tool: String,
        /// How it died ("exited (exit status 3; stderr: ...)").
        report: String,
    },
    /// The upstream's reply was larger than the gateway accepts; it was dropped unread.
    ReplyTooLarge {
        /// The MCP.
        mcp: String,
        /// The tool called.
        tool: String,
        /// The reply's size.
        bytes: u64,
        /// `--max-reply-bytes`.
        limit: usize,
    },
    /// The upstream answered with a JSON-RPC error.
    Rpc {
        /// The MCP.
        mcp: String,
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
    /// No resumable call has that id here.
    CallUnknown {
        /// The call id.
        id: String,
    },
    /// The resumable call is no longer kept.
    CallGone {
        /// The call id.
        id: String,
        /// Why, e.g. "it ended more than 600s ago ...".
        why: String,
    },
    /// A resumable call has (or had) that id: ids are never reused, so no call runs twice.
    CallIdTaken {
        /// The call id.
        id: String,
    },
    /// Acknowledging a call that still runs would lose its answer.
    CallRunning {
        /// The call id.
        id: String,
    },
    /// Running resumable calls hold all the memory kept for resumable calls.
    CallsFull {
        /// `--call-retention-bytes`.
        budget: usize,
    },
    /// The upstream failed in another way; the text says how.
    Upstream(String),
    /// The gateway itself failed; the text says how.
    Internal(String),
}

/// Where a call's deadline came from, named in the detail of [`Error::Deadline`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadlineSource {
    /// The call's `?timeout=`.
    Request,
    /// The MCP's `execution_timeout`.
    ExecutionTimeout,
    /// The gateway's `--call-timeout`.
    Gateway,
}

impl fmt::Display for DeadlineSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DeadlineSource::Request => "the request's timeout",
            DeadlineSource::ExecutionTimeout => "the MCP's execution_timeout",
            DeadlineSource::Gateway => "the gateway's --call-timeout",
        })
    }
}

/// The detail: what the caller reads.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Invalid(text) | Error::Upstream(text) | Error::Internal(text) => {
                f.write_str(text)
            }
            Error::PayloadTooLarge => f.write_str("request body too large"),
            Error::UpgradeRequired => write!(
                f,
                "an MCP connection is an HTTP/1.1 upgrade: send Connection: Upgrade and Upgrade: {}",
                mcpgw::wire::rest::UPGRADE
            ),
            Error::TooManyConnections { max } => write!(
                f,
                "{max} MCP connections are open, as many as the gateway allows (--max-mcp-connections): close one first"
            ),
            Error::NoRoute => f.write_str("Not Found"),
            Error::MethodNotAllowed => f.write_str("Method Not Allowed"),
            Error::NotFound { name, scope } => {
                write!(f, "{} not found for {}", py_repr(name), scope.describe())
            }
            Error::ToolNotFound { tool, mcp } => write!(
                f,
                "Tool {} not found in MCP server {}",
                py_repr(tool),
                py_repr(mcp)
            ),
            Error::ToolDisabled { tool, mcp, rule } => {
                f.write_str(&mcpgw::wire::spec::disabled_tool_message(tool, mcp, rule))
            }
            Error::Removed { name } => write!(f, "{} was removed", py_repr(name)),
            Error::RemovedWhileConnecting { name } => {
                write!(f, "{} was removed while it was connecting", py_repr(name))
            }
            Error::StillConnecting { name } => write!(f, "{} is still connecting", py_repr(name)),
            Error::Conflict { name, scope } => {
                write!(
                    f,
                    "{} already exists for {}",
                    py_repr(name),
                    scope.describe()
                )
            }
            Error::ConnectFailed(reason) => write!(f, "connect failed: {reason}"),
            Error::SessionFailed { mcp, reason } => {
                write!(f, "connecting to {} failed: {reason}", py_repr(mcp))
            }
            Error::RestartFailed { mcp, reason } => {
                write!(f, "restarting upstream {} failed: {reason}", py_repr(mcp))
            }
            Error::Crashing {
                mcp,
                restarts,
                window,
                last_error,
            } => write!(
                f,
                "upstream {} keeps crashing ({restarts} restarts within {}s); last error: {}",
                py_repr(mcp),
                window.as_secs(),
                last_error.as_deref().unwrap_or("unknown")
            ),
            Error::Deadline {
                tool,
                mcp,
                limit,
                source,
            } => write!(
                f,
                "tool {} of {} did not finish within its deadline of {}s ({source}); the upstream was told to cancel it",
                py_repr(tool),
                py_repr(mcp),
                seconds(*limit)
            ),
            Error::SetupTimeout { what, limit } => write!(f, "{what} took longer than {limit:?}"),
            Error::Died { mcp, tool, report } => write!(
                f,
                "upstream {} {report} during the call to {}; the call was not retried",
                py_repr(mcp),
                py_repr(tool)
            ),
            Error::ReplyTooLarge {
                mcp,
                tool,
                bytes,
                limit,
            } => write!(
                f,
                "the reply of {} to the call of {} was {bytes} bytes, more than --max-reply-bytes ({limit}); it was dropped",
                py_repr(mcp),
                py_repr(tool)
            ),
            Error::Rpc { mcp, code, message } => {
                write!(f, "{} answered with error {code}: {message}", py_repr(mcp))
            }
            Error::CallUnknown { id } => write!(
                f,
                "no call {id} is known here: it never started on this gateway, or the gateway was restarted"
            ),
            Error::CallGone { id, why } => write!(f, "call {id} is no longer kept: {why}"),
            Error::CallIdTaken { id } => write!(
                f,
                "call id {id} is taken: a call with it ran here already (a call is never run twice)"
            ),
            Error::CallRunning { id } => write!(
                f,
                "call {id} is still running: only a finished call is acknowledged"
            ),
            Error::CallsFull { budget } => write!(
                f,
                "running resumable calls hold all {budget} bytes kept for them (--call-retention-bytes): try again once some finish"
            ),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// The HTTP status and the detail, the one mapping from the domain to HTTP.
    pub fn status_and_detail(&self) -> (StatusCode, String) {
        let status = match self {
            Error::Invalid(_) => StatusCode::BAD_REQUEST,
            Error::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Error::UpgradeRequired => StatusCode::UPGRADE_REQUIRED,
            Error::TooManyConnections { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::NoRoute
            | Error::NotFound { .. }
            | Error::ToolNotFound { .. }
            | Error::Removed { .. }
            | Error::CallUnknown { .. } => StatusCode::NOT_FOUND,
            Error::ToolDisabled { .. } => StatusCode::FORBIDDEN,
            Error::CallGone { .. } => StatusCode::GONE,
            Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Error::Conflict { .. }
            | Error::RemovedWhileConnecting { .. }
            | Error::CallIdTaken { .. }
            | Error::CallRunning { .. } => StatusCode::CONFLICT,
            Error::StillConnecting { .. } | Error::CallsFull { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Error::ConnectFailed(_) | Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Error::SessionFailed { .. }
            | Error::RestartFailed { .. }
            | Error::Crashing { .. }
            | Error::Died { .. }
            | Error::Rpc { .. }
            | Error::ReplyTooLarge { .. }
            | Error::Upstream(_) => StatusCode::BAD_GATEWAY,
            Error::Deadline { .. } | Error::SetupTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        };
        (status, self.to_string())
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let (status, detail) = self.status_and_detail();
        let body = serde_json::to_vec(&ErrorBody { detail }).expect("a string always serializes");
        (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python() {
        assert_eq!(py_repr("fs"), "'fs'");
        assert_eq!(py_repr(""), "''");
        assert_eq!(py_repr("it's"), "\"it's\"");
        assert_eq!(py_repr("a'b\"c"), "'a\\'b\"c'");
        assert_eq!(py_repr("x\ny\u{1}"), "'x\\ny\\x01'");
    }

    #[test]
    fn details_keep_agentscopes_wording() {
        let scope = Scope::default_scope();
        let cases = [
            (
                Error::NotFound {
                    name: "fs".into(),
                    scope: scope.clone(),
                },
                404,
                "'fs' not found for agent='' session=''",
            ),
            (
                Error::Conflict {
                    name: "ts".into(),
                    scope,
                },
                409,
                "'ts' already exists for agent='' session=''",
            ),
            (
                Error::ToolNotFound {
                    tool: "nope".into(),
                    mcp: "ts".into(),
                },
                404,
                "Tool 'nope' not found in MCP server 'ts'",
            ),
            (
                Error::ToolDisabled {
                    tool: "echo".into(),
                    mcp: "ts".into(),
                    rule: "disable_tools",
                },
                403,
                r#"tool "echo" of MCP "ts" is disabled by its spec (disable_tools)"#,
            ),
            (
                Error::Deadline {
                    tool: "slow".into(),
                    mcp: "ts".into(),
                    limit: Duration::from_millis(500),
                    source: DeadlineSource::ExecutionTimeout,
                },
                504,
                "tool 'slow' of 'ts' did not finish within its deadline of 0.5s (the MCP's execution_timeout); the upstream was told to cancel it",
            ),
            (
                Error::SetupTimeout {
                    what: "listing the tools of 'x'".into(),
                    limit: Duration::from_millis(500),
                },
                504,
                "listing the tools of 'x' took longer than 500ms",
            ),
        ];
        for (error, status, detail) in cases {
            let (s, d) = error.status_and_detail();
            assert_eq!((s.as_u16(), d.as_str()), (status, detail));
        }
    }
}
