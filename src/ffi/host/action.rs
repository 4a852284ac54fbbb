//! The accessors of an action: each total (NULL gives its absent value), borrowed views living as
//! long as the action.

use super::*;

/// Frees an action. NULL is ignored. Takes ownership.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_free(action: *mut mcpgw_action) {
    ffi_boundary!((), {
        if !action.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_host_next_action, per the contract.
            drop(unsafe { Box::from_raw(action) });
        }
    })
}

/// `read` of an action, `absent` for NULL: the one body of the accessors below, each total.
///
/// # Safety
/// `action` is NULL or a live action.
unsafe fn field<T: Copy>(
    action: *const mcpgw_action,
    absent: T,
    read: impl FnOnce(&mcpgw_action) -> T,
) -> T {
    ffi_boundary!(absent, {
        // SAFETY: NULL or a live action, per this function's contract.
        unsafe { action.as_ref() }.map_or(absent, read)
    })
}

/// A string an action holds, borrowed; NULL for NULL or when it has none.
///
/// # Safety
/// `action` is NULL or a live action.
unsafe fn borrowed(
    action: *const mcpgw_action,
    pick: impl for<'a> FnOnce(&'a mcpgw_action) -> Option<&'a CString>,
) -> *const c_char {
    // SAFETY: the caller's contract.
    unsafe {
        field(action, ptr::null(), |a| {
            pick(a).map_or(ptr::null(), |s| s.as_ptr())
        })
    }
}

/// The action's kind; NOTICE for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_get_kind(action: *const mcpgw_action) -> mcpgw_action_kind {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, mcpgw_action_kind::Notice, |a| a.kind) }
}

/// The process of a RUN, OPEN, WRITE, CLOSE_INPUT or KILL action (0 otherwise).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_proc(action: *const mcpgw_action) -> u64 {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, 0, |a| a.proc) }
}

/// The operation or connection of a PROGRESS, DONE or CONNECTION_* action (0 otherwise).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_id(action: *const mcpgw_action) -> u64 {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, 0, |a| a.id) }
}

/// How many argv entries a RUN or OPEN action's program has; 0 when it is shell text for the
/// host's exec function (`mcpgw_action_shell`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_argc(action: *const mcpgw_action) -> usize {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, 0, |a| a.argv.len()) }
}

/// Argv entry `i` of a RUN or OPEN action; NULL past the end. Borrowed: lives as long as the
/// action. Run it as is, never through a host shell.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_argv(action: *const mcpgw_action, i: usize) -> *const c_char {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { borrowed(action, |a| a.argv.get(i)) }
}

/// The `sh -c` text of a RUN or OPEN action for the host's own exec function (backend
/// `exec`), or NULL when the program is an argv. Borrowed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_shell(action: *const mcpgw_action) -> *const c_char {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { borrowed(action, |a| a.shell.as_ref()) }
}

/// The working directory to run a RUN or OPEN action's argv in (the local backend's `cwd`),
/// or NULL for the host process's own. Borrowed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_cwd(action: *const mcpgw_action) -> *const c_char {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { borrowed(action, |a| a.cwd.as_ref()) }
}

/// What a RUN action's standard input is.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_stdin_kind(action: *const mcpgw_action) -> mcpgw_stdin_kind {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, mcpgw_stdin_kind::Null, |a| a.stdin) }
}

/// The bytes an action carries: a RUN's stdin (kind BYTES), a WRITE's bytes, a PROGRESS's
/// chunk, a DONE's result or error, a CONNECTION_MESSAGE's message (the last three JSON text).
/// Writes their length to `*len_out` (when not NULL). Not NUL-terminated: copy them to pass
/// them on as a C string (e.g. to `mcpgw_tool_chunk_from_json`). Borrowed; NULL when there are
/// none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_bytes(
    action: *const mcpgw_action,
    len_out: *mut usize,
) -> *const u8 {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live action, per the contract.
        let a = unsafe { action.as_ref() };
        let b = a.map_or(&[][..], |a| a.bytes.as_slice());
        if !len_out.is_null() {
            // SAFETY: non-NULL; writable per the contract.
            unsafe { *len_out = b.len() };
        }
        if b.is_empty() {
            ptr::null()
        } else {
            b.as_ptr()
        }
    })
}

/// A RUN action's time limit in milliseconds (the driver kills it after that time too).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_timeout_ms(action: *const mcpgw_action) -> u32 {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, 0, |a| a.timeout_ms) }
}

/// A DONE action's result code: `MCPGW_RESULT_OK`, or the failure's code. A CONNECTION_CLOSED's:
/// `MCPGW_RESULT_OK` when the host closed it, else the kind of its end (a refused open's by its
/// HTTP status: NOT_FOUND for no such MCP; UPSTREAM_ERROR when the gateway ended it;
/// SESSION_LOST when the channel was lost), the same in every binding.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_result(action: *const mcpgw_action) -> mcpgw_result {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, mcpgw_result::NullParameter, |a| a.result) }
}

/// A NOTICE's text, a CONNECTION_CLOSED's reason, a failed DONE's message; NULL otherwise.
/// Borrowed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_text(action: *const mcpgw_action) -> *const c_char {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { borrowed(action, |a| a.text.as_ref()) }
}

/// A CONNECTION_CLOSED's HTTP status (a refused open: 404 for no such MCP), else 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_action_status(action: *const mcpgw_action) -> u16 {
    // SAFETY: NULL or a live action, per the contract.
    unsafe { field(action, 0, |a| a.status) }
}
