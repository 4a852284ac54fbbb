//! The host's policy: which tools, prompts and resources of which servers its calls may reach,
//! enforced on the trusted side (the host driver), whatever the sandbox does.
//!
//! ```json
//! {"servers": {"fs": {"tools": {"allow": ["read_*", "list_directory"], "deny": ["read_secret"]},
//!                     "resources": {"deny": ["file:///etc/"]},
//!                     "arguments": {"read_*": {"encoding": "utf-8"}}},
//!              "*":  {"prompts": {"deny": ["*"]}}},
//!  "scopes": {"agent-7": {"servers": {"fs": {"tools": {"deny": ["write_*"]}}}}}}
//! ```
//!
//! - `servers` maps a server name (a glob: `*` stands for any run of characters) to its rules;
//!   every entry whose glob matches the server applies. `scopes` maps an agent id (a glob) to
//!   more `servers` entries, which apply to that agent's calls as well.
//! - `tools` and `prompts` take `allow` and `deny` lists of name globs, `resources` lists of URI
//!   prefixes. A name is refused when a `deny` of an applying entry matches it, or when an
//!   applying entry has an `allow` that does not; else it is allowed.
//! - `arguments` maps a tool glob to argument values a call must carry exactly; `schemas` maps a
//!   tool glob to a JSON Schema its calls' arguments must satisfy (the subset [`schema`]
//!   enforces; a schema with another keyword is refused when the policy is read).
//!
//! A refusal names the rule. Lists are filtered (what is refused is not listed), and calls
//! refused before anything reaches the sandbox.

use crate::wire::jsonrpc::method;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Error;

pub mod schema;
pub use schema::ArgumentSchema;

/// The host's policy (see the module documentation); the default allows everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Rules by server name glob.
    #[serde(default)]
    pub servers: BTreeMap<String, Rules>,
    /// More rules by agent id glob.
    #[serde(default)]
    pub scopes: BTreeMap<String, ScopeRules>,
}

/// The rules of one scope glob.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeRules {
    /// Rules by server name glob.
    #[serde(default)]
    pub servers: BTreeMap<String, Rules>,
}

/// The rules of one server glob.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Tool names.
    #[serde(default)]
    pub tools: Option<List>,
    /// Prompt names.
    #[serde(default)]
    pub prompts: Option<List>,
    /// Resource URI prefixes.
    #[serde(default)]
    pub resources: Option<List>,
    /// Argument values a call of a tool (by glob) must carry.
    #[serde(default)]
    pub arguments: BTreeMap<String, Map<String, Value>>,
    /// A JSON Schema the arguments of a call of a tool (by glob) must satisfy.
    #[serde(default)]
    pub schemas: BTreeMap<String, ArgumentSchema>,
}

/// An allow and a deny list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct List {
    /// When set, only what it matches is allowed.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// What it matches is refused.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// What a rule is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A tool, by name.
    Tool,
    /// A prompt, by name.
    Prompt,
    /// A resource or resource template, by URI (prefixes).
    Resource,
}

impl Kind {
    fn member(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Prompt => "prompts",
            Kind::Resource => "resources",
        }
    }

    fn noun(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Prompt => "prompt",
            Kind::Resource => "resource",
        }
    }

    fn matches(self, pattern: &str, subject: &str) -> bool {
        match self {
            Kind::Resource => subject.starts_with(pattern),
            Kind::Tool | Kind::Prompt => glob(pattern, subject),
        }
    }
}

/// The JSON-RPC error code of a request the policy refuses (implementation-defined server
/// error range; the gateway answers a tool its spec disables with the same).
pub const DENIED_CODE: i64 = -32003;

impl Policy {
    /// Reads a policy from JSON; the error names what is wrong.
    pub fn from_json(text: &str) -> Result<Policy, Error> {
        serde_json::from_str(text)
            .map_err(|e| Error::invalid_argument(format!("the policy is invalid: {e}")))
    }

    /// Whether it has no rule at all (nothing is checked then).
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty() && self.scopes.is_empty()
    }

    /// The entries that apply to server `mcp` for agent `agent`, each with its path for
    /// messages.
    fn applying<'a>(&'a self, agent: &str, mcp: &str) -> Vec<(String, &'a Rules)> {
        let mut out: Vec<(String, &Rules)> = self
            .servers
            .iter()
            .filter(|(g, _)| glob(g, mcp))
            .map(|(g, r)| (format!("servers.{g:?}"), r))
            .collect();
        for (sg, scope) in &self.scopes {
            if glob(sg, agent) {
                out.extend(
                    scope
                        .servers
                        .iter()
                        .filter(|(g, _)| glob(g, mcp))
                        .map(|(g, r)| (format!("scopes.{sg:?}.servers.{g:?}"), r)),
                );
            }
        }
        out
    }

    /// Why `name` (a tool or prompt name, a resource URI) of server `mcp` is refused to agent
    /// `agent`, naming the rule; `None` when it is allowed.
    pub fn refusal(&self, agent: &str, mcp: &str, kind: Kind, name: &str) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        for (path, rules) in self.applying(agent, mcp) {
            let list = match kind {
                Kind::Tool => &rules.tools,
                Kind::Prompt => &rules.prompts,
                Kind::Resource => &rules.resources,
            };
            let Some(list) = list else { continue };
            let member = kind.member();
            if let Some(p) = list.deny.iter().find(|p| kind.matches(p, name)) {
                return Some(denied(
                    kind,
                    name,
                    mcp,
                    &format!("{path}.{member}.deny: {p:?}"),
                ));
            }
            if let Some(allow) = &list.allow
                && !allow.iter().any(|p| kind.matches(p, name))
            {
                return Some(denied(
                    kind,
                    name,
                    mcp,
                    &format!("not in {path}.{member}.allow"),
                ));
            }
        }
        None
    }

    /// Why a call of tool `tool` with `arguments` is refused: the tool is, or an argument
    /// lacks the value a rule fixes.
    pub fn call_refusal(
        &self,
        agent: &str,
        mcp: &str,
        tool: &str,
        arguments: &Value,
    ) -> Option<String> {
        if let Some(why) = self.refusal(agent, mcp, Kind::Tool, tool) {
            return Some(why);
        }
        for (path, rules) in self.applying(agent, mcp) {
            for (g, fixed) in &rules.arguments {
                if !glob(g, tool) {
                    continue;
                }
                for (arg, want) in fixed {
                    if arguments.get(arg) != Some(want) {
                        return Some(format!(
                            "a call of tool {tool:?} of MCP {mcp:?} is refused by the host's \
                             policy: argument {arg:?} must be {want} ({path}.arguments.{g:?})"
                        ));
                    }
                }
            }
            for (g, schema) in &rules.schemas {
                if !glob(g, tool) {
                    continue;
                }
                // Absent arguments are an empty object, as the server sees them.
                let empty = Value::Object(Map::new());
                let given = if arguments.is_null() {
                    &empty
                } else {
                    arguments
                };
                if let Some(why) = schema.violation(given) {
                    return Some(format!(
                        "a call of tool {tool:?} of MCP {mcp:?} is refused by the host's \
                         policy: {why} ({path}.schemas.{g:?})"
                    ));
                }
            }
        }
        None
    }

    /// Removes from a list result (`tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list`; a page, or the REST tool list as an array) what the policy
    /// refuses; returns whether it removed anything.
    pub fn filter_list(&self, agent: &str, mcp: &str, list: &str, result: &mut Value) -> bool {
        let (kind, member, key) = match list {
            method::TOOLS_LIST => (Kind::Tool, "tools", "name"),
            method::PROMPTS_LIST => (Kind::Prompt, "prompts", "name"),
            method::RESOURCES_LIST => (Kind::Resource, "resources", "uri"),
            method::RESOURCE_TEMPLATES_LIST => (Kind::Resource, "resourceTemplates", "uriTemplate"),
            _ => return false,
        };
        let items = match result {
            Value::Array(items) => items,
            Value::Object(page) => match page.get_mut(member) {
                Some(Value::Array(items)) => items,
                _ => return false,
            },
            _ => return false,
        };
        let before = items.len();
        items.retain(|item| {
            item[key]
                .as_str()
                .is_none_or(|name| self.refusal(agent, mcp, kind, name).is_none())
        });
        items.len() != before
    }

    /// Why the JSON-RPC request `request` (its method) with `params` of a client of server `mcp`
    /// is refused:
    /// a tool call, a prompt or a resource the policy refuses.
    pub fn request_refusal(
        &self,
        agent: &str,
        mcp: &str,
        request: &str,
        params: &Value,
    ) -> Option<String> {
        let name = |key: &str| params[key].as_str().unwrap_or_default();
        match request {
            method::TOOLS_CALL => self.call_refusal(
                agent,
                mcp,
                name("name"),
                params.get("arguments").unwrap_or(&Value::Null),
            ),
            method::PROMPTS_GET => self.refusal(agent, mcp, Kind::Prompt, name("name")),
            method::RESOURCES_READ | method::RESOURCES_SUBSCRIBE => {
                self.refusal(agent, mcp, Kind::Resource, name("uri"))
            }
            _ => None,
        }
    }
}

fn denied(kind: Kind, name: &str, mcp: &str, rule: &str) -> String {
    format!(
        "{} {name:?} of MCP {mcp:?} is refused by the host's policy ({rule})",
        kind.noun()
    )
}

/// Whether `subject` matches `pattern`, where `*` stands for any run of characters.
pub fn glob(pattern: &str, subject: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = subject.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn globs() {
        for (p, s, want) in [
            ("*", "", true),
            ("*", "abc", true),
            ("a*", "abc", true),
            ("*c", "abc", true),
            ("a*c", "ac", true),
            ("a*b*c", "axxbyyc", true),
            ("a*c", "ab", false),
            ("abc", "abc", true),
            ("abc", "abcd", false),
            ("a*a", "a", false),
            ("", "", true),
            ("", "x", false),
        ] {
            assert_eq!(glob(p, s), want, "{p} {s}");
        }
    }

    fn policy() -> Policy {
        Policy::from_json(
            &json!({
                "servers": {
                    "fs": {"tools": {"allow": ["read_*", "echo"], "deny": ["read_secret"]},
                           "resources": {"deny": ["file:///etc/"]},
                           "arguments": {"read_*": {"encoding": "utf-8"}}},
                    "*": {"prompts": {"deny": ["*"]}}
                },
                "scopes": {"agent-*": {"servers": {"fs": {"tools": {"deny": ["echo"]}}}}}
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn refusals_name_their_rule() {
        let p = policy();
        assert_eq!(p.refusal("", "fs", Kind::Tool, "read_file"), None);
        assert_eq!(
            p.refusal("", "fs", Kind::Tool, "read_secret").as_deref(),
            Some(
                r#"tool "read_secret" of MCP "fs" is refused by the host's policy (servers."fs".tools.deny: "read_secret")"#
            )
        );
        assert_eq!(
            p.refusal("", "fs", Kind::Tool, "write_file").as_deref(),
            Some(
                r#"tool "write_file" of MCP "fs" is refused by the host's policy (not in servers."fs".tools.allow)"#
            )
        );
        // Other servers: only the "*" entry applies.
        assert_eq!(p.refusal("", "web", Kind::Tool, "write_file"), None);
        assert!(p.refusal("", "web", Kind::Prompt, "p").is_some());
        // A scope's rules add to the servers'.
        assert_eq!(p.refusal("", "fs", Kind::Tool, "echo"), None);
        assert!(
            p.refusal("agent-7", "fs", Kind::Tool, "echo")
                .unwrap()
                .contains(r#"scopes."agent-*".servers."fs".tools.deny: "echo""#)
        );
        // Resources by prefix.
        assert!(
            p.refusal("", "fs", Kind::Resource, "file:///etc/passwd")
                .is_some()
        );
        assert_eq!(p.refusal("", "fs", Kind::Resource, "file:///work/a"), None);
    }

    #[test]
    fn fixed_arguments_and_requests() {
        let p = policy();
        let call = |args: Value| {
            p.request_refusal(
                "",
                "fs",
                "tools/call",
                &json!({"name": "read_file", "arguments": args}),
            )
        };
        assert_eq!(call(json!({"path": "a", "encoding": "utf-8"})), None);
        assert!(
            call(json!({"path": "a"}))
                .unwrap()
                .contains(r#"argument "encoding" must be "utf-8""#)
        );
        assert!(call(json!({"encoding": "latin1"})).is_some());
        assert!(
            p.request_refusal("", "fs", "resources/read", &json!({"uri": "file:///etc/x"}))
                .is_some()
        );
        assert!(
            p.request_refusal("", "x", "prompts/get", &json!({"name": "p"}))
                .is_some()
        );
        assert_eq!(p.request_refusal("", "fs", "ping", &json!({})), None);
        // A call that names no tool is not in an allow list.
        assert!(
            p.request_refusal("", "fs", "tools/call", &json!({}))
                .is_some()
        );
    }

    #[test]
    fn lists_lose_what_is_refused() {
        let p = policy();
        let mut page = json!({"tools": [{"name": "read_file"}, {"name": "write_file"},
                                        {"name": "read_secret"}], "nextCursor": "x"});
        assert!(p.filter_list("", "fs", "tools/list", &mut page));
        assert_eq!(
            page,
            json!({"tools": [{"name": "read_file"}], "nextCursor": "x"})
        );
        let mut rest = json!([{"name": "echo"}, {"name": "write_file"}]);
        assert!(p.filter_list("", "fs", "tools/list", &mut rest));
        assert_eq!(rest, json!([{"name": "echo"}]));
        let mut templates = json!({"resourceTemplates": [
            {"uriTemplate": "file:///etc/{x}"}, {"uriTemplate": "file:///work/{x}"}]});
        assert!(p.filter_list("", "fs", "resources/templates/list", &mut templates));
        assert_eq!(templates["resourceTemplates"].as_array().unwrap().len(), 1);
        let mut same = json!({"tools": [{"name": "read_file"}]});
        assert!(!p.filter_list("", "fs", "tools/list", &mut same));
    }

    #[test]
    fn bad_policies_are_refused_with_the_reason() {
        for (bad, says) in [
            (
                r#"{"servers": {"fs": {"tools": {"alow": []}}}}"#,
                "unknown field `alow`",
            ),
            (r#"{"servers": []}"#, "invalid type"),
            ("{", "EOF"),
        ] {
            let e = Policy::from_json(bad).unwrap_err();
            assert!(e.to_string().contains(says), "{bad}: {e}");
        }
        assert!(Policy::from_json("{}").unwrap().is_empty());
    }
}
