//! Heartbeats: a channel that stops moving without an end of file (a half-open `kubectl exec`
//! stream, a frozen exec) is noticed.
//!
//! - attach writes `{"t":"ping"}` when it has written nothing for `--heartbeat`, so the host
//!   can tell a quiet channel from a dead one;
//! - attach ends the session (as at the end of input: resumable calls keep running) when
//!   nothing at all arrived from the host for `--heartbeat-timeout`. The timeout applies once
//!   the host has sent its first `ping`: a host that sends none (an older one, a person typing)
//!   is never cut off for being quiet.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// When something last happened, shared between the threads of a session.
#[derive(Clone)]
pub struct Moment {
    origin: Instant,
    /// Milliseconds after `origin`.
    at: Arc<AtomicU64>,
}

impl Moment {
    /// Now, as the first moment.
    pub fn now() -> Moment {
        Moment {
            origin: Instant::now(),
            at: Arc::default(),
        }
    }

    /// It happened again, now.
    pub fn touch(&self) {
        self.touch_at(Instant::now());
    }

    fn touch_at(&self, at: Instant) {
        let ms = at.saturating_duration_since(self.origin).as_millis() as u64;
        self.at.fetch_max(ms, Ordering::Relaxed);
    }

    /// When it last happened.
    pub fn last(&self) -> Instant {
        self.origin + Duration::from_millis(self.at.load(Ordering::Relaxed))
    }
}

/// What the heartbeat asks for when its timer fires.
#[derive(Debug, PartialEq, Eq)]
pub enum Beat {
    /// Nothing now.
    Nothing,
    /// Write a `ping`.
    Ping,
    /// The host has been silent past the timeout: end the session.
    Silent(Duration),
}

/// The session's heartbeat: its settings and what it saw.
pub struct Liveness {
    interval: Option<Duration>,
    timeout: Option<Duration>,
    /// The last write to stdout.
    pub written: Moment,
    /// The last bytes read from stdin.
    pub read: Moment,
    /// Whether the host has sent a `ping`.
    armed: AtomicBool,
    /// The last write when the last `ping` was queued: no second one until it is written.
    pinged_after: Option<Instant>,
}

impl Liveness {
    /// A heartbeat every `interval`, a host silent for `timeout` declared gone (zero: never).
    pub fn new(interval: Duration, timeout: Duration) -> Liveness {
        Liveness {
            interval: (!interval.is_zero()).then_some(interval),
            timeout: (!timeout.is_zero()).then_some(timeout),
            written: Moment::now(),
            read: Moment::now(),
            armed: AtomicBool::new(false),
            pinged_after: None,
        }
    }

    /// The host sent a `ping`: from now on its silence counts.
    pub fn host_pinged(&self) {
        self.armed.store(true, Ordering::Relaxed);
    }

    /// When to look again; `None` when there is nothing to watch.
    pub fn next_check(&self) -> Option<Instant> {
        let ping = self.interval.map(|i| self.written.last() + i);
        let silence = self
            .timeout
            .filter(|_| self.armed.load(Ordering::Relaxed))
            .map(|t| self.read.last() + t);
        match (ping, silence) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What to do at `now`.
    pub fn check(&mut self, now: Instant) -> Beat {
        if let Some(timeout) = self.timeout
            && self.armed.load(Ordering::Relaxed)
            && now.saturating_duration_since(self.read.last()) >= timeout
        {
            return Beat::Silent(timeout);
        }
        let written = self.written.last();
        match self.interval {
            Some(interval)
                if now.saturating_duration_since(written) >= interval
                    && self.pinged_after != Some(written) =>
            {
                self.pinged_after = Some(written);
                Beat::Ping
            }
            _ => Beat::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_when_quiet_and_declares_a_silent_host_gone_once_it_pinged() {
        let mut live = Liveness::new(Duration::from_secs(5), Duration::from_secs(15));
        let start = live.written.last();
        live.read.touch_at(start);
        assert_eq!(live.next_check(), Some(start + Duration::from_secs(5)));
        assert_eq!(live.check(start + Duration::from_secs(4)), Beat::Nothing);
        assert_eq!(live.check(start + Duration::from_secs(5)), Beat::Ping);
        // That ping is not written yet: no second one.
        assert_eq!(live.check(start + Duration::from_secs(11)), Beat::Nothing);
        live.written.touch_at(start + Duration::from_secs(11));
        assert_eq!(
            live.next_check(),
            Some(start + Duration::from_secs(16)),
            "the next ping is due an interval after the last write"
        );
        // Silent for 30 s, but the host never pinged: nothing ends.
        assert_eq!(live.check(start + Duration::from_secs(30)), Beat::Ping);
        live.host_pinged();
        assert_eq!(
            live.check(start + Duration::from_secs(30)),
            Beat::Silent(Duration::from_secs(15))
        );
        live.read.touch_at(start + Duration::from_secs(11));
        assert_eq!(live.check(start + Duration::from_secs(12)), Beat::Nothing);

        let mut off = Liveness::new(Duration::ZERO, Duration::ZERO);
        off.host_pinged();
        assert_eq!(off.next_check(), None);
        assert_eq!(off.check(start + Duration::from_secs(1000)), Beat::Nothing);
    }
}
