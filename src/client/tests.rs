//! The operations driven by hand, command by command.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::command;

fn attached(transport: Option<Transport>) -> Client {
    Client::new(Config {
        port: 5600,
        token_file: Some("/run/gw/token".into()),
        transport,
        ..Config::default()
    })
    .unwrap()
}

fn ok(stdout: &str) -> ExecResult {
    Ok(ExecOutput {
        exit_code: 0,
        stdout: stdout.as_bytes().to_vec(),
        stderr: vec![],
    })
}

#[test]
fn probe_then_request_and_the_transport_is_remembered() {
    let client = attached(None);
    let opts = CallOptions::default();
    let mut op = client.prepare_list_mcps(&opts);
    assert_eq!(op.command().unwrap().text, command::request::probe());
    op.complete(ok("none\n")).unwrap();
    let cmd = op.command().unwrap().text.clone();
    assert!(cmd.starts_with("'mcpgw-gateway' request GET '/mcps?agent_id=&session_id='"));
    op.complete(ok("[]\nmcpgw-http-status:200\n")).unwrap();
    assert!(op.command().is_none());
    assert_eq!(op.finish().unwrap(), vec![]);
    assert_eq!(client.transport(), Some(Transport::BuiltIn));
    // The next operation skips the probe.
    let op = client.prepare_list_mcps(&opts);
    assert!(op.command().unwrap().text.contains(" request GET "));
}

#[test]
fn invalid_arguments_fail_before_any_command() {
    let client = attached(Some(Transport::Curl));
    let opts = CallOptions::default();
    for op in [
        client.prepare_list_tools(&opts, "bad name").erase(),
        client.prepare_list_tools(&opts, &"n".repeat(129)).erase(),
        client.prepare_call_tool(&opts, "m", "t", "[1]").erase(),
        client.prepare_call_tool(&opts, "m", "t", "{").erase(),
        client.prepare_call_tool(&opts, "m", "", "{}").erase(),
        client.prepare_call_tool(&opts, "m", "a\0b", "{}").erase(),
        client
            .prepare_add_mcp(
                &opts,
                r#"{"name":"x y","mcp_config":{"type":"stdio_mcp","command":"c"}}"#,
            )
            .erase(),
        client
            .prepare_add_mcp(
                &opts,
                r#"{"name":"x","execution_timeout":1e20,"mcp_config":{"type":"stdio_mcp","command":"c"}}"#,
            )
            .erase(),
        client
            .prepare_set_runtime_headers(&opts, "m", r#"{"Host":"x"}"#)
            .erase(),
        client
            .prepare_ensure_gateway_binary(&opts, Arc::from(&b"x"[..]))
            .erase(),
    ] {
        assert!(op.is_finished());
        assert!(op.command().is_none());
        let e = op.finish().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    }
    let unknown = Client::new(Config::default()).unwrap();
    let e = unknown.prepare_list_mcps(&opts).finish().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning);
}

#[test]
fn scope_timeout_and_names_are_encoded() {
    let client = attached(Some(Transport::Curl));
    let opts = CallOptions {
        agent_id: "a b".into(),
        session_id: "s&x=1".into(),
        timeout: Some(Duration::from_millis(1500)),
    };
    let op = client.prepare_call_tool(&opts, "fs", "read file", r#"{"p":"it's"}"#);
    let cmd = op.command().unwrap();
    assert!(
        cmd.text.contains(
            "'http://127.0.0.1:5600/mcps/fs/tools/read%20file?agent_id=a%20b&session_id=s%26x%3D1&timeout=1.5'"
        ),
        "{}",
        cmd.text
    );
    assert!(cmd.text.contains("--max-time 6.5"), "{}", cmd.text);
    assert!(
        cmd.text
            .contains(r#"--data-raw '{"arguments":{"p":"it'\''s"}}'"#)
    );
    assert_eq!(cmd.timeout, Duration::from_millis(11500));
}

#[test]
fn large_bodies_are_staged_in_pieces_then_sent_from_the_file() {
    let client = Client::new(Config {
        port: 1,
        token_file: Some("/t".into()),
        transport: Some(Transport::Curl),
        max_command_bytes: MIN_MAX_COMMAND_BYTES,
        ..Config::default()
    })
    .unwrap();
    let text = "x'y".repeat(5000);
    let args = serde_json::json!({ "text": text }).to_string();
    let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "echo", &args);
    let mut staged = String::new();
    let mut rounds = 0;
    let path = loop {
        let cmd = op.command().unwrap().text.clone();
        assert!(cmd.len() <= MIN_MAX_COMMAND_BYTES, "{}", cmd.len());
        if cmd.contains("curl") {
            assert!(cmd.contains("--data-binary @'/tmp/mcpgw-body-"));
            assert!(cmd.ends_with("; exit $s"));
            break cmd;
        }
        // Run the piece through a real sh to collect exactly what it writes.
        let piece = std::process::Command::new("sh")
            .arg("-c")
            .arg(
                cmd.replace("set -C; umask 077; ", "")
                    .replace(" >> '", " #'")
                    .replace(" > '", " #'"),
            )
            .output()
            .unwrap();
        staged.push_str(std::str::from_utf8(&piece.stdout).unwrap());
        rounds += 1;
        op.complete(ok("")).unwrap();
    };
    assert!(rounds > 3);
    assert_eq!(staged, format!(r#"{{"arguments":{args}}}"#));
    assert!(path.contains("rm -f '/tmp/mcpgw-body-"));
}

#[test]
fn exec_failure_and_out_of_order_completion() {
    let client = attached(Some(Transport::Curl));
    let mut op = client.prepare_health(&CallOptions::default());
    op.complete(Err("docker: no such container".into()))
        .unwrap();
    let e = op.outcome().unwrap().clone().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed);
    assert!(e.message().contains("no such container"));
    assert_eq!(
        op.complete(ok("")).unwrap_err().kind(),
        ErrorKind::InvalidState
    );
}

#[test]
fn start_then_health_then_stop() {
    let client = Client::new(Config::default()).unwrap();
    let opts = CallOptions::default();
    let mut op = client.prepare_start_gateway(&opts);
    let launch = op.command().unwrap().text.clone();
    assert!(
        launch.starts_with("umask 077; mkdir -p '/tmp/mcpgw-"),
        "{launch}"
    );
    assert!(launch.contains("--daemon --host '127.0.0.1' --port 0 --token-file '/tmp/mcpgw-"));
    let nonce = launch
        .split("--instance-nonce '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_owned();
    // A readiness line with another nonce is refused.
    let mut other = client.prepare_start_gateway(&opts);
    other
        .complete(ok(
            "{\"port\":1,\"pid\":2,\"token_file\":\"/t\",\"instance_nonce\":\"x\"}\n",
        ))
        .unwrap();
    assert_eq!(other.finish().unwrap_err().kind(), ErrorKind::StartFailed);
    let ready = format!(
        "{{\"port\":41000,\"pid\":77,\"token_file\":\"/tmp/x/token\",\"instance_nonce\":\"{nonce}\"}}\n"
    );
    // One command launches and confirms.
    op.complete(ok(&ready)).unwrap();
    assert!(op.is_finished());
    // The launched binary's built-in client becomes the transport.
    assert_eq!(client.transport(), Some(Transport::BuiltIn));
    let info = op.finish().unwrap();
    assert_eq!((info.port, info.pid), (41000, 77));
    assert_eq!(info.token_file, "/tmp/x/token");
    assert_eq!(client.gateway().unwrap(), info);
    // A second launch is refused while this one runs.
    let again = client.prepare_start_gateway(&opts).finish().unwrap_err();
    assert_eq!(again.kind(), ErrorKind::InvalidArgument);
    // A health check that meets another gateway says so.
    let mut h = client.prepare_health(&opts);
    h.complete(ok(
        "{\"status\":\"ok\",\"instance_nonce\":\"other\"}\nmcpgw-http-status:200\n",
    ))
    .unwrap();
    assert_eq!(h.finish().unwrap_err().kind(), ErrorKind::GatewayNotRunning);
    let mut stop = client.prepare_stop_gateway(&opts);
    let text = stop.command().unwrap().text.clone();
    assert!(
        text.contains("p=77;") && text.contains(&nonce) && text.contains("rm -rf '/tmp/mcpgw-")
    );
    stop.complete(ok("")).unwrap();
    stop.finish().unwrap();
    assert!(client.gateway().is_none());
}

#[test]
fn failed_launch_carries_the_reason() {
    let client = Client::new(Config {
        transport: Some(Transport::Curl),
        ..Config::default()
    })
    .unwrap();
    let mut op = client.prepare_start_gateway(&CallOptions::default());
    op.complete(Ok(ExecOutput {
        exit_code: 1,
        stdout: vec![],
        stderr: b"port 80 is in use\nlog tail: bind: permission denied".to_vec(),
    }))
    .unwrap();
    let e = op.finish().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::StartFailed);
    assert!(e.message().contains("bind: permission denied"), "{e}");
}

#[test]
fn ensure_binary_skips_an_identical_file_and_uploads_otherwise() {
    let client = Client::new(Config {
        gateway_path: "/opt/mcpgw/mcpgw-gateway".into(),
        max_command_bytes: MIN_MAX_COMMAND_BYTES,
        ..Config::default()
    })
    .unwrap();
    let bin: Arc<[u8]> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let sha = crate::random::hex(&sha2::Digest::finalize(sha2::Digest::chain_update(
        <sha2::Sha256 as sha2::Digest>::new(),
        &bin,
    )));
    let opts = CallOptions::default();
    let mut op = client.prepare_ensure_gateway_binary(&opts, bin.clone());
    op.complete(ok(&format!("{sha}  -\n"))).unwrap();
    assert!(!op.finish().unwrap().uploaded);

    let mut op = client.prepare_ensure_gateway_binary(&opts, bin.clone());
    op.complete(ok("mcpgw-missing\n")).unwrap();
    let mut rounds = 0;
    while let Some(cmd) = op.command() {
        assert!(cmd.text.len() <= MIN_MAX_COMMAND_BYTES);
        if rounds == 0 {
            assert!(cmd.text.starts_with("mkdir -p '/opt/mcpgw' && "));
        }
        rounds += 1;
        op.complete(ok("")).unwrap();
    }
    assert!(rounds >= 8, "{rounds}");
    let st = op.finish().unwrap();
    assert!(st.uploaded);
    assert_eq!(st.sha256, sha);
}
