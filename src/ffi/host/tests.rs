use super::action::*;
use super::*;
use std::ffi::CStr;

fn text(p: *const c_char) -> String {
    assert!(!p.is_null());
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

fn json_of(a: *const mcpgw_action) -> serde_json::Value {
    let mut len = 0;
    let p = unsafe { mcpgw_action_bytes(a, &mut len) };
    serde_json::from_slice(unsafe { std::slice::from_raw_parts(p, len) }).unwrap()
}

#[test]
fn a_host_turns_operations_into_actions_and_reports_into_results() {
    unsafe {
        let mut err = ptr::null_mut();
        let mut host = ptr::null_mut();
        // A bad configuration names its field, and writes no host.
        let bad = c"{\"backend\":{\"kind\":\"docker\",\"container\":\"-x\"}}";
        assert_eq!(
            mcpgw_host_new(bad.as_ptr(), &mut host, &mut err),
            mcpgw_result::InvalidArgument
        );
        assert!(host.is_null());
        assert!(text(super::super::error::mcpgw_error_message(err)).contains("'-'"));
        super::super::error::mcpgw_error_free(err);

        let config = c"{\"backend\":{\"kind\":\"local\",\"cwd\":\"/tmp\"},\"port\":1,\"token_file\":\"/nonexistent/token\",\"transport\":\"built_in\"}";
        assert_eq!(
            mcpgw_host_new(config.as_ptr(), &mut host, ptr::null_mut()),
            mcpgw_result::Ok
        );
        assert_eq!(mcpgw_host_timeout_ms(host), -1);
        let mut id = 0;
        assert_eq!(
            mcpgw_host_submit(
                host,
                c"{\"op\":\"brew\"}".as_ptr(),
                &mut id,
                ptr::null_mut()
            ),
            mcpgw_result::InvalidArgument
        );
        assert_eq!(
            mcpgw_host_submit(
                host,
                c"{\"op\":\"list_mcps\"}".as_ptr(),
                &mut id,
                ptr::null_mut()
            ),
            mcpgw_result::Ok
        );
        let run = mcpgw_host_next_action(host);
        assert_eq!(mcpgw_action_get_kind(run), mcpgw_action_kind::Run);
        assert_eq!(mcpgw_action_argc(run), 3);
        assert_eq!(text(mcpgw_action_argv(run, 0)), "sh");
        assert!(mcpgw_action_argv(run, 3).is_null());
        assert!(mcpgw_action_shell(run).is_null());
        assert_eq!(text(mcpgw_action_cwd(run)), "/tmp");
        assert_eq!(mcpgw_action_stdin_kind(run), mcpgw_stdin_kind::Null);
        assert!(mcpgw_action_timeout_ms(run) > 0);
        assert!(mcpgw_host_timeout_ms(host) > 0);
        let proc = mcpgw_action_proc(run);
        mcpgw_action_free(run);
        assert!(mcpgw_host_next_action(host).is_null());
        // The built-in client could not read the token file.
        let err = b"mcpgw-gateway request: cannot read the token file";
        mcpgw_host_on_exit(host, proc, 121, ptr::null(), 0, err.as_ptr(), err.len());
        let done = mcpgw_host_next_action(host);
        assert_eq!(mcpgw_action_get_kind(done), mcpgw_action_kind::Done);
        assert_eq!(mcpgw_action_id(done), id);
        assert_eq!(mcpgw_action_result(done), mcpgw_result::Unauthorized);
        let e = json_of(done);
        assert_eq!(e["name"], "UNAUTHORIZED");
        assert_eq!(e["code"], 7104);
        assert!(text(mcpgw_action_text(done)).contains("token file"));
        mcpgw_action_free(done);
        let state: serde_json::Value = serde_json::from_str(&{
            let s = mcpgw_host_state_json(host);
            let t = text(s);
            super::super::mcpgw_string_free(s);
            t
        })
        .unwrap();
        assert_eq!(state["session"], "off");
        // A connection needs a session.
        let mut conn = 0;
        let mut err = ptr::null_mut();
        assert_eq!(
            mcpgw_host_open_connection(
                host,
                c"ts".as_ptr(),
                ptr::null(),
                ptr::null(),
                &mut conn,
                &mut err
            ),
            mcpgw_result::InvalidState
        );
        super::super::error::mcpgw_error_free(err);
        // NULLs are refused, not dereferenced.
        assert!(mcpgw_host_next_action(ptr::null_mut()).is_null());
        assert!(!mcpgw_host_cancel(ptr::null_mut(), 1));
        mcpgw_host_on_data(ptr::null_mut(), 1, ptr::null(), 5);
        assert_eq!(
            mcpgw_action_get_kind(ptr::null()),
            mcpgw_action_kind::Notice
        );
        mcpgw_host_free(host);
    }
}
