//! `mcpgw_client`, the exec callback, and the operations: one `mcpgw_client_prepare_*` per
//! operation, and `mcpgw_client_run`, the blocking driver of any of them.

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;

use super::config::mcpgw_client_config;
use super::error::{mcpgw_error, report_code, report_error};
use super::op::{bytes, mcpgw_op};
use super::options::{mcpgw_call_options, options_of};
use super::{c_str, ffi_boundary, mcpgw_result, try_ref};
use mcpgw::client::{CallOptions, Client, Config, ExecOutput, ExecResult, Operation, Output};
use mcpgw::command::Command;
use mcpgw::error::Error;
use mcpgw::exec::{Exec, read_host_file};

/// The output a callback reports for one command, filled with `mcpgw_exec_output_set`; it also
/// holds the command's standard input (`mcpgw_exec_output_stdin`). Valid only during the
/// callback that received it; used by that callback's thread only.
#[derive(Default)]
pub struct mcpgw_exec_output {
    pub(crate) output: Option<ExecOutput>,
    pub(crate) error: Option<String>,
    stdin: Option<std::sync::Arc<[u8]>>,
}

/// Runs `command` with `sh -c` inside the sandbox and reports its exit status and output with
/// `mcpgw_exec_output_set(out, ...)`, then returns 0; returns non-zero when the command could not
/// be run at all (optionally after `mcpgw_exec_output_set_error`). Whatever the exit status of
/// the command, it ran: return 0. `timeout_ms` is how long the command may take. A client
/// configured with `mcpgw_client_config_set_exec_stdin` may give the command bytes for its
/// standard input: read them with `mcpgw_exec_output_stdin(out, ...)`.
///
/// Called on the thread that made the blocking call, for as long as that call lasts; calls made
/// concurrently from several threads call it concurrently. It must not call back into the same
/// client.
pub type mcpgw_exec_fn = Option<
    unsafe extern "C" fn(
        userdata: *mut c_void,
        command: *const c_char,
        timeout_ms: u32,
        out: *mut mcpgw_exec_output,
    ) -> i32,
>;

/// Releases the `userdata` of a client, called exactly once: when the client is freed, or when
/// `mcpgw_client_new` fails.
pub type mcpgw_userdata_free_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

/// The host's userdata and its finalizer, which runs when this is dropped.
struct Userdata {
    data: *mut c_void,
    free: mcpgw_userdata_free_fn,
}

impl Drop for Userdata {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the host gave this finalizer for this userdata; called exactly once.
            unsafe { free(self.data) };
        }
    }
}

struct Callback {
    exec: unsafe extern "C" fn(*mut c_void, *const c_char, u32, *mut mcpgw_exec_output) -> i32,
    userdata: Userdata,
}

// SAFETY: the documented contract of mcpgw_exec_fn: the host's callback and userdata may be
// used from any thread that makes a blocking call.
unsafe impl Send for Callback {}
// SAFETY: as above; concurrent blocking calls call the callback concurrently, as documented.
unsafe impl Sync for Callback {}

impl Exec for Callback {
    fn exec(&self, command: &Command) -> ExecResult {
        let text = super::cstring_lossy(&command.text);
        let mut out = mcpgw_exec_output {
            stdin: command.stdin.clone(),
            ..mcpgw_exec_output::default()
        };
        let ms = u32::try_from(command.timeout.as_millis()).unwrap_or(u32::MAX);
        // SAFETY: a valid function pointer from the host; the pointers live across the call.
        let rc = unsafe { (self.exec)(self.userdata.data, text.as_ptr(), ms, &mut out) };
        if rc != 0 {
            return Err(out
                .error
                .unwrap_or_else(|| format!("the exec callback returned {rc}")));
        }
        out.output.ok_or_else(|| {
            "the exec callback returned 0 without calling mcpgw_exec_output_set".to_owned()
        })
    }
}

/// A client of one gateway in one sandbox, with the host's exec callback.
///
/// Thread-safe: its functions may be called from several threads at once (blocking calls then
/// call the exec callback concurrently). Created with `mcpgw_client_new`, released with
/// `mcpgw_client_free`.
pub struct mcpgw_client {
    pub(crate) client: Client,
    callback: Option<Callback>,
    /// The userdata of a client without an exec callback: released with the client, as the
    /// header promises, not before.
    _userdata: Option<Userdata>,
}

/// Creates a client. `config` may be NULL for the defaults; it is copied, not kept. `exec` may
/// be NULL for a client used only in sans-IO form (its ops driven by the host, or over a
/// session). `userdata` is passed to every `exec` call; `userdata_free` (may be NULL) is called
/// with it exactly once: when the client is freed, or at once when this function fails. On
/// success `*client_out` receives the client; free it with `mcpgw_client_free`. `error_out` may
/// be NULL; on failure it receives an error to free with `mcpgw_error_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_new(
    config: *const mcpgw_client_config,
    exec: mcpgw_exec_fn,
    userdata: *mut c_void,
    userdata_free: mcpgw_userdata_free_fn,
    client_out: *mut *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    // Owned from here on: every way out, the panic's included, releases it unless a client
    // took it.
    let userdata = Userdata {
        data: userdata,
        free: userdata_free,
    };
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if client_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        // SAFETY: NULL or a live config, per the contract.
        let config = unsafe { config.as_ref() }.map_or_else(Config::default, |c| c.config.clone());
        match Client::new(config) {
            Ok(client) => {
                let (callback, kept) = match exec {
                    Some(exec) => (Some(Callback { exec, userdata }), None),
                    None => (None, Some(userdata)),
                };
                // SAFETY: checked non-NULL above.
                unsafe {
                    *client_out = Box::into_raw(Box::new(mcpgw_client {
                        client,
                        callback,
                        _userdata: kept,
                    }))
                };
                mcpgw_result::Ok
            }
            Err(e) => report_error(error_out, &e),
        }
    })
}

/// Frees a client and calls its userdata finalizer. NULL is ignored. Operations prepared from
/// it stay usable. Takes ownership: do not use `client` afterwards, and make no call on it
/// concurrently with this one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_free(client: *mut mcpgw_client) {
    ffi_boundary!((), {
        if !client.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_client_new, per the contract.
            drop(unsafe { Box::from_raw(client) });
        }
    })
}

/// The gateway's port, once known (configured, launched, or learned from a session); 0
/// otherwise.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_port(client: *const mcpgw_client) -> u16 {
    ffi_boundary!(0, {
        // SAFETY: NULL or a live client, per the contract.
        unsafe { client.as_ref() }
            .and_then(|c| c.client.port())
            .unwrap_or(0)
    })
}

/// Reports a command's exit status and output from inside an exec callback. The buffers are
/// copied (a buffer may be NULL when its length is 0). A NULL `out` is ignored; a second call
/// replaces the first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_exec_output_set(
    out: *mut mcpgw_exec_output,
    exit_code: i32,
    out_buf: *const u8,
    out_len: usize,
    err_buf: *const u8,
    err_len: usize,
) {
    ffi_boundary!((), {
        // SAFETY: NULL or the live output of the running callback, per the contract.
        let Some(out) = (unsafe { out.as_mut() }) else {
            return;
        };
        // SAFETY: the caller's contract: `len` readable bytes, or NULL with 0.
        let (stdout, stderr) = unsafe { (bytes(out_buf, out_len), bytes(err_buf, err_len)) };
        out.output = Some(ExecOutput {
            exit_code,
            stdout: stdout.unwrap_or_default().to_vec(),
            stderr: stderr.unwrap_or_default().to_vec(),
        });
    })
}

/// Says why a command could not be run, from inside an exec callback that then returns
/// non-zero; the text (copied) goes into the error the call reports. NULL arguments are
/// ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_exec_output_set_error(
    out: *mut mcpgw_exec_output,
    message: *const c_char,
) {
    ffi_boundary!((), {
        // SAFETY: NULL or the live output of the running callback, per the contract.
        let Some(out) = (unsafe { out.as_mut() }) else {
            return;
        };
        // SAFETY: NULL or NUL-terminated, per the contract.
        if let Some(m) = unsafe { c_str(message) } {
            out.error = Some(m.to_string_lossy().into_owned());
        }
    })
}

/// From inside an exec callback: the bytes to pass on the command's standard input; `*buf_out`
/// and `*len_out` receive them (borrowed until the callback returns), or NULL and 0 when the
/// command takes none. Only clients configured with `mcpgw_client_config_set_exec_stdin` make
/// such commands. NULL arguments are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_exec_output_stdin(
    out: *const mcpgw_exec_output,
    buf_out: *mut *const u8,
    len_out: *mut usize,
) {
    ffi_boundary!((), {
        // SAFETY: NULL or the live output of the running callback, per the contract.
        let (Some(out), false, false) = (
            unsafe { out.as_ref() },
            buf_out.is_null(),
            len_out.is_null(),
        ) else {
            return;
        };
        let (buf, len) = out
            .stdin
            .as_ref()
            .map_or((std::ptr::null(), 0), |b| (b.as_ptr(), b.len()));
        // SAFETY: checked non-NULL above.
        unsafe {
            *buf_out = buf;
            *len_out = len;
        }
    })
}

/// The text arguments of a prepare: NULL is `MCPGW_RESULT_NULL_PARAMETER`; text that is not
/// UTF-8 fails the operation, reported like every other problem of an argument.
unsafe fn texts<'a, const N: usize>(
    ptrs: [(*const c_char, &str); N],
) -> Result<Result<[&'a str; N], Error>, mcpgw_result> {
    let mut out = [""; N];
    for (i, (p, what)) in ptrs.into_iter().enumerate() {
        // SAFETY: NULL or NUL-terminated, per the contract; the borrow ends with the call.
        let s: &'a CStr = unsafe { c_str(p) }.ok_or(mcpgw_result::NullParameter)?;
        match s.to_str() {
            Ok(s) => out[i] = s,
            Err(_) => {
                return Ok(Err(Error::invalid_argument(format!(
                    "the {what} is not valid UTF-8"
                ))));
            }
        }
    }
    Ok(Ok(out))
}

/// The body of every `mcpgw_client_prepare_*` function: converts the arguments, builds the
/// operation with `f`, hands it out.
unsafe fn prepare<T: Into<Output> + 'static, const N: usize>(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    args: [(*const c_char, &str); N],
    op_out: *mut *mut mcpgw_op,
    name: &'static str,
    f: impl FnOnce(&Client, &CallOptions, [&str; N]) -> Operation<T>,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let client = try_ref!(client);
        if op_out.is_null() {
            return mcpgw_result::NullParameter;
        }
        // SAFETY: the contract of the calling export, stated in its documentation.
        let args = match unsafe { texts(args) } {
            Ok(a) => a,
            Err(code) => return code,
        };
        // SAFETY: as above.
        let opts = unsafe { options_of(options) };
        let op = match args {
            Ok(args) => f(&client.client, &opts, args).erase(),
            Err(e) => client.client.failed_operation(name, e),
        };
        // SAFETY: checked non-NULL above.
        unsafe { *op_out = Box::into_raw(Box::new(mcpgw_op::new(op))) };
        mcpgw_result::Ok
    })
}

// Every `mcpgw_client_prepare_*` function works alike: `options` may be NULL for the defaults;
// on success `*op_out` receives an operation to drive (`mcpgw_client_run`, the sans-IO
// `mcpgw_op_command` / `mcpgw_op_complete` loop, or `mcpgw_session_submit`) and to free with
// `mcpgw_op_free`. It fails only for NULL pointers; every other problem (an invalid name, JSON
// that is not an object, no gateway known) is reported by the operation, finished at once.

/// Prepares launching the gateway inside the sandbox: one command starts `mcpgw-gateway
/// --daemon` (which mints the token into its 0600 token file there, so the host never sees it)
/// and confirms its instance nonce. Its result JSON: `{"port","pid","token_file",
/// "instance_nonce","state_dir"}`. On failure the error carries the gateway's reason and log
/// tail.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_start_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(client, options, [], op_out, "start_gateway", |c, o, []| {
            c.prepare_start_gateway(o)
        })
    }
}

/// Prepares stopping the gateway this client launched (SIGTERM, then SIGKILL after the timeout;
/// its state directory is removed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_stop_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(client, options, [], op_out, "stop_gateway", |c, o, []| {
            c.prepare_stop_gateway(o)
        })
    }
}

/// Prepares installing the gateway binary read from `host_path` (on the host) at the client's
/// absolute gateway path in the sandbox, unless an identical file is there (SHA-256). Its result
/// JSON: `{"uploaded","sha256","path"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_ensure_gateway_binary(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    host_path: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [(host_path, "host path")],
            op_out,
            "ensure_gateway_binary",
            |c, o, [p]| match read_host_file(Path::new(p)) {
                Ok(bin) => c.prepare_ensure_gateway_binary(o, bin),
                Err(e) => c.failed_operation("ensure_gateway_binary", e),
            },
        )
    }
}

/// Prepares `GET /health`; with a known instance nonce, a different gateway on the port is
/// `MCPGW_RESULT_GATEWAY_NOT_RUNNING`. Its result JSON: `{"status","instance_nonce"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_health(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(client, options, [], op_out, "health", |c, o, []| {
            c.prepare_health(o)
        })
    }
}

/// Prepares `GET /mcps`: the scope's registered specs, each with its `status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_list_mcps(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(client, options, [], op_out, "list_mcps", |c, o, []| {
            c.prepare_list_mcps(o)
        })
    }
}

/// Prepares `POST /mcps` with `spec_json`, an MCP spec (AgentScope's `MCPClient` dump), checked
/// first with the gateway's own validator. Succeeds once the MCP is connected and its tools
/// listed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_add_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    spec_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [(spec_json, "MCP spec")],
            op_out,
            "add_mcp",
            |c, o, [s]| c.prepare_add_mcp(o, s),
        )
    }
}

/// Prepares `DELETE /mcps/{name}`: succeeds once the MCP's session and processes are gone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_remove_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    name: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [(name, "MCP name")],
            op_out,
            "remove_mcp",
            |c, o, [n]| c.prepare_remove_mcp(o, n),
        )
    }
}

/// Prepares `GET /mcps/{mcp}/tools`: the MCP `Tool` objects (camelCase), filtered by the
/// spec's `enable_tools` / `disable_tools`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_list_tools(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [(mcp, "MCP name")],
            op_out,
            "list_tools",
            |c, o, [m]| c.prepare_list_tools(o, m),
        )
    }
}

/// Prepares calling tool `tool` of MCP `mcp` with `arguments_json` (a JSON object; "" or "null"
/// for none). The options' timeout is also the gateway's deadline for the call. The result is a
/// ToolChunk (`mcpgw_op_tool_chunk`, or its JSON).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_call_tool(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [
                (mcp, "MCP name"),
                (tool, "tool name"),
                (arguments_json, "tool arguments"),
            ],
            op_out,
            "call_tool",
            |c, o, [m, t, a]| c.prepare_call_tool(o, m, t, a),
        )
    }
}

/// Prepares replacing the runtime headers of the streamable HTTP MCP `mcp` with
/// `headers_json`, a JSON object of header names to values (`{}` clears them), without
/// reconnecting it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_set_runtime_headers(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    headers_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    // SAFETY: this function's contract.
    unsafe {
        prepare(
            client,
            options,
            [(mcp, "MCP name"), (headers_json, "runtime headers")],
            op_out,
            "set_runtime_headers",
            |c, o, [m, h]| c.prepare_set_runtime_headers(o, m, h),
        )
    }
}

/// Runs `op` to its end through the client's exec callback, on the calling thread: the blocking
/// form of every operation. Returns the operation's result (as `mcpgw_op_result` then does);
/// its output is then read from the op (`mcpgw_op_result_json`, `mcpgw_op_tool_chunk`) and its
/// failure from `mcpgw_op_error`. `MCPGW_RESULT_INVALID_STATE` (and the op unchanged) for a
/// client without an exec callback, or an op that a session carries; an op that has finished
/// returns its result again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_run(
    client: *const mcpgw_client,
    op: *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let client = try_ref!(client);
        let op = try_ref!(op);
        let Some(callback) = &client.callback else {
            return mcpgw_result::InvalidState;
        };
        let mut cell = op.lock();
        if cell.op.is_on_session() {
            return mcpgw_result::InvalidState;
        }
        while let Some(cmd) = cell.op.command() {
            let result = callback.exec(cmd);
            if cell.op.complete(result).is_err() {
                break;
            }
        }
        cell.sync();
        cell.result()
    })
}

#[cfg(test)]
mod tests;
