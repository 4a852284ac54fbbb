//! `mcpgw_error`: a failure with its code, message, HTTP status and detail.

use std::ffi::{CString, c_char};
use std::ptr;

use super::{cstring_lossy, ffi_boundary, mcpgw_result};
use mcpgw::error::Error;

/// A failure: result code, a message a person can act on, and the gateway's HTTP status and
/// `detail` when it answered.
///
/// Immutable: may be moved between threads and read from several at once. Created by the
/// library (through an `error_out` parameter), released with `mcpgw_error_free`.
pub struct mcpgw_error {
    code: mcpgw_result,
    message: CString,
    status: u16,
    detail: Option<CString>,
}

impl mcpgw_error {
    pub(crate) fn from_error(e: &Error) -> mcpgw_error {
        mcpgw_error {
            code: e.kind().into(),
            message: cstring_lossy(e.message()),
            status: e.http_status().unwrap_or(0),
            detail: e.detail().map(cstring_lossy),
        }
    }

    pub(crate) fn from_code(code: mcpgw_result, message: &str) -> mcpgw_error {
        mcpgw_error {
            code,
            message: cstring_lossy(message),
            status: 0,
            detail: None,
        }
    }
}

/// Writes an error object to `*error_out` when `error_out` is not NULL, and returns `code`.
pub(crate) fn report(error_out: *mut *mut mcpgw_error, err: mcpgw_error) -> mcpgw_result {
    let code = err.code;
    if !error_out.is_null() {
        // SAFETY: non-NULL; the caller's contract makes it writable.
        unsafe { *error_out = Box::into_raw(Box::new(err)) };
    }
    code
}

/// Like [`report`] for a crate error.
pub(crate) fn report_error(error_out: *mut *mut mcpgw_error, e: &Error) -> mcpgw_result {
    report(error_out, mcpgw_error::from_error(e))
}

/// Reports a code with its static message (NULL parameters, panics).
pub(crate) fn report_code(error_out: *mut *mut mcpgw_error, code: mcpgw_result) -> mcpgw_result {
    if code == mcpgw_result::Ok {
        return code;
    }
    let msg = code.message();
    report(error_out, mcpgw_error::from_code(code, msg))
}

/// The error's result code; `MCPGW_RESULT_NULL_PARAMETER` for NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_error_code(error: *const mcpgw_error) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or a live error, per the contract.
        match unsafe { error.as_ref() } {
            Some(e) => e.code,
            None => mcpgw_result::NullParameter,
        }
    })
}

/// The error's message, e.g. "call_tool: deadline: tool 'slow' exceeded 1 s". Borrowed: valid
/// until the error is freed. NULL only for a NULL error.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_error_message(error: *const mcpgw_error) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live error, per the contract.
        unsafe { error.as_ref() }.map_or(ptr::null(), |e| e.message.as_ptr())
    })
}

/// The gateway's HTTP status for this failure, or 0 when the gateway did not answer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_error_http_status(error: *const mcpgw_error) -> u16 {
    ffi_boundary!(0, {
        // SAFETY: NULL or a live error, per the contract.
        unsafe { error.as_ref() }.map_or(0, |e| e.status)
    })
}

/// The gateway's `detail` (or plain-text body) for this failure, or NULL when there is none.
/// Borrowed: valid until the error is freed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_error_detail(error: *const mcpgw_error) -> *const c_char {
    ffi_boundary!(ptr::null(), {
        // SAFETY: NULL or a live error, per the contract.
        unsafe { error.as_ref() }
            .and_then(|e| e.detail.as_ref())
            .map_or(ptr::null(), |d| d.as_ptr())
    })
}

/// Frees an error. NULL is ignored. Takes ownership: do not use `error` afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_error_free(error: *mut mcpgw_error) {
    ffi_boundary!((), {
        if !error.is_null() {
            // SAFETY: came from Box::into_raw in `report`, per the contract.
            drop(unsafe { Box::from_raw(error) });
        }
    })
}
