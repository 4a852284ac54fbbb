//! What the caller supplies to a client (its callbacks), what the library gives them (the
//! command to run), and how they answer (`mcpgw_reply`).

use std::ffi::{c_char, c_void};
use std::ptr;
use std::time::Duration;

use crate::chunk::mcpgw_tool_chunk;
use crate::host::mcpgw_stdin_kind;
use crate::{c_str, cstring_lossy, ffi_boundary, mcpgw_result, millis_u32, program_cstrings};
use mcpgw::driver::{Program, Stdin};
use mcpgw::error::Error;

/// One command for `exec`, or the channel's command for `channel_open`. Written by the library and
/// borrowed by the callback for the call; fields may be added at its end.
#[repr(C)]
pub struct mcpgw_exec_request {
    /// The program to run on this host, never through a shell (the `local`, `docker`,
    /// `podman`, `kubectl` and `argv` backends): `argc` strings; NULL for `shell`.
    pub argv: *const *const c_char,
    /// How many strings `argv` holds (0 for `shell`).
    pub argc: usize,
    /// `sh -c` text to run in the sandbox (the `exec` backend); NULL for `argv`.
    pub shell: *const c_char,
    /// The working directory for `argv` (the `local` backend's `cwd`); NULL: this process's.
    pub cwd: *const c_char,
    /// The command's standard input (always `MCPGW_STDIN_KIND_NULL` for `channel_open`).
    pub stdin_kind: mcpgw_stdin_kind,
    /// The bytes of `MCPGW_STDIN_KIND_BYTES`.
    pub stdin_bytes: *const u8,
    /// How many.
    pub stdin_len: usize,
    /// How long the command may run (0 for `channel_open`): past it, `exec` kills it and
    /// replies.
    pub timeout_ms: u32,
}

/// What the caller supplies to `mcpgw_client_new`: how to run a command in the sandbox, and
/// optionally how to keep one running with its standard streams open (the session channel).
///
/// Every function is called on the thread that called the `mcpgw_client_*` function, with the
/// `userdata` given to `mcpgw_client_new` first, one at a time; none may call an
/// `mcpgw_client_*` function of the same client (that call fails with INVALID_STATE). A
/// callback answers through its `mcpgw_reply` (`mcpgw_reply_exited`, `_failed`, ...), which is
/// valid for that call only; what it reports is copied.
///
/// `size` is `sizeof(mcpgw_client_callbacks)` as the caller was built: functions added to a
/// later version go at the end, and a shorter table leaves them out.
#[repr(C)]
pub struct mcpgw_client_callbacks {
    /// `sizeof(mcpgw_client_callbacks)`.
    pub size: usize,
    /// Required: runs `request` to its end within its time limit and replies once, with
    /// `mcpgw_reply_exited` (its status, 128 + N for signal N, and its outputs) or
    /// `mcpgw_reply_failed` (it could not be run: the sandbox is unreachable, gone, ...).
    pub exec: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            request: *const mcpgw_exec_request,
            reply: *mut mcpgw_reply,
        ),
    >,
    /// Optional (with `channel_write`, `_read` and `_close`, which are then all required): starts
    /// `request` with its standard input, output and error open, and returns a handle of the
    /// caller's for it; or returns NULL after `mcpgw_reply_failed`. Without a channel, every
    /// operation is a one-shot command and `open_session` fails.
    pub channel_open: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            request: *const mcpgw_exec_request,
            reply: *mut mcpgw_reply,
        ) -> *mut c_void,
    >,
    /// Writes all of `len` bytes to the channel's stdin; `mcpgw_reply_failed` when it cannot.
    pub channel_write: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            channel: *mut c_void,
            bytes: *const u8,
            len: usize,
            reply: *mut mcpgw_reply,
        ),
    >,
    /// Waits up to `timeout_ms` for the channel's output and replies with what came, in order:
    /// `mcpgw_reply_stdout`, `mcpgw_reply_stderr` (any number), `mcpgw_reply_eof` (its stdout
    /// ended), `mcpgw_reply_exited` (its status; after it, nothing more), or
    /// `mcpgw_reply_failed`; nothing when the time passed.
    pub channel_read: Option<
        unsafe extern "C" fn(
            userdata: *mut c_void,
            channel: *mut c_void,
            timeout_ms: u32,
            reply: *mut mcpgw_reply,
        ),
    >,
    /// Optional: closes the channel's stdin (the channel then ends by itself). Without it the
    /// channel is closed with `channel_close`.
    pub channel_close_input:
        Option<unsafe extern "C" fn(userdata: *mut c_void, channel: *mut c_void)>,
    /// Ends the channel: kills what still runs (with what it started) and releases the handle.
    /// Returns its exit status when known, else -1. Called once per handle `channel_open` returned.
    pub channel_close:
        Option<unsafe extern "C" fn(userdata: *mut c_void, channel: *mut c_void) -> i32>,
    /// Optional: receives each notice of the driver (a line worth a log: a channel opened
    /// again, a frame for a call no longer in flight), borrowed for the call.
    pub notice: Option<unsafe extern "C" fn(userdata: *mut c_void, text: *const c_char)>,
    /// Optional: called with `userdata` when the client is freed, after every other callback.
    pub finalize: Option<unsafe extern "C" fn(userdata: *mut c_void)>,
    /// Optional: receives each call's audit record (JSON, borrowed for the call) when the call
    /// ends; given, it turns the configuration's `audit` on.
    pub audit: Option<unsafe extern "C" fn(userdata: *mut c_void, record: *const c_char)>,
}

/// What a callback answers, given to it for the call; see the `mcpgw_reply_*` functions.
pub struct mcpgw_reply {
    pub(super) expects: Expects,
    pub(super) said: Vec<Said>,
}

/// Which callback a reply belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expects {
    Exec,
    Open,
    Write,
    Read,
}

/// One thing a callback said.
#[derive(Debug)]
pub(super) enum Said {
    Exited {
        code: i32,
        stdout: Vec<u8>,
        stderr: Vec<u8>,
    },
    Failed(String),
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Eof,
}

impl mcpgw_reply {
    pub(super) fn new(expects: Expects) -> mcpgw_reply {
        mcpgw_reply {
            expects,
            said: Vec::new(),
        }
    }

    /// Whether the reply has ended (an exit or a failure is the last thing said).
    pub(super) fn ended(&self) -> bool {
        matches!(
            self.said.last(),
            Some(Said::Exited { .. } | Said::Failed(_))
        )
    }

    pub(super) fn eof(&self) -> bool {
        self.said.iter().any(|s| matches!(s, Said::Eof))
    }

    /// Takes `said` when the callback may say it now.
    pub(super) fn say(&mut self, said: Said) -> mcpgw_result {
        let allowed = !self.ended()
            && match (&said, self.expects) {
                (Said::Failed(_), _) => true,
                (Said::Exited { .. }, Expects::Exec | Expects::Read) => true,
                (Said::Stdout(_), Expects::Read) => !self.eof(),
                (Said::Stderr(_), Expects::Read) => true,
                (Said::Eof, Expects::Read) => !self.eof(),
                _ => false,
            };
        if !allowed {
            return mcpgw_result::InvalidState;
        }
        self.said.push(said);
        mcpgw_result::Ok
    }
}

/// Borrows `len` bytes at `ptr`; `None` for NULL with a length.
pub(super) unsafe fn borrowed<'a>(ptr: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        Some(&[])
    } else if ptr.is_null() {
        None
    } else {
        // SAFETY: the caller's contract: `ptr` points to `len` readable bytes.
        Some(unsafe { std::slice::from_raw_parts(ptr, len) })
    }
}

/// The body of every `mcpgw_reply_*` function.
pub(super) unsafe fn reply_with(
    reply: *mut mcpgw_reply,
    said: impl FnOnce() -> Option<Said>,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or the reply the callback was given, per the contract.
        let Some(reply) = (unsafe { reply.as_mut() }) else {
            return mcpgw_result::NullParameter;
        };
        match said() {
            Some(said) => reply.say(said),
            None => mcpgw_result::NullParameter,
        }
    })
}

/// The command exited with status `code` (0 to 255; 128 + N when signal N ended it) after
/// writing `stdout` and `stderr` (`exec`; `channel_read` passes none: its output came by
/// `mcpgw_reply_stdout` and `_stderr`). The bytes are copied. INVALID_ARGUMENT for a status
/// out of range, INVALID_STATE when the callback already ended its reply or this callback
/// cannot say it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_reply_exited(
    reply: *mut mcpgw_reply,
    code: i32,
    stdout_bytes: *const u8,
    stdout_len: usize,
    stderr_bytes: *const u8,
    stderr_len: usize,
) -> mcpgw_result {
    if !(0..=255).contains(&code) {
        return mcpgw_result::InvalidArgument;
    }
    // SAFETY: each pointer points to its length of bytes, per the contract.
    unsafe {
        reply_with(reply, || {
            Some(Said::Exited {
                code,
                stdout: borrowed(stdout_bytes, stdout_len)?.to_vec(),
                stderr: borrowed(stderr_bytes, stderr_len)?.to_vec(),
            })
        })
    }
}

/// The command could not be run, or the channel failed: `reason` says why (NULL: no reason
/// known), e.g. "the sandbox is gone". Any callback may say it, as the last thing it says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_reply_failed(
    reply: *mut mcpgw_reply,
    reason: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    let reason = unsafe { c_str(reason) }.map_or_else(
        || "the host's exec function failed".to_owned(),
        |r| r.to_string_lossy().into_owned(),
    );
    // SAFETY: the reply's contract.
    unsafe { reply_with(reply, || Some(Said::Failed(reason))) }
}

/// Bytes the channel wrote to its stdout (`channel_read` only, before its eof). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_reply_stdout(
    reply: *mut mcpgw_reply,
    bytes: *const u8,
    len: usize,
) -> mcpgw_result {
    // SAFETY: the reply's and the bytes' contracts.
    unsafe { reply_with(reply, || Some(Said::Stdout(borrowed(bytes, len)?.to_vec()))) }
}

/// Bytes the channel wrote to its stderr (`channel_read` only). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_reply_stderr(
    reply: *mut mcpgw_reply,
    bytes: *const u8,
    len: usize,
) -> mcpgw_result {
    // SAFETY: the reply's and the bytes' contracts.
    unsafe { reply_with(reply, || Some(Said::Stderr(borrowed(bytes, len)?.to_vec()))) }
}

/// The channel's stdout ended (`channel_read` only, once).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_reply_eof(reply: *mut mcpgw_reply) -> mcpgw_result {
    // SAFETY: the reply's contract.
    unsafe { reply_with(reply, || Some(Said::Eof)) }
}

/// Receives each PROGRESS chunk of `mcpgw_client_call_tool_stream`, borrowed for the call.
/// Returning false cancels the call: it then ends with CANCELLED.
pub type mcpgw_progress_fn =
    Option<unsafe extern "C" fn(userdata: *mut c_void, chunk: *const mcpgw_tool_chunk) -> bool>;

/// The caller's callbacks, checked, and their userdata.
pub(super) struct Callbacks {
    pub(super) userdata: *mut c_void,
    pub(super) exec: unsafe extern "C" fn(*mut c_void, *const mcpgw_exec_request, *mut mcpgw_reply),
    pub(super) channel: Option<ChannelFns>,
    pub(super) notice: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
    pub(super) finalize: Option<unsafe extern "C" fn(*mut c_void)>,
    pub(super) audit: Option<unsafe extern "C" fn(*mut c_void, *const c_char)>,
}

#[derive(Clone, Copy)]
pub(super) struct ChannelFns {
    pub(super) open: unsafe extern "C" fn(
        *mut c_void,
        *const mcpgw_exec_request,
        *mut mcpgw_reply,
    ) -> *mut c_void,
    pub(super) write:
        unsafe extern "C" fn(*mut c_void, *mut c_void, *const u8, usize, *mut mcpgw_reply),
    pub(super) read: unsafe extern "C" fn(*mut c_void, *mut c_void, u32, *mut mcpgw_reply),
    pub(super) close_input: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    pub(super) close: unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32,
}

impl Callbacks {
    /// Reads the caller's table, which is `table.size` bytes long.
    ///
    /// # Safety
    /// `table` points to at least `size_of::<usize>()` readable bytes, and to `size` of them.
    pub(super) unsafe fn read(
        table: *const mcpgw_client_callbacks,
        userdata: *mut c_void,
    ) -> Result<Callbacks, Error> {
        // SAFETY: the table starts with its size, per the contract.
        let size = unsafe { ptr::read_unaligned(table.cast::<usize>()) };
        let full = std::mem::size_of::<mcpgw_client_callbacks>();
        let mut copy = mcpgw_client_callbacks {
            size,
            exec: None,
            channel_open: None,
            channel_write: None,
            channel_read: None,
            channel_close_input: None,
            channel_close: None,
            notice: None,
            finalize: None,
            audit: None,
        };
        let first = std::mem::offset_of!(mcpgw_client_callbacks, exec);
        if size < first + std::mem::size_of::<usize>() {
            return Err(Error::invalid_argument(format!(
                "the callbacks' size is {size}: set it to sizeof(mcpgw_client_callbacks)"
            )));
        }
        // SAFETY: the caller's table holds `size` bytes; the fields past them stay None (a
        // table of an older, shorter version), and those past this version's are not read.
        unsafe {
            ptr::copy_nonoverlapping(
                table.cast::<u8>().add(first),
                (&raw mut copy).cast::<u8>().add(first),
                size.min(full) - first,
            );
        }
        let exec = copy
            .exec
            .ok_or_else(|| Error::invalid_argument("the callbacks have no exec: it is required"))?;
        let channel = match (
            copy.channel_open,
            copy.channel_write,
            copy.channel_read,
            copy.channel_close,
        ) {
            (None, None, None, None) if copy.channel_close_input.is_none() => None,
            (Some(open), Some(write), Some(read), Some(close)) => Some(ChannelFns {
                open,
                write,
                read,
                close_input: copy.channel_close_input,
                close,
            }),
            _ => {
                return Err(Error::invalid_argument(
                    "the callbacks' channel is incomplete: give channel_open, channel_write, \
                     channel_read and channel_close (and optionally channel_close_input), or none \
                     of them",
                ));
            }
        };
        Ok(Callbacks {
            userdata,
            exec,
            channel,
            notice: copy.notice,
            finalize: copy.finalize,
            audit: copy.audit,
        })
    }
}

/// The C views of one command.
pub(super) struct Request {
    pub(super) argv: Vec<std::ffi::CString>,
    pub(super) argv_ptrs: Vec<*const c_char>,
    pub(super) shell: Option<std::ffi::CString>,
    pub(super) cwd: Option<std::ffi::CString>,
    pub(super) stdin: Stdin,
    pub(super) timeout_ms: u32,
}

impl Request {
    pub(super) fn new(
        program: Program,
        cwd: Option<&str>,
        stdin: Stdin,
        timeout: Duration,
    ) -> Request {
        let (argv, shell) = program_cstrings(program);
        let argv_ptrs = argv
            .iter()
            .map(|a: &std::ffi::CString| a.as_ptr())
            .collect();
        Request {
            argv,
            argv_ptrs,
            shell,
            cwd: cwd.map(cstring_lossy),
            stdin,
            timeout_ms: millis_u32(timeout),
        }
    }

    /// The view, borrowing `self`.
    pub(super) fn view(&self) -> mcpgw_exec_request {
        let (stdin_kind, bytes): (_, &[u8]) = match &self.stdin {
            Stdin::Null => (mcpgw_stdin_kind::Null, &[]),
            Stdin::Hold => (mcpgw_stdin_kind::Hold, &[]),
            Stdin::Bytes(b) => (mcpgw_stdin_kind::Bytes, b),
        };
        mcpgw_exec_request {
            argv: if self.argv.is_empty() {
                ptr::null()
            } else {
                self.argv_ptrs.as_ptr()
            },
            argc: self.argv.len(),
            shell: self.shell.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            cwd: self.cwd.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            stdin_kind,
            stdin_bytes: if bytes.is_empty() {
                ptr::null()
            } else {
                bytes.as_ptr()
            },
            stdin_len: bytes.len(),
            timeout_ms: self.timeout_ms,
        }
    }
}
