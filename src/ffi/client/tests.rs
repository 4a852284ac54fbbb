//! The C surface of the client exercised from Rust, through a real local shell.

use super::*;
use crate::error::{mcpgw_error_code, mcpgw_error_free, mcpgw_error_message};
use crate::op::*;
use crate::options::*;
use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A counter of finalizer runs of its own for each test (tests run in parallel).
fn counter() -> &'static AtomicUsize {
    Box::leak(Box::new(AtomicUsize::new(0)))
}

/// The finalizer: counts its runs on the counter its userdata points to.
unsafe extern "C" fn count_free(userdata: *mut c_void) {
    unsafe { &*(userdata as *const AtomicUsize) }.fetch_add(1, Ordering::SeqCst);
}

fn userdata(freed: &'static AtomicUsize) -> *mut c_void {
    freed as *const AtomicUsize as *mut c_void
}

/// Runs the command with a real local `sh -c`, passing its stdin.
unsafe extern "C" fn local_sh(
    _userdata: *mut c_void,
    command: *const c_char,
    _timeout_ms: u32,
    out: *mut mcpgw_exec_output,
) -> i32 {
    use std::io::Write;
    let cmd = unsafe { CStr::from_ptr(command) }.to_str().unwrap();
    let (mut buf, mut len) = (ptr::null(), 0);
    unsafe { mcpgw_exec_output_stdin(out, &mut buf, &mut len) };
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if !buf.is_null() {
        stdin
            .write_all(unsafe { std::slice::from_raw_parts(buf, len) })
            .unwrap();
    }
    drop(stdin);
    let o = child.wait_with_output().unwrap();
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
    use crate::config::*;
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

fn new_client(exec: mcpgw_exec_fn, freed: &'static AtomicUsize) -> *mut mcpgw_client {
    let cfg = attached_config();
    let mut client = ptr::null_mut();
    unsafe {
        assert_eq!(
            mcpgw_client_new(
                cfg,
                exec,
                userdata(freed),
                Some(count_free),
                &mut client,
                ptr::null_mut()
            ),
            mcpgw_result::Ok
        );
        crate::config::mcpgw_client_config_free(cfg);
    }
    client
}

#[test]
fn run_reports_errors_through_the_op_and_the_finalizer_runs_once() {
    let freed = counter();
    let client = new_client(Some(broken), freed);
    unsafe {
        let mut op = ptr::null_mut();
        assert_eq!(
            mcpgw_client_prepare_list_mcps(client, ptr::null(), &mut op),
            mcpgw_result::Ok
        );
        assert_eq!(mcpgw_client_run(client, op), mcpgw_result::ExecFailed);
        let mut json: *mut c_char = ptr::null_mut();
        assert_eq!(
            mcpgw_op_result_json(op, &mut json),
            mcpgw_result::InvalidState
        );
        assert!(json.is_null(), "out-parameters are written only on success");
        let err = mcpgw_op_error(op);
        assert_eq!(mcpgw_error_code(err), mcpgw_result::ExecFailed);
        let msg = CStr::from_ptr(mcpgw_error_message(err)).to_str().unwrap();
        assert!(msg.contains("container gone"), "{msg}");
        // A later, rejected completion does not free the error handed out.
        assert_eq!(
            mcpgw_op_complete(op, 0, ptr::null(), 0, ptr::null(), 0),
            mcpgw_result::InvalidState
        );
        assert_eq!(
            mcpgw_op_fail_exec(op, ptr::null()),
            mcpgw_result::InvalidState
        );
        assert_eq!(mcpgw_op_error(op), err);
        assert_eq!(mcpgw_error_code(err), mcpgw_result::ExecFailed);
        mcpgw_op_free(op);
        // Bad arguments: NULL and non-UTF-8.
        assert_eq!(
            mcpgw_client_prepare_list_tools(client, ptr::null(), ptr::null(), &mut op),
            mcpgw_result::NullParameter
        );
        let bad = CString::new(vec![0xff, 0xfe]).unwrap();
        assert_eq!(
            mcpgw_client_prepare_list_tools(client, ptr::null(), bad.as_ptr(), &mut op),
            mcpgw_result::Ok
        );
        assert_eq!(mcpgw_op_result(op), mcpgw_result::InvalidArgument);
        mcpgw_op_free(op);
        assert_eq!(freed.load(Ordering::SeqCst), 0);
        mcpgw_client_free(client);
        assert_eq!(freed.load(Ordering::SeqCst), 1);
        mcpgw_client_free(ptr::null_mut());
    }
}

#[test]
fn a_failed_new_and_a_client_without_exec_release_the_userdata() {
    let freed = counter();
    unsafe {
        let mut err = ptr::null_mut();
        assert_eq!(
            mcpgw_client_new(
                ptr::null(),
                Some(broken),
                userdata(freed),
                Some(count_free),
                ptr::null_mut(),
                &mut err
            ),
            mcpgw_result::NullParameter
        );
        mcpgw_error_free(err);
        assert_eq!(freed.load(Ordering::SeqCst), 1);
        let mut client = ptr::null_mut();
        assert_eq!(
            mcpgw_client_new(
                ptr::null(),
                None,
                userdata(freed),
                Some(count_free),
                &mut client,
                ptr::null_mut()
            ),
            mcpgw_result::Ok
        );
        // A client without a callback keeps its userdata until it is freed, as the header says.
        assert_eq!(freed.load(Ordering::SeqCst), 1);
        // Without a callback, run says what to use instead and leaves the op alone.
        let mut op = ptr::null_mut();
        mcpgw_client_prepare_list_mcps(client, ptr::null(), &mut op);
        assert_eq!(mcpgw_client_run(client, op), mcpgw_result::InvalidState);
        mcpgw_op_free(op);
        mcpgw_client_free(client);
        assert_eq!(freed.load(Ordering::SeqCst), 2);
    }
}

#[test]
fn the_sans_io_pair_drives_a_real_shell() {
    let client = new_client(None, counter());
    unsafe {
        let mut opts = ptr::null_mut();
        mcpgw_call_options_new(&mut opts);
        mcpgw_call_options_set_agent_id(opts, c"agent".as_ptr());
        mcpgw_call_options_set_timeout_ms(opts, 2000);
        let mut op = ptr::null_mut();
        assert_eq!(
            mcpgw_client_prepare_call_tool(
                client,
                opts,
                c"m".as_ptr(),
                c"t".as_ptr(),
                c"{}".as_ptr(),
                &mut op
            ),
            mcpgw_result::Ok
        );
        mcpgw_call_options_free(opts);
        // The client may go first: the operation keeps what it needs.
        mcpgw_client_free(client);
        assert_eq!(mcpgw_op_result(op), mcpgw_result::InvalidState);
        let (mut cmd, mut tmo) = (ptr::null(), 0);
        let mut rounds = 0;
        while mcpgw_op_command(op, &mut cmd, &mut tmo) == mcpgw_result::Ok {
            assert_eq!(tmo, 12_000);
            let (mut buf, mut len) = (ptr::null(), 1);
            assert_eq!(
                mcpgw_op_command_stdin(op, &mut buf, &mut len),
                mcpgw_result::Ok
            );
            assert!(buf.is_null() && len == 0);
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
        assert_eq!(CStr::from_ptr(mcpgw_op_name(op)).to_str(), Ok("call_tool"));
        mcpgw_op_free(op);
    }
}

#[test]
fn stdin_reaches_the_callback() {
    use crate::config::*;
    let dir = std::env::temp_dir().join(format!("mcpgw-ffi-stdin-{}", std::process::id()));
    let target = dir.join("gw");
    let source = dir.join("source");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 249) as u8).collect();
    std::fs::write(&source, &bytes).unwrap();
    unsafe {
        let mut cfg = ptr::null_mut();
        mcpgw_client_config_new(&mut cfg);
        let path = CString::new(target.to_str().unwrap()).unwrap();
        mcpgw_client_config_set_gateway_path(cfg, path.as_ptr());
        assert_eq!(
            mcpgw_client_config_set_exec_stdin(cfg, true),
            mcpgw_result::Ok
        );
        let mut client = ptr::null_mut();
        mcpgw_client_new(
            cfg,
            Some(local_sh),
            ptr::null_mut(),
            None,
            &mut client,
            ptr::null_mut(),
        );
        mcpgw_client_config_free(cfg);
        let src = CString::new(source.to_str().unwrap()).unwrap();
        let mut op = ptr::null_mut();
        mcpgw_client_prepare_ensure_gateway_binary(client, ptr::null(), src.as_ptr(), &mut op);
        assert_eq!(mcpgw_client_run(client, op), mcpgw_result::Ok);
        let mut json = ptr::null_mut();
        mcpgw_op_result_json(op, &mut json);
        let text = CStr::from_ptr(json).to_str().unwrap().to_owned();
        crate::mcpgw_string_free(json);
        assert!(text.contains("\"uploaded\":true"), "{text}");
        assert_eq!(std::fs::read(&target).unwrap(), bytes);
        mcpgw_op_free(op);
        mcpgw_client_free(client);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
