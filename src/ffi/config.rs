//! `mcpgw_client_config`: the settings a client is created with.

use std::ffi::c_char;
use std::time::Duration;

use super::{ffi_boundary, mcpgw_result, optional_text, required_text, try_mut};
use mcpgw::client::Config;
use mcpgw::command::Transport;

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
    pub(crate) config: Config,
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

/// Applies `f` to the configuration behind `config`.
fn set(
    config: *mut mcpgw_client_config,
    f: impl FnOnce(&mut Config) -> Result<(), mcpgw_result>,
) -> mcpgw_result {
    ffi_boundary!(mcpgw_result::Panic, {
        // SAFETY: NULL or a live config not used concurrently, per the contract.
        match unsafe { config.as_mut() } {
            None => mcpgw_result::NullParameter,
            Some(c) => f(&mut c.config).map_or_else(|e| e, |()| mcpgw_result::Ok),
        }
    })
}

/// Sets a text value converted by `text`.
fn set_text<T>(
    config: *mut mcpgw_client_config,
    text: Result<T, mcpgw_result>,
    f: impl FnOnce(&mut Config, T),
) -> mcpgw_result {
    set(config, |c| {
        f(c, text?);
        Ok(())
    })
}

/// The gateway binary inside the sandbox (a bare name is looked up on `PATH`; installing it with
/// ensure_gateway_binary needs an absolute path). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_gateway_path(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { required_text(path) }, |c, v| {
        c.gateway_path = v.to_owned()
    })
}

/// The loopback address the gateway listens on ("127.0.0.1" by default). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_host(
    config: *mut mcpgw_client_config,
    host: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { required_text(host) }, |c, v| {
        c.host = v.to_owned()
    })
}

/// The gateway's port: 0 (the default) lets start_gateway pick a free one; non-zero, with a
/// token file, attaches to a gateway that already runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_port(
    config: *mut mcpgw_client_config,
    port: u16,
) -> mcpgw_result {
    set(config, |c| {
        c.port = port;
        Ok(())
    })
}

/// The gateway's token file inside the sandbox; NULL restores the default
/// (`<state dir>/token`). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_token_file(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { optional_text(path) }, |c, v| {
        c.token_file = v
    })
}

/// The per-launch state directory inside the sandbox (token file, log); NULL restores the
/// default (`/tmp/mcpgw-<16 hex of the nonce>`). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_state_dir(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { optional_text(path) }, |c, v| {
        c.state_dir = v
    })
}

/// The instance nonce of a gateway that already runs, checked by health; NULL for none. Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_instance_nonce(
    config: *mut mcpgw_client_config,
    nonce: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { optional_text(nonce) }, |c, v| {
        c.instance_nonce = v
    })
}

/// Where large request bodies are staged inside the sandbox; NULL restores the default (the
/// state directory, else /tmp). Copied.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_staging_dir(
    config: *mut mcpgw_client_config,
    path: *const c_char,
) -> mcpgw_result {
    // SAFETY: NULL or NUL-terminated, per the contract.
    set_text(config, unsafe { optional_text(path) }, |c, v| {
        c.staging_dir = v
    })
}

/// How requests are sent: one of the `mcpgw_transport` values; `MCPGW_RESULT_INVALID_ARGUMENT`
/// for another value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_transport(
    config: *mut mcpgw_client_config,
    transport: u32,
) -> mcpgw_result {
    set(config, |c| {
        c.transport = match transport {
            t if t == mcpgw_transport::Auto as u32 => None,
            t if t == mcpgw_transport::Curl as u32 => Some(Transport::Curl),
            t if t == mcpgw_transport::Builtin as u32 => Some(Transport::BuiltIn),
            _ => return Err(mcpgw_result::InvalidArgument),
        };
        Ok(())
    })
}

/// The timeout of calls that set none, in milliseconds (not 0; 60000 by default).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_timeout_ms(
    config: *mut mcpgw_client_config,
    timeout_ms: u32,
) -> mcpgw_result {
    set(config, |c| {
        if timeout_ms == 0 {
            return Err(mcpgw_result::InvalidArgument);
        }
        c.timeout = Duration::from_millis(u64::from(timeout_ms));
        Ok(())
    })
}

/// The longest command text handed to the exec callback (at least 4096; by default 120 KiB,
/// under the kernel's 128 KiB for one `sh -c` argument); larger bodies are staged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_max_command_bytes(
    config: *mut mcpgw_client_config,
    max_bytes: usize,
) -> mcpgw_result {
    set(config, |c| {
        if max_bytes < mcpgw::client::MIN_MAX_COMMAND_BYTES {
            return Err(mcpgw_result::InvalidArgument);
        }
        c.max_command_bytes = max_bytes;
        Ok(())
    })
}

/// Whether the exec callback passes a command's standard input (`docker exec -i`,
/// `kubectl exec -i`, a local shell): then it must read `mcpgw_exec_output_stdin` in its
/// callback, or a sans-IO host `mcpgw_op_command_stdin`, and pass those bytes. The gateway
/// binary and bodies too large for one command then travel on stdin in one command instead of
/// staged pieces. False by default.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mcpgw_client_config_set_exec_stdin(
    config: *mut mcpgw_client_config,
    passes_stdin: bool,
) -> mcpgw_result {
    set(config, |c| {
        c.exec_stdin = passes_stdin;
        Ok(())
    })
}
