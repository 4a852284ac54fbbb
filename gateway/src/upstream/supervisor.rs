//! Supervision of a stateful upstream: when its session dies, the next operation starts a new
//! one after a backoff, and an upstream that keeps dying is reported as crashing instead of
//! being restarted forever. A call is never replayed; only the next one gets the new session.
//!
//! [`RestartPolicy`] decides, from the times of deaths and restarts alone; the rest of this file
//! applies its decisions to the upstream's session.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mcpgw::wire::McpState;

use super::Upstream;
use super::session::{Era, Session};
use super::tools::fetch_tools;
use crate::error::Error;

/// When a dead upstream may be started again: at most [`RestartPolicy::MAX_RESTARTS`] restarts
/// within [`RestartPolicy::WINDOW`], each after a backoff that starts at
/// [`RestartPolicy::FIRST_BACKOFF`] and doubles with every recent restart, counted from the
/// death it follows.
#[derive(Debug, Clone, Default)]
pub struct RestartPolicy {
    /// Restart attempts (successful or not) within the window, oldest first.
    recent: VecDeque<Instant>,
    /// When the current session died, if it has and was not restarted since.
    died_at: Option<Instant>,
    /// Successful restarts over the upstream's life.
    restarts: u64,
}

/// What to do before restarting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Restart once this has passed (zero: at once).
    Wait(Duration),
    /// Do not restart: it died too often within the window.
    GiveUp {
        /// The restarts allowed within the window.
        restarts: usize,
        /// The window.
        window: Duration,
    },
}

impl RestartPolicy {
    /// Restarts allowed within [`Self::WINDOW`] before the upstream is declared crashing.
    pub const MAX_RESTARTS: usize = 5;
    /// The window restarts are counted in.
    pub const WINDOW: Duration = Duration::from_secs(60);
    /// The backoff before the first restart; it doubles with each recent restart.
    pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);

    /// Notes that the session died at `now` (the first notice counts).
    pub fn on_death(&mut self, now: Instant) {
        self.died_at.get_or_insert(now);
    }

    /// Whether to restart, and after how long.
    pub fn before_restart(&mut self, now: Instant) -> Decision {
        while self
            .recent
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > Self::WINDOW)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= Self::MAX_RESTARTS {
            return Decision::GiveUp {
                restarts: Self::MAX_RESTARTS,
                window: Self::WINDOW,
            };
        }
        let backoff = Self::FIRST_BACKOFF * (1 << self.recent.len().min(6));
        let since = self
            .died_at
            .map_or(backoff, |d| now.saturating_duration_since(d));
        Decision::Wait(backoff.saturating_sub(since))
    }

    /// Notes a restart that worked.
    pub fn restarted(&mut self, now: Instant) {
        self.recent.push_back(now);
        self.died_at = None;
        self.restarts += 1;
    }

    /// Notes a restart that failed: the upstream counts as dead from `now`.
    pub fn restart_failed(&mut self, now: Instant) {
        self.recent.push_back(now);
        self.died_at = Some(now);
    }

    /// Successful restarts so far.
    pub fn restarts(&self) -> u64 {
        self.restarts
    }
}

impl Upstream {
    /// The session to use now: the live one, or a new one when the old one died (stateful), or
    /// a fresh one for this operation only (stateless; the flag says so).
    pub(super) async fn session(&self) -> Result<(Arc<Session>, bool), Error> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Removed {
                name: self.name.clone(),
            });
        }
        if !self.spec.is_stateful {
            let session = self.open_session().await.map_err(|r| self.failed(r))?;
            return Ok((session, true));
        }
        if let Some(s) = self.live_session() {
            return Ok((s, false));
        }
        let _turn = self.reconnect.lock().await;
        if let Some(s) = self.live_session() {
            return Ok((s, false));
        }
        let wait = {
            let mut health = self.health.lock().unwrap();
            match health.policy.before_restart(Instant::now()) {
                Decision::GiveUp { restarts, window } => {
                    health.state = McpState::Crashing;
                    return Err(Error::Crashing {
                        mcp: self.name.clone(),
                        restarts,
                        window,
                        last_error: health.last_error.clone(),
                    });
                }
                Decision::Wait(wait) => {
                    health.state = McpState::Restarting;
                    wait
                }
            }
        };
        tokio::time::sleep(wait).await;
        match self.open_session().await {
            Ok(session) => {
                self.health.lock().unwrap().policy.restarted(Instant::now());
                tracing::info!(mcp = %self.name, "upstream restarted");
                if !session.announces_tool_changes()
                    && let Ok(tools) = fetch_tools(&session.peer, &session.handshake).await
                {
                    self.tools.set(tools);
                }
                self.install(session.clone());
                Ok((session, false))
            }
            Err(reason) => {
                let mut health = self.health.lock().unwrap();
                health.policy.restart_failed(Instant::now());
                health.last_error = Some(reason.clone());
                health.state = McpState::Failed;
                Err(Error::RestartFailed {
                    mcp: self.name.clone(),
                    reason,
                })
            }
        }
    }

    /// The error of a session of this upstream that could not be opened.
    fn failed(&self, reason: String) -> Error {
        Error::SessionFailed {
            mcp: self.name.clone(),
            reason,
        }
    }

    /// The installed session if it is alive; a dead one is noted and dropped (closing it kills
    /// what is left of its processes).
    pub(super) fn live_session(&self) -> Option<Arc<Session>> {
        let mut slot = self.session.lock().unwrap();
        match slot.as_ref() {
            Some(s) if s.alive() => Some(s.clone()),
            Some(_) => {
                let dead = slot.take().expect("checked");
                let mut health = self.health.lock().unwrap();
                health.state = McpState::Exited;
                health.policy.on_death(Instant::now());
                health.pid = None;
                tokio::spawn(async move { dead.close().await });
                None
            }
            None => None,
        }
    }

    /// Notes how the session died, seen by a call it failed.
    pub(super) fn note_death(&self, report: String) {
        let mut health = self.health.lock().unwrap();
        health.last_error = Some(report);
        health.policy.on_death(Instant::now());
    }

    /// Runs `op` on a session, closing it afterwards when it was made for this operation only.
    pub(super) async fn with_session<T, F, Fut>(&self, op: F) -> Result<T, Error>
    where
        F: FnOnce(Arc<Session>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let (session, one_off) = self.session().await?;
        let result = op(session.clone()).await;
        if one_off {
            session.close().await;
        }
        result
    }

    /// The session a virtual connection whose host speaks `era` and declared `capabilities`
    /// uses, and whether it is the connection's alone (a stateless MCP's, to close with it).
    ///
    /// A legacy upstream declares client capabilities once, at `initialize`: the gateway
    /// declares the union of what its connections' hosts declared. And a server that speaks
    /// both eras keeps to the one its session opened in. So when a host declares a capability
    /// the running session did not, or speaks the era the session does not but the server is
    /// known to, and no other connection uses that session, the session is started again for
    /// it (calls in flight on the old one fail, naming why): the host then meets the server as
    /// it would straight, rather than through the gateway's translation between the eras.
    pub async fn session_declaring(
        &self,
        capabilities: &serde_json::Value,
        era: Era,
    ) -> Result<(Arc<Session>, bool), Error> {
        {
            let mut union = self.capabilities.lock().unwrap();
            merge(&mut union, capabilities);
        }
        if !self.spec.is_stateful && !self.closed.load(Ordering::Acquire) {
            let speaks = self.eras.lock().unwrap().known_to_speak(era);
            if speaks {
                let session = self
                    .open_session_in(era)
                    .await
                    .map_err(|r| self.failed(r))?;
                return Ok((session, true));
            }
        }
        let (session, one_off) = self.session().await?;
        let fits = |s: &Session| {
            let declared = s.handshake.is_modern() || covers(&s.handshake.declared, capabilities);
            let spoken = s.handshake.era() == era || !self.eras.lock().unwrap().known_to_speak(era);
            declared && spoken
        };
        if one_off || fits(&session) || !session.hub.connections().is_empty() {
            return Ok((session, one_off));
        }
        let _turn = self.reconnect.lock().await;
        if let Some(live) = self.live_session()
            && (fits(&live) || !live.hub.connections().is_empty())
        {
            return Ok((live, false));
        }
        let old = self.session.lock().unwrap().take();
        if let Some(old) = old {
            tracing::info!(mcp = %self.name, "starting the upstream again for a connection's host: to declare the client capabilities it declared, or speak its revision");
            old.peer.close("the upstream was started again for the host of a new MCP connection (its capabilities or its revision)");
            old.close().await;
        }
        self.eras.lock().unwrap().wanted = era;
        match self.open_session().await {
            Ok(session) => {
                if let Ok(tools) = fetch_tools(&session.peer, &session.handshake).await {
                    self.tools.set(tools);
                }
                self.install(session.clone());
                Ok((session, false))
            }
            Err(reason) => {
                let mut health = self.health.lock().unwrap();
                health.last_error = Some(reason.clone());
                health.state = McpState::Failed;
                Err(Error::RestartFailed {
                    mcp: self.name.clone(),
                    reason,
                })
            }
        }
    }

    /// Whether calls can be served now without (re)connecting first.
    pub fn is_up(&self) -> bool {
        !self.spec.is_stateful || self.live_session().is_some()
    }
}

/// Adds what `more` declares to `union` (capabilities are objects of objects).
fn merge(union: &mut serde_json::Value, more: &serde_json::Value) {
    let (Some(union), Some(more)) = (union.as_object_mut(), more.as_object()) else {
        return;
    };
    for (k, v) in more {
        match union.get_mut(k) {
            Some(existing) if existing.is_object() && v.is_object() => merge(existing, v),
            Some(_) => {}
            None => {
                union.insert(k.clone(), v.clone());
            }
        }
    }
}

/// Whether `declared` declares everything `wanted` does.
fn covers(declared: &serde_json::Value, wanted: &serde_json::Value) -> bool {
    match (declared.as_object(), wanted.as_object()) {
        (Some(d), Some(w)) => w
            .iter()
            .all(|(k, v)| d.get(k).is_some_and(|dv| !v.is_object() || covers(dv, v))),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_first_restart_waits_out_the_first_backoff_from_the_death() {
        let t0 = Instant::now();
        let mut p = RestartPolicy::default();
        p.on_death(t0);
        assert_eq!(p.before_restart(t0), Decision::Wait(ms(100)));
        assert_eq!(p.before_restart(t0 + ms(30)), Decision::Wait(ms(70)));
        assert_eq!(p.before_restart(t0 + ms(500)), Decision::Wait(ms(0)));
        // A later notice of the same death does not push the restart back.
        p.on_death(t0 + ms(50));
        assert_eq!(p.before_restart(t0 + ms(60)), Decision::Wait(ms(40)));
    }

    #[test]
    fn backoff_doubles_with_each_recent_restart_then_gives_up() {
        let mut now = Instant::now();
        let mut p = RestartPolicy::default();
        for (i, want) in [100, 200, 400, 800, 1600].into_iter().enumerate() {
            p.on_death(now);
            assert_eq!(
                p.before_restart(now),
                Decision::Wait(ms(want)),
                "restart {i}"
            );
            now += ms(want);
            p.restarted(now);
        }
        assert_eq!(p.restarts(), 5);
        p.on_death(now);
        assert_eq!(
            p.before_restart(now),
            Decision::GiveUp {
                restarts: 5,
                window: Duration::from_secs(60)
            }
        );
        // Once the oldest restarts leave the window, it may restart again.
        let later = now + Duration::from_secs(61);
        assert!(matches!(p.before_restart(later), Decision::Wait(_)));
    }

    #[test]
    fn failed_restarts_count_and_restart_the_backoff_clock() {
        let t0 = Instant::now();
        let mut p = RestartPolicy::default();
        p.on_death(t0);
        p.restart_failed(t0 + ms(100));
        // The failure counts as a fresh death: 200 ms from it.
        assert_eq!(p.before_restart(t0 + ms(150)), Decision::Wait(ms(150)));
        assert_eq!(p.restarts(), 0);
        for i in 1..5 {
            p.restart_failed(t0 + ms(1000 * i));
        }
        assert!(matches!(
            p.before_restart(t0 + ms(5000)),
            Decision::GiveUp { .. }
        ));
    }

    #[test]
    fn without_a_recorded_death_it_restarts_at_once() {
        let mut p = RestartPolicy::default();
        assert_eq!(p.before_restart(Instant::now()), Decision::Wait(ms(0)));
    }
}
