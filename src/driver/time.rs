//! The driver's one timer: operations' limits, the heartbeat, waits and the reopen backoff.

use super::*;

impl Host {
    /// When the driver wants [`Host::on_timeout`] next.
    pub fn timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for entry in self.ops.values() {
            if let Some(d) = entry.deadline {
                at(d);
            }
            if let Place::Asking {
                again_at: Some(t), ..
            } = entry.place
            {
                at(t);
            }
        }
        if let Some(c) = &self.channel {
            if !c.opened {
                at(c.open_deadline);
            }
            if let Some(d) = c.end_deadline {
                at(d);
            }
            if let Some(d) = c.acks_due {
                at(d);
            }
            if let (Some(h), true) = (c.heartbeat, c.opened) {
                if !h.every.is_zero() {
                    at(c.last_tx + h.every);
                }
                at(c.last_rx + h.timeout);
            }
        }
        if let Want::On {
            reopen_at: Some(t), ..
        } = self.want
        {
            at(t);
        }
        for (_, t) in &self.retired {
            at(*t);
        }
        next
    }

    /// Time passed: whatever was due at `now` is done.
    pub fn on_timeout(&mut self, now: Instant) {
        // Operations past their step's limit.
        let mut due: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| e.deadline.is_some_and(|d| d <= now))
            .map(|(i, _)| *i)
            .collect();
        due.sort_unstable();
        for id in due {
            self.overdue(id, now);
        }
        // Questions to ask again.
        let again: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.place, Place::Asking { again_at: Some(t), .. } if t <= now))
            .map(|(i, _)| *i)
            .collect();
        for id in again {
            let question = match self.config.backend.judge(137, b"", b"", false) {
                Verdict::Ask(q) => q,
                _ => continue,
            };
            let proc = self.ask(question, Role::Question(id));
            if let Some(Entry {
                place: Place::Asking {
                    proc: p, again_at, ..
                },
                ..
            }) = self.ops.get_mut(&id)
            {
                *p = Some(proc);
                *again_at = None;
            }
        }
        // The channel's timers.
        if let Some(c) = self.channel.as_mut()
            && c.acks_due.is_some_and(|d| d <= now)
        {
            c.session.write_acks();
            self.flush(now);
        }
        if let Some(c) = self.channel.as_mut() {
            if !c.opened && c.open_deadline <= now {
                let e = Error::new(
                    ErrorKind::Deadline,
                    format!(
                        "the session channel did not answer within {:?}; is `mcpgw-gateway \
                         attach` running at the other end?",
                        Self::ms(self.config.open_timeout_ms)
                    ),
                );
                self.lose_channel(e, false, now);
            } else if c.end_deadline.is_some_and(|d| d <= now) {
                self.finish_channel(now);
            } else if let (Some(h), true) = (c.heartbeat, c.opened) {
                if c.last_rx + h.timeout <= now {
                    let e = Error::new(
                        ErrorKind::SessionLost,
                        format!(
                            "the session channel sent nothing for {:?} (its heartbeat stopped)",
                            h.timeout
                        ),
                    );
                    let reopen = self.config.reopen;
                    self.lose_channel(e, reopen, now);
                } else if !h.every.is_zero() && c.last_tx + h.every <= now {
                    c.session.ping();
                    self.flush(now);
                }
            }
        }
        // Opening the channel again.
        if let Want::On {
            reopen_at: Some(t), ..
        } = self.want
            && t <= now
            && self.channel.is_none()
        {
            self.start_channel(now);
        }
        // Channels that did not exit after their input closed.
        let (late, waiting): (Vec<_>, Vec<_>) =
            self.retired.drain(..).partition(|(_, t)| *t <= now);
        self.retired = waiting;
        for (proc, _) in late {
            if self.procs.get(&proc) == Some(&Role::Retired) {
                self.actions.push_back(Action::Kill { proc });
            }
        }
    }

    pub(super) fn overdue(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let limit = entry.deadline.map(|d| d.saturating_duration_since(now));
        let _ = limit;
        match &entry.place {
            Place::Command(_) => {
                let e = Error::new(
                    ErrorKind::Deadline,
                    "a command in the sandbox did not finish within its time limit; it was killed",
                );
                self.fail(id, e);
            }
            Place::Session(sid) => {
                let sid = *sid;
                if let Some(channel) = self.channel.as_mut() {
                    channel.session.cancel(sid);
                    channel.by_sid.remove(&sid);
                }
                self.flush(now);
                let e = Error::new(
                    ErrorKind::Deadline,
                    "no answer came over the session within the operation's time limit; it \
                     was cancelled",
                );
                self.fail(id, e);
            }
            Place::Waiting => {
                if matches!(entry.job, Job::OpenSession) {
                    let e = Error::new(
                        ErrorKind::Deadline,
                        "the session channel did not open within the open timeout",
                    );
                    self.fail(id, e);
                } else {
                    entry.deadline = None;
                }
            }
            _ => entry.deadline = None,
        }
    }
}
