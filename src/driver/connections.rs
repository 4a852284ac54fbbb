//! Virtual MCP connections over the session channel.

use super::*;

impl Host {
    /// Opens a virtual MCP connection to MCP `mcp` of the scope (`agent_id`, `session_id`)
    /// over the session channel; [`Action::ConnectionOpened`] says it is ready. With
    /// `own_upstream` the gateway gives it an upstream session of its own, opened with its
    /// client's handshake (`upstream=own`: the client meets the server as it would straight);
    /// else it shares the MCP's. Fails when no session is open or opening, or for an invalid
    /// name.
    pub fn open_connection(
        &mut self,
        mcp: &str,
        agent_id: &str,
        session_id: &str,
        own_upstream: bool,
        now: Instant,
    ) -> Result<Id, Error> {
        crate::wire::spec::check_name(mcp).map_err(Error::invalid_argument)?;
        let Some(channel) = self.channel.as_mut() else {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "virtual MCP connections travel over the session channel: open a session first",
            ));
        };
        let mut path = format!(
            "{}?{}",
            crate::wire::rest::path::connection(mcp),
            crate::wire::rest::Query::scope(agent_id, session_id).to_query_string()
        );
        if own_upstream {
            path.push('&');
            path.push_str(crate::wire::rest::UPSTREAM_OWN);
        }
        let sid = channel.session.open_connection(&path)?;
        let id = self.next;
        self.next += 1;
        channel.by_sid.insert(sid, id);
        let screen = govern::Screen::new(mcp, agent_id, session_id);
        self.conns.insert(id, Conn { sid, screen });
        self.flush(now);
        Ok(id)
    }

    /// Sends one JSON-RPC message on connection `conn`.
    pub fn send(&mut self, conn: Id, msg: &str, now: Instant) -> Result<(), Error> {
        let (Some(c), Some(channel)) = (self.conns.get_mut(&conn), self.channel.as_mut()) else {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!("connection {conn} is not open"),
            ));
        };
        let rules = govern::Rules {
            policy: &self.config.policy,
            audit: self.config.audit,
            audit_arguments: self.config.audit_arguments,
        };
        let mut records = Vec::new();
        let refused = c.screen.request(&rules, msg, &mut records, now);
        self.actions.extend(records.into_iter().map(Action::Audit));
        if let Some(refused) = refused {
            self.actions
                .push_back(Action::ConnectionMessage { conn, msg: refused });
            return Ok(());
        }
        channel.session.send_message(c.sid, msg)?;
        self.flush(now);
        Ok(())
    }

    /// Closes connection `conn` (its [`Action::ConnectionClosed`] follows); returns whether it
    /// was open.
    pub fn close_connection(&mut self, conn: Id, now: Instant) -> bool {
        let Some(c) = self.conns.get(&conn) else {
            return false;
        };
        if let Some(channel) = self.channel.as_mut() {
            channel.session.close_connection(c.sid);
        }
        self.drain_session(now);
        self.flush(now);
        true
    }
}
