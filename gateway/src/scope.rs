//! What a registration belongs to, `(agent_id, session_id)`, and how AgentScope's messages
//! name things (Python's `repr()`), which the errors' details follow.

/// `(agent_id, session_id)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// The agent.
    pub agent_id: String,
    /// The session.
    pub session_id: String,
}

impl Scope {
    /// The default scope, `("", "")`.
    pub fn default_scope() -> Self {
        Scope {
            agent_id: String::new(),
            session_id: String::new(),
        }
    }

    /// `agent='a' session=''`, as AgentScope's details name a scope.
    pub fn describe(&self) -> String {
        format!(
            "agent={} session={}",
            py_repr(&self.agent_id),
            py_repr(&self.session_id)
        )
    }
}

/// A string as Python's `repr()` writes it, for details worded as AgentScope words them
/// (`'fs' not found for agent='' session=''`).
pub fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}
