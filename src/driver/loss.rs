//! A channel lost: reopened or given up, and what waited on it settled.

use super::*;

impl Host {
    /// The channel is gone, for `failure` of the backend or for its own reasons: every
    /// operation it carried is settled, and the session is opened again when it can be.
    pub(super) fn channel_lost(&mut self, failure: Option<BackendFailure>, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        let reason = Self::end_reason(channel, &self.config.backend);
        let code = match &channel.exit {
            Some(Exit::Exited { code, .. }) => Some(*code),
            _ => None,
        };
        let error = if !channel.opened {
            let said = channel.backend_err.text();
            let e = channel.session.eof_error(&reason);
            match (&failure, code) {
                (Some(f), _) => Error::backend_failed(f.clone()),
                (None, Some(126 | 127)) | (None, _)
                    if said.contains("cannot launch") || code.is_some_and(|c| c >= 126) =>
                {
                    let kind = if channel.launching {
                        ErrorKind::StartFailed
                    } else {
                        ErrorKind::CommandFailed
                    };
                    Error::new(
                        kind,
                        format!(
                            "{}; is the gateway binary at {:?} in the sandbox?",
                            e.message(),
                            self.config.gateway_path
                        ),
                    )
                }
                _ => e,
            }
        } else {
            let mut e = channel.session.eof_error(&reason);
            if let Some(f) = &failure {
                e = Error::new(
                    ErrorKind::SessionLost,
                    format!("the session channel ended: {f}"),
                );
            }
            e
        };
        let reopen = self.config.reopen && failure.is_none();
        self.lose_channel(error, reopen, now);
    }

    /// Finishes with the channel for `error`: what it carried is settled (resumable calls wait
    /// for the next channel), it is retired, and the session goes on or gives up.
    pub(super) fn lose_channel(&mut self, error: Error, reopen: bool, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        channel.ending = true;
        channel.session.lose_with(error.clone());
        self.drain_session(now);
        let Some(channel) = self.channel.take() else {
            return;
        };
        let opened = channel.opened;
        self.retire(channel, now, false);
        self.after_loss(error, opened, reopen, now);
    }

    /// After a channel was lost: open another, or give up on the session.
    pub(super) fn after_loss(&mut self, error: Error, opened: bool, reopen: bool, now: Instant) {
        let attempts = self.config.reopen_attempts;
        let Want::On {
            ever_opened,
            failures,
            reopen_at,
            last_error,
        } = &mut self.want
        else {
            return self.settle_all_waiting(Some(error), now);
        };
        if opened {
            *failures = 0;
        } else {
            *failures += 1;
        }
        *last_error = Some(error.clone());
        if !reopen || !*ever_opened || *failures > attempts {
            return self.give_up(error, now);
        }
        let wait = if *failures == 0 {
            Duration::ZERO
        } else {
            (REOPEN_BACKOFF * 2u32.saturating_pow(*failures - 1)).min(REOPEN_BACKOFF_MAX)
        };
        *reopen_at = Some(now + wait);
        self.actions.push_back(Action::Notice(format!(
            "{}; opening the session channel again in {wait:?}",
            error.message()
        )));
        if wait.is_zero() {
            self.start_channel(now);
        }
    }

    /// Gives up on the session: waiting operations go one-shot, detached calls and waiting
    /// opens fail with `error`.
    pub(super) fn give_up(&mut self, error: Error, now: Instant) {
        self.want = Want::Off;
        self.settle_all_waiting(Some(error), now);
    }

    pub(super) fn settle_all_waiting(&mut self, error: Option<Error>, now: Instant) {
        let mut waiting: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Waiting | Place::Detached { .. }))
            .map(|(i, _)| *i)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            self.settle_without_channel(id, error.clone(), now);
        }
    }

    /// An operation that waited for a channel that will not come.
    pub(super) fn settle_without_channel(&mut self, id: Id, error: Option<Error>, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let lost = |why: Option<&Error>, what: &str| {
            Error::new(
                ErrorKind::SessionLost,
                match why {
                    Some(e) => format!("{what}: {}", e.message()),
                    None => format!("{what}: the session was closed by the host"),
                },
            )
        };
        match (&entry.job, &entry.place) {
            (Job::OpenSession, _) => {
                let e = error.unwrap_or_else(|| lost(None, "the session could not be opened"));
                self.fail(id, e);
            }
            (Job::Op(_), Place::Detached { .. }) => {
                let e = lost(
                    error.as_ref(),
                    "the session channel was lost and could not be opened again to resume the \
                     call (it may still be running in the gateway)",
                );
                self.fail(id, e);
            }
            (Job::Op(op), Place::Waiting) if op.is_on_session() => {
                let e = lost(error.as_ref(), "the session channel was lost");
                self.fail(id, e);
            }
            (Job::Op(_), Place::Waiting) => self.run_command(id, now),
            // No channel will name a gateway: prepared as is, it goes one-shot (or says why not).
            (Job::Later(_), _) => self.dispatch(id, now),
            _ => {}
        }
    }
}
