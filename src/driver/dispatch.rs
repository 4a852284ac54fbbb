//! Where an operation goes: over the session channel or as a one-shot command, and how it ends.

use super::*;

impl Host {
    /// Whether REST operations must wait for the session's hello to learn their gateway: a
    /// session is wanted and the client knows no gateway (the channel launches one).
    pub(super) fn awaits_gateway(&self) -> bool {
        matches!(self.want, Want::On { .. }) && self.client.port().is_none()
    }

    /// Decides where operation `id` goes now.
    pub(super) fn dispatch(&mut self, id: Id, now: Instant) {
        let awaits_gateway = self.awaits_gateway();
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        if let Job::Later(submit) = &entry.job {
            if awaits_gateway {
                entry.place = Place::Waiting;
                return;
            }
            let op = submit.prepare(&self.client).expect("a REST operation");
            entry.job = Job::Op(Box::new(op));
        }
        match &mut entry.job {
            Job::Later(_) => unreachable!("prepared above"),
            Job::OpenSession => return self.open_session(id, now),
            Job::CloseSession => return self.close_session(id, now),
            Job::Op(op) => {
                if op.is_finished() {
                    let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                        Job::Op(op) => op,
                        _ => unreachable!(),
                    };
                    return self.done(id, op.finish());
                }
            }
        }
        let rest = matches!(&entry.job, Job::Op(op) if op.is_rest() && op.command().is_some());
        if rest && matches!(self.want, Want::On { .. }) {
            if self.channel.is_some() {
                if self.send_over_channel(id, now) {
                    return;
                }
            } else {
                // The channel is being opened again: wait for it.
                entry.place = Place::Waiting;
                return;
            }
        }
        if self.ops.get(&id).is_some_and(|e| e.sealed) {
            let e = Error::new(
                ErrorKind::SessionLost,
                "a spec that names a secret goes over the session channel only, and the channel \
                 did not take it",
            );
            return self.done(id, Err(e));
        }
        self.run_command(id, now);
    }

    /// Puts operation `id` on the channel; false when the channel refused it.
    pub(super) fn send_over_channel(&mut self, id: Id, now: Instant) -> bool {
        let grace = Self::ms(self.config.answer_grace_ms);
        let (Some(channel), Some(entry)) = (self.channel.as_mut(), self.ops.get_mut(&id)) else {
            return false;
        };
        let Job::Op(op) = &mut entry.job else {
            return false;
        };
        let call = (op.name() == "call_tool").then(CallId::random);
        match channel.session.submit(op, entry.stream, call.clone()) {
            Ok(sid) => {
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.deadline = Some(now + op.session_limit() + grace);
                entry.call = call;
                self.flush(now);
                true
            }
            Err(e) => {
                self.actions.push_back(Action::Notice(format!(
                    "{e}; it goes over one-shot commands"
                )));
                false
            }
        }
    }

    /// Starts operation `id`'s next one-shot command, or finishes it.
    pub(super) fn run_command(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        let Some(command) = op.command() else {
            let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                Job::Op(op) => op,
                _ => unreachable!(),
            };
            return self.done(id, op.finish());
        };
        let (program, stdin) = self
            .config
            .backend
            .command(&command.text, command.stdin.clone());
        let timeout = command.timeout;
        let proc = self.next;
        self.next += 1;
        entry.place = Place::Command(proc);
        entry.deadline = Some(now + timeout);
        self.procs.insert(proc, Role::Command(id));
        self.actions.push_back(Action::Run {
            proc,
            program,
            stdin,
            timeout,
        });
    }

    /// Hands operation `id` what its command did, and moves it on.
    pub(super) fn complete(&mut self, id: Id, result: Result<ExecOutput, Error>, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        entry.place = Place::Waiting;
        entry.deadline = None;
        match result {
            Ok(mut out) => {
                let r = self.secrets.redactor();
                r.redact_bytes_in_place(&mut out.stdout);
                r.redact_bytes_in_place(&mut out.stderr);
                let _ = op.complete(Ok(out));
            }
            Err(e) => op.abandon(e),
        }
        self.run_command(id, now);
    }

    /// Cancels operation `id` (its command is killed; over a session the gateway cancels it
    /// upstream); it finishes with [`ErrorKind::Cancelled`]. Returns whether it was under way.
    pub fn cancel(&mut self, id: Id, now: Instant) -> bool {
        let Some(entry) = self.ops.get(&id) else {
            return false;
        };
        if let (Place::Session(sid), Some(channel)) = (&entry.place, self.channel.as_mut()) {
            channel.session.cancel(*sid);
            channel.by_sid.remove(sid);
            self.flush(now);
        }
        let e = Error::new(
            ErrorKind::Cancelled,
            "the operation was cancelled; the gateway was told to cancel it upstream",
        );
        self.fail(id, e);
        true
    }

    /// Ends operation `id` with `error`.
    pub(super) fn fail(&mut self, id: Id, error: Error) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let result = match &mut entry.job {
            Job::Op(op) => {
                op.abandon(error.clone());
                let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
                    Job::Op(op) => op,
                    _ => unreachable!(),
                };
                op.finish()
            }
            _ => Err(error),
        };
        self.done(id, result);
    }
}
