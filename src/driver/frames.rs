//! What the channel's session says: the hello, answers, progress, operations it could not send.

use super::*;

impl Host {
    /// Handles what the session has to say.
    pub(super) fn drain_session(&mut self, now: Instant) {
        loop {
            let Some(channel) = self.channel.as_mut() else {
                return;
            };
            let Some(event) = channel.session.poll_event() else {
                return;
            };
            match event {
                Event::Opened(hello) => self.hello(hello, now),
                Event::Progress { id: sid, chunk } => {
                    if let Some(op) = channel.by_sid.get(&sid) {
                        self.actions.push_back(Action::Progress { op: *op, chunk });
                    }
                }
                Event::Finished { id: sid, answer } => {
                    let Some(op) = channel.by_sid.remove(&sid) else {
                        continue;
                    };
                    self.answered(op, answer, now);
                }
                Event::Unsent { id: sid } => {
                    if let Some(op) = channel.by_sid.remove(&sid) {
                        self.unsent(op, now);
                    }
                }
                Event::Detached {
                    id: sid,
                    call,
                    chunks,
                } => {
                    if let Some(op) = channel.by_sid.remove(&sid)
                        && let Some(entry) = self.ops.get_mut(&op)
                    {
                        entry.place = Place::Detached { call, chunks };
                        entry.deadline = None;
                    }
                }
                Event::ConnectionOpened { id: sid } => {
                    if let Some(conn) = channel.by_sid.get(&sid) {
                        self.actions
                            .push_back(Action::ConnectionOpened { conn: *conn });
                    }
                }
                Event::ConnectionMessage { id: sid, msg } => {
                    if let Some(conn) = channel.by_sid.get(&sid) {
                        let mut records = Vec::new();
                        let msg = match self.conns.get_mut(conn) {
                            Some(c) => c.screen.answer(&self.config.policy, msg, &mut records, now),
                            None => msg,
                        };
                        self.actions.extend(records.into_iter().map(Action::Audit));
                        self.actions
                            .push_back(Action::ConnectionMessage { conn: *conn, msg });
                    }
                }
                Event::ConnectionClosed {
                    id: sid,
                    reason,
                    status,
                    kind,
                } => {
                    if let Some(conn) = channel.by_sid.remove(&sid) {
                        if let Some(mut c) = self.conns.remove(&conn) {
                            let mut records = Vec::new();
                            c.screen.lost(reason.as_deref(), &mut records, now);
                            self.actions.extend(records.into_iter().map(Action::Audit));
                        }
                        self.actions.push_back(Action::ConnectionClosed {
                            conn,
                            reason,
                            status,
                            kind,
                        });
                    }
                }
                Event::Notice(n) => self.actions.push_back(Action::Notice(n)),
                Event::Lost(e) => {
                    // The session ended itself (a protocol failure, another gateway) or was
                    // ended by the driver (then the channel is already being finished with).
                    let Some(channel) = self.channel.as_ref() else {
                        return;
                    };
                    if channel.ending || channel.eof || channel.exit.is_some() {
                        continue;
                    }
                    let reopen = self.config.reopen && e.kind() == ErrorKind::SessionLost;
                    self.lose_channel(e, reopen, now);
                    return;
                }
            }
        }
    }

    pub(super) fn hello(&mut self, hello: Hello, now: Instant) {
        let Some(channel) = self.channel.as_mut() else {
            return;
        };
        channel.opened = true;
        channel.last_rx = now;
        // Only a channel that pings can be judged by its silence.
        if hello.heartbeat_ms > 0 {
            let every = Self::ms(hello.heartbeat_ms);
            let timeout = if self.config.heartbeat_timeout_ms > 0 {
                Self::ms(self.config.heartbeat_timeout_ms)
            } else {
                every * 3
            };
            channel.heartbeat = Some(Heartbeat { every, timeout });
        }
        if let Want::On {
            ever_opened,
            failures,
            last_error,
            ..
        } = &mut self.want
        {
            *ever_opened = true;
            if last_error.take().is_some() {
                self.actions.push_back(Action::Notice(
                    "the session channel is open again".to_owned(),
                ));
            }
            *failures = 0;
        }
        let opens: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.job, Job::OpenSession))
            .map(|(i, _)| *i)
            .collect();
        for id in opens {
            self.done(id, Ok(Output::Session(hello.clone())));
        }
        // The hello named the gateway: what waited for it is prepared and sent now.
        let mut later: Vec<Id> = self
            .ops
            .iter()
            .filter(|(_, e)| matches!(e.job, Job::Later(_)))
            .map(|(i, _)| *i)
            .collect();
        later.sort_unstable();
        for id in later {
            self.dispatch(id, now);
        }
    }

    pub(super) fn answered(
        &mut self,
        id: Id,
        answer: Result<crate::client::response::HttpResponse, Error>,
        now: Instant,
    ) {
        let reopening = self.config.reopen && matches!(self.want, Want::On { .. });
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Job::Op(op) = &mut entry.job else {
            return;
        };
        // A GET the lost channel carried is sent again on the next one.
        if let Err(e) = &answer
            && e.kind() == ErrorKind::SessionLost
            && reopening
            && op.is_idempotent()
        {
            entry.place = Place::Waiting;
            entry.deadline = None;
            return;
        }
        // A resume the gateway answers 404 is a call that never reached it (its channel died
        // first): it is sent again under its own id, which the gateway runs at most once. If
        // the first request reaches the gateway after all, the second is refused (409) and the
        // call is resumed instead. Either way it runs once.
        if let Ok(resp) = &answer
            && matches!(
                (entry.carry, resp.status),
                (Carry::Resume, 404) | (Carry::RequestAgain, 409)
            )
            && let Some(call) = entry.call.clone()
            && let Some(channel) = self.channel.as_mut()
            && !channel.session.is_lost()
        {
            let again = match entry.carry {
                Carry::Resume => op.session_request(entry.stream).map(|request| {
                    (
                        channel.session.submit_request(request, Some(call)),
                        Carry::RequestAgain,
                    )
                }),
                _ => Some((
                    channel.session.resume(op.name(), call, 0, entry.stream),
                    Carry::Resume,
                )),
            };
            if let Some((sid, carry)) = again {
                let grace = Self::ms(self.config.answer_grace_ms);
                channel.by_sid.insert(sid, id);
                entry.place = Place::Session(sid);
                entry.carry = carry;
                entry.deadline = Some(now + op.session_limit() + grace);
                self.flush(now);
                return;
            }
        }
        let answer = match answer {
            Ok(resp) if entry.carry == Carry::Resume && matches!(resp.status, 404 | 410) => {
                let detail = String::from_utf8_lossy(&resp.body).into_owned();
                Err(Error::new(
                    ErrorKind::SessionLost,
                    format!(
                        "the session channel was lost and the call could not be resumed: {}",
                        crate::error::tail(&detail, 500)
                    ),
                )
                .with_http(resp.status, Some(detail)))
            }
            other => other,
        };
        op.deliver(answer);
        let op = match std::mem::replace(&mut entry.job, Job::CloseSession) {
            Job::Op(op) => op,
            _ => unreachable!(),
        };
        self.done(id, op.finish());
    }

    pub(super) fn unsent(&mut self, id: Id, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        if let Job::Op(op) = &mut entry.job {
            op.resume();
        }
        entry.place = Place::Waiting;
        entry.deadline = None;
        // Never written: it goes one-shot at once rather than wait for a new channel.
        self.run_command(id, now);
    }
}
