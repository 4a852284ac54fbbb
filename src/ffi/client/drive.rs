//! The client's loop: the host driver's actions carried out through the callbacks, on the
//! caller's thread, until the operation submitted is done.

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_void};
use std::time::{Duration, Instant};

use super::*;
use crate::chunk::mcpgw_tool_chunk;
use crate::error::{mcpgw_error, report_error};
use crate::{cstring_lossy, give_string, mcpgw_result};
use mcpgw::driver::{Action, Exit, Host, Op, ProcId, SessionState, Stdin, Submit};
use mcpgw::error::Error;
use mcpgw::wire::ToolChunk;

/// How long a channel's `channel_read` waits when the driver keeps no timer.
pub(super) const IDLE_READ: Duration = Duration::from_secs(1);
/// How long each of several channels' `channel_read` waits in turn (a closing channel beside a new one).
pub(super) const SHARED_READ: Duration = Duration::from_millis(10);

/// A channel the caller opened.
pub(super) struct Open {
    pub(super) proc: ProcId,
    pub(super) handle: *mut c_void,
    pub(super) eof: bool,
}

pub(super) struct Inner {
    pub(super) host: Host,
    pub(super) callbacks: Callbacks,
    pub(super) channels: Vec<Open>,
    pub(super) agent_id: String,
    pub(super) session_id: String,
    /// The backend's working directory for commands, from the configuration (fixed).
    pub(super) cwd: Option<String>,
}

/// A host driver run by blocking calls over the caller's callbacks: one sandbox's gateway.
///
/// May be moved between threads, but used by one thread at a time; its callbacks run on the
/// thread that calls it. Created with `mcpgw_client_new`, released with `mcpgw_client_free`.
pub struct mcpgw_client {
    pub(super) busy: Cell<bool>,
    pub(super) inner: UnsafeCell<Inner>,
}

/// What an operation gives back.
pub(super) enum Give {
    Nothing,
    Json(*mut *mut c_char),
    Chunk(*mut *mut mcpgw_tool_chunk),
}

impl Inner {
    /// Calls `exec` and reads its reply into an exit.
    pub(super) fn exec(&mut self, request: &Request) -> Exit {
        let view = request.view();
        let mut reply = mcpgw_reply::new(Expects::Exec);
        // SAFETY: the caller's function, given its userdata, a request that lives through the
        // call, and a reply valid for it.
        unsafe { (self.callbacks.exec)(self.callbacks.userdata, &view, &mut reply) };
        match reply.said.pop() {
            Some(Said::Exited {
                code,
                stdout,
                stderr,
            }) => Exit::Exited {
                code,
                stdout,
                stderr,
            },
            Some(Said::Failed(reason)) => Exit::Failed(reason),
            _ => Exit::Failed("the exec callback did not reply (neither exited nor failed)".into()),
        }
    }

    /// Opens a channel for `proc`; its failure is reported to the driver.
    pub(super) fn open(&mut self, proc: ProcId, request: &Request, now: Instant) {
        let Some(fns) = self.callbacks.channel else {
            self.host.on_exit(
                proc,
                Exit::Failed(
                    "the client's callbacks have no channel (channel_open, _write, _read, _close)"
                        .into(),
                ),
                now,
            );
            return;
        };
        let view = request.view();
        let mut reply = mcpgw_reply::new(Expects::Open);
        // SAFETY: as in `exec`.
        let handle = unsafe { (fns.open)(self.callbacks.userdata, &view, &mut reply) };
        if handle.is_null() {
            let reason = match reply.said.pop() {
                Some(Said::Failed(reason)) => reason,
                _ => "the open callback returned no channel and no reason".to_owned(),
            };
            self.host
                .on_exit(proc, Exit::Failed(reason), Instant::now());
        } else {
            self.channels.push(Open {
                proc,
                handle,
                eof: false,
            });
        }
    }

    pub(super) fn channel(&self, proc: ProcId) -> Option<usize> {
        self.channels.iter().position(|c| c.proc == proc)
    }

    /// Ends channel `i` (the caller's `channel_close`) and reports its end to the driver: `exit`, or
    /// the status `channel_close` returned.
    pub(super) fn end(&mut self, i: usize, exit: Option<Exit>) {
        let open = self.channels.remove(i);
        let fns = self.callbacks.channel.expect("a channel was opened");
        // SAFETY: a handle `open` returned, closed once.
        let code = unsafe { (fns.close)(self.callbacks.userdata, open.handle) };
        let now = Instant::now();
        if !open.eof {
            self.host.on_eof(open.proc, now);
        }
        let exit =
            exit.unwrap_or_else(|| Exit::code(if (0..=255).contains(&code) { code } else { 137 }));
        self.host.on_exit(open.proc, exit, now);
    }

    pub(super) fn write(&mut self, proc: ProcId, bytes: &[u8]) {
        let Some(i) = self.channel(proc) else { return };
        let fns = self.callbacks.channel.expect("a channel was opened");
        let mut reply = mcpgw_reply::new(Expects::Write);
        // SAFETY: a live handle, bytes that live through the call, a reply valid for it.
        unsafe {
            (fns.write)(
                self.callbacks.userdata,
                self.channels[i].handle,
                bytes.as_ptr(),
                bytes.len(),
                &mut reply,
            )
        };
        if let Some(Said::Failed(reason)) = reply.said.pop() {
            self.end(
                i,
                Some(Exit::Failed(format!(
                    "writing to the channel failed: {reason}"
                ))),
            );
        }
    }

    pub(super) fn close_input(&mut self, proc: ProcId) {
        let Some(i) = self.channel(proc) else { return };
        let fns = self.callbacks.channel.expect("a channel was opened");
        match fns.close_input {
            // SAFETY: a live handle.
            Some(close_input) => unsafe {
                close_input(self.callbacks.userdata, self.channels[i].handle)
            },
            None => self.end(i, None),
        }
    }

    /// Reads channel `i` for up to `wait`; whether it said anything.
    pub(super) fn read(&mut self, i: usize, wait: Duration) -> bool {
        let fns = self.callbacks.channel.expect("a channel was opened");
        let mut reply = mcpgw_reply::new(Expects::Read);
        let wait_ms = u32::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(u32::MAX);
        // SAFETY: a live handle and a reply valid for the call.
        unsafe {
            (fns.read)(
                self.callbacks.userdata,
                self.channels[i].handle,
                wait_ms,
                &mut reply,
            )
        };
        let said = !reply.said.is_empty();
        let proc = self.channels[i].proc;
        for s in reply.said {
            let now = Instant::now();
            match s {
                Said::Stdout(b) => self.host.on_data(proc, &b, now),
                Said::Stderr(b) => self.host.on_stderr(proc, &b, now),
                Said::Eof => {
                    self.channels[i].eof = true;
                    self.host.on_eof(proc, now);
                }
                Said::Exited {
                    code,
                    stdout,
                    stderr,
                } => {
                    if !stdout.is_empty() && !self.channels[i].eof {
                        self.host.on_data(proc, &stdout, now);
                    }
                    if !stderr.is_empty() {
                        self.host.on_stderr(proc, &stderr, now);
                    }
                    self.end(i, Some(Exit::code(code)));
                    return true;
                }
                Said::Failed(reason) => {
                    self.end(i, Some(Exit::Failed(reason)));
                    return true;
                }
            }
        }
        said
    }

    /// Carries out the driver's actions until operation `id` is done; then, when the session is
    /// off, until the channels it is ending have ended (bounded by the driver's close grace,
    /// after which it kills them), so that nothing of a closed session outlives the call.
    pub(super) fn run(
        &mut self,
        id: u64,
        mut progress: impl FnMut(&ToolChunk) -> bool,
    ) -> Result<mcpgw::client::Output, Error> {
        let mut result = None;
        loop {
            self.act(id, &mut progress, &mut result);
            if result.is_some() && (self.channels.is_empty() || self.session_on()) {
                break;
            }
            if !self.wait() {
                if result.is_some() {
                    break;
                }
                // Nothing can come: no channel, no timer, no command. Give the operation up.
                self.host.cancel(id, Instant::now());
                self.act(id, &mut |_| true, &mut None);
                return Err(Error::protocol(
                    "the host driver waits for nothing while the operation is under way",
                ));
            }
        }
        result.expect("the loop ends with a result")
    }

    pub(super) fn session_on(&self) -> bool {
        !matches!(self.host.session_state(), SessionState::Off)
    }

    /// Carries out every action the driver has now: the commands and the channel's are the
    /// callbacks', operation `id`'s progress goes to `progress` (false cancels it) and its end
    /// to `result`.
    pub(super) fn act(
        &mut self,
        id: u64,
        progress: &mut impl FnMut(&ToolChunk) -> bool,
        result: &mut Option<Result<mcpgw::client::Output, Error>>,
    ) {
        while let Some(action) = self.host.poll_action() {
            match action {
                Action::Run {
                    proc,
                    program,
                    stdin,
                    timeout,
                } => {
                    let request = Request::new(program, self.cwd.as_deref(), stdin, timeout);
                    let exit = self.exec(&request);
                    self.host.on_exit(proc, exit, Instant::now());
                }
                Action::Open { proc, program } => {
                    let request =
                        Request::new(program, self.cwd.as_deref(), Stdin::Null, Duration::ZERO);
                    self.open(proc, &request, Instant::now());
                }
                Action::Write { proc, bytes } => self.write(proc, &bytes),
                Action::CloseInput { proc } => self.close_input(proc),
                Action::Kill { proc } => {
                    if let Some(i) = self.channel(proc) {
                        self.end(i, None);
                    }
                }
                Action::Progress { op, chunk } if op == id => {
                    let go_on = match serde_json::from_str::<ToolChunk>(chunk.get()) {
                        Ok(c) => progress(&c),
                        Err(_) => true,
                    };
                    if !go_on {
                        self.host.cancel(id, Instant::now());
                    }
                }
                Action::Done { op, result: r } if op == id => *result = Some(r),
                Action::Notice(text) => {
                    if let Some(notice) = self.callbacks.notice {
                        let text = cstring_lossy(&text);
                        // SAFETY: the caller's function, given a string borrowed for the call.
                        unsafe { notice(self.callbacks.userdata, text.as_ptr()) };
                    }
                }
                Action::Audit(record) => {
                    if let Some(audit) = self.callbacks.audit {
                        let record = cstring_lossy(&record);
                        // SAFETY: the caller's function, given a string borrowed for the call.
                        unsafe { audit(self.callbacks.userdata, record.as_ptr()) };
                    }
                }
                // Connections are the host driver's (mcpgw_host).
                _ => {}
            }
        }
    }

    /// Waits for the channel's output or the driver's timer, whichever comes first; false when
    /// there is neither to wait for.
    pub(super) fn wait(&mut self) -> bool {
        let now = Instant::now();
        let timer = self.host.timeout();
        let left = timer.map(|at| at.saturating_duration_since(now));
        let mut heard = false;
        match self.channels.len() {
            0 => match left {
                Some(left) => std::thread::sleep(left),
                None => return false,
            },
            1 => heard = self.read(0, left.unwrap_or(IDLE_READ)),
            n => {
                for i in (0..n).rev() {
                    if i < self.channels.len() {
                        heard |= self.read(i, Duration::ZERO);
                    }
                }
                if !heard && !self.channels.is_empty() {
                    let last = self.channels.len() - 1;
                    heard = self.read(last, left.unwrap_or(SHARED_READ).min(SHARED_READ));
                }
            }
        }
        let now = Instant::now();
        if !heard || timer.is_some_and(|at| at <= now) {
            self.host.on_timeout(now);
        }
        true
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(fns) = self.callbacks.channel {
            for open in self.channels.drain(..) {
                // SAFETY: a handle `open` returned, closed once.
                unsafe { (fns.close)(self.callbacks.userdata, open.handle) };
            }
        }
        if let Some(finalize) = self.callbacks.finalize {
            // SAFETY: the caller's finalizer, called once, last.
            unsafe { finalize(self.callbacks.userdata) };
        }
    }
}
impl Inner {
    /// Runs `op` in the client's scope and gives its result as `give` says.
    pub(super) fn operate(
        &mut self,
        op: Op,
        stream: Option<(mcpgw_progress_fn, *mut c_void)>,
        give: Give,
        error_out: *mut *mut mcpgw_error,
    ) -> mcpgw_result {
        let mut submit = Submit::new(op);
        submit.agent_id.clone_from(&self.agent_id);
        submit.session_id.clone_from(&self.session_id);
        submit.stream = stream.is_some();
        self.finish(submit, stream, give, error_out)
    }

    pub(super) fn finish(
        &mut self,
        submit: Submit,
        stream: Option<(mcpgw_progress_fn, *mut c_void)>,
        give: Give,
        error_out: *mut *mut mcpgw_error,
    ) -> mcpgw_result {
        let id = self.host.submit(&submit, Instant::now());
        let result = self.run(id, |chunk| {
            let Some((Some(progress), userdata)) = stream else {
                return true;
            };
            match mcpgw_tool_chunk::new(chunk.clone()) {
                // SAFETY: the caller's function, given a chunk borrowed for the call.
                Ok(c) => unsafe { progress(userdata, &c) },
                Err(_) => true,
            }
        });
        let output = match result {
            Ok(output) => output,
            Err(e) => return report_error(error_out, &e),
        };
        match give {
            Give::Nothing => mcpgw_result::Ok,
            Give::Json(out) => {
                // SAFETY: checked writable by the caller.
                unsafe { *out = give_string(&output.to_json()) };
                mcpgw_result::Ok
            }
            Give::Chunk(out) => {
                let made = match output {
                    mcpgw::client::Output::Chunk(chunk) => mcpgw_tool_chunk::new(chunk),
                    other => Err(Error::protocol(format!(
                        "a tool call gave no ToolChunk: {}",
                        other.to_json()
                    ))),
                };
                match made {
                    Ok(c) => {
                        // SAFETY: checked writable by the caller.
                        unsafe { *out = Box::into_raw(Box::new(c)) };
                        mcpgw_result::Ok
                    }
                    Err(e) => report_error(error_out, &e),
                }
            }
        }
    }
}
