//! `mcpgw_host`: the host driver in sans-IO form, and `mcpgw_action`, what it asks for.
//!
//! ```c
//! mcpgw_host *host;
//! mcpgw_host_new("{\"backend\":{\"kind\":\"docker\",\"container\":\"box\"}}", &host, &err);
//! mcpgw_host_submit(host, "{\"op\":\"open_session\"}", &id, &err);
//! for (;;) {
//!     mcpgw_action *a;
//!     while ((a = mcpgw_host_next_action(host)) != NULL) {
//!         switch (mcpgw_action_get_kind(a)) {
//!         case MCPGW_ACTION_KIND_RUN: ... spawn argv, report mcpgw_host_on_exit ...
//!         case MCPGW_ACTION_KIND_OPEN: ... spawn with pipes, feed mcpgw_host_on_data ...
//!         case MCPGW_ACTION_KIND_DONE: ... mcpgw_action_bytes: the result or the error ...
//!         ...
//!         }
//!         mcpgw_action_free(a);
//!     }
//!     poll(fds, n, mcpgw_host_timeout_ms(host));   // then feed what happened
//!     mcpgw_host_on_timeout(host);
//! }
//! ```
//! The library reads the monotonic clock itself: every call is "now".

use std::ffi::{CString, c_char};
use std::ptr;
use std::time::Instant;

use super::error::{mcpgw_error, report, report_code, report_error};
use super::{
    cstring_lossy, ffi_boundary, mcpgw_result, millis_u32, program_cstrings, required_text,
};
use mcpgw::driver::{Action, Exit, Host, HostConfig, Program, Stdin};

/// One sandbox's gateway and its session channel: the host driver. It turns submitted
/// operations and what the host reports (exits, channel bytes, time) into actions.
///
/// May be moved between threads, but used by one thread at a time (a binding guards it with
/// its own lock or owns it in one task). Created with `mcpgw_host_new`, released with
/// `mcpgw_host_free`.
pub struct mcpgw_host {
    host: Host,
}

/// What an action is.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_action_kind {
    /// Run a program to its end (`mcpgw_action_argc`/`_argv`, or `_shell` for the host's own
    /// exec function), with `mcpgw_action_stdin_kind`, within `mcpgw_action_timeout_ms`; report
    /// its end with `mcpgw_host_on_exit` (or `mcpgw_host_on_exec_failed`).
    Run = 1,
    /// Start a long-lived program with stdin, stdout and stderr piped (the session channel);
    /// feed `mcpgw_host_on_data`, `_on_stderr`, `_on_eof` and `_on_exit`.
    Open = 2,
    /// Write `mcpgw_action_bytes` to the process's stdin.
    Write = 3,
    /// Close the process's stdin.
    CloseInput = 4,
    /// Kill the process with everything it started (its process group), then report its exit.
    Kill = 5,
    /// Progress of operation `mcpgw_action_id`: `mcpgw_action_bytes` is a ToolChunk's JSON.
    Progress = 6,
    /// Operation `mcpgw_action_id` finished: `mcpgw_action_result` says how, and
    /// `mcpgw_action_bytes` is its result as JSON (a call_tool's ToolChunk, a list_tools's
    /// tools, `{"ok":true}` for an operation that returns nothing, ...) or its error (`code`,
    /// `name`, `message`, `http_status`, `detail`, `backend`).
    Done = 7,
    /// Connection `mcpgw_action_id` is open.
    ConnectionOpened = 8,
    /// A JSON-RPC message (`mcpgw_action_bytes`, JSON text) for connection `mcpgw_action_id`.
    ConnectionMessage = 9,
    /// Connection `mcpgw_action_id` ended (`mcpgw_action_text` says why, or is NULL when the
    /// host closed it; `mcpgw_action_status` is the HTTP status of a refused open, and
    /// `mcpgw_action_result` the kind of the end).
    ConnectionClosed = 10,
    /// Something worth a log line: `mcpgw_action_text`.
    Notice = 11,
    /// The audit record of a call that ended (`mcpgw_action_bytes`, a JSON object), when the
    /// configuration's `audit` is on; a host that did not turn it on never gets one.
    Audit = 12,
}

/// What a `RUN` action's standard input is.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_stdin_kind {
    /// `/dev/null`.
    Null = 0,
    /// `mcpgw_action_bytes`, then end of input.
    Bytes = 1,
    /// A pipe the host keeps open, writing nothing, until the process exits (its end tells the
    /// sandbox that the host gave up).
    Hold = 2,
}

/// One action of the driver, with C views of what it carries.
///
/// Immutable once made: may be moved between threads and read from several at once. Released
/// with `mcpgw_action_free`; borrowed strings and bytes live as long as the action.
pub struct mcpgw_action {
    kind: mcpgw_action_kind,
    proc: u64,
    id: u64,
    argv: Vec<CString>,
    shell: Option<CString>,
    cwd: Option<CString>,
    stdin: mcpgw_stdin_kind,
    bytes: Vec<u8>,
    timeout_ms: u32,
    result: mcpgw_result,
    text: Option<CString>,
    status: u16,
}

impl mcpgw_action {
    fn new(kind: mcpgw_action_kind) -> mcpgw_action {
        mcpgw_action {
            kind,
            proc: 0,
            id: 0,
            argv: Vec::new(),
            shell: None,
            cwd: None,
            stdin: mcpgw_stdin_kind::Null,
            bytes: Vec::new(),
            timeout_ms: 0,
            result: mcpgw_result::Ok,
            text: None,
            status: 0,
        }
    }

    fn program(&mut self, program: Program, cwd: Option<&str>) {
        (self.argv, self.shell) = program_cstrings(program);
        self.cwd = cwd.map(cstring_lossy);
    }

    fn from_action(action: Action, cwd: Option<&str>) -> mcpgw_action {
        use mcpgw_action_kind as K;
        match action {
            Action::Run {
                proc,
                program,
                stdin,
                timeout,
            } => {
                let mut a = mcpgw_action::new(K::Run);
                a.proc = proc;
                a.program(program, cwd);
                a.timeout_ms = millis_u32(timeout);
                match stdin {
                    Stdin::Null => {}
                    Stdin::Hold => a.stdin = mcpgw_stdin_kind::Hold,
                    Stdin::Bytes(bytes) => {
                        a.stdin = mcpgw_stdin_kind::Bytes;
                        a.bytes = bytes.to_vec();
                    }
                }
                a
            }
            Action::Open { proc, program } => {
                let mut a = mcpgw_action::new(K::Open);
                a.proc = proc;
                a.program(program, cwd);
                a
            }
            Action::Write { proc, bytes } => {
                let mut a = mcpgw_action::new(K::Write);
                a.proc = proc;
                a.bytes = bytes;
                a
            }
            Action::CloseInput { proc } => {
                let mut a = mcpgw_action::new(K::CloseInput);
                a.proc = proc;
                a
            }
            Action::Kill { proc } => {
                let mut a = mcpgw_action::new(K::Kill);
                a.proc = proc;
                a
            }
            Action::Progress { op, chunk } => {
                let mut a = mcpgw_action::new(K::Progress);
                a.id = op;
                a.bytes = chunk.get().as_bytes().to_vec();
                a
            }
            Action::Done { op, result } => {
                let mut a = mcpgw_action::new(K::Done);
                a.id = op;
                match result {
                    Ok(output) => a.bytes = output.to_json().into_bytes(),
                    Err(e) => {
                        a.result = e.kind().into();
                        a.text = Some(cstring_lossy(e.message()));
                        a.bytes = e.to_json().into_bytes();
                    }
                }
                a
            }
            Action::ConnectionOpened { conn } => {
                let mut a = mcpgw_action::new(K::ConnectionOpened);
                a.id = conn;
                a
            }
            Action::ConnectionMessage { conn, msg } => {
                let mut a = mcpgw_action::new(K::ConnectionMessage);
                a.id = conn;
                a.bytes = msg.get().as_bytes().to_vec();
                a
            }
            Action::ConnectionClosed {
                conn,
                reason,
                status,
                kind,
            } => {
                let mut a = mcpgw_action::new(K::ConnectionClosed);
                a.id = conn;
                a.result = kind.map_or(mcpgw_result::Ok, Into::into);
                a.text = reason.as_deref().map(cstring_lossy);
                a.status = status.unwrap_or(0);
                a
            }
            Action::Notice(text) => {
                let mut a = mcpgw_action::new(K::Notice);
                a.text = Some(cstring_lossy(&text));
                a
            }
            Action::Audit(record) => {
                let mut a = mcpgw_action::new(K::Audit);
                a.bytes = record.into_bytes();
                a
            }
        }
    }
}

/// Borrows `len` bytes at `ptr` (NULL with length 0 is an empty slice).
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract: `ptr` points to `len` readable bytes.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// A fallible C function's answer: its result code, any failure reported to `error_out`.
type Answer = Result<mcpgw_result, mcpgw_result>;

/// The driver behind `host`; NULL is reported as NULL_PARAMETER.
///
/// # Safety
/// `host` is NULL or a live host, used by this thread alone for the borrow.
unsafe fn driver<'a>(
    host: *mut mcpgw_host,
    error_out: *mut *mut mcpgw_error,
) -> Result<&'a mut Host, mcpgw_result> {
    // SAFETY: the caller's contract.
    unsafe { host.as_mut() }
        .map(|h| &mut h.host)
        .ok_or_else(|| report_code(error_out, mcpgw_result::NullParameter))
}

/// `f` on the driver behind `host`, which is ignored when NULL: the body of every report of
/// the host's I/O below.
///
/// # Safety
/// `host` is NULL or a live host, used by this thread alone for the call.
unsafe fn on_host(host: *mut mcpgw_host, f: impl FnOnce(&mut Host)) {
    ffi_boundary!((), {
        // SAFETY: the caller's contract.
        if let Some(h) = unsafe { host.as_mut() } {
            f(&mut h.host)
        }
    })
}

/// `out`, unless it is NULL (reported as NULL_PARAMETER).
fn writable<T>(out: *mut T, error_out: *mut *mut mcpgw_error) -> Result<*mut T, mcpgw_result> {
    if out.is_null() {
        Err(report_code(error_out, mcpgw_result::NullParameter))
    } else {
        Ok(out)
    }
}

/// A NUL-terminated UTF-8 argument; NULL is `""` when `optional`, else NULL_PARAMETER.
/// Failures are reported.
///
/// # Safety
/// `p` is NULL or NUL-terminated.
unsafe fn text_arg<'a>(
    p: *const c_char,
    optional: bool,
    error_out: *mut *mut mcpgw_error,
) -> Result<&'a str, mcpgw_result> {
    if optional && p.is_null() {
        return Ok("");
    }
    // SAFETY: the caller's contract.
    unsafe { required_text(p) }.map_err(|code| report_code(error_out, code))
}

/// Writes what `made` made to `*out` (checked by [`writable`]), or reports why it failed.
///
/// # Safety
/// `out` is writable.
unsafe fn give<T>(
    out: *mut T,
    made: Result<T, mcpgw::error::Error>,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    match made {
        Ok(value) => {
            // SAFETY: the caller's contract.
            unsafe { *out = value };
            mcpgw_result::Ok
        }
        Err(e) => report_error(error_out, &e),
    }
}

/// Makes a host driver from `config_json` (`{"backend":{"kind":"docker","container":"box"},
/// "gateway_path":"/usr/local/bin/mcpgw-gateway", ...}`; see the README for every key). Writes
/// `*host_out` on success; on failure `*error_out` (when not NULL) names what is wrong.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_new(
    config_json: *const c_char,
    host_out: *mut *mut mcpgw_host,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        let answer = || -> Answer {
            let out = writable(host_out, error_out)?;
            // SAFETY: NULL or NUL-terminated, per the contract.
            let text = unsafe { text_arg(config_json, false, error_out) }?;
            let made = HostConfig::from_json(text)
                .and_then(Host::new)
                .map(|host| Box::into_raw(Box::new(mcpgw_host { host })));
            // SAFETY: writable per the contract.
            Ok(unsafe { give(out, made, error_out) })
        };
        answer().unwrap_or_else(|code| code)
    })
}

/// Frees a host driver. Processes it asked for are the host's to end (kill them). NULL is
/// ignored. Takes ownership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_free(host: *mut mcpgw_host) {
    ffi_boundary!((), {
        if !host.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_host_new, per the contract.
            drop(unsafe { Box::from_raw(host) });
        }
    })
}

/// Submits an operation given as JSON (`{"op":"call_tool","mcp":"fs","tool":"read",
/// "arguments":{...},"agent_id":"","session_id":"","timeout_ms":5000,"stream":true}`; the
/// operations are start_gateway, stop_gateway, ensure_gateway_binary (`binary_path`), health,
/// list_mcps, add_mcp (`spec`), remove_mcp (`name`), list_tools (`mcp`), call_tool,
/// set_runtime_headers (`mcp`, `headers`), open_session and close_session). Writes its id to
/// `*id_out`: it gets exactly one DONE action. Fails only for text that is not exactly one
/// operation (INVALID_ARGUMENT naming the fault: trailing bytes, an `op` that is not one of the
/// names above as a string, a field of the wrong type).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_submit(
    host: *mut mcpgw_host,
    op_json: *const c_char,
    id_out: *mut u64,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        let answer = || -> Answer {
            // SAFETY: NULL or a live host, per the contract.
            let host = unsafe { driver(host, error_out) }?;
            let out = writable(id_out, error_out)?;
            // SAFETY: NULL or NUL-terminated, per the contract.
            let text = unsafe { text_arg(op_json, false, error_out) }?;
            let made = host.submit_json(text, Instant::now());
            // SAFETY: writable per the contract.
            Ok(unsafe { give(out, made, error_out) })
        };
        answer().unwrap_or_else(|code| code)
    })
}

/// Cancels operation `id`: its command is killed, or the gateway cancels it upstream; it ends
/// with a DONE action of result CANCELLED. Returns whether it was under way.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_cancel(host: *mut mcpgw_host, id: u64) -> bool {
    ffi_boundary!(false, {
        // SAFETY: NULL or a live host, per the contract.
        unsafe { host.as_mut() }.is_some_and(|h| h.host.cancel(id, Instant::now()))
    })
}

/// Opens a virtual MCP connection to MCP `mcp` of the scope (`agent_id`, `session_id`; NULL
/// is "") over the session channel; writes its id to `*id_out`. A CONNECTION_OPENED action
/// says it is ready; it ends with one CONNECTION_CLOSED. Fails without an open session.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_open_connection(
    host: *mut mcpgw_host,
    mcp: *const c_char,
    agent_id: *const c_char,
    session_id: *const c_char,
    id_out: *mut u64,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        let answer = || -> Answer {
            // SAFETY: NULL or a live host, per the contract.
            let host = unsafe { driver(host, error_out) }?;
            let out = writable(id_out, error_out)?;
            // SAFETY: each NULL or NUL-terminated, per the contract.
            let (name, agent, session) = unsafe {
                (
                    text_arg(mcp, false, error_out)?,
                    text_arg(agent_id, true, error_out)?,
                    text_arg(session_id, true, error_out)?,
                )
            };
            let made = host.open_connection(name, agent, session, false, Instant::now());
            // SAFETY: writable per the contract.
            Ok(unsafe { give(out, made, error_out) })
        };
        answer().unwrap_or_else(|code| code)
    })
}

/// Sends one JSON-RPC message (`len` bytes of UTF-8 JSON, one object) on connection `conn`.
/// The bytes are copied. A message larger than the session's frames (the hello's
/// `max_frame_bytes`, less the frame's envelope) is INVALID_ARGUMENT.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_send(
    host: *mut mcpgw_host,
    conn: u64,
    msg: *const u8,
    len: usize,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: NULL or a live host, per the contract.
        let host = match unsafe { driver(host, error_out) } {
            Ok(host) => host,
            Err(code) => return code,
        };
        // SAFETY: `len` readable bytes at `msg`, per the contract.
        let Ok(text) = std::str::from_utf8(unsafe { bytes(msg, len) }) else {
            return report(
                error_out,
                mcpgw_error::from_code(mcpgw_result::InvalidArgument, "the message is not UTF-8"),
            );
        };
        match host.send(conn, text, Instant::now()) {
            Ok(()) => mcpgw_result::Ok,
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// Closes connection `conn` (its CONNECTION_CLOSED follows); returns whether it was open.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_close_connection(host: *mut mcpgw_host, conn: u64) -> bool {
    ffi_boundary!(false, {
        // SAFETY: NULL or a live host, per the contract.
        unsafe { host.as_mut() }.is_some_and(|h| h.host.close_connection(conn, Instant::now()))
    })
}

/// Process `proc` exited with `exit_code` (128 + N for signal N) after writing these outputs
/// (a channel's were fed as they came: pass none). The bytes are copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_exit(
    host: *mut mcpgw_host,
    proc: u64,
    exit_code: i32,
    out: *const u8,
    out_len: usize,
    err: *const u8,
    err_len: usize,
) {
    let report = |h: &mut Host| {
        // SAFETY: the buffers are readable, per the contract.
        let exit = Exit::Exited {
            code: exit_code,
            stdout: unsafe { bytes(out, out_len) }.to_vec(),
            stderr: unsafe { bytes(err, err_len) }.to_vec(),
        };
        h.on_exit(proc, exit, Instant::now());
    };
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, report) }
}

/// Process `proc` could not be run, or the host's exec function failed: `reason` says why
/// (NULL: no reason known).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_exec_failed(
    host: *mut mcpgw_host,
    proc: u64,
    reason: *const c_char,
) {
    let report = |h: &mut Host| {
        // SAFETY: NULL or NUL-terminated, per the contract.
        let reason = unsafe { super::c_str(reason) }.map_or_else(
            || "no reason given".to_owned(),
            |r| r.to_string_lossy().into_owned(),
        );
        h.on_exit(proc, Exit::Failed(reason), Instant::now());
    };
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, report) }
}

/// Bytes the channel process `proc` wrote to its stdout. Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_data(
    host: *mut mcpgw_host,
    proc: u64,
    data: *const u8,
    len: usize,
) {
    let report = |h: &mut Host| {
        // SAFETY: `len` readable bytes, per the contract.
        h.on_data(proc, unsafe { bytes(data, len) }, Instant::now());
    };
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, report) }
}

/// Bytes the channel process `proc` wrote to its stderr. Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_stderr(
    host: *mut mcpgw_host,
    proc: u64,
    data: *const u8,
    len: usize,
) {
    let report = |h: &mut Host| {
        // SAFETY: `len` readable bytes, per the contract.
        h.on_stderr(proc, unsafe { bytes(data, len) }, Instant::now());
    };
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, report) }
}

/// The channel process `proc`'s stdout ended.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_eof(host: *mut mcpgw_host, proc: u64) {
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, |h| h.on_eof(proc, Instant::now())) }
}

/// Time passed: call it when `mcpgw_host_timeout_ms` has elapsed (calling it early is harmless).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_on_timeout(host: *mut mcpgw_host) {
    // SAFETY: NULL or a live host, per the contract.
    unsafe { on_host(host, |h| h.on_timeout(Instant::now())) }
}

/// Milliseconds until the driver wants `mcpgw_host_on_timeout` (rounded up; 0: now), or -1
/// when it waits for nothing but the host's reports.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_timeout_ms(host: *const mcpgw_host) -> i64 {
    ffi_boundary!(-1, {
        // SAFETY: NULL or a live host, per the contract.
        let Some(h) = (unsafe { host.as_ref() }) else {
            return -1;
        };
        match h.host.timeout() {
            None => -1,
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                i64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i64::MAX)
            }
        }
    })
}

/// The next action, or NULL when there is none (until the host reports something or time
/// passes). The caller frees it with `mcpgw_action_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_next_action(host: *mut mcpgw_host) -> *mut mcpgw_action {
    ffi_boundary!(ptr::null_mut(), {
        // SAFETY: NULL or a live host, per the contract.
        let Some(h) = (unsafe { host.as_mut() }) else {
            return ptr::null_mut();
        };
        match h.host.poll_action() {
            Some(a) => {
                let cwd = h.host.config().backend.cwd().map(str::to_owned);
                Box::into_raw(Box::new(mcpgw_action::from_action(a, cwd.as_deref())))
            }
            None => ptr::null_mut(),
        }
    })
}

/// What the driver knows, as JSON: `{"session":"off"|"opening"|"open","gateway":{port, pid,
/// token_file, instance_nonce, state_dir} or null, "hello":{...} or null, "resumed": calls
/// resumed on a new channel so far}`. Free it with `mcpgw_string_free`; NULL for a NULL host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_host_state_json(host: *const mcpgw_host) -> *mut c_char {
    ffi_boundary!(ptr::null_mut(), {
        // SAFETY: NULL or a live host, per the contract.
        let Some(h) = (unsafe { host.as_ref() }) else {
            return ptr::null_mut();
        };
        super::give_string(&h.host.state_json())
    })
}

mod action;
#[cfg(test)]
mod tests;
