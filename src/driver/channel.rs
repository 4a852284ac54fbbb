//! The session channel: opened, written, read, closed and retired.

use super::*;

impl Host {
    pub(super) fn attach_options(&self) -> AttachOptions {
        AttachOptions {
            heartbeat: (self.config.heartbeat_ms > 0).then(|| Self::ms(self.config.heartbeat_ms)),
            heartbeat_timeout: (self.config.heartbeat_timeout_ms > 0)
                .then(|| Self::ms(self.config.heartbeat_timeout_ms)),
        }
    }

    pub(super) fn open_session(&mut self, id: Id, now: Instant) {
        if matches!(self.want, Want::Off) {
            self.want = Want::On {
                ever_opened: false,
                failures: 0,
                reopen_at: None,
                last_error: None,
            };
        }
        if let Some(entry) = self.ops.get_mut(&id) {
            entry.place = Place::Waiting;
            entry.deadline = Some(now + Self::ms(self.config.open_timeout_ms));
        }
        match &self.channel {
            Some(c) if c.opened => {
                let hello = c.session.hello().cloned().expect("opened");
                self.done(id, Ok(Output::Session(hello)));
            }
            Some(_) => {}
            None => self.start_channel(now),
        }
    }

    /// Starts a channel (the session is wanted and none runs); operations waiting for it and
    /// detached calls go onto it at once (it holds them until its hello).
    pub(super) fn start_channel(&mut self, now: Instant) {
        let (mut session, command) = match Session::open_with(&self.client, &self.attach_options())
        {
            Ok(s) => s,
            Err(e) => return self.give_up(e, now),
        };
        session.set_redactor(self.secrets.redactor().clone());
        let launching = command.text.ends_with(" --launch");
        let program = self.config.backend.channel(&command.text);
        let proc = self.take_id();
        self.procs.insert(proc, Role::Channel);
        self.actions.push_back(Action::Open { proc, program });
        if let Want::On { reopen_at, .. } = &mut self.want {
            *reopen_at = None;
        }
        self.channel = Some(Channel {
            proc,
            session,
            by_sid: HashMap::new(),
            opened: false,
            launching,
            open_deadline: now + Self::ms(self.config.open_timeout_ms),
            heartbeat: None,
            last_rx: now,
            last_tx: now,
            acks_due: None,
            backend_err: Tail::default(),
            attach_log: Tail::default(),
            err_partial: Vec::new(),
            eof: false,
            exit: None,
            end_deadline: None,
            question: None,
            ending: false,
        });
        let mut waiting: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| {
                matches!(e.place, Place::Waiting | Place::Detached { .. })
                    && matches!(e.job, Job::Op(_))
            })
            .map(|(id, _)| *id)
            .collect();
        waiting.sort_unstable();
        for id in waiting {
            self.put_on_new_channel(id, now);
        }
    }

    /// Puts a waiting operation, or a detached call, on the channel just started.
    pub(super) fn put_on_new_channel(&mut self, id: Id, now: Instant) {
        let grace = Self::ms(self.config.answer_grace_ms);
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        match std::mem::replace(&mut entry.place, Place::Waiting) {
            Place::Detached { call, chunks } => {
                let channel = self.channel.as_mut().expect("just started");
                let Job::Op(op) = &entry.job else { return };
                let sid = channel
                    .session
                    .resume(op.name(), call.clone(), chunks, entry.stream);
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.carry = Carry::Resume;
                self.resumed += 1;
                // The call's own deadline is the gateway's; the answer's limit starts anew.
                entry.deadline = Some(now + op.session_limit() + grace);
            }
            Place::Waiting => {
                let Job::Op(op) = &entry.job else { return };
                match op.session_request(entry.stream) {
                    // A GET that was in flight on the lost channel: sent again.
                    Some(request) => {
                        let channel = self.channel.as_mut().expect("just started");
                        let sid = channel.session.submit_request(request, None);
                        channel.by_sid.insert(sid, id);
                        entry.place = Place::Session(sid);
                        entry.deadline = Some(now + op.session_limit() + grace);
                    }
                    None => self.dispatch(id, now),
                }
            }
            other => entry.place = other,
        }
    }

    pub(super) fn close_session(&mut self, id: Id, now: Instant) {
        self.end_session(now);
        self.done(id, Ok(Output::Done));
    }

    /// Ends the session, if one is wanted: what its channel carries is cancelled or lost, the
    /// channel's input is closed, and later operations go one-shot. Stopping the gateway ends it
    /// first: its attach would outlive the gateway it relays to.
    pub(super) fn end_session(&mut self, now: Instant) {
        if matches!(self.want, Want::Off) && self.channel.is_none() {
            return;
        }
        self.want = Want::Off;
        if let Some(channel) = self.channel.as_mut() {
            channel.ending = true;
            // Resumable calls would outlive the channel: the host asked for an end, so they
            // are cancelled in the gateway, and end as lost.
            let sids: Vec<(u64, Id)> = channel.by_sid.iter().map(|(s, i)| (*s, *i)).collect();
            let mut cancelled = Vec::new();
            for (sid, op) in sids {
                if self.ops.get(&op).is_some_and(|e| e.call.is_some()) {
                    channel.session.cancel(sid);
                    channel.by_sid.remove(&sid);
                    cancelled.push(op);
                }
            }
            if let Some(channel) = self.channel.as_mut() {
                channel.session.write_acks();
            }
            self.flush(now);
            let channel = self.channel.as_mut().expect("checked");
            channel.session.close();
            self.drain_session(now);
            for op in cancelled {
                self.fail(
                    op,
                    Error::new(ErrorKind::SessionLost, "the session was closed by the host"),
                );
            }
            if let Some(channel) = self.channel.take() {
                self.retire(channel, now, true);
            }
        }
        // Detached calls were the old channel's: they end with it.
        self.settle_all_waiting(None, now);
    }

    /// Retires `channel`: its process is told to end (closing its input, or killed), and its
    /// later events are ignored.
    pub(super) fn retire(&mut self, channel: Channel, now: Instant, gently: bool) {
        let proc = channel.proc;
        if let Some(q) = channel.question {
            self.kill(q);
        }
        let running = channel.exit.is_none();
        if running {
            self.procs.insert(proc, Role::Retired);
            self.actions.push_back(if gently {
                Action::CloseInput { proc }
            } else {
                Action::Kill { proc }
            });
            if gently {
                // Killed for sure after the grace: see `on_timeout`.
                self.retired
                    .push((proc, now + Self::ms(self.config.close_grace_ms)));
            }
        } else {
            self.procs.remove(&proc);
        }
    }

    /// Writes what the session has to send. Acknowledgements that nothing carried wait for
    /// the next write, at most [`ACK_DELAY`].
    pub(super) fn flush(&mut self, now: Instant) {
        if let Some(channel) = self.channel.as_mut() {
            let bytes = channel.session.take_output();
            if !bytes.is_empty() {
                channel.last_tx = now;
                self.actions.push_back(Action::Write {
                    proc: channel.proc,
                    bytes,
                });
            }
            channel.acks_due = channel
                .session
                .acks_waiting()
                .then(|| channel.acks_due.unwrap_or(now + ACK_DELAY));
        }
    }

    /// Bytes the channel printed on its stdout.
    pub fn on_data(&mut self, proc: ProcId, bytes: &[u8], now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.last_rx = now;
        channel.session.feed(bytes);
        self.drain_session(now);
        self.flush(now);
    }

    /// Bytes the channel printed on its stderr (kept for messages, never shown as output).
    pub fn on_stderr(&mut self, proc: ProcId, bytes: &[u8], _now: Instant) {
        // Also a retired channel's: its last words may still come.
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.err_partial.extend_from_slice(bytes);
        while let Some(at) = channel.err_partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = channel.err_partial.drain(..=at).collect();
            let line = line.trim_ascii();
            if line.is_empty() {
                continue;
            }
            if is_attach_log(line) {
                channel.attach_log.push(line);
            } else {
                channel.backend_err.push(line);
            }
        }
        if channel.err_partial.len() > STDERR_KEEP {
            let rest = std::mem::take(&mut channel.err_partial);
            channel.backend_err.push(&rest[..STDERR_KEEP]);
        }
    }

    /// The channel's stdout ended.
    pub fn on_eof(&mut self, proc: ProcId, now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.proc == proc) else {
            return;
        };
        channel.eof = true;
        if channel.exit.is_some() {
            self.finish_channel(now);
        } else {
            channel.end_deadline = Some(now + EXIT_WAIT);
        }
    }

    pub(super) fn channel_exited(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        if self.channel.as_ref().is_none_or(|c| c.proc != proc) {
            self.procs.remove(&proc);
            return;
        }
        if let Exit::Exited { stderr, .. } = &exit
            && !stderr.is_empty()
        {
            let stderr = stderr.clone();
            self.on_stderr(proc, &stderr, now);
        }
        let channel = self.channel.as_mut().expect("checked");
        channel.exit = Some(exit);
        if channel.eof {
            self.finish_channel(now);
        } else {
            // Something in the sandbox may still hold its stdout: the output is given a moment.
            channel.end_deadline = Some(now + EXIT_WAIT);
        }
    }

    /// The channel ended (its output and its process, or the wait for them): says why, or
    /// asks the backend first when the exit status cannot tell.
    pub(super) fn finish_channel(&mut self, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        if channel.question.is_some() {
            return;
        }
        channel.end_deadline = None;
        if !channel.err_partial.is_empty() {
            let rest = std::mem::take(&mut channel.err_partial);
            channel.backend_err.push(&rest);
        }
        let stderr = channel.backend_err.0.clone();
        let verdict = match &channel.exit {
            Some(Exit::Exited { code, .. }) => self.config.backend.judge(*code, b"", &stderr, true),
            Some(Exit::Failed(reason)) => match self.config.backend.judge_failed(reason) {
                Some(f) => Verdict::Failed(f),
                None => Verdict::Command,
            },
            None => Verdict::Command,
        };
        match verdict {
            Verdict::Ask(question) => {
                let q = self.ask(question, Role::ChannelQuestion);
                if let Some(channel) = self.channel.as_mut() {
                    channel.question = Some(q);
                }
            }
            Verdict::Failed(f) => self.channel_lost(Some(f), now),
            Verdict::Command => self.channel_lost(None, now),
        }
    }

    pub(super) fn channel_question_answered(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        let Some(channel) = self.channel.as_mut().filter(|c| c.question == Some(proc)) else {
            return;
        };
        channel.question = None;
        let code = match &channel.exit {
            Some(Exit::Exited { code, .. }) => *code,
            _ => 137,
        };
        let (answer_exit, answer) = match &exit {
            Exit::Exited { code, stdout, .. } => (*code, stdout.as_slice()),
            Exit::Failed(_) => (-1, &b""[..]),
        };
        let failure = self.config.backend.judge_answer(code, answer_exit, answer);
        self.channel_lost(failure, now);
    }

    /// The message of a channel that ended: its exit, the backend's words, attach's last.
    pub(super) fn end_reason(channel: &Channel, backend: &Backend) -> String {
        let mut parts = Vec::new();
        match &channel.exit {
            Some(Exit::Exited { code, .. }) => {
                parts.push(format!("{} exited {code}", backend.name()))
            }
            Some(Exit::Failed(reason)) => parts.push(reason.trim().to_owned()),
            None => parts.push(format!("{} did not exit", backend.name())),
        }
        let said = channel.backend_err.text();
        if !said.is_empty() {
            parts.push(said);
        }
        let mut reason = parts.join(": ");
        let logged = channel.attach_log.text();
        if !logged.is_empty() {
            let last = logged.lines().last().unwrap_or("").trim().to_owned();
            reason.push_str(&format!("; attach's last log line: {last}"));
        }
        reason
    }
}
