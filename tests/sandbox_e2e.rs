//! The library and the gateway end to end, through real Linux-namespace sandboxes that the host
//! cannot reach over the network: every operation goes through `nsenter ... sh -c`.
//!
//! Skipped, with a message, where namespaces cannot be made (no root, no unshare).

mod common;

use std::collections::HashSet;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use mcpgw::wire::{Block, ToolChunk, ToolState};
use mcpgw::{CallOptions, Client, Config, ErrorKind, GatewayInfo, Transport};
use serde_json::json;

use common::{CmdlineScanner, Nsenter, Sandbox};

fn opts() -> CallOptions {
    CallOptions {
        agent_id: "agent-1".into(),
        session_id: "s'1 $(x)".into(),
        timeout: Some(Duration::from_secs(30)),
    }
}

fn with_timeout(t: Duration) -> CallOptions {
    CallOptions {
        timeout: Some(t),
        ..opts()
    }
}

fn text_of(chunk: &ToolChunk) -> String {
    chunk
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.text.as_str()),
            Block::Data(_) => None,
        })
        .collect()
}

fn stdio_spec(name: &str, command: &str) -> String {
    json!({"name": name, "mcp_config": {"type": "stdio_mcp", "command": command, "args": ["stdio"]}})
        .to_string()
}

/// A client that launches the gateway binary at `gateway_path` (the sandbox's path to it).
fn launching(gateway_path: &str, transport: Option<Transport>) -> Client {
    Client::new(Config {
        gateway_path: gateway_path.into(),
        transport,
        ..Config::default()
    })
    .unwrap()
}

/// Registers the test server, run as `command stdio` in the sandbox, under the name "test".
fn add_testserver(client: &Client, exec: &Nsenter, command: &str) -> Result<(), mcpgw::Error> {
    client.add_mcp(exec, &opts(), &stdio_spec("test", command))
}

/// A full sandbox's client with its gateway started and the test server registered as "test".
fn started_with_testserver(
    exec: &Nsenter,
    gateway: &str,
    testserver: &str,
) -> (Client, GatewayInfo) {
    let client = launching(gateway, None);
    let info = client.start_gateway(exec, &opts()).unwrap();
    add_testserver(&client, exec, testserver).unwrap();
    (client, info)
}

/// The host cannot open the gateway's port: it lives in the sandbox's own network. Should some
/// host process happen to listen on the same number, it is not this gateway.
fn assert_unreachable_from_host(port: u16, nonce: &str) {
    if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
        use std::io::{Read, Write};
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let _ = s.write_all(b"GET /health HTTP/1.0\r\n\r\n");
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        assert!(
            !answer.contains(nonce),
            "the host reached the sandbox's gateway"
        );
    }
}

/// Reads the gateway's token inside the sandbox (the test's own check; the library never does).
fn token(sb: &Sandbox, token_file: &str) -> String {
    let out = sb.sh(&format!("cat {}", mcpgw::quote::quote(token_file).unwrap()));
    let t = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(t.len() >= 32, "token file {token_file} holds {t:?}");
    t
}

/// 10 MiB of JSON-safe text that still exercises quoting.
fn ten_mib_text() -> String {
    let unit = "it's $(not run) `nor this` \"quoted\" \\ é 中 ";
    let mut s = String::with_capacity(10 << 20);
    while s.len() + unit.len() <= 10 << 20 {
        s.push_str(unit);
    }
    while s.len() < 10 << 20 {
        s.push('x');
    }
    s
}

/// Calls the test server's echo tool with `text` and checks that the same text comes back.
fn echo(client: &Client, exec: &Nsenter, text: &str) -> ToolChunk {
    let args = json!({ "text": text }).to_string();
    let chunk = client
        .call_tool(exec, &opts(), "test", "echo", &args)
        .unwrap();
    assert_eq!(text_of(&chunk), text);
    chunk
}

/// Calls `tool` of the test server with a 120 s deadline; the chunk and how long it took.
fn timed_call(client: &Client, exec: &Nsenter, tool: &str, args: &str) -> (ToolChunk, Duration) {
    let t0 = Instant::now();
    let chunk = client
        .call_tool(
            exec,
            &with_timeout(Duration::from_secs(120)),
            "test",
            tool,
            args,
        )
        .unwrap();
    (chunk, t0.elapsed())
}

/// A 10 MiB argument and a 10 MiB result, while no process shows the token.
fn large_round_trips(client: &Client, exec: &Nsenter, tok: &str) {
    let text = ten_mib_text();
    let args = json!({ "text": text }).to_string();
    let scanner = CmdlineScanner::start(tok.to_owned());
    let (echoed, echo_time) = timed_call(client, exec, "echo", &args);
    let (big, big_time) = timed_call(client, exec, "big", &json!({"bytes": 10 << 20}).to_string());
    let (scans, hits) = scanner.finish();
    assert!(
        text_of(&echoed) == text,
        "the 10 MiB argument came back changed"
    );
    let big_text = text_of(&big);
    assert_eq!(big_text.len(), 10 << 20);
    assert!(big_text.starts_with("0123456789abcdef0123"));
    assert!(scans > 0);
    assert!(hits.is_empty(), "the token was in a command line: {hits:?}");
    eprintln!(
        "10 MiB argument: {echo_time:?}; 10 MiB result: {big_time:?}; {scans} /proc scans meanwhile"
    );
}

/// A slow call while /proc is scanned for the token.
fn slow_call_without_token_in_argv(client: &Client, exec: &Nsenter, tok: &str) {
    let scanner = CmdlineScanner::start(tok.to_owned());
    let chunk = client
        .call_tool(
            exec,
            &opts(),
            "test",
            "slow",
            r#"{"seconds": 1.5, "steps": 3}"#,
        )
        .unwrap();
    let (scans, hits) = scanner.finish();
    assert!(text_of(&chunk).contains("done"), "{chunk:?}");
    assert!(scans > 5, "only {scans} scans");
    assert!(hits.is_empty(), "the token was in a command line: {hits:?}");
}

fn assert_no_token_in_commands(exec: &Nsenter, tok: &str) {
    let commands = exec.commands.lock().unwrap();
    assert!(!commands.is_empty());
    for c in commands.iter() {
        assert!(!c.contains(tok), "a command held the token");
    }
}

#[test]
fn every_operation_through_a_sandbox_with_curl() {
    require_sandbox!();
    let (gateway, testserver) = common::binaries();
    let sb = Sandbox::full();
    let exec = sb.exec();
    let client = launching(gateway.to_str().unwrap(), Some(Transport::Curl));
    let e = client.health(&exec, &opts()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");

    let t0 = Instant::now();
    let info = client.start_gateway(&exec, &opts()).unwrap();
    eprintln!("start_gateway took {:?}", t0.elapsed());
    assert_eq!(client.transport(), Some(Transport::Curl));
    // A client attached to a running gateway detects curl once, in auto mode.
    let attached = Client::new(Config {
        port: info.port,
        token_file: Some(info.token_file.clone()),
        ..Config::default()
    })
    .unwrap();
    attached.list_mcps(&exec, &opts()).unwrap();
    assert_eq!(attached.transport(), Some(Transport::Curl));
    assert_unreachable_from_host(info.port, &info.instance_nonce);
    let health = client.health(&exec, &opts()).unwrap();
    assert_eq!(
        health.instance_nonce.as_deref(),
        Some(info.instance_nonce.as_str())
    );
    let tok = token(&sb, &info.token_file);

    add_testserver(&client, &exec, testserver.to_str().unwrap()).unwrap();
    let mcps = client.list_mcps(&exec, &opts()).unwrap();
    assert_eq!(
        mcps.iter()
            .map(|m| m.spec.name.as_str())
            .collect::<Vec<_>>(),
        ["test"]
    );
    // Scopes are isolated: another agent sees nothing.
    let other = CallOptions {
        agent_id: "agent-2".into(),
        ..opts()
    };
    assert!(client.list_mcps(&exec, &other).unwrap().is_empty());

    let tools = client.list_tools(&exec, &opts(), "test").unwrap();
    let names: HashSet<_> = tools.iter().map(|t| t.name.as_str()).collect();
    for t in ["echo", "media", "slow", "big", "headers"] {
        assert!(names.contains(t), "{t} missing from {names:?}");
    }

    let chunk = echo(&client, &exec, "it's $(x) `y` \n é");
    assert!(chunk.is_last);

    let media = client
        .call_tool(&exec, &opts(), "test", "media", "{}")
        .unwrap();
    let data: Vec<_> = media
        .content
        .iter()
        .filter_map(|b| match b {
            Block::Data(d) => Some(d),
            Block::Text(_) => None,
        })
        .collect();
    assert!(data.iter().any(|d| d.source.media_type() == "image/png"));
    let png = data
        .iter()
        .find(|d| d.source.media_type() == "image/png")
        .and_then(|d| d.source.decode())
        .unwrap()
        .unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");

    slow_call_without_token_in_argv(&client, &exec, &tok);
    large_round_trips(&client, &exec, &tok);

    // An HTTP upstream inside the sandbox, for runtime headers.
    let launched = sb.sh(&format!(
        "{} http --port 0 > /tmp/ts.out 2>/tmp/ts.err & \
         for i in $(seq 100); do grep -q listening /tmp/ts.out && break; sleep 0.05; done; cat /tmp/ts.out",
        mcpgw::quote::quote(testserver.to_str().unwrap()).unwrap()
    ));
    let url = String::from_utf8_lossy(&launched.stdout)
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("the HTTP test server printed its URL")
        .to_owned();
    let spec = json!({"name": "web", "is_stateful": true,
                      "mcp_config": {"type": "http_mcp", "url": url}});
    client.add_mcp(&exec, &opts(), &spec.to_string()).unwrap();
    client
        .set_runtime_headers(&exec, &opts(), "web", r#"{"X-Mcpgw-Test": "it's set"}"#)
        .unwrap();
    let headers = client
        .call_tool(&exec, &opts(), "web", "headers", "{}")
        .unwrap();
    let seen = serde_json::to_string(&headers).unwrap();
    assert!(
        seen.contains("x-mcpgw-test") && seen.contains("it's set"),
        "{seen}"
    );

    client.remove_mcp(&exec, &opts(), "web").unwrap();
    client.remove_mcp(&exec, &opts(), "test").unwrap();
    assert!(client.list_mcps(&exec, &opts()).unwrap().is_empty());

    assert_no_token_in_commands(&exec, &tok);
    client.stop_gateway(&exec, &opts()).unwrap();
    let gone = sb.sh(&format!(
        "[ -d {} ] && echo dir; [ -e /proc/{}/status ] && ! grep -q '^State:[[:space:]]*Z' /proc/{}/status && echo alive; true",
        mcpgw::quote::quote(&info.state_dir).unwrap(),
        info.pid,
        info.pid
    ));
    assert_eq!(
        String::from_utf8_lossy(&gone.stdout),
        "",
        "gateway or state dir left"
    );
    // Stopping twice is refused: this client no longer knows a gateway.
    let e = client.stop_gateway(&exec, &opts()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning);
}

#[test]
fn every_operation_in_a_minimal_root_with_only_busybox() {
    require_sandbox!();
    let (gateway, testserver) = common::binaries();
    let sb = Sandbox::minimal(gateway);
    assert!(!sb.root_dir().join("usr/bin/curl").exists());
    // The MCP server to register: copied in as the host's build of it.
    std::fs::copy(
        testserver,
        sb.root_dir().join("usr/local/bin/mcpgw-testserver"),
    )
    .unwrap();
    let exec = sb.exec();
    let client = launching("/usr/local/bin/mcpgw-gateway", None);
    let slow = with_timeout(Duration::from_secs(120));

    // Not there yet: uploaded in pieces, checked, installed; the second time nothing moves.
    let t0 = Instant::now();
    let st = client.ensure_gateway_binary(&exec, &slow, gateway).unwrap();
    let upload = t0.elapsed();
    assert!(st.uploaded);
    let size = std::fs::metadata(gateway).unwrap().len();
    eprintln!(
        "uploaded {} MiB in {upload:?} over {} commands",
        size >> 20,
        exec.commands.lock().unwrap().len()
    );
    assert!(
        !client
            .ensure_gateway_binary(&exec, &slow, gateway)
            .unwrap()
            .uploaded
    );

    let info = client.start_gateway(&exec, &opts()).unwrap();
    // The launching client uses the binary it launched as its client.
    assert_eq!(client.transport(), Some(Transport::BuiltIn));
    // An attached client in auto mode finds no curl here and falls back to the built-in client.
    let attached = Client::new(Config {
        gateway_path: "/usr/local/bin/mcpgw-gateway".into(),
        port: info.port,
        token_file: Some(info.token_file.clone()),
        ..Config::default()
    })
    .unwrap();
    attached.list_mcps(&exec, &opts()).unwrap();
    assert_eq!(
        attached.transport(),
        Some(Transport::BuiltIn),
        "no curl here"
    );
    assert_unreachable_from_host(info.port, &info.instance_nonce);
    let tok = token(&sb, &info.token_file);
    client.health(&exec, &opts()).unwrap();
    add_testserver(&client, &exec, "/usr/local/bin/mcpgw-testserver").unwrap();
    assert_eq!(client.list_mcps(&exec, &opts()).unwrap().len(), 1);
    assert!(
        !client
            .list_tools(&exec, &opts(), "test")
            .unwrap()
            .is_empty()
    );
    let chunk = echo(&client, &exec, "busybox 'only'");
    assert_eq!(chunk.state, ToolState::Running);

    slow_call_without_token_in_argv(&client, &exec, &tok);
    large_round_trips(&client, &exec, &tok);

    let e = client.list_tools(&exec, &opts(), "nope").unwrap_err();
    assert_eq!(
        (e.kind(), e.http_status()),
        (ErrorKind::NotFound, Some(404))
    );
    client.remove_mcp(&exec, &opts(), "test").unwrap();
    assert_no_token_in_commands(&exec, &tok);
    client.stop_gateway(&exec, &opts()).unwrap();
}

#[test]
fn every_failure_surfaces_with_its_own_code() {
    require_sandbox!();
    let (gateway, testserver) = common::binaries();
    let sb = Sandbox::full();
    let exec = sb.exec();
    let gw = gateway.to_str().unwrap().to_owned();
    let (client, info) = started_with_testserver(&exec, &gw, testserver.to_str().unwrap());
    let tok = token(&sb, &info.token_file);
    let attached = |port: u16, token_file: &str, transport: Option<Transport>| {
        Client::new(Config {
            gateway_path: gw.clone(),
            port,
            token_file: Some(token_file.into()),
            transport,
            ..Config::default()
        })
        .unwrap()
    };

    let mut seen = Vec::new();
    let mut expect = |what: &str, kind: ErrorKind, result: Result<(), mcpgw::Error>| {
        let e = result.expect_err(what);
        assert_eq!(e.kind(), kind, "{what}: {e}");
        assert!(
            !e.message().contains(&tok),
            "{what}: the token is in the message"
        );
        eprintln!("{what}: {kind:?}: {e}");
        seen.push(kind);
    };

    // The exec backend cannot reach the sandbox at all.
    {
        let dead = Sandbox::full();
        let dead_exec = dead.exec();
        let c = attached(info.port, &info.token_file, Some(Transport::Curl));
        drop(dead);
        expect(
            "exec failed",
            ErrorKind::ExecFailed,
            c.list_mcps(&dead_exec, &opts()).map(drop),
        );
    }
    // Nothing listens on that port inside the sandbox.
    expect(
        "gateway not running",
        ErrorKind::GatewayNotRunning,
        attached(9, &info.token_file, Some(Transport::Curl))
            .list_mcps(&exec, &opts())
            .map(drop),
    );
    // A token file that holds another token.
    sb.sh("printf 'not-the-token\\n' > /tmp/wrong-token");
    let wrong =
        attached(info.port, "/tmp/wrong-token", Some(Transport::Curl)).list_mcps(&exec, &opts());
    assert_eq!(wrong.as_ref().unwrap_err().http_status(), Some(401));
    expect("unauthorized", ErrorKind::Unauthorized, wrong.map(drop));
    expect(
        "not found",
        ErrorKind::NotFound,
        client
            .call_tool(&exec, &opts(), "test", "no_such_tool", "{}")
            .map(drop),
    );
    let dup = add_testserver(&client, &exec, testserver.to_str().unwrap());
    assert_eq!(dup.as_ref().unwrap_err().http_status(), Some(409));
    expect("conflict", ErrorKind::Conflict, dup);
    let broken = client.add_mcp(&exec, &opts(), &stdio_spec("broken", "/nonexistent/server"));
    assert!(broken.as_ref().unwrap_err().detail().is_some());
    expect("upstream error", ErrorKind::UpstreamError, broken);
    let t0 = Instant::now();
    let late = client.call_tool(
        &exec,
        &with_timeout(Duration::from_secs(1)),
        "test",
        "slow",
        r#"{"seconds": 5}"#,
    );
    assert!(
        t0.elapsed() < Duration::from_secs(4),
        "the deadline was not kept"
    );
    assert_eq!(late.as_ref().unwrap_err().http_status(), Some(504));
    expect("deadline", ErrorKind::Deadline, late.map(drop));
    // Something that is not a gateway answers on a port: busybox's httpd serving a file.
    let httpd = sb.sh(
        "mkdir -p /tmp/www && printf 'surely not json' > /tmp/www/mcps && \
         busybox httpd -p 127.0.0.1:8765 -h /tmp/www && echo started",
    );
    assert_eq!(
        String::from_utf8_lossy(&httpd.stdout).trim(),
        "started",
        "{httpd:?}"
    );
    expect(
        "protocol error",
        ErrorKind::ProtocolError,
        attached(8765, &info.token_file, Some(Transport::Curl))
            .list_mcps(&exec, &opts())
            .map(drop),
    );
    expect(
        "invalid argument",
        ErrorKind::InvalidArgument,
        client
            .list_tools(&exec, &opts(), "no spaces allowed")
            .map(drop),
    );
    expect(
        "start failed",
        ErrorKind::StartFailed,
        launching("/nonexistent/mcpgw-gateway", None)
            .start_gateway(&exec, &opts())
            .map(drop),
    );
    expect(
        "command failed",
        ErrorKind::CommandFailed,
        Client::new(Config {
            gateway_path: "/nonexistent/mcpgw-gateway".into(),
            port: info.port,
            token_file: Some(info.token_file.clone()),
            transport: Some(Transport::BuiltIn),
            ..Config::default()
        })
        .unwrap()
        .list_mcps(&exec, &opts())
        .map(drop),
    );
    expect(
        "host I/O",
        ErrorKind::HostIo,
        client
            .ensure_gateway_binary(&exec, &opts(), std::path::Path::new("/nonexistent/binary"))
            .map(drop),
    );
    // Each failure has a kind of its own (and the C ABI a code of its own per kind: its tests).
    let kinds: HashSet<_> = seen.iter().collect();
    assert_eq!(kinds.len(), seen.len(), "two failures share a kind");

    // The upstream dies mid-call: the gateway reports it, and the next call respawns it.
    let crash = client.call_tool(&exec, &opts(), "test", "crash", r#"{"code": 7}"#);
    assert_eq!(crash.unwrap_err().kind(), ErrorKind::UpstreamError);
    client.stop_gateway(&exec, &opts()).unwrap();
    // After the stop, a client that still holds the old port finds nobody there.
    let e = attached(info.port, &info.token_file, Some(Transport::Curl))
        .health(&exec, &opts())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");
}

#[test]
fn concurrent_calls_on_one_client() {
    require_sandbox!();
    let (gateway, testserver) = common::binaries();
    let sb = Sandbox::full();
    let exec = sb.exec();
    let (client, _) = started_with_testserver(
        &exec,
        gateway.to_str().unwrap(),
        testserver.to_str().unwrap(),
    );
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (client, exec) = (&client, &exec);
                s.spawn(move || {
                    let args = json!({"text": format!("call {i}")}).to_string();
                    let slow = client
                        .call_tool(exec, &opts(), "test", "slow", r#"{"seconds": 1}"#)
                        .unwrap();
                    assert!(text_of(&slow).contains("done"));
                    text_of(
                        &client
                            .call_tool(exec, &opts(), "test", "echo", &args)
                            .unwrap(),
                    )
                })
            })
            .collect();
        for (i, h) in handles.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), format!("call {i}"));
        }
    });
    let took = t0.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "4 parallel 1 s calls took {took:?}"
    );
    client.stop_gateway(&exec, &opts()).unwrap();
}
