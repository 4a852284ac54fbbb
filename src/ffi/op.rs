//! `mcpgw_op`: one operation in sans-IO form, for hosts that own their event loop.
//!
//! ```c
//! mcpgw_op *op;
//! mcpgw_client_prepare_call_tool(client, NULL, "fs", "read_file", "{\"path\":\"/x\"}", &op);
//! const char *cmd; uint32_t timeout_ms;
//! while (mcpgw_op_command(op, &cmd, &timeout_ms) == MCPGW_RESULT_OK) {
//!     ... run `sh -c cmd` in the sandbox, however and whenever the host likes ...
//!     mcpgw_op_complete(op, exit_code, out, out_len, err, err_len);
//! }
//! if (mcpgw_op_result(op) == MCPGW_RESULT_OK) mcpgw_op_tool_chunk(op, &chunk, NULL);
//! mcpgw_op_free(op);
//! ```
//! The same op may instead run through the client's exec callback (`mcpgw_client_run`) or over a
//! session channel (`mcpgw_session_submit`).

use std::ffi::{CString, c_char};
use std::ptr;
use std::sync::{Arc, Mutex, MutexGuard};

use super::chunk::mcpgw_tool_chunk;
use super::error::{mcpgw_error, report_code, report_error};
use super::{c_str, cstring_lossy, ffi_boundary, give_string, mcpgw_result, try_ref};
use mcpgw::client::{ExecOutput, Operation, Output};
use mcpgw::error::{Error, ErrorKind};

/// One operation on the gateway in sans-IO form: it says which command to run next
/// (`mcpgw_op_command`), takes what the command did (`mcpgw_op_complete`), and repeats until
/// it has a result (`mcpgw_op_result`). Or it runs through the client's exec callback
/// (`mcpgw_client_run`), or over a session (`mcpgw_session_submit`), which finishes it.
///
/// May be moved between threads, but used by one thread at a time (a session it was submitted
/// to finishes it on the thread that feeds the session). Independent operations of the same
/// client may be in flight at once. Created by a `mcpgw_client_prepare_*` function, released
/// with `mcpgw_op_free`; it keeps what it needs of its client, which may be freed first.
pub struct mcpgw_op {
    pub(crate) cell: Arc<Mutex<OpCell>>,
}

/// An operation and the C views of its pending command and of its failure.
pub(crate) struct OpCell {
    pub(crate) op: Operation<Output>,
    command: Option<CString>,
    /// Made once, when the operation fails, and never replaced: a pointer to it stays valid
    /// until the op is freed.
    error: Option<Box<mcpgw_error>>,
}

impl OpCell {
    /// Refreshes the C views after the operation moved.
    pub(crate) fn sync(&mut self) {
        self.command = self.op.command().map(|c| cstring_lossy(&c.text));
        if self.error.is_none()
            && let Some(Err(e)) = self.op.outcome()
        {
            self.error = Some(Box::new(mcpgw_error::from_error(e)));
        }
    }

    fn output(&self) -> Option<&Output> {
        match self.op.outcome() {
            Some(Ok(o)) => Some(o),
            _ => None,
        }
    }

    pub(crate) fn result(&self) -> mcpgw_result {
        match self.op.outcome() {
            None => mcpgw_result::InvalidState,
            Some(Ok(_)) => mcpgw_result::Ok,
            Some(Err(e)) => e.kind().into(),
        }
    }
}

impl mcpgw_op {
    pub(crate) fn new(op: Operation<Output>) -> mcpgw_op {
        let mut cell = OpCell {
            op,
            command: None,
            error: None,
        };
        cell.sync();
        mcpgw_op {
            cell: Arc::new(Mutex::new(cell)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, OpCell> {
        self.cell.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The command to run next: on success `*command_out` receives `sh -c` text (borrowed: valid
/// until the next `mcpgw_op_complete`, `mcpgw_op_fail_exec` or `mcpgw_op_free` on this op) and
/// `*timeout_ms_out` how long the host should let it run. `MCPGW_RESULT_INVALID_STATE` when the
/// operation has finished or a session carries it: then read `mcpgw_op_result`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_command(
    op: *const mcpgw_op,
    command_out: *mut *const c_char,
    timeout_ms_out: *mut u32,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let op = try_ref!(op);
        if command_out.is_null() || timeout_ms_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let cell = op.lock();
        let (Some(text), Some(cmd)) = (&cell.command, cell.op.command()) else {
            return mcpgw_result::InvalidState;
        };
        // SAFETY: checked non-NULL above; the text lives in the op until it moves on.
        unsafe {
            *command_out = text.as_ptr();
            *timeout_ms_out = u32::try_from(cmd.timeout.as_millis()).unwrap_or(u32::MAX);
        }
        mcpgw_result::Ok
    })
}

/// The bytes the pending command wants on its standard input: on success `*buf_out` and
/// `*len_out` receive them (borrowed like the command's text), or NULL and 0 when it takes none.
/// Only clients configured with `mcpgw_client_config_set_exec_stdin` make such commands.
/// `MCPGW_RESULT_INVALID_STATE` when no command is pending.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_command_stdin(
    op: *const mcpgw_op,
    buf_out: *mut *const u8,
    len_out: *mut usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let op = try_ref!(op);
        if buf_out.is_null() || len_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let cell = op.lock();
        let Some(cmd) = cell.op.command() else {
            return mcpgw_result::InvalidState;
        };
        let (buf, len) = cmd
            .stdin
            .as_ref()
            .map_or((ptr::null(), 0), |b| (b.as_ptr(), b.len()));
        // SAFETY: checked non-NULL above; the bytes live in the op until it moves on.
        unsafe {
            *buf_out = buf;
            *len_out = len;
        }
        mcpgw_result::Ok
    })
}

/// Hands back what the pending command did: its exit status and everything it wrote to stdout
/// and stderr (copied; a buffer may be NULL when its length is 0). Returns
/// `MCPGW_RESULT_OK` when the input was taken (the operation may then want another command or
/// have finished), `MCPGW_RESULT_INVALID_STATE` when no command was pending (the operation is
/// then unchanged).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_complete(
    op: *mut mcpgw_op,
    exit_code: i32,
    out_buf: *const u8,
    out_len: usize,
    err_buf: *const u8,
    err_len: usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let op = try_ref!(op);
        let (Some(stdout), Some(stderr)) = (
            // SAFETY: the caller's contract: `len` readable bytes, or NULL with 0.
            unsafe { bytes(out_buf, out_len) },
            unsafe { bytes(err_buf, err_len) },
        ) else {
            return mcpgw_result::NullParameter;
        };
        complete(
            op,
            Ok(ExecOutput {
                exit_code,
                stdout: stdout.to_vec(),
                stderr: stderr.to_vec(),
            }),
        )
    })
}

fn complete(op: &mcpgw_op, result: mcpgw::ExecResult) -> mcpgw_result {
    let mut cell = op.lock();
    match cell.op.complete(result) {
        Ok(()) => {
            cell.sync();
            mcpgw_result::Ok
        }
        // Rejected: nothing moved, so nothing handed out before is invalidated.
        Err(e) => e.kind().into(),
    }
}

/// Reports that the host could not run the pending command at all (the sandbox is gone, the
/// backend refused); `reason` (may be NULL) goes into the error message. The operation then
/// fails with `MCPGW_RESULT_EXEC_FAILED`. `MCPGW_RESULT_INVALID_STATE` when no command was
/// pending.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_fail_exec(
    op: *mut mcpgw_op,
    reason: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let op = try_ref!(op);
        // SAFETY: NULL or NUL-terminated, per the contract.
        let reason = unsafe { c_str(reason) }.map_or_else(
            || "no reason given".into(),
            |r| r.to_string_lossy().into_owned(),
        );
        complete(op, Err(reason))
    })
}

/// Whether the operation has finished (it wants no more commands and has its result).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_is_finished(op: *const mcpgw_op) -> bool {
    ffi_boundary!(true, {
        // SAFETY: NULL or a live op, per the contract.
        unsafe { op.as_ref() }.is_none_or(|o| o.lock().op.is_finished())
    })
}

/// The operation's outcome: `MCPGW_RESULT_OK` when it succeeded, the failure's code when it
/// failed (details in `mcpgw_op_error`), `MCPGW_RESULT_INVALID_STATE` while it is under way.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_result(op: *const mcpgw_op) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, { try_ref!(op).lock().result() })
}

/// The failure of a failed operation, NULL otherwise. Borrowed: valid until the op is freed
/// (nothing done to the op in between replaces it); never freed on its own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_error(op: *const mcpgw_op) -> *const mcpgw_error {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live op, per the contract.
        unsafe { op.as_ref() }.map_or(ptr::null(), |o| {
            o.lock()
                .error
                .as_deref()
                .map_or(ptr::null(), |e| e as *const mcpgw_error)
        })
    })
}

/// The operation's name, e.g. "call_tool". Static; NULL for a NULL op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_name(op: *const mcpgw_op) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live op, per the contract.
        unsafe { op.as_ref() }.map_or(ptr::null(), |o| op_name_c(o.lock().op.name()))
    })
}

fn op_name_c(name: &str) -> *const c_char {
    const NAMES: [&str; 10] = [
        "start_gateway\0",
        "stop_gateway\0",
        "ensure_gateway_binary\0",
        "health\0",
        "list_mcps\0",
        "add_mcp\0",
        "remove_mcp\0",
        "list_tools\0",
        "call_tool\0",
        "set_runtime_headers\0",
    ];
    NAMES
        .iter()
        .find(|n| n.trim_end_matches('\0') == name)
        .map_or(c"operation".as_ptr(), |n| n.as_ptr().cast())
}

/// The result of a succeeded operation as JSON: start_gateway `{"port","pid","token_file",
/// "instance_nonce","state_dir"}`, ensure_gateway_binary `{"uploaded","sha256","path"}`, health
/// `{"status","instance_nonce"}`, list_mcps the array of specs (each with its `status`),
/// list_tools the array of MCP `Tool` objects, call_tool the ToolChunk, the others
/// `{"ok":true}`. On success `*json_out` receives a string to free with `mcpgw_string_free`.
/// `MCPGW_RESULT_INVALID_STATE` unless the operation succeeded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_result_json(
    op: *const mcpgw_op,
    json_out: *mut *mut c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let op = try_ref!(op);
        if json_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        let cell = op.lock();
        let Some(output) = cell.output() else {
            return mcpgw_result::InvalidState;
        };
        // SAFETY: checked non-NULL above.
        unsafe { *json_out = give_string(&output.to_json()) };
        mcpgw_result::Ok
    })
}

/// The ToolChunk of a succeeded call_tool operation. On success `*chunk_out` receives a new
/// chunk to free with `mcpgw_tool_chunk_free`. `MCPGW_RESULT_INVALID_STATE` unless the operation
/// is a succeeded call_tool; `MCPGW_RESULT_PROTOCOL_ERROR` when a data block holds invalid
/// base64 (then `error_out`, when not NULL, receives the details).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_tool_chunk(
    op: *const mcpgw_op,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: NULL or a live op, per the contract.
        let Some(op) = (unsafe { op.as_ref() }) else {
            return report_code(error_out, mcpgw_result::NullParameter);
        };
        if chunk_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        let chunk = match op.lock().output() {
            Some(Output::Chunk(chunk)) => chunk.clone(),
            _ => {
                return report_error(
                    error_out,
                    &Error::new(
                        ErrorKind::InvalidState,
                        "only a call_tool operation that succeeded has a ToolChunk",
                    ),
                );
            }
        };
        match mcpgw_tool_chunk::new(chunk) {
            Ok(c) => {
                // SAFETY: checked non-NULL above.
                unsafe { *chunk_out = Box::into_raw(Box::new(c)) };
                mcpgw_result::Ok
            }
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// Frees an operation, finished or not (an unfinished one simply stops; a body it had staged
/// in the sandbox stays in the staging directory; one a session carries is forgotten by it, and
/// its answer dropped). NULL is ignored. Takes ownership: do not use `op` afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_op_free(op: *mut mcpgw_op) {
    ffi_boundary!((), {
        if !op.is_null() {
            // SAFETY: came from Box::into_raw in this library, per the contract.
            drop(unsafe { Box::from_raw(op) });
        }
    })
}

/// `len` bytes at `ptr`; an empty slice for (NULL, 0); `None` for NULL with a length.
///
/// # Safety
/// A non-NULL `ptr` points to `len` readable bytes that outlive the borrow.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> Option<&'a [u8]> {
    if ptr.is_null() {
        (len == 0).then_some(&[][..])
    } else {
        // SAFETY: the caller's contract.
        Some(unsafe { std::slice::from_raw_parts(ptr, len) })
    }
}
