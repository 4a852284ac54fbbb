//! The host's policy ([`crate::policy`]) where the driver's calls pass: a refused `call_tool`
//! ends at once with [`ErrorKind::PolicyDenied`], a `list_tools` result loses what is refused,
//! and on a virtual connection a refused request (`tools/call`, `prompts/get`,
//! `resources/read`, `resources/subscribe`) is answered with a JSON-RPC error naming the rule
//! and never sent, and the answers to its list requests (every page) are filtered. With audit
//! on, each call's end makes one record ([`super::audit`]). Nothing is parsed when the policy
//! is empty and audit is off.

use crate::wire::jsonrpc::method;
use std::collections::HashMap;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::audit::{Call, Started};
use super::config::{Op, Submit};
use crate::client::Output;
use crate::error::{Error, ErrorKind};
use crate::policy::{DENIED_CODE, Kind, Policy};

/// What the driver governs with: the host's policy, and whether calls are audited.
pub(super) struct Rules<'a> {
    pub policy: &'a Policy,
    pub audit: bool,
    /// Whether audit records hold the arguments themselves.
    pub audit_arguments: bool,
}

impl Rules<'_> {
    fn idle(&self) -> bool {
        self.policy.is_empty() && !self.audit
    }
}

/// What a virtual connection needs for the policy and the audit: whose it is, and its list
/// requests and audited calls in flight.
#[derive(Debug, Default)]
pub(super) struct Screen {
    /// The MCP it reaches.
    mcp: String,
    /// The agent of its scope.
    agent: String,
    /// The session of its scope.
    session: String,
    /// The list requests awaiting their answer: the id's JSON text, and the method.
    lists: HashMap<String, String>,
    /// The audited calls awaiting their answer, by the id's JSON text.
    calls: HashMap<String, Started>,
}

/// Why operation `submit` is refused.
pub(super) fn refused_op(policy: &Policy, submit: &Submit) -> Option<Error> {
    let Op::CallTool {
        mcp,
        tool,
        arguments,
    } = &submit.op
    else {
        return None;
    };
    policy
        .call_refusal(&submit.agent_id, mcp, tool, arguments)
        .map(|why| Error::new(ErrorKind::PolicyDenied, format!("call_tool: {why}")))
}

/// The audit of operation `submit` (a `call_tool`), started now.
pub(super) fn started_op(
    submit: &Submit,
    id: u64,
    keep_arguments: bool,
    now: Instant,
) -> Option<Started> {
    let Op::CallTool {
        mcp,
        tool,
        arguments,
    } = &submit.op
    else {
        return None;
    };
    Some(Started::new(
        Call {
            agent_id: &submit.agent_id,
            session_id: &submit.session_id,
            server: mcp,
            method: method::TOOLS_CALL,
            name: tool,
            via: "operation",
            id: id.to_string(),
            arguments,
            keep_arguments,
            meta: None,
        },
        now,
    ))
}

/// The record of an audited operation that ended with `result`.
pub(super) fn op_record(started: &Started, result: &Result<Output, Error>, now: Instant) -> String {
    match result {
        Ok(output) => {
            let text = output.to_json();
            let failed = matches!(output, Output::Chunk(c) if c.state == crate::wire::chunk::ToolState::Error);
            let outcome = if failed { "error" } else { "ok" };
            started.record(outcome, text.len(), None, now)
        }
        Err(e) => started.record(super::audit::outcome_of(e), 0, Some(e.message()), now),
    }
}

/// The scope whose policy filters the result of operation `submit` (a `list_tools`).
pub(super) fn list_filter(policy: &Policy, submit: &Submit) -> Option<(String, String)> {
    match &submit.op {
        Op::ListTools { mcp } if !policy.is_empty() => Some((submit.agent_id.clone(), mcp.clone())),
        _ => None,
    }
}

/// Removes the tools the policy refuses from a `list_tools` result.
pub(super) fn filter_tools(
    policy: &Policy,
    (agent, mcp): &(String, String),
    result: &mut Result<Output, Error>,
) {
    if let Ok(Output::Tools(tools)) = result {
        tools.retain(|t| policy.refusal(agent, mcp, Kind::Tool, &t.name).is_none());
    }
}

impl Screen {
    /// The screen of a connection to `mcp` in scope (`agent`, `session`).
    pub fn new(mcp: &str, agent: &str, session: &str) -> Screen {
        Screen {
            mcp: mcp.to_owned(),
            agent: agent.to_owned(),
            session: session.to_owned(),
            lists: HashMap::new(),
            calls: HashMap::new(),
        }
    }

    /// The answer to the client's message `msg` when the policy refuses it (it is then not
    /// sent); remembers its list requests and audited calls. `records` receives the audit
    /// records of calls that end here (refused, or cancelled by the client).
    pub fn request(
        &mut self,
        rules: &Rules<'_>,
        msg: &str,
        records: &mut Vec<String>,
        now: Instant,
    ) -> Option<Box<RawValue>> {
        if rules.idle() {
            return None;
        }
        let value: Value = serde_json::from_str(msg).ok()?;
        let called = value["method"].as_str()?;
        let params = &value["params"];
        let Some(id) = value.get("id") else {
            if called == method::CANCELLED {
                let cancelled = self.calls.remove(&params["requestId"].to_string());
                if let Some(started) = cancelled {
                    records.push(started.record("cancelled", 0, None, now));
                }
            }
            return None;
        };
        if called.ends_with("/list") {
            if !rules.policy.is_empty() {
                self.lists.insert(id.to_string(), called.to_owned());
            }
            return None;
        }
        let key = match called {
            method::TOOLS_CALL | method::PROMPTS_GET => "name",
            method::RESOURCES_READ => "uri",
            _ => "",
        };
        let started = (rules.audit && !key.is_empty()).then(|| {
            Started::new(
                Call {
                    agent_id: &self.agent,
                    session_id: &self.session,
                    server: &self.mcp,
                    method: called,
                    name: params[key].as_str().unwrap_or_default(),
                    via: "connection",
                    id: id.to_string(),
                    arguments: params.get("arguments").unwrap_or(&Value::Null),
                    keep_arguments: rules.audit_arguments,
                    meta: params.get("_meta"),
                },
                now,
            )
        });
        let Some(why) = rules
            .policy
            .request_refusal(&self.agent, &self.mcp, called, params)
        else {
            if let Some(started) = started {
                self.calls.insert(id.to_string(), started);
            }
            return None;
        };
        if let Some(started) = started {
            records.push(started.record("denied", 0, Some(&why), now));
        }
        let answer = json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": DENIED_CODE, "message": why}});
        RawValue::from_string(answer.to_string()).ok()
    }

    /// The server's message `msg` as the client gets it: the answer to a list request without
    /// what the policy refuses. `records` receives the record of an audited call it answers.
    pub fn answer(
        &mut self,
        policy: &Policy,
        msg: Box<RawValue>,
        records: &mut Vec<String>,
        now: Instant,
    ) -> Box<RawValue> {
        if self.lists.is_empty() && self.calls.is_empty() {
            return msg;
        }
        let Ok(mut value) = serde_json::from_str::<Value>(msg.get()) else {
            return msg;
        };
        if value.get("method").is_some() {
            return msg;
        }
        let Some(id) = value.get("id").map(Value::to_string) else {
            return msg;
        };
        if let Some(started) = self.calls.remove(&id) {
            let failed = value.get("error").is_some() || value["result"]["isError"] == true;
            let reason = value["error"]["message"].as_str();
            let outcome = if failed { "error" } else { "ok" };
            records.push(started.record(outcome, msg.get().len(), reason, now));
            return msg;
        }
        let Some(list) = self.lists.remove(&id) else {
            return msg;
        };
        let Some(result) = value.get_mut("result") else {
            return msg;
        };
        if !policy.filter_list(&self.agent, &self.mcp, &list, result) {
            return msg;
        }
        RawValue::from_string(value.to_string()).unwrap_or(msg)
    }

    /// The records of the audited calls still awaiting their answer when the connection
    /// ended: each `lost`.
    pub fn lost(&mut self, reason: Option<&str>, records: &mut Vec<String>, now: Instant) {
        for (_, started) in self.calls.drain() {
            records.push(started.record("lost", 0, reason, now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::from_json(r#"{"servers": {"ts": {"tools": {"deny": ["crash"]}}}}"#).unwrap()
    }

    #[test]
    fn a_connection_is_screened_both_ways_and_audited() {
        let p = policy();
        let rules = Rules {
            policy: &p,
            audit: true,
            audit_arguments: false,
        };
        let now = Instant::now();
        let mut records = Vec::new();
        let mut s = Screen::new("ts", "a", "s");
        let raw = |t: &str| RawValue::from_string(t.to_owned()).unwrap();
        let refused = s
            .request(
                &rules,
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crash"}}"#,
                &mut records,
                now,
            )
            .unwrap();
        let refused: Value = serde_json::from_str(refused.get()).unwrap();
        assert_eq!(refused["id"], 7);
        assert_eq!(refused["error"]["code"], DENIED_CODE);
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("\"crash\"")
        );
        let call = r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}"#;
        assert!(s.request(&rules, call, &mut records, now).is_none());
        let list = r#"{"jsonrpc":"2.0","id":"l","method":"tools/list"}"#;
        assert!(s.request(&rules, list, &mut records, now).is_none());
        // A call's answer passes as it is, and ends its record.
        let answer = r#"{"jsonrpc":"2.0","id":8,"result":{"content":[]}}"#;
        assert_eq!(s.answer(&p, raw(answer), &mut records, now).get(), answer);
        let page = raw(
            r#"{"jsonrpc":"2.0","id":"l","result":{"tools":[{"name":"crash"},{"name":"echo"}]}}"#,
        );
        let page: Value =
            serde_json::from_str(s.answer(&p, page, &mut records, now).get()).unwrap();
        assert_eq!(page["result"]["tools"], json!([{"name": "echo"}]));
        // A cancelled call, and one the connection's end leaves unanswered.
        let call = |id: u32| {
            format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"prompts/get","params":{{"name":"p"}}}}"#
            )
        };
        assert!(s.request(&rules, &call(9), &mut records, now).is_none());
        assert!(s.request(&rules, &call(10), &mut records, now).is_none());
        let cancel =
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#;
        assert!(s.request(&rules, cancel, &mut records, now).is_none());
        s.lost(Some("gone"), &mut records, now);
        assert!(s.lists.is_empty() && s.calls.is_empty());
        let records: Vec<Value> = records
            .iter()
            .map(|r| serde_json::from_str(r).unwrap())
            .collect();
        let outcomes: Vec<(&str, &str, &str)> = records
            .iter()
            .map(|r| {
                (
                    r["id"].as_str().unwrap(),
                    r["name"].as_str().unwrap(),
                    r["outcome"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            [
                ("7", "crash", "denied"),
                ("8", "echo", "ok"),
                ("9", "p", "cancelled"),
                ("10", "p", "lost")
            ]
        );
        let echo = &records[1];
        assert_eq!(
            (echo["agent_id"].as_str(), echo["session_id"].as_str()),
            (Some("a"), Some("s"))
        );
        assert_eq!(echo["args_bytes"], r#"{"text":"x"}"#.len());
        assert_eq!(echo["args_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(echo["result_bytes"], answer.len());
        assert_eq!(echo["via"], "connection");
        assert!(echo["time"].as_str().unwrap().ends_with('Z'));
        assert!(
            records[0]["reason"]
                .as_str()
                .unwrap()
                .contains("tools.deny")
        );
        // Nothing is parsed with neither a policy nor audit.
        let none = Policy::default();
        let idle = Rules {
            policy: &none,
            audit: false,
            audit_arguments: false,
        };
        assert!(s.request(&idle, "not json", &mut Vec::new(), now).is_none());
    }
}
