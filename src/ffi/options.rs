//! `mcpgw_call_options`: the scope and time limit of a call.

use std::ffi::c_char;
use std::time::Duration;

use super::{ffi_boundary, mcpgw_result, required_text, try_mut};
use mcpgw::client::CallOptions;

/// Per-call options: the scope the MCPs live in (`agent_id`, `session_id`, both "" by default)
/// and a time limit (the client's timeout by default). Opaque: built with
/// `mcpgw_call_options_new` and the setters, so new options can be added without breaking
/// programs built against an older header. A NULL `const mcpgw_call_options *` means all
/// defaults. Read (and copied) only during the call it is passed to.
///
/// May be moved between threads; not for concurrent modification (concurrent reads are fine).
/// Released with `mcpgw_call_options_free`.
pub struct mcpgw_call_options {
    pub(crate) options: CallOptions,
}

/// The options of `ptr`, or the defaults for NULL.
///
/// # Safety
/// `ptr` is NULL or a live options object.
pub(crate) unsafe fn options_of(ptr: *const mcpgw_call_options) -> CallOptions {
    // SAFETY: the caller's contract.
    unsafe { ptr.as_ref() }.map_or_else(CallOptions::default, |o| o.options.clone())
}

/// Creates options with the defaults. On success `*options_out` receives them; free them with
/// `mcpgw_call_options_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_call_options_new(
    options_out: *mut *mut mcpgw_call_options,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let out = try_mut!(options_out);
        *out = Box::into_raw(Box::new(mcpgw_call_options {
            options: CallOptions::default(),
        }));
        mcpgw_result::Ok
    })
}

/// Frees options. NULL is ignored. Takes ownership: do not use them afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_call_options_free(options: *mut mcpgw_call_options) {
    ffi_boundary!((), {
        if !options.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_call_options_new, per the contract.
            drop(unsafe { Box::from_raw(options) });
        }
    })
}

fn set(
    options: *mut mcpgw_call_options,
    f: impl FnOnce(&mut CallOptions) -> Result<(), mcpgw_result>,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or live options not used concurrently, per the contract.
        match unsafe { options.as_mut() } {
            None => mcpgw_result::NullParameter,
            Some(o) => f(&mut o.options).map_or_else(|e| e, |()| mcpgw_result::Ok),
        }
    })
}

/// The agent part of the scope (copied; NUL-terminated UTF-8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_call_options_set_agent_id(
    options: *mut mcpgw_call_options,
    agent_id: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    let text = unsafe { required_text(agent_id) };
    set(options, |o| {
        o.agent_id = text?.to_owned();
        Ok(())
    })
}

/// The session part of the scope (copied; NUL-terminated UTF-8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_call_options_set_session_id(
    options: *mut mcpgw_call_options,
    session_id: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    let text = unsafe { required_text(session_id) };
    set(options, |o| {
        o.session_id = text?.to_owned();
        Ok(())
    })
}

/// Bounds each command of the call, in milliseconds; 0 restores the client's timeout. A tool
/// call also passes it to the gateway as the call's deadline.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_call_options_set_timeout_ms(
    options: *mut mcpgw_call_options,
    timeout_ms: u32,
) -> mcpgw_result {
    set(options, |o| {
        o.timeout = (timeout_ms != 0).then(|| Duration::from_millis(u64::from(timeout_ms)));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr;

    #[test]
    fn setters_check_their_arguments() {
        let mut o = ptr::null_mut();
        unsafe {
            assert_eq!(mcpgw_call_options_new(&mut o), mcpgw_result::Ok);
            assert_eq!(
                mcpgw_call_options_set_agent_id(o, c"a b".as_ptr()),
                mcpgw_result::Ok
            );
            assert_eq!(
                mcpgw_call_options_set_session_id(o, ptr::null()),
                mcpgw_result::NullParameter
            );
            let bad = std::ffi::CString::new(vec![0xff]).unwrap();
            assert_eq!(
                mcpgw_call_options_set_session_id(o, bad.as_ptr()),
                mcpgw_result::InvalidArgument
            );
            assert_eq!(mcpgw_call_options_set_timeout_ms(o, 1500), mcpgw_result::Ok);
            let read = options_of(o);
            assert_eq!(read.agent_id, "a b");
            assert_eq!(read.session_id, "");
            assert_eq!(read.timeout, Some(Duration::from_millis(1500)));
            assert_eq!(options_of(ptr::null()), CallOptions::default());
            assert_eq!(
                mcpgw_call_options_set_timeout_ms(ptr::null_mut(), 1),
                mcpgw_result::NullParameter
            );
            mcpgw_call_options_free(o);
            mcpgw_call_options_free(ptr::null_mut());
        }
    }
}
