//! The audit record: one JSON object per call the host makes (a `call_tool` operation; a
//! `tools/call`, `prompts/get` or `resources/read` on a virtual connection), written when the
//! call ends, whatever its end: `ok`, `error`, `denied`, `cancelled`, `timeout` or `lost`.
//!
//! ```json
//! {"time":"2026-12-03T22:58:01.123456Z","agent_id":"","session_id":"","server":"fs",
//!  "method":"tools/call","name":"read_file","via":"connection","id":"7",
//!  "args_sha256":"…","args_bytes":24,"outcome":"ok","duration_ms":1.8,"result_bytes":311}
//! ```
//!
//! The arguments appear as their SHA-256 and size (of their JSON text as sent), and themselves
//! (`arguments`) only when the configuration's `audit_arguments` asks for them, with every
//! secret's value replaced by `[secret:NAME]` as in all the driver says. `trace_id` is the trace
//! of a request whose `_meta.traceparent` (W3C trace context) names one. A refusal's or
//! failure's `reason` is the library's message.

use std::time::{Instant, SystemTime};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{Error, ErrorKind};

/// A call under way, as its record will say.
#[derive(Debug, Clone)]
pub(super) struct Started {
    time: SystemTime,
    at: Instant,
    agent_id: String,
    session_id: String,
    server: String,
    method: String,
    name: String,
    via: &'static str,
    id: String,
    args_sha256: String,
    args_bytes: usize,
    arguments: Option<Value>,
    trace_id: Option<String>,
}

#[derive(Serialize)]
struct Record<'a> {
    time: String,
    agent_id: &'a str,
    session_id: &'a str,
    server: &'a str,
    method: &'a str,
    name: &'a str,
    via: &'a str,
    id: &'a str,
    args_sha256: &'a str,
    args_bytes: usize,
    outcome: &'a str,
    duration_ms: f64,
    result_bytes: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<&'a str>,
}

/// Where a call went.
pub(super) struct Call<'a> {
    pub agent_id: &'a str,
    pub session_id: &'a str,
    pub server: &'a str,
    pub method: &'a str,
    pub name: &'a str,
    /// `operation` or `connection`.
    pub via: &'static str,
    /// The operation's id, or the request's id as JSON text.
    pub id: String,
    pub arguments: &'a Value,
    /// Whether the record holds the arguments themselves.
    pub keep_arguments: bool,
    /// The request's `_meta`, for its trace.
    pub meta: Option<&'a Value>,
}

/// The trace id of a W3C `traceparent` (`VERSION-TRACEID-PARENTID-FLAGS`): 32 lowercase hex
/// digits, not all zero.
fn trace_id(meta: Option<&Value>) -> Option<String> {
    let parent = meta?.get("traceparent")?.as_str()?;
    let id = parent.split('-').nth(1)?;
    (id.len() == 32
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && id.bytes().any(|b| b != b'0'))
    .then(|| id.to_owned())
}

impl Started {
    /// A call starting now.
    pub fn new(call: Call<'_>, now: Instant) -> Started {
        let text = match call.arguments {
            Value::Null => String::new(),
            args => args.to_string(),
        };
        let digest = Sha256::digest(text.as_bytes());
        Started {
            time: SystemTime::now(),
            at: now,
            agent_id: call.agent_id.to_owned(),
            session_id: call.session_id.to_owned(),
            server: call.server.to_owned(),
            method: call.method.to_owned(),
            name: call.name.to_owned(),
            via: call.via,
            id: call.id,
            args_sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            args_bytes: text.len(),
            arguments: call.keep_arguments.then(|| call.arguments.clone()),
            trace_id: trace_id(call.meta),
        }
    }

    /// Its record, ended now with `outcome`.
    pub fn record(
        &self,
        outcome: &str,
        result_bytes: usize,
        reason: Option<&str>,
        now: Instant,
    ) -> String {
        let (time, micros) = crate::civil::utc(self.time);
        let elapsed = now.saturating_duration_since(self.at);
        serde_json::to_string(&Record {
            time: format!("{time}.{micros:06}Z"),
            agent_id: &self.agent_id,
            session_id: &self.session_id,
            server: &self.server,
            method: &self.method,
            name: &self.name,
            via: self.via,
            id: &self.id,
            args_sha256: &self.args_sha256,
            args_bytes: self.args_bytes,
            outcome,
            duration_ms: (elapsed.as_micros() as f64) / 1000.0,
            result_bytes,
            reason,
            arguments: self.arguments.as_ref(),
            trace_id: self.trace_id.as_deref(),
        })
        .expect("a record serializes")
    }
}

/// The outcome an operation's error stands for.
pub(super) fn outcome_of(error: &Error) -> &'static str {
    match error.kind() {
        ErrorKind::PolicyDenied => "denied",
        ErrorKind::Cancelled => "cancelled",
        ErrorKind::Deadline => "timeout",
        ErrorKind::SessionLost => "lost",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_trace_id_is_read_from_a_valid_traceparent_only() {
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let meta = |p: &str| json!({"traceparent": p});
        assert_eq!(
            trace_id(Some(&meta(&format!("00-{id}-00f067aa0ba902b7-01")))).as_deref(),
            Some(id)
        );
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f35-00f067aa0ba902b7-01",
            "garbage",
        ] {
            assert_eq!(trace_id(Some(&meta(bad))), None, "{bad}");
        }
        assert_eq!(trace_id(Some(&json!({"traceparent": 7}))), None);
        assert_eq!(trace_id(None), None);
    }
}
