//! `mcpgw_client`: the host driver run to completion, one operation at a time, over functions
//! the caller supplies (`mcpgw_client_callbacks`): an `exec` that runs one command in the
//! sandbox, and optionally a channel (open, write, read, close) that carries the session.
//!
//! This layer decides nothing: every policy (the backend's argv, session or one-shot, resumes,
//! reopening, timers, what a failure means) is the driver's, exactly as under `mcpgw_host`. It
//! only carries out the driver's actions by calling the callbacks, on the caller's thread,
//! until the operation it submitted is done.
//!
//! ```c
//! mcpgw_client *client;
//! mcpgw_client_new("{\"backend\":{\"kind\":\"exec\",\"passes_stdin\":true}}", &callbacks,
//!                  my_sandbox, &client, &err);
//! mcpgw_client_start_gateway(client, &err);
//! mcpgw_client_add_mcp(client, "{\"name\":\"fs\",...}", &err);
//! mcpgw_tool_chunk *chunk;
//! mcpgw_client_call_tool(client, "fs", "read", "{\"path\":\"a\"}", &chunk, &err);
//! ```

mod callbacks;
mod drive;

pub use callbacks::*;
use drive::*;

use std::cell::{Cell, UnsafeCell};
use std::ffi::{c_char, c_void};

use crate::chunk::mcpgw_tool_chunk;
use crate::error::{mcpgw_error, report, report_code, report_error};
use crate::{ffi_boundary, mcpgw_result, required_text};
use mcpgw::driver::{Host, HostConfig, Op, Submit};
use mcpgw::error::Error;

/// Runs `f` on the client behind `client` unless it is NULL or already running a call (a
/// callback calling back), which are reported.
///
/// # Safety
/// `client` is NULL or a live client, used by this thread alone for the call.
unsafe fn with_client(
    client: *const mcpgw_client,
    error_out: *mut *mut mcpgw_error,
    f: impl FnOnce(&mut Inner) -> mcpgw_result,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: NULL or live, per the contract.
        let Some(client) = (unsafe { client.as_ref() }) else {
            return report_code(error_out, mcpgw_result::NullParameter);
        };
        if client.busy.replace(true) {
            return report(
                error_out,
                mcpgw_error::from_code(
                    mcpgw_result::InvalidState,
                    "the client is running a call: its callbacks may not call it",
                ),
            );
        }
        /// Clears `busy` when the call ends, also by a panic (caught at the boundary).
        struct Done<'a>(&'a Cell<bool>);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.set(false);
            }
        }
        let _done = Done(&client.busy);
        // SAFETY: `busy` makes this the only borrow of the inner state.
        f(unsafe { &mut *client.inner.get() })
    })
}

/// A text argument of an operation, or its failure reported.
unsafe fn arg<'a>(
    p: *const c_char,
    what: &str,
    error_out: *mut *mut mcpgw_error,
) -> Result<&'a str, mcpgw_result> {
    // SAFETY: NULL or NUL-terminated, per the contract.
    unsafe { required_text(p) }.map_err(|code| {
        let message = match code {
            mcpgw_result::NullParameter => format!("{what} is NULL"),
            _ => format!("{what} is not UTF-8"),
        };
        report(error_out, mcpgw_error::from_code(code, &message))
    })
}

/// A JSON argument (`what` names it), or its failure reported.
unsafe fn json_arg(
    p: *const c_char,
    what: &str,
    optional: bool,
    error_out: *mut *mut mcpgw_error,
) -> Result<serde_json::Value, mcpgw_result> {
    if optional && p.is_null() {
        return Ok(serde_json::Value::Null);
    }
    // SAFETY: the contract.
    let text = unsafe { arg(p, what, error_out) }?;
    serde_json::from_str(text).map_err(|e| {
        report_error(
            error_out,
            &Error::invalid_argument(format!("{what} is not JSON: {e}")),
        )
    })
}

/// An out-parameter, or NULL_PARAMETER reported.
fn out<T>(p: *mut T, what: &str, error_out: *mut *mut mcpgw_error) -> Result<*mut T, mcpgw_result> {
    if p.is_null() {
        Err(report(
            error_out,
            mcpgw_error::from_code(mcpgw_result::NullParameter, &format!("{what} is NULL")),
        ))
    } else {
        Ok(p)
    }
}

/// Makes a client of one sandbox's gateway: a host driver configured by `config_json` (as
/// `mcpgw_host_new` takes it: `{"backend":{"kind":"exec","passes_stdin":true},
/// "gateway_path":...}`, or any argv backend, whose commands `exec` then runs on this host),
/// run over `callbacks` (copied; `size` bytes of it are read) with `userdata`. On success
/// `*client_out` receives it, and `callbacks->finalize` is called with `userdata` when it is
/// freed; on failure (INVALID_ARGUMENT: no `exec`, a channel without all of its open, write,
/// read and close, or a configuration the driver refuses) nothing is kept and `finalize` is not
/// called.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_new(
    config_json: *const c_char,
    callbacks: *const mcpgw_client_callbacks,
    userdata: *mut c_void,
    client_out: *mut *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        let made = || -> Result<mcpgw_client, mcpgw_result> {
            let out = out(client_out, "client_out", error_out)?;
            // SAFETY: the contract.
            let config = unsafe { arg(config_json, "config_json", error_out) }?;
            if callbacks.is_null() {
                return Err(report(
                    error_out,
                    mcpgw_error::from_code(mcpgw_result::NullParameter, "callbacks is NULL"),
                ));
            }
            let _ = out;
            // SAFETY: a table of `size` bytes, per the contract.
            let callbacks = unsafe { Callbacks::read(callbacks, userdata) }
                .map_err(|e| report_error(error_out, &e))?;
            let host = HostConfig::from_json(config)
                .map(|mut c| {
                    c.audit |= callbacks.audit.is_some();
                    c
                })
                .and_then(Host::new)
                .map_err(|e| report_error(error_out, &e))?;
            Ok(mcpgw_client {
                busy: Cell::new(false),
                inner: UnsafeCell::new(Inner {
                    cwd: host.config().backend.cwd().map(str::to_owned),
                    host,
                    callbacks,
                    channels: Vec::new(),
                    agent_id: String::new(),
                    session_id: String::new(),
                }),
            })
        };
        match made() {
            Ok(client) => {
                // SAFETY: checked non-NULL in `made`.
                unsafe { *client_out = Box::into_raw(Box::new(client)) };
                mcpgw_result::Ok
            }
            Err(code) => code,
        }
    })
}

/// Frees a client: closes the channels it holds (the callbacks' `channel_close`), then calls
/// `finalize`. The gateway keeps running (stop it first with `mcpgw_client_stop_gateway`).
/// NULL is ignored. Takes ownership; not from one of the client's own callbacks.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_free(client: *mut mcpgw_client) {
    ffi_boundary!((), {
        if !client.is_null() {
            // SAFETY: from mcpgw_client_new, per the contract.
            let client = unsafe { Box::from_raw(client) };
            if client.busy.get() {
                // Freed from its own callback: leaking it is the one safe answer.
                std::mem::forget(client);
                return;
            }
            drop(client);
        }
    })
}

/// Sets the scope (`agent_id`, `session_id`; NULL is "") of the client's later operations;
/// both are "" until set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_set_scope(
    client: *mut mcpgw_client,
    agent_id: *const c_char,
    session_id: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        with_client(client, error_out, |c| {
            let text = |p: *const c_char, what: &str| -> Result<String, mcpgw_result> {
                if p.is_null() {
                    Ok(String::new())
                } else {
                    arg(p, what, error_out).map(str::to_owned)
                }
            };
            match (text(agent_id, "agent_id"), text(session_id, "session_id")) {
                (Ok(a), Ok(s)) => {
                    c.agent_id = a;
                    c.session_id = s;
                    mcpgw_result::Ok
                }
                (Err(code), _) | (_, Err(code)) => code,
            }
        })
    }
}

/// Runs any operation given as JSON (as `mcpgw_host_submit` takes it, its scope and time limit
/// included; the client's scope is not applied) and writes its result as JSON to
/// `*result_json_out` (free it with `mcpgw_string_free`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_run(
    client: *mut mcpgw_client,
    op_json: *const c_char,
    result_json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        with_client(client, error_out, |c| {
            let submit = out(result_json_out, "result_json_out", error_out)
                .and_then(|_| arg(op_json, "op_json", error_out))
                .and_then(|t| Submit::from_json(t).map_err(|e| report_error(error_out, &e)));
            match submit {
                Ok(submit) => c.finish(submit, None, Give::Json(result_json_out), error_out),
                Err(code) => code,
            }
        })
    }
}

/// The body of an `mcpgw_client_*` function: `op` makes the operation from the function's
/// arguments (or gives the code of the one it refused, reported), which runs in the client's
/// scope; its result is given as `give` says.
unsafe fn run_op(
    client: *mut mcpgw_client,
    give: Give,
    error_out: *mut *mut mcpgw_error,
    op: impl FnOnce() -> Result<Op, mcpgw_result>,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        with_client(client, error_out, |c| match op() {
            Ok(op) => c.operate(op, None, give, error_out),
            Err(code) => code,
        })
    }
}

/// The body of an `mcpgw_client_*` function of an operation without arguments or result.
unsafe fn simple(
    client: *mut mcpgw_client,
    op: Op,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe { run_op(client, Give::Nothing, error_out, || Ok(op)) }
}

/// Launches the gateway in the sandbox (it mints its token there).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_start_gateway(
    client: *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe { simple(client, Op::StartGateway {}, error_out) }
}

/// Stops the gateway this client launched (closing the session first).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_stop_gateway(
    client: *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe { simple(client, Op::StopGateway {}, error_out) }
}

/// Opens the session channel (the callbacks' `channel_open`): later operations go over it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_open_session(
    client: *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe { simple(client, Op::OpenSession {}, error_out) }
}

/// Closes the session channel: later operations go one-shot.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_close_session(
    client: *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe { simple(client, Op::CloseSession {}, error_out) }
}

/// Installs the gateway binary read from `binary_path` (a regular file on this host) at the
/// configured gateway path, unless an identical one is there.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_ensure_gateway_binary(
    client: *mut mcpgw_client,
    binary_path: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        run_op(client, Give::Nothing, error_out, || {
            Ok(Op::EnsureGatewayBinary {
                binary_path: arg(binary_path, "binary_path", error_out)?.to_owned(),
            })
        })
    }
}

/// Registers an MCP server in the client's scope: `spec_json` as the gateway's `POST /mcps`
/// takes it (`{"name":"fs","command":"...","args":[...]}` for stdio).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_add_mcp(
    client: *mut mcpgw_client,
    spec_json: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        run_op(client, Give::Nothing, error_out, || {
            Ok(Op::AddMcp {
                spec: json_arg(spec_json, "spec_json", false, error_out)?,
            })
        })
    }
}

/// Removes MCP server `name` from the client's scope.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_remove_mcp(
    client: *mut mcpgw_client,
    name: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        run_op(client, Give::Nothing, error_out, || {
            Ok(Op::RemoveMcp {
                name: arg(name, "name", error_out)?.to_owned(),
            })
        })
    }
}

/// Lists the tools of MCP `mcp`: `*tools_json_out` receives them as a JSON array (free it with
/// `mcpgw_string_free`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_list_tools(
    client: *mut mcpgw_client,
    mcp: *const c_char,
    tools_json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        run_op(client, Give::Json(tools_json_out), error_out, || {
            out(tools_json_out, "tools_json_out", error_out)?;
            Ok(Op::ListTools {
                mcp: arg(mcp, "mcp", error_out)?.to_owned(),
            })
        })
    }
}

/// The body of both tool calls.
unsafe fn call_tool(
    client: *mut mcpgw_client,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    stream: Option<(mcpgw_progress_fn, *mut c_void)>,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        with_client(client, error_out, |c| {
            let op = out(chunk_out, "chunk_out", error_out).and_then(|_| {
                Ok(Op::CallTool {
                    mcp: arg(mcp, "mcp", error_out)?.to_owned(),
                    tool: arg(tool, "tool", error_out)?.to_owned(),
                    arguments: json_arg(arguments_json, "arguments_json", true, error_out)?,
                })
            });
            match op {
                Ok(op) => c.operate(op, stream, Give::Chunk(chunk_out), error_out),
                Err(code) => code,
            }
        })
    }
}

/// Calls tool `tool` of MCP `mcp` with `arguments_json` (a JSON object; NULL: none):
/// `*chunk_out` receives its result (free it with `mcpgw_tool_chunk_free`). A tool's own
/// error is a result too, its state `MCPGW_TOOL_STATE_ERROR`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_call_tool(
    client: *mut mcpgw_client,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        call_tool(
            client,
            mcp,
            tool,
            arguments_json,
            None,
            chunk_out,
            error_out,
        )
    }
}

/// `mcpgw_client_call_tool`, with each progress chunk given to `progress` (may be NULL) with
/// `userdata` as it comes; `progress` returning false cancels the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_call_tool_stream(
    client: *mut mcpgw_client,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    progress: mcpgw_progress_fn,
    userdata: *mut c_void,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // SAFETY: the contract.
    unsafe {
        call_tool(
            client,
            mcp,
            tool,
            arguments_json,
            Some((progress, userdata)),
            chunk_out,
            error_out,
        )
    }
}
