//! `mcpgw_client_config`, `mcpgw_client`, the exec callback and the operations.

use std::ffi::{CStr, c_char, c_void};
use std::path::Path;
use std::time::Duration;

use super::chunk::mcpgw_tool_chunk;
use super::error::{mcpgw_error, report_code, report_error};
use super::op::{bytes, mcpgw_op};
use super::{c_str, ffi_boundary, give_string, mcpgw_result, try_mut};
use crate::client::{CallOptions, Client, Config, ExecOutput, Operation, Output};
use crate::command::Transport;
use crate::error::{Error, ErrorKind};
use crate::exec::{Exec, read_host_file, run};

/// How requests reach the gateway inside the sandbox.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum mcpgw_transport {
    /// curl when the sandbox has it (detected once), else the gateway's built-in client.
    Auto = 0,
    /// Always curl.
    Curl = 1,
    /// Always `mcpgw-gateway request`.
    Builtin = 2,
}

/// Settings of a client, built up with the `mcpgw_client_config_set_*` functions and read by
/// `mcpgw_client_new`. Defaults: gateway path `mcpgw-gateway`, host `127.0.0.1`, port 0 (picked
/// at launch), token file `<state dir>/token`, state directory `/tmp/mcpgw-<16 hex>`,
/// transport auto, timeout 60 s, commands of at most 120 KiB.
///
/// May be moved between threads; not for concurrent use. Released with
/// `mcpgw_client_config_free`.
pub struct mcpgw_client_config {
    config: Config,
}

/// The output a callback reports for one command; filled with `mcpgw_exec_output_set`.
/// Valid only during the callback that received it; used by that callback's thread only.
#[derive(Default)]
pub struct mcpgw_exec_output {
    output: Option<ExecOutput>,
    error: Option<String>,
}

/// Runs `command` with `sh -c` inside the sandbox and reports its exit status and output with
/// `mcpgw_exec_output_set(out, ...)`, then returns 0; returns non-zero when the command could not
/// be run at all (optionally after `mcpgw_exec_output_set_error`). Whatever the exit status of
/// the command, it ran: return 0. `timeout_ms` is how long the command may take.
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

/// Releases the `userdata` of a client, called once when the client is freed.
pub type mcpgw_userdata_free_fn = Option<unsafe extern "C" fn(userdata: *mut c_void)>;

struct Callback {
    exec: unsafe extern "C" fn(*mut c_void, *const c_char, u32, *mut mcpgw_exec_output) -> i32,
    userdata: *mut c_void,
    free: mcpgw_userdata_free_fn,
}

// SAFETY: the documented contract of mcpgw_exec_fn: the host's callback and userdata may be
// used from any thread that makes a blocking call.
unsafe impl Send for Callback {}
// SAFETY: as above; concurrent blocking calls call the callback concurrently, as documented.
unsafe impl Sync for Callback {}

impl Drop for Callback {
    fn drop(&mut self) {
        if let Some(free) = self.free {
            // SAFETY: the host gave this finalizer for this userdata; called exactly once.
            unsafe { free(self.userdata) };
        }
    }
}

impl Exec for Callback {
    fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, String> {
        let command = super::cstring_lossy(command);
        let mut out = mcpgw_exec_output::default();
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        // SAFETY: a valid function pointer from the host; the pointers live across the call.
        let rc = unsafe { (self.exec)(self.userdata, command.as_ptr(), ms, &mut out) };
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
    client: Client,
    callback: Option<Callback>,
}

/// Per-call options. A NULL `mcpgw_call_options *` means all defaults. Owned by the caller and
/// read only during the call it is passed to (the strings are copied).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mcpgw_call_options {
    /// The agent part of the MCPs' scope; NULL means "".
    pub agent_id: *const c_char,
    /// The session part of the MCPs' scope; NULL means "".
    pub session_id: *const c_char,
    /// Bounds each command of the call, in milliseconds; 0 means the client's timeout. A tool
    /// call also passes it to the gateway as the call's deadline.
    pub timeout_ms: u32,
}

/// Creates a configuration with the defaults. On success `*config_out` receives it; free it with
/// `mcpgw_client_config_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_new(
    config_out: *mut *mut mcpgw_client_config,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let out = try_mut!(config_out);
        *out = Box::into_raw(Box::new(mcpgw_client_config {
            config: Config::default(),
        }));
        mcpgw_result::Ok
    })
}

/// Frees a configuration. NULL is ignored. Takes ownership: do not use it afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_free(config: *mut mcpgw_client_config) {
    ffi_boundary!((), {
        if !config.is_null() {
            // SAFETY: came from Box::into_raw in mcpgw_client_config_new, per the contract.
            drop(unsafe { Box::from_raw(config) });
        }
    })
}

/// A required UTF-8 string argument.
unsafe fn utf8<'a>(s: *const c_char) -> Result<&'a str, mcpgw_result> {
    // SAFETY: NULL or NUL-terminated, per the contract of every caller.
    let s = unsafe { c_str(s) }.ok_or(mcpgw_result::NullParameter)?;
    s.to_str().map_err(|_| mcpgw_result::InvalidArgument)
}

/// An optional UTF-8 string argument (NULL is `None`).
unsafe fn opt_utf8(s: *const c_char) -> Result<Option<String>, mcpgw_result> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: as for `utf8`.
    unsafe { utf8(s) }.map(|s| Some(s.to_owned()))
}

/// Applies `f` to the configuration behind `config`.
fn set(
    config: *mut mcpgw_client_config,
    f: impl FnOnce(&mut Config) -> Result<(), mcpgw_result>,
) -> mcpgw_result {
    // SAFETY: NULL or a live config not used concurrently, per the contract.
    match unsafe { config.as_mut() } {
        None => mcpgw_result::NullParameter,
        Some(c) => f(&mut c.config).map_or_else(|e| e, |()| mcpgw_result::Ok),
    }
}

/// The gateway binary inside the sandbox (a bare name is looked up on `PATH`; installing it with
/// ensure_gateway_binary needs an absolute path). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_gateway_path(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.gateway_path = unsafe { utf8(path) }?.to_owned();
            Ok(())
        })
    })
}

/// The loopback address the gateway listens on ("127.0.0.1" by default). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_host(
    config: *mut mcpgw_client_config,
    host: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.host = unsafe { utf8(host) }?.to_owned();
            Ok(())
        })
    })
}

/// The gateway's port: 0 (the default) lets start_gateway pick a free one; non-zero, with a
/// token file, attaches to a gateway that already runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_port(
    config: *mut mcpgw_client_config,
    port: u16,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        set(config, |c| {
            c.port = port;
            Ok(())
        })
    })
}

/// The gateway's token file inside the sandbox; NULL restores the default
/// (`<state dir>/token`). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_token_file(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.token_file = unsafe { opt_utf8(path) }?;
            Ok(())
        })
    })
}

/// The per-launch state directory inside the sandbox (token file, log); NULL restores the
/// default (`/tmp/mcpgw-<16 hex of the nonce>`). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_state_dir(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.state_dir = unsafe { opt_utf8(path) }?;
            Ok(())
        })
    })
}

/// The instance nonce of a gateway that already runs, checked by health; NULL for none. Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_instance_nonce(
    config: *mut mcpgw_client_config,
    nonce: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.instance_nonce = unsafe { opt_utf8(nonce) }?;
            Ok(())
        })
    })
}

/// Where large request bodies are staged inside the sandbox; NULL restores the default (the
/// state directory, else /tmp). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_staging_dir(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or NUL-terminated, per the contract.
        set(config, |c| {
            c.staging_dir = unsafe { opt_utf8(path) }?;
            Ok(())
        })
    })
}

/// How requests are sent: one of the `mcpgw_transport` values; `MCPGW_RESULT_INVALID_ARGUMENT`
/// for another value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_transport(
    config: *mut mcpgw_client_config,
    transport: u32,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        set(config, |c| {
            c.transport = match transport {
                t if t == mcpgw_transport::Auto as u32 => None,
                t if t == mcpgw_transport::Curl as u32 => Some(Transport::Curl),
                t if t == mcpgw_transport::Builtin as u32 => Some(Transport::BuiltIn),
                _ => return Err(mcpgw_result::InvalidArgument),
            };
            Ok(())
        })
    })
}

/// The timeout of calls that set none, in milliseconds (not 0; 60000 by default).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_timeout_ms(
    config: *mut mcpgw_client_config,
    timeout_ms: u32,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        set(config, |c| {
            if timeout_ms == 0 {
                return Err(mcpgw_result::InvalidArgument);
            }
            c.timeout = Duration::from_millis(u64::from(timeout_ms));
            Ok(())
        })
    })
}

/// The longest command text handed to the exec callback (at least 4096; by default 120 KiB,
/// under the kernel's 128 KiB for one `sh -c` argument); larger bodies are staged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_max_command_bytes(
    config: *mut mcpgw_client_config,
    max_bytes: usize,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        set(config, |c| {
            if max_bytes < crate::client::MIN_MAX_COMMAND_BYTES {
                return Err(mcpgw_result::InvalidArgument);
            }
            c.max_command_bytes = max_bytes;
            Ok(())
        })
    })
}

/// Creates a client. `config` may be NULL for the defaults; it is copied, not kept. `exec` may
/// be NULL for a client used only through the `mcpgw_client_prepare_*` (sans-IO) functions.
/// `userdata` is passed to every `exec` call; `userdata_free` (may be NULL) is called with it
/// once, when the client is freed — not when this function fails. On success `*client_out`
/// receives the client; free it with `mcpgw_client_free`. `error_out` may be NULL; on failure it
/// receives an error to free with `mcpgw_error_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_new(
    config: *const mcpgw_client_config,
    exec: mcpgw_exec_fn,
    userdata: *mut c_void,
    userdata_free: mcpgw_userdata_free_fn,
    client_out: *mut *mut mcpgw_client,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if client_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        // SAFETY: NULL or a live config, per the contract.
        let config = unsafe { config.as_ref() }.map_or_else(Config::default, |c| c.config.clone());
        match Client::new(config) {
            Ok(client) => {
                let callback = exec.map(|exec| Callback {
                    exec,
                    userdata,
                    free: userdata_free,
                });
                // SAFETY: checked non-NULL above.
                unsafe { *client_out = Box::into_raw(Box::new(mcpgw_client { client, callback })) };
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

/// The gateway's port, once known (configured or launched); 0 otherwise.
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

/// The client and options of a call, converted; strings that are not UTF-8 become a failed
/// operation rather than an early return, so that they are reported like every other problem.
struct Call<'a> {
    client: &'a mcpgw_client,
    opts: Result<CallOptions, Error>,
}

unsafe fn call<'a>(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
) -> Result<Call<'a>, mcpgw_result> {
    // SAFETY: NULL or a live client, per the contract.
    let client = unsafe { client.as_ref() }.ok_or(mcpgw_result::NullParameter)?;
    // SAFETY: NULL or a live options struct, per the contract.
    let opts = match unsafe { options.as_ref() } {
        None => Ok(CallOptions::default()),
        Some(o) => (|| {
            let text = |p: *const c_char, what: &str| -> Result<String, Error> {
                // SAFETY: NULL or NUL-terminated, per the contract.
                match unsafe { c_str(p) } {
                    None => Ok(String::new()),
                    Some(s) => s.to_str().map(str::to_owned).map_err(|_| {
                        Error::invalid_argument(format!("the {what} is not valid UTF-8"))
                    }),
                }
            };
            Ok(CallOptions {
                agent_id: text(o.agent_id, "agent_id")?,
                session_id: text(o.session_id, "session_id")?,
                timeout: (o.timeout_ms != 0)
                    .then(|| Duration::from_millis(u64::from(o.timeout_ms))),
            })
        })(),
    };
    Ok(Call { client, opts })
}

/// Required string arguments: NULL is `MCPGW_RESULT_NULL_PARAMETER`; invalid UTF-8 an error
/// kept for the operation.
unsafe fn args<'a, const N: usize>(
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

/// Builds an operation, or the failed one for bad arguments.
fn build<const N: usize>(
    call: &Call<'_>,
    name: &'static str,
    args: Result<[&str; N], Error>,
    f: impl FnOnce(&Client, &CallOptions, [&str; N]) -> Operation,
) -> Operation {
    let c = &call.client.client;
    match (&call.opts, args) {
        (Ok(opts), Ok(args)) => f(c, opts, args),
        (Err(e), _) => c.failed_operation(name, e.clone()),
        (_, Err(e)) => c.failed_operation(name, e),
    }
}

/// Drives `op` through the client's callback.
fn drive(client: &mcpgw_client, op: Operation) -> Result<Output, Error> {
    match &client.callback {
        Some(cb) => run(op, cb),
        None => Err(Error::new(
            ErrorKind::InvalidState,
            format!(
                "{}: this client has no exec callback; use the mcpgw_client_prepare_* functions",
                op.name()
            ),
        )),
    }
}

/// The body of every `mcpgw_client_prepare_*` function: converts the arguments, builds the
/// operation, hands it out.
unsafe fn prepare<const N: usize>(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    strings: [(*const c_char, &str); N],
    op_out: *mut *mut mcpgw_op,
    name: &'static str,
    f: impl FnOnce(&Client, &CallOptions, [&str; N]) -> Operation,
) -> mcpgw_result {
    // SAFETY: the contract of the calling export, stated in its documentation.
    let call = match unsafe { call(client, options) } {
        Ok(c) => c,
        Err(code) => return code,
    };
    // SAFETY: as above.
    let strings = match unsafe { args(strings) } {
        Ok(a) => a,
        Err(code) => return code,
    };
    if op_out.is_null() {
        return mcpgw_result::NullParameter;
    }
    let op = build(&call, name, strings, f);
    // SAFETY: checked non-NULL above.
    unsafe { *op_out = Box::into_raw(Box::new(mcpgw_op::new(op))) };
    mcpgw_result::Ok
}

/// The body of every blocking call: converts the arguments, runs the operation through the
/// client's callback, hands the output to `deliver` (which writes the out-parameters).
unsafe fn blocking<const N: usize>(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    strings: [(*const c_char, &str); N],
    error_out: *mut *mut mcpgw_error,
    name: &'static str,
    f: impl FnOnce(&Client, &CallOptions, [&str; N]) -> Operation,
    deliver: impl FnOnce(Output) -> Result<(), Error>,
) -> mcpgw_result {
    // SAFETY: the contract of the calling export, stated in its documentation.
    let call = match unsafe { call(client, options) } {
        Ok(c) => c,
        Err(code) => return report_code(error_out, code),
    };
    // SAFETY: as above.
    let strings = match unsafe { args(strings) } {
        Ok(a) => a,
        Err(code) => return report_code(error_out, code),
    };
    let op = build(&call, name, strings, f);
    match drive(call.client, op).and_then(deliver) {
        Ok(()) => mcpgw_result::Ok,
        Err(e) => report_error(error_out, &e),
    }
}

/// Writes `value` to `*out` when `out` is not NULL.
fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: non-NULL; writable by the caller's contract.
        unsafe { *out = value };
    }
}

/// Writes the output's JSON to a required (or, with `optional`, a nullable) `char **`.
fn put_json(out: *mut *mut c_char, output: &Output, optional: bool) -> Result<(), Error> {
    if out.is_null() {
        return if optional {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::InvalidArgument,
                "json_out must not be NULL",
            ))
        };
    }
    put(out, give_string(&output.to_json()));
    Ok(())
}

fn ensure_op(c: &Client, o: &CallOptions, host_path: &str) -> Operation {
    match read_host_file(Path::new(host_path)) {
        Ok(bin) => c.prepare_ensure_gateway_binary(o, bin),
        Err(e) => c.failed_operation("ensure_gateway_binary", e),
    }
}

/// Launches the gateway inside the sandbox, sans-IO form: see `mcpgw_client_start_gateway`.
///
/// Every `mcpgw_client_prepare_*` function works alike: on success `*op_out` receives an
/// operation to drive with `mcpgw_op_command` / `mcpgw_op_complete` and to free with
/// `mcpgw_op_free`; it fails only for NULL pointers (`options` may be NULL), and every other
/// problem is reported by the operation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_start_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(client, options, [], op_out, "start_gateway", |c, o, []| {
                c.prepare_start_gateway(o)
            })
        }
    })
}

/// Launches the gateway inside the sandbox: one command starts `mcpgw-gateway --daemon` (which
/// mints the token into its 0600 token file there, so the host never sees it), then `/health`
/// confirms the instance nonce. On failure the error carries the gateway's reason and log tail.
/// With `info_json_out` (may be NULL) the caller receives `{"port","pid","token_file",
/// "instance_nonce","state_dir"}`, to free with `mcpgw_string_free`.
///
/// Every blocking call works alike: it runs each command through the client's exec callback on
/// the calling thread; `options` may be NULL; out-parameters are written only on success;
/// `error_out` may be NULL, and on failure it receives an error to free with `mcpgw_error_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_start_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    info_json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [],
                error_out,
                "start_gateway",
                |c, o, []| c.prepare_start_gateway(o),
                |out| put_json(info_json_out, &out, true),
            )
        }
    })
}

/// Stops the gateway, sans-IO form: see `mcpgw_client_stop_gateway`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_stop_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(client, options, [], op_out, "stop_gateway", |c, o, []| {
                c.prepare_stop_gateway(o)
            })
        }
    })
}

/// Stops the gateway this client launched: SIGTERM, a wait of up to the timeout for it to close
/// its upstreams and exit, SIGKILL after that (reported as `MCPGW_RESULT_COMMAND_FAILED`); then
/// its state directory is removed. Succeeds when it had already exited.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_stop_gateway(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [],
                error_out,
                "stop_gateway",
                |c, o, []| c.prepare_stop_gateway(o),
                |_| Ok(()),
            )
        }
    })
}

/// Installs the gateway binary, sans-IO form: see `mcpgw_client_ensure_gateway_binary`. The
/// file is read here, once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_ensure_gateway_binary(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    host_path: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(
                client,
                options,
                [(host_path, "host path")],
                op_out,
                "ensure_gateway_binary",
                |c, o, [p]| ensure_op(c, o, p),
            )
        }
    })
}

/// Makes sure the sandbox holds the gateway binary read from `host_path` on the host at the
/// configured (absolute) gateway path: compares SHA-256, and when the file is missing or differs
/// uploads it in pieces, verifies it there and renames it into place. Needs `sha256sum` and
/// `base64` in the sandbox. With `uploaded_out` (may be NULL) the caller learns whether it was
/// uploaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_ensure_gateway_binary(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    host_path: *const c_char,
    uploaded_out: *mut bool,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [(host_path, "host path")],
                error_out,
                "ensure_gateway_binary",
                |c, o, [p]| ensure_op(c, o, p),
                |out| {
                    if let Output::Binary(b) = out {
                        put(uploaded_out, b.uploaded);
                    }
                    Ok(())
                },
            )
        }
    })
}

/// Asks whether the gateway is up, sans-IO form: see `mcpgw_client_health`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_health(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(client, options, [], op_out, "health", |c, o, []| {
                c.prepare_health(o)
            })
        }
    })
}

/// Asks whether the gateway is up (`GET /health`, no token needed), checking its instance nonce
/// when the client knows it. With `json_out` (may be NULL) the caller receives
/// `{"status","instance_nonce"}`, to free with `mcpgw_string_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_health(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [],
                error_out,
                "health",
                |c, o, []| c.prepare_health(o),
                |out| put_json(json_out, &out, true),
            )
        }
    })
}

/// Lists the MCPs of the scope, sans-IO form: see `mcpgw_client_list_mcps`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_list_mcps(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(client, options, [], op_out, "list_mcps", |c, o, []| {
                c.prepare_list_mcps(o)
            })
        }
    })
}

/// Lists the MCPs registered in the scope. On success `*json_out` receives the JSON array of
/// their specs, to free with `mcpgw_string_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_list_mcps(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if json_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [],
                error_out,
                "list_mcps",
                |c, o, []| c.prepare_list_mcps(o),
                |out| put_json(json_out, &out, false),
            )
        }
    })
}

/// Registers an MCP, sans-IO form: see `mcpgw_client_add_mcp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_add_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    spec_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: this function's contract.
        unsafe {
            prepare(
                client,
                options,
                [(spec_json, "MCP spec")],
                op_out,
                "add_mcp",
                |c, o, [spec]| c.prepare_add_mcp(o, spec),
            )
        }
    })
}

/// Registers an MCP in the scope from `spec_json` (AgentScope's MCPClient dump, checked here
/// first); returns once the gateway has connected it and listed its tools.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_add_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    spec_json: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [(spec_json, "MCP spec")],
                error_out,
                "add_mcp",
                |c, o, [spec]| c.prepare_add_mcp(o, spec),
                |_| Ok(()),
            )
        }
    })
}

/// Removes an MCP, sans-IO form: see `mcpgw_client_remove_mcp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_remove_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    name: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
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
    })
}

/// Removes the MCP `name` from the scope; the gateway closes it and its processes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_remove_mcp(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    name: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [(name, "MCP name")],
                error_out,
                "remove_mcp",
                |c, o, [n]| c.prepare_remove_mcp(o, n),
                |_| Ok(()),
            )
        }
    })
}

/// Lists the tools of an MCP, sans-IO form: see `mcpgw_client_list_tools`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_list_tools(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
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
    })
}

/// Lists the tools of the MCP `mcp`. On success `*json_out` receives the JSON array of MCP
/// `Tool` objects (camelCase, as the server sent them), to free with `mcpgw_string_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_list_tools(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    json_out: *mut *mut c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if json_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [(mcp, "MCP name")],
                error_out,
                "list_tools",
                |c, o, [m]| c.prepare_list_tools(o, m),
                |out| put_json(json_out, &out, false),
            )
        }
    })
}

/// Calls a tool, sans-IO form: see `mcpgw_client_call_tool`; the result comes from
/// `mcpgw_op_tool_chunk` or `mcpgw_op_result_json`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_call_tool(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        let strings = [
            (mcp, "MCP name"),
            (tool, "tool name"),
            (arguments_json, "tool arguments"),
        ];
        // SAFETY: this function's contract.
        unsafe {
            prepare(
                client,
                options,
                strings,
                op_out,
                "call_tool",
                |c, o, [m, t, a]| c.prepare_call_tool(o, m, t, a),
            )
        }
    })
}

/// Calls the tool `tool` of the MCP `mcp` with `arguments_json` (a JSON object; "" or "null" for
/// none). The options' timeout is also the call's deadline at the gateway. On success
/// `*chunk_out` receives the result, to free with `mcpgw_tool_chunk_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_call_tool(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    tool: *const c_char,
    arguments_json: *const c_char,
    chunk_out: *mut *mut mcpgw_tool_chunk,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        if chunk_out.is_null() {
            return report_code(error_out, mcpgw_result::NullParameter);
        }
        let strings = [
            (mcp, "MCP name"),
            (tool, "tool name"),
            (arguments_json, "tool arguments"),
        ];
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                strings,
                error_out,
                "call_tool",
                |c, o, [m, t, a]| c.prepare_call_tool(o, m, t, a),
                |out| {
                    let Output::Chunk(chunk) = out else {
                        return Err(Error::protocol("call_tool gave no ToolChunk"));
                    };
                    put(
                        chunk_out,
                        Box::into_raw(Box::new(mcpgw_tool_chunk::new(chunk)?)),
                    );
                    Ok(())
                },
            )
        }
    })
}

/// Replaces runtime headers, sans-IO form: see `mcpgw_client_set_runtime_headers`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_prepare_set_runtime_headers(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    headers_json: *const c_char,
    op_out: *mut *mut mcpgw_op,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
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
    })
}

/// Replaces the runtime headers of the HTTP MCP `mcp` with `headers_json`, a JSON object of
/// header names to values (`{}` clears them), without reconnecting it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_set_runtime_headers(
    client: *const mcpgw_client,
    options: *const mcpgw_call_options,
    mcp: *const c_char,
    headers_json: *const c_char,
    error_out: *mut *mut mcpgw_error,
) -> mcpgw_result {
    ffi_boundary!(report_code(error_out, mcpgw_result::Panic), {
        // SAFETY: this function's contract.
        unsafe {
            blocking(
                client,
                options,
                [(mcp, "MCP name"), (headers_json, "runtime headers")],
                error_out,
                "set_runtime_headers",
                |c, o, [m, h]| c.prepare_set_runtime_headers(o, m, h),
                |_| Ok(()),
            )
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::error::{mcpgw_error_code, mcpgw_error_free, mcpgw_error_message};
    use crate::ffi::op::*;
    use std::ffi::CString;
    use std::ptr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static FREED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn count_free(userdata: *mut c_void) {
        assert_eq!(userdata as usize, 42);
        FREED.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs the command with a real local `sh -c`.
    unsafe extern "C" fn local_sh(
        _userdata: *mut c_void,
        command: *const c_char,
        _timeout_ms: u32,
        out: *mut mcpgw_exec_output,
    ) -> i32 {
        let cmd = unsafe { CStr::from_ptr(command) }.to_str().unwrap();
        let o = std::process::Command::new("sh")
            .arg("-c")
            .arg(cmd)
            .output()
            .unwrap();
        unsafe {
            mcpgw_exec_output_set(
                out,
                o.status.code().unwrap_or(-1),
                o.stdout.as_ptr(),
                o.stdout.len(),
                o.stderr.as_ptr(),
                o.stderr.len(),
            )
        };
        0
    }

    unsafe extern "C" fn broken(
        _userdata: *mut c_void,
        _command: *const c_char,
        _timeout_ms: u32,
        out: *mut mcpgw_exec_output,
    ) -> i32 {
        unsafe { mcpgw_exec_output_set_error(out, c"container gone".as_ptr()) };
        1
    }

    fn attached_config() -> *mut mcpgw_client_config {
        let mut cfg = ptr::null_mut();
        unsafe {
            assert_eq!(mcpgw_client_config_new(&mut cfg), mcpgw_result::Ok);
            assert_eq!(mcpgw_client_config_set_port(cfg, 1), mcpgw_result::Ok);
            assert_eq!(
                mcpgw_client_config_set_token_file(cfg, c"/nonexistent/token".as_ptr()),
                mcpgw_result::Ok
            );
            assert_eq!(
                mcpgw_client_config_set_transport(cfg, mcpgw_transport::Curl as u32),
                mcpgw_result::Ok
            );
            assert_eq!(
                mcpgw_client_config_set_transport(cfg, 9),
                mcpgw_result::InvalidArgument
            );
            assert_eq!(
                mcpgw_client_config_set_timeout_ms(cfg, 0),
                mcpgw_result::InvalidArgument
            );
            assert_eq!(
                mcpgw_client_config_set_gateway_path(cfg, ptr::null()),
                mcpgw_result::NullParameter
            );
        }
        cfg
    }

    #[test]
    fn blocking_calls_report_errors_through_error_out_and_the_finalizer_runs_once() {
        let cfg = attached_config();
        let mut client = ptr::null_mut();
        let before = FREED.load(Ordering::SeqCst);
        unsafe {
            assert_eq!(
                mcpgw_client_new(
                    cfg,
                    Some(broken),
                    42 as *mut c_void,
                    Some(count_free),
                    &mut client,
                    ptr::null_mut()
                ),
                mcpgw_result::Ok
            );
            mcpgw_client_config_free(cfg);
            let mut json: *mut c_char = ptr::null_mut();
            let mut err = ptr::null_mut();
            let rc = mcpgw_client_list_mcps(client, ptr::null(), &mut json, &mut err);
            assert_eq!(rc, mcpgw_result::ExecFailed);
            assert!(json.is_null(), "out-parameters are written only on success");
            assert_eq!(mcpgw_error_code(err), mcpgw_result::ExecFailed);
            let msg = CStr::from_ptr(mcpgw_error_message(err)).to_str().unwrap();
            assert!(msg.contains("container gone"), "{msg}");
            mcpgw_error_free(err);
            // Bad arguments: NULL and non-UTF-8.
            let mut err = ptr::null_mut();
            let rc = mcpgw_client_list_tools(client, ptr::null(), ptr::null(), &mut json, &mut err);
            assert_eq!(rc, mcpgw_result::NullParameter);
            mcpgw_error_free(err);
            let bad = CString::new(vec![0xff, 0xfe]).unwrap();
            let rc = mcpgw_client_list_tools(
                client,
                ptr::null(),
                bad.as_ptr(),
                &mut json,
                ptr::null_mut(),
            );
            assert_eq!(rc, mcpgw_result::InvalidArgument);
            assert_eq!(FREED.load(Ordering::SeqCst), before);
            mcpgw_client_free(client);
            assert_eq!(FREED.load(Ordering::SeqCst), before + 1);
            mcpgw_client_free(ptr::null_mut());
        }
    }

    #[test]
    fn the_sans_io_pair_drives_a_real_shell() {
        let cfg = attached_config();
        let mut client = ptr::null_mut();
        unsafe {
            assert_eq!(
                mcpgw_client_new(
                    cfg,
                    None,
                    ptr::null_mut(),
                    None,
                    &mut client,
                    ptr::null_mut()
                ),
                mcpgw_result::Ok
            );
            mcpgw_client_config_free(cfg);
            // Without a callback, blocking calls say what to use instead.
            let mut err = ptr::null_mut();
            let mut json = ptr::null_mut();
            assert_eq!(
                mcpgw_client_list_mcps(client, ptr::null(), &mut json, &mut err),
                mcpgw_result::InvalidState
            );
            mcpgw_error_free(err);

            let opts = mcpgw_call_options {
                agent_id: c"agent".as_ptr(),
                session_id: ptr::null(),
                timeout_ms: 2000,
            };
            let mut op = ptr::null_mut();
            assert_eq!(
                mcpgw_client_prepare_call_tool(
                    client,
                    &opts,
                    c"m".as_ptr(),
                    c"t".as_ptr(),
                    c"{}".as_ptr(),
                    &mut op
                ),
                mcpgw_result::Ok
            );
            // The client may go first: the operation keeps what it needs.
            mcpgw_client_free(client);
            assert_eq!(mcpgw_op_result(op), mcpgw_result::InvalidState);
            let (mut cmd, mut tmo) = (ptr::null(), 0);
            let mut rounds = 0;
            while mcpgw_op_command(op, &mut cmd, &mut tmo) == mcpgw_result::Ok {
                assert_eq!(tmo, 12_000);
                let mut out = mcpgw_exec_output::default();
                local_sh(ptr::null_mut(), cmd, tmo, &mut out);
                let o = out.output.unwrap();
                assert_eq!(
                    mcpgw_op_complete(
                        op,
                        o.exit_code,
                        o.stdout.as_ptr(),
                        o.stdout.len(),
                        o.stderr.as_ptr(),
                        o.stderr.len()
                    ),
                    mcpgw_result::Ok
                );
                rounds += 1;
            }
            assert_eq!(rounds, 1);
            assert!(mcpgw_op_is_finished(op));
            // The token file does not exist: the shell said so before any request.
            assert_eq!(mcpgw_op_result(op), mcpgw_result::Unauthorized);
            let e = mcpgw_op_error(op);
            let msg = CStr::from_ptr(mcpgw_error_message(e)).to_str().unwrap();
            assert!(msg.starts_with("call_tool: "), "{msg}");
            assert!(msg.contains("/nonexistent/token"), "{msg}");
            assert_eq!(
                mcpgw_op_complete(op, 0, ptr::null(), 0, ptr::null(), 0),
                mcpgw_result::InvalidState
            );
            let mut json = ptr::null_mut();
            assert_eq!(
                mcpgw_op_result_json(op, &mut json),
                mcpgw_result::InvalidState
            );
            assert_eq!(CStr::from_ptr(mcpgw_op_name(op)).to_str(), Ok("call_tool"));
            mcpgw_op_free(op);
        }
    }

    #[test]
    fn invalid_arguments_fail_the_operation_not_the_prepare() {
        let mut client = ptr::null_mut();
        unsafe {
            mcpgw_client_new(
                ptr::null(),
                None,
                ptr::null_mut(),
                None,
                &mut client,
                ptr::null_mut(),
            );
            let mut op = ptr::null_mut();
            assert_eq!(
                mcpgw_client_prepare_remove_mcp(
                    client,
                    ptr::null(),
                    c"no spaces".as_ptr(),
                    &mut op
                ),
                mcpgw_result::Ok
            );
            assert_eq!(mcpgw_op_result(op), mcpgw_result::InvalidArgument);
            let (mut cmd, mut tmo) = (ptr::null(), 0);
            assert_eq!(
                mcpgw_op_command(op, &mut cmd, &mut tmo),
                mcpgw_result::InvalidState
            );
            assert!(cmd.is_null());
            mcpgw_op_free(op);
            assert_eq!(
                mcpgw_client_prepare_remove_mcp(client, ptr::null(), ptr::null(), &mut op),
                mcpgw_result::NullParameter
            );
            mcpgw_client_free(client);
        }
    }
}
