//! `mcpgw mcp` under hostile input, into a Docker container with server-everything inside:
//! token files it must not write, clients that hold connections without sending a request,
//! messages and headers that are not what MCP allows, and input that is not UTF-8 or too long.
//! Each is refused with a clear answer and the endpoint goes on serving.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    DockerBox, HttpEndpoint, endpoint_argv, mcpgw_bin, request_bytes, start_long_call,
    stdio_client, text,
};
use mcpgw_testkit::{RawResponse, TempDir, raw_request};
use serde_json::{Value, json};

/// `mcpgw mcp --http` on a token file: its exit status and what it said.
fn http_endpoint_with_token_file(token_file: &str, env: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(mcpgw_bin());
    cmd.args(["mcp", "--http", "127.0.0.1:0", "--local"]);
    if !token_file.is_empty() {
        cmd.args(["--token-file", token_file]);
    }
    cmd.args(["--", "true"]).envs(env.iter().copied());
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_token_file_is_never_written_through_a_link_or_into_another_users_directory() {
    // SAFETY: geteuid(2) has no failure.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: making another user's directory needs root");
        return;
    }
    let dir = TempDir::new("token-file");
    let theirs = dir.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o777)).unwrap();
    let target = dir.path("precious");
    std::fs::write(&target, "keep me").unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = theirs.join("token");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (status, said) = http_endpoint_with_token_file(link.to_str().unwrap(), &[]);
    assert_eq!(status, 2, "{said}");
    assert!(said.contains("belongs to another user"), "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o644);
    // A link in a directory of our own is refused too.
    let own_link = dir.path("link");
    std::os::unix::fs::symlink(&target, &own_link).unwrap();
    let (status, said) = http_endpoint_with_token_file(own_link.to_str().unwrap(), &[]);
    assert_eq!(status, 2, "{said}");
    assert!(said.contains("symbolic link"), "{said}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    // The default directory ($XDG_RUNTIME_DIR/mcpgw) squatted by another user.
    let runtime = dir.path("runtime");
    std::fs::create_dir_all(runtime.join("mcpgw")).unwrap();
    std::os::unix::fs::chown(runtime.join("mcpgw"), Some(65534), Some(65534)).unwrap();
    std::fs::set_permissions(
        runtime.join("mcpgw"),
        std::fs::Permissions::from_mode(0o777),
    )
    .unwrap();
    let (status, said) =
        http_endpoint_with_token_file("", &[("XDG_RUNTIME_DIR", runtime.to_str().unwrap())]);
    assert_eq!(status, 2, "{said}");
    assert!(said.contains("belongs to another user"), "{said}");
    assert_eq!(std::fs::read_dir(runtime.join("mcpgw")).unwrap().count(), 0);
}

/// The endpoint's authority (`127.0.0.1:PORT`).
fn authority(endpoint: &HttpEndpoint) -> String {
    endpoint
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string()
}

fn post(authority: &str, headers: &[(&str, &str)], body: &Value) -> RawResponse {
    raw_request(
        authority,
        &request_bytes(
            authority,
            "POST",
            &[headers, &[("Content-Type", "application/json")]].concat(),
            body.to_string().as_bytes(),
        ),
        Duration::from_secs(60),
    )
}

/// The JSON-RPC messages of an SSE body (or the one message of a JSON body).
fn messages(r: &RawResponse) -> Vec<Value> {
    let body = text(r);
    if r.header("content-type") == Some("application/json") {
        return vec![serde_json::from_str(&body).unwrap()];
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

const SSE: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON_ONLY: (&str, &str) = ("Accept", "application/json");

fn init(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "1"}}})
}

#[test]
fn http_refuses_what_mcp_does_not_allow_and_answers_the_rest() {
    let Some(b) = DockerBox::start() else { return };
    let endpoint = HttpEndpoint::start(&b, &[]);
    let at = authority(&endpoint);
    let bearer = format!("Bearer {}", endpoint.token());
    let auth = ("Authorization", bearer.as_str());

    // A client that accepts JSON only gets JSON answers, the initialize's with its session.
    let r = post(&at, &[auth, JSON_ONLY], &init(1));
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let sid = r.header("mcp-session-id").expect("a session").to_string();
    assert!(text(&r).contains("serverInfo"), "{}", text(&r));
    let session = ("Mcp-Session-Id", sid.as_str());
    let echo = |id: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"message": "hi"}}})
    };
    let r = post(&at, &[auth, JSON_ONLY, session], &echo(json!(2)));
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(messages(&r)[0]["result"]["content"][0]["text"], "Echo: hi");

    // Ids that JSON-RPC does not allow are refused at once, never sent on.
    for id in [json!(true), json!({}), json!([])] {
        let started = Instant::now();
        let r = post(&at, &[auth, SSE, session], &echo(id.clone()));
        assert_eq!(r.status, 400, "id {id}: {}", text(&r));
        assert!(
            text(&r).contains("an id must be a number or a string"),
            "{}",
            text(&r)
        );
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    // A malformed notification is refused at once, and nothing about it reaches the next
    // request's stream.
    let bad = json!({"jsonrpc": "2.0", "method": "notifications/initialized", "params": 5});
    let r = post(&at, &[auth, SSE, session], &bad);
    assert_eq!(r.status, 400, "{}", text(&r));
    let r = post(&at, &[auth, SSE, session], &echo(json!("after")));
    let got = messages(&r);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], "after");

    // Protocol versions this endpoint does not speak.
    for version in ["garbage", "2099-01-01", "2026-07-29"] {
        let r = post(
            &at,
            &[auth, SSE, session, ("MCP-Protocol-Version", version)],
            &echo(json!(3)),
        );
        assert_eq!(r.status, 400, "{version}: {}", text(&r));
        assert!(
            text(&r).contains("unsupported MCP-Protocol-Version"),
            "{}",
            text(&r)
        );
    }
    let r = post(
        &at,
        &[auth, SSE, session, ("MCP-Protocol-Version", "2025-11-25")],
        &echo(json!(4)),
    );
    assert_eq!(r.status, 200, "{}", text(&r));

    // An id reused while its first request is in flight: the second is refused, the first
    // still completes.
    let long = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "trigger-long-running-operation", "arguments": {"duration": 2, "steps": 2},
        "_meta": {"progressToken": "dup"}}});
    let mut first = TcpStream::connect(&at).unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    first
        .write_all(&request_bytes(
            &at,
            "POST",
            &[auth, SSE, session, ("Content-Type", "application/json")],
            long.to_string().as_bytes(),
        ))
        .unwrap();
    let mut first = BufReader::new(first);
    let mut line = String::new();
    while !line.contains("notifications/progress") {
        line.clear();
        assert!(
            first.read_line(&mut line).unwrap() > 0,
            "the call's stream ended"
        );
    }
    let r = post(&at, &[auth, SSE, session], &echo(json!(9)));
    let got = messages(&r);
    assert_eq!(got[0]["error"]["code"], -32600, "{got:?}");
    assert!(
        got[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("in flight"),
        "{got:?}"
    );
    let mut rest = String::new();
    first.read_to_string(&mut rest).unwrap();
    assert!(
        rest.contains("\"result\""),
        "the first request's answer: {rest}"
    );

    // Stateless 2026-07-28 with JSON only is answered too.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let modern = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "stateless"}, "_meta": meta}});
    let r = post(
        &at,
        &[
            auth,
            JSON_ONLY,
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ],
        &modern,
    );
    assert_eq!(r.status, 200, "{}", text(&r));
    assert_eq!(
        messages(&r)[0]["result"]["content"][0]["text"],
        "Echo: stateless"
    );
    endpoint.stop();
    b.assert_nothing_left();
}

#[test]
fn http_bounds_what_a_client_that_sends_nothing_can_hold() {
    let Some(b) = DockerBox::start() else { return };
    // Few descriptors, as a crowded machine has.
    let mut argv = vec!["prlimit".to_string(), "--nofile=256".into(), "--".into()];
    let token_file = b.dir.path("token");
    argv.extend(endpoint_argv(
        &b,
        &[
            "--http",
            "127.0.0.1:0",
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    ));
    let stderr_file = b.dir.path("stderr");
    let (mut child, line) = mcpgw_testkit::servers::spawn_first_line(
        Command::new(&argv[0])
            .args(&argv[1..])
            .stderr(std::fs::File::create(&stderr_file).unwrap()),
    );
    let ready: Value = serde_json::from_str(&line).unwrap();
    let at = ready["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let token = std::fs::read_to_string(&token_file).unwrap();
    let bearer = format!("Bearer {}", token.trim());
    // A head dribbled a byte at a time is cut off at the header deadline (10 s).
    let mut slow = TcpStream::connect(&at).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let dribble = b"POST /mcp HTTP/1.1\r\nHost: x\r\n";
    let mut closed = false;
    for byte in dribble.iter().cycle() {
        if slow.write_all(&[*byte]).is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 1];
        slow.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        if let Ok(0) = slow.read(&mut buf) {
            closed = true;
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still open after 30 s"
        );
    }
    assert!(closed);
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    // 400 idle connections against 256 descriptors: a client's request is still answered.
    let idle: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect(&at).ok())
        .collect();
    assert!(idle.len() > 100, "only {} connected", idle.len());
    let r = post(&at, &[("Authorization", &bearer), SSE], &init(1));
    assert_eq!(r.status, 200, "{}", text(&r));
    drop(idle);
    // It said so once or a few times, not once per failed accept.
    let said = std::fs::read_to_string(&stderr_file).unwrap();
    assert!(said.len() < 64 * 1024, "{} bytes on stderr", said.len());
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = mcpgw_testkit::wait_child(&mut child, Duration::from_secs(30));
    assert!(status.success(), "{status}");
    b.assert_nothing_left();
}

#[test]
fn stdio_answers_lines_that_are_not_utf8_or_too_long_and_goes_on() {
    let Some(b) = DockerBox::start() else { return };
    let mut c = stdio_client(&b);
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\",\"x\":\"\xff\xfe\"}\n");
    let answer = c.answer_to(&json!(77));
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], 77, "{answer}");
    // 70 MiB on one line: refused by its id, without holding it.
    let mut long =
        b"{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"tools/call\",\"params\":{\"x\":\""
            .to_vec();
    long.resize(long.len() + (70 << 20), b'a');
    long.extend_from_slice(b"\"}}\n");
    c.send_raw(&long);
    // (What the server announces on its own, its list change after initialized, may come
    // first.)
    let answer = c.answer_to(&json!("big"));
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(answer["id"], "big", "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than"),
        "{answer}"
    );
    let echo = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "still here"}}),
    );
    assert_eq!(
        echo["result"]["content"][0]["text"], "Echo: still here",
        "{echo}"
    );
    assert!(c.finish(Duration::from_secs(30)).success());
    b.wait_nothing_left();
}

/// A container killed under a call: the call fails naming the loss, and so does the next one,
/// at once (the session channel cannot be opened again into a container that is gone). Several
/// kills, since how the channel's end is seen (its exit first, or its output's end first)
/// varies from run to run.
#[test]
fn after_the_container_is_killed_every_call_is_answered_at_once() {
    for round in 0..6 {
        let Some(b) = DockerBox::start() else { return };
        let mut c = stdio_client(&b);
        let id = start_long_call(&mut c);
        b.container.kill();
        let lost = c.wait_for(id);
        assert!(
            lost["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("lost"),
            "{lost}"
        );
        let started = Instant::now();
        let next = c.take_id();
        c.send(
            &json!({"jsonrpc": "2.0", "id": next, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "after"}}}),
        );
        let answer = loop {
            let left = Duration::from_secs(20).saturating_sub(started.elapsed());
            match c.receive(left) {
                Some(m) if m["id"] == next => break Some(m),
                Some(_) => continue,
                None => break None,
            }
        };
        assert!(
            answer.as_ref().is_some_and(|a| a["error"].is_object()),
            "round {round}: the next call got {answer:?} after {:?}",
            started.elapsed()
        );
        assert!(c.finish(Duration::from_secs(30)).success());
    }
}
