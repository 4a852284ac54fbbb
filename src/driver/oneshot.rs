//! One-shot processes: commands, the follow-up questions of a silent exit, and what their exits
//! mean.

use super::*;

impl Host {
    /// A process the driver started ended: a one-shot command, a question, or the channel.
    pub fn on_exit(&mut self, proc: ProcId, exit: Exit, now: Instant) {
        let Some(role) = self.procs.remove(&proc) else {
            return;
        };
        match role {
            Role::Command(id) => self.command_exited(id, exit, now),
            Role::Question(id) => self.question_answered(id, exit, now),
            Role::Channel => {
                // Still registered until the channel is finished with.
                self.procs.insert(proc, Role::Channel);
                self.channel_exited(proc, exit, now);
            }
            Role::ChannelQuestion => self.channel_question_answered(proc, exit, now),
            Role::Retired => {}
        }
    }

    pub(super) fn command_exited(&mut self, id: Id, exit: Exit, now: Instant) {
        match exit {
            Exit::Failed(reason) if self.config.backend.judge_failed(&reason).is_some() => {
                let f = self.config.backend.judge_failed(&reason).expect("judged");
                self.complete(id, Err(Error::backend_failed(f)), now)
            }
            Exit::Failed(reason) => {
                let e = Error::new(
                    ErrorKind::ExecFailed,
                    format!(
                        "{} could not run a command in the sandbox ({}); is the sandbox alive \
                         and the backend reachable?",
                        match &self.config.backend {
                            Backend::Exec { .. } => "the exec function".to_owned(),
                            b if b.runs_through_binding() => format!("the {} SDK", b.name()),
                            b => format!("{:?}", b.name()),
                        },
                        reason.trim()
                    ),
                );
                self.complete(id, Err(e), now)
            }
            Exit::Exited {
                code,
                stdout,
                stderr,
            } => match self.config.backend.judge(code, &stdout, &stderr, false) {
                Verdict::Command => self.complete(
                    id,
                    Ok(ExecOutput {
                        exit_code: code,
                        stdout,
                        stderr,
                    }),
                    now,
                ),
                Verdict::Failed(f) => self.complete(id, Err(Error::backend_failed(f)), now),
                Verdict::Ask(question) => {
                    let proc = self.ask(question, Role::Question(id));
                    if let Some(entry) = self.ops.get_mut(&id) {
                        entry.place = Place::Asking {
                            proc: Some(proc),
                            out: ExecOutput {
                                exit_code: code,
                                stdout,
                                stderr,
                            },
                            until: now + ASK_FOR,
                            again_at: None,
                        };
                        entry.deadline = None;
                    }
                }
            },
        }
    }

    pub(super) fn ask(&mut self, question: Vec<String>, role: Role) -> ProcId {
        let proc = self.take_id();
        self.procs.insert(proc, role);
        self.actions.push_back(Action::Run {
            proc,
            program: Program::Argv(question),
            stdin: Stdin::Null,
            timeout: QUESTION_LIMIT,
        });
        proc
    }

    pub(super) fn question_answered(&mut self, id: Id, exit: Exit, now: Instant) {
        let Some(entry) = self.ops.get_mut(&id) else {
            return;
        };
        let Place::Asking {
            proc, out, until, ..
        } = &mut entry.place
        else {
            return;
        };
        *proc = None;
        let (answer_exit, answer) = match &exit {
            Exit::Exited { code, stdout, .. } => (*code, stdout.as_slice()),
            Exit::Failed(_) => (-1, &b""[..]),
        };
        match self
            .config
            .backend
            .judge_answer(out.exit_code, answer_exit, answer)
        {
            Some(failure) => self.complete(id, Err(Error::backend_failed(failure)), now),
            None if now < *until => {
                if let Place::Asking { again_at, .. } = &mut entry.place {
                    *again_at = Some(now + ASK_EVERY);
                }
            }
            None => {
                let out = std::mem::take(out);
                self.complete(id, Ok(out), now)
            }
        }
    }
}
