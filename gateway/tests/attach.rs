//! `mcpgw-gateway attach` against real processes: the gateway binary (in the foreground or
//! launched as a daemon), the project's test server over stdio, real pipes and a real PTY.
//! Nothing here waits by sleeping: it waits on frames, files and process exits, with deadlines.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mcpgw_testkit::*;
use serde_json::{Value, json};

/// Who relays a session: the gateway it was handed off to, on its one worker or (with two
/// workers) on its sessions' thread; and attach itself. The gateway's arguments, then attach's.
type Relay = (&'static [&'static str], &'static [&'static str]);
const RELAYS: [Relay; 3] = [
    (&[], &[]),
    (&["--threads", "2"], &[]),
    (&[], &["--no-handoff"]),
];

fn cmdline(pid: u32) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()
}

#[test]
fn hello_comes_first_and_concurrent_launches_start_one_gateway() {
    let state = TempDir::new("attach-launch");
    let dir = state.0.display().to_string();
    let starts: Vec<_> = (0..4)
        .map(|_| {
            let dir = dir.clone();
            std::thread::spawn(move || Attach::start(&["--state-dir", &dir, "--launch"]))
        })
        .collect();
    let mut attaches: Vec<Attach> = starts.into_iter().map(|t| t.join().unwrap()).collect();
    let hellos: Vec<Value> = attaches.iter().map(|a| a.hello.clone()).collect();
    let _daemon = Daemon(hellos[0]["pid"].as_u64().unwrap() as u32);
    assert_eq!(
        hellos.iter().filter(|h| h["launched"] == true).count(),
        1,
        "{hellos:?}"
    );
    for h in &hellos {
        assert_eq!(h["v"], mcpgw::wire::frame::VERSION);
        assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(h["pid"], hellos[0]["pid"], "{hellos:?}");
        assert_eq!(h["port"], hellos[0]["port"]);
        assert_eq!(h["instance_nonce"], hellos[0]["instance_nonce"]);
        assert_eq!(h["token_file"], json!(state.path("token")));
        assert_eq!(h["max_frame_bytes"], (64 << 20) + (64 << 10));
    }
    let pid = hellos[0]["pid"].as_u64().unwrap() as u32;
    assert!(process_alive(pid));
    let ready: Value =
        serde_json::from_slice(&std::fs::read(state.path("gateway.json")).unwrap()).unwrap();
    assert_eq!(ready["pid"], pid);
    assert_eq!(ready["port"], hellos[0]["port"]);

    // Each session relays, and ending them leaves the gateway running.
    for (i, a) in attaches.iter_mut().enumerate() {
        let r = a.call(i as u64, "GET", "/mcps", None);
        assert_eq!(ok_res(&r), &json!([]));
        assert!(a.finish().success(), "{}", a.stderr());
    }
    assert!(process_alive(pid));

    let mut again = Attach::start(&["--state-dir", &dir]);
    assert_eq!(again.hello["launched"], false);
    assert_eq!(again.hello["pid"], pid);
    assert!(again.finish().success());
    drop(_daemon);
    assert!(
        !state.path("gateway.json").exists(),
        "the ready file outlived its gateway"
    );
}

#[test]
fn a_gateway_of_another_instance_or_none_at_all_is_refused() {
    let gw = start_gateway(&["--instance-nonce", "right"]);
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token").display().to_string();

    let mut a = spawn_attach(&[
        "--port",
        &port,
        "--token-file",
        &token_file,
        "--instance-nonce",
        "wrong",
    ]);
    let status = a.exit();
    assert_eq!(status.code(), Some(7), "{}", a.stderr());
    assert!(a.stderr().contains("another instance"), "{}", a.stderr());
    assert!(a.stderr().contains("\"right\""), "{}", a.stderr());
    assert_eq!(a.stdout(), "", "nothing is relayed to another instance");

    let mut a = spawn_attach(&["--port", &free_port().to_string()]);
    assert_eq!(a.exit().code(), Some(7));
    assert!(a.stderr().contains("no gateway answers"), "{}", a.stderr());

    let state = TempDir::new("attach-empty");
    let mut a = spawn_attach(&["--state-dir", &state.0.display().to_string()]);
    assert_eq!(a.exit().code(), Some(7));
    assert!(a.stderr().contains("--launch"), "{}", a.stderr());

    // The right nonce attaches; the gateway's pid is found from its port.
    let mut a = Attach::start(&[
        "--port",
        &port,
        "--token-file",
        &token_file,
        "--instance-nonce",
        "right",
    ]);
    assert_eq!(a.hello["instance_nonce"], "right");
    assert_eq!(a.hello["pid"], gw.child.id());
    assert_eq!(a.hello["launched"], false);
    assert!(a.finish().success());
}

#[test]
fn launch_replaces_a_gateway_of_another_instance() {
    let state = TempDir::new("attach-relaunch");
    let dir = state.0.display().to_string();
    let mut first = Attach::start(&["--state-dir", &dir, "--launch", "--instance-nonce", "a"]);
    let first_pid = first.hello["pid"].as_u64().unwrap() as u32;
    let _first = Daemon(first_pid);
    assert_eq!(first.hello["launched"], true);
    assert!(first.finish().success());

    let mut refused = spawn_attach(&["--state-dir", &dir, "--instance-nonce", "b"]);
    assert_eq!(refused.exit().code(), Some(7));
    assert!(
        refused.stderr().contains("another instance"),
        "{}",
        refused.stderr()
    );

    let mut second = Attach::start(&["--state-dir", &dir, "--launch", "--instance-nonce", "b"]);
    let _second = Daemon(second.hello["pid"].as_u64().unwrap() as u32);
    assert_eq!(second.hello["launched"], true);
    assert_eq!(second.hello["instance_nonce"], "b");
    assert_ne!(second.hello["pid"], first_pid);
    assert_ne!(second.hello["port"], first.hello["port"]);
    assert!(second.finish().success());
}

#[test]
fn requests_are_relayed_concurrently_and_answered_by_id() {
    for relay in RELAYS {
        requests_are_relayed_concurrently_and_answered_by_id_with(relay);
    }
}

fn requests_are_relayed_concurrently_and_answered_by_id_with((gateway, relay): Relay) {
    let (_gw, mut a) = gateway_of_and_attach(gateway, relay);
    let tools = a.call(2, "GET", "/mcps/ts/tools?agent_id=&session_id=", None);
    let names = tool_names(ok_res(&tools));
    assert!(
        names.contains(&"echo") && names.contains(&"slow"),
        "{names:?}"
    );
    let r = a.call(
        3,
        "POST",
        "/mcps/ts/tools/echo",
        Some(json!({"arguments": {"text": "hi\nthere \u{e9}"}})),
    );
    assert_eq!(chunk_text(ok_res(&r)), "hi\nthere \u{e9}");

    // 64 at once, in one write: every answer carries its own request's text.
    a.send(&echo_requests(100..164));
    let mut answered = HashMap::new();
    while answered.len() < 64 {
        let f = a.next();
        assert_eq!(f.t(), "res", "{:?}", f.value);
        let id = f.id().unwrap();
        assert_eq!(chunk_text(ok_res(&f.value)), format!("call {id}"));
        assert!(answered.insert(id, f.at).is_none(), "{id} answered twice");
    }
    assert!((100..164).all(|id| answered.contains_key(&id)));

    // Answers come as calls finish: a quick call overtakes a slow one sent before it.
    a.req(
        8,
        "POST",
        "/mcps/ts/tools/slow",
        Some(slow_args(0.5, 0, None)),
        false,
    );
    a.req(
        9,
        "POST",
        "/mcps/ts/tools/echo",
        Some(json!({"arguments": {"text": "quick"}})),
        false,
    );
    let first = a.next();
    assert_eq!(first.id(), Some(9), "{:?}", first.value);
    let slow = a.next();
    assert_eq!(slow.id(), Some(8), "{:?}", slow.value);
    assert_eq!(chunk_text(ok_res(&slow.value)), "done after 0 steps");

    // Bodies that are not JSON, and none.
    let r = a.call(4, "DELETE", "/mcps/nope", None);
    assert_eq!(r["status"], 404);
    assert!(r["body"]["detail"].is_string(), "{r}");
    let r = a.call(5, "GET", "/metrics", None);
    assert_eq!(r["status"], 200);
    assert!(r["text"].as_str().unwrap().contains("mcpgw_"), "{r}");
    let r = a.call(
        6,
        "PUT",
        "/mcps/ts/runtime-headers",
        Some(json!({"headers": {}})),
    );
    assert_eq!(r["status"], 400, "a stdio MCP has no runtime headers: {r}");

    // A large argument and result go through unchanged.
    let text = "0123456789abcdef".repeat(1 << 16);
    let r = a.call(
        7,
        "POST",
        "/mcps/ts/tools/echo",
        Some(json!({"arguments": {"text": text}})),
    );
    assert_eq!(chunk_text(ok_res(&r)), text);
    assert!(a.finish().success(), "{}", a.stderr());
    let handed_off = a.stderr().contains("handed off");
    assert_eq!(handed_off, relay.is_empty(), "{}", a.stderr());
}

#[test]
fn without_the_token_the_gateway_says_so_in_a_text_body() {
    let gw = start_gateway(&[]);
    let mut a = Attach::start(&["--port", &gw.port.to_string()]);
    assert_eq!(a.hello["token_file"], Value::Null);
    let r = a.call(1, "GET", "/mcps", None);
    assert_eq!(r["status"], 401);
    assert_eq!(r["text"], "invalid gateway token");
    assert!(a.finish().success());
}

#[test]
fn a_streamed_call_relays_each_chunk_as_it_happens() {
    for relay in RELAYS {
        a_streamed_call_relays_each_chunk_as_it_happens_with(relay);
    }
}

fn a_streamed_call_relays_each_chunk_as_it_happens_with((gateway, relay): Relay) {
    let (_gw, mut a) = gateway_of_and_attach(gateway, relay);
    let sent = Instant::now();
    a.req(
        2,
        "POST",
        "/mcps/ts/tools/slow",
        Some(slow_args(1.0, 4, None)),
        true,
    );
    let frames = a.answer(2);
    let (last, chunks) = frames.split_last().unwrap();
    assert_eq!(last.value, json!({"t": "res", "id": 2, "status": 200}));
    assert_eq!(chunks.len(), 5, "{frames:?}");
    for (i, f) in chunks.iter().enumerate() {
        assert_eq!(f.t(), "chunk");
        let chunk = &f.value["chunk"];
        if i < 4 {
            assert_eq!(chunk["is_last"], false);
            assert_eq!(
                chunk["metadata"]["mcp_progress"]["progress"],
                (i + 1) as f64
            );
        } else {
            assert_eq!(chunk["is_last"], true);
            assert_eq!(chunk["content"][0]["text"], "done after 4 steps");
        }
    }
    // Progress is steps of 0.25 s: it reaches the host while the call runs, not at its end.
    let first = chunks[0].at - sent;
    let spread = chunks[3].at - chunks[0].at;
    assert!(
        first < Duration::from_millis(700),
        "first chunk after {first:?}"
    );
    assert!(
        spread >= Duration::from_millis(500),
        "chunks spread over {spread:?}"
    );
    assert!(a.finish().success());
}

#[test]
fn a_cancel_reaches_the_upstream_at_once() {
    for relay in RELAYS {
        a_cancel_reaches_the_upstream_at_once_with(relay);
    }
}

fn a_cancel_reaches_the_upstream_at_once_with((gateway, relay): Relay) {
    let (_gw, mut a) = gateway_of_and_attach(gateway, relay);
    let dir = TempDir::new("attach-cancel");

    // Streamed: the first chunk shows the call runs upstream.
    let marker = dir.path("streamed");
    a.slow_call_running(2, slow_args(100.0, 10_000, Some(&marker)));
    a.cancel(2);
    let took = wait_file(&marker, Duration::from_secs(5)).expect("no cancel marker");
    println!("streamed call: cancel marker {took:?} after the cancel frame");
    assert!(took <= Duration::from_millis(100), "marker after {took:?}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "cancelled");
    let frames = a.answer(2);
    let last = frames.last().unwrap();
    assert_eq!(last.value, json!({"t": "cancelled", "id": 2}));
    assert!(frames[..frames.len() - 1].iter().all(|f| f.t() == "chunk"));

    // Not streamed: the gateway's call counter shows the call started.
    let marker = dir.path("plain");
    a.req(
        3,
        "POST",
        "/mcps/ts/tools/slow",
        Some(slow_args(100.0, 0, Some(&marker))),
        false,
    );
    let mut probe = 10;
    loop {
        probe += 1;
        let r = a.call(probe, "GET", "/mcps", None);
        if ok_res(&r)[0]["status"]["calls"].as_u64() == Some(2) {
            break;
        }
    }
    a.cancel(3);
    let took = wait_file(&marker, Duration::from_secs(5)).expect("no cancel marker");
    println!("plain call: cancel marker {took:?} after the cancel frame");
    assert!(took <= Duration::from_millis(100), "marker after {took:?}");
    assert_eq!(a.next_for(3).value, json!({"t": "cancelled", "id": 3}));

    // The session goes on; a second cancel of the same id is ignored without output.
    a.cancel(3);
    let r = a.call(
        50,
        "POST",
        "/mcps/ts/tools/echo",
        Some(json!({"arguments": {"text": "on"}})),
    );
    assert_eq!(chunk_text(ok_res(&r)), "on");
    assert!(a.stash.is_empty(), "{:?}", a.stash);
    assert!(a.finish().success());
}

#[test]
fn end_of_input_cancels_calls_in_flight_and_exits_cleanly() {
    let state = TempDir::new("attach-eof");
    let dir = state.0.display().to_string();
    let mut a = Attach::start(&["--state-dir", &dir, "--launch"]);
    let _daemon = Daemon(a.hello["pid"].as_u64().unwrap() as u32);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    let markers: Vec<PathBuf> = (0..3).map(|i| state.path(&format!("m{i}"))).collect();
    for (i, m) in markers.iter().enumerate() {
        a.req(
            10 + i as u64,
            "POST",
            "/mcps/ts/tools/slow",
            Some(slow_args(100.0, 10_000, Some(m))),
            true,
        );
    }
    for i in 0..3 {
        assert_eq!(a.next_for(10 + i).t(), "chunk");
    }
    let status = a.finish();
    assert!(status.success(), "{status}: {}", a.stderr());
    for m in &markers {
        assert!(
            wait_file(m, Duration::from_secs(5)).is_some(),
            "{} missing: the call was not cancelled upstream",
            m.display()
        );
    }
    for i in 0..3 {
        assert_eq!(a.answer(10 + i).last().unwrap().t(), "cancelled");
    }
    // Only the gateway remains of everything that ran with this state directory.
    let left: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| process_alive(pid))
        .filter(|&pid| {
            let cmd = cmdline(pid);
            cmd.windows(dir.len()).any(|w| w == dir.as_bytes())
        })
        .collect();
    assert_eq!(
        left,
        [a.hello["pid"].as_u64().unwrap() as u32],
        "processes left"
    );
}

#[test]
fn bad_lines_get_error_frames_and_the_session_goes_on() {
    let (_gw, mut a) = gateway_and_attach(&[]);
    let cases: &[(&str, Option<u64>, &str)] = &[
        ("garbage", None, "not a frame"),
        (r#"{"t":"boom","id":4}"#, Some(4), "unknown frame type"),
        (
            r#"{"t":"req","id":5,"method":"PATCH","path":"/mcps"}"#,
            Some(5),
            "method",
        ),
        (
            r#"{"t":"req","id":6,"method":"GET","path":"/mcps x"}"#,
            Some(6),
            "path",
        ),
        (
            r#"{"t":"req","id":7,"method":"GET","path":"/a<b"}"#,
            Some(7),
            "path",
        ),
        (
            r#"{"t":"req","id":8,"method":"GET","path":"/caf\u00e9"}"#,
            Some(8),
            "percent-encode",
        ),
        (r#"{"t":"req","id":9,"method":"GET"}"#, Some(9), "\"path\""),
        (r#"{"t":"cancel"}"#, None, "\"id\""),
    ];
    for (line, id, says) in cases {
        a.send(&format!("{line}\n"));
        let f = a.next();
        assert_eq!(f.t(), "error", "{line}: {:?}", f.value);
        assert_eq!(f.id(), *id, "{line}: {:?}", f.value);
        let message = f.value["message"].as_str().unwrap();
        assert!(message.contains(says), "{line}: {message}");
    }
    // Blank lines are skipped; a cancel for an unknown id says nothing.
    a.send("\n  \r\n");
    a.cancel(99);
    let r = a.call(10, "GET", "/health", None);
    assert_eq!(
        r,
        json!({"t": "res", "id": 10, "status": 200, "text": "ok"})
    );
    assert!(a.stash.is_empty(), "{:?}", a.stash);

    // An id already in flight is refused without ending the request that has it.
    a.slow_call_running(11, slow_args(100.0, 10_000, None));
    a.req(11, "GET", "/health", None, false);
    let refused = loop {
        let f = a.next();
        if f.t() != "chunk" {
            break f;
        }
    };
    assert_eq!(refused.t(), "error");
    assert_eq!(refused.id(), None);
    assert!(
        refused.value["message"]
            .as_str()
            .unwrap()
            .contains("in flight")
    );
    a.cancel(11);
    assert_eq!(a.answer(11).last().unwrap().t(), "cancelled");
    assert!(a.finish().success());
}

#[test]
fn an_oversized_line_is_refused_and_skipped_in_bounded_memory() {
    let (_gw, mut a) = gateway_and_attach(&["--max-frame-bytes", "1048576"]);
    assert_eq!(a.hello["max_frame_bytes"], 1048576);
    let before = peak_rss_kib(a.pid());
    let mut stdin = a.stdin.take().unwrap();
    let started = Instant::now();
    let writer = std::thread::spawn(move || {
        let head = br#"{"t":"req","id":7,"method":"POST","path":"/mcps/ts/tools/echo","body":{"arguments":{"text":""#;
        stdin.write_all(head).unwrap();
        let piece = vec![b'a'; 1 << 20];
        for _ in 0..200 {
            stdin.write_all(&piece).unwrap();
        }
        stdin.write_all(b"\"}}}\n").unwrap();
        stdin
            .write_all(b"{\"t\":\"req\",\"id\":8,\"method\":\"GET\",\"path\":\"/health\"}\n")
            .unwrap();
        stdin
    });
    let f = a.next();
    assert_eq!(f.t(), "error", "{:?}", f.value);
    assert_eq!(f.id(), Some(7));
    assert!(
        f.value["message"].as_str().unwrap().contains("1048576"),
        "{:?}",
        f.value
    );
    a.stdin = Some(writer.join().unwrap());
    let r = a.next_for(8);
    assert_eq!(r.value["text"], "ok", "{:?}", r.value);
    let hwm = peak_rss_kib(a.pid());
    println!(
        "200 MiB line skipped in {:?}; attach's peak RSS {before} KiB before it, {hwm} KiB after",
        started.elapsed()
    );
    // The limit (1 MiB) and a read buffer, not the line.
    assert!(
        hwm < before + 8 * 1024,
        "attach's peak RSS grew from {before} to {hwm} KiB"
    );
    assert!(a.finish().success());
}

#[test]
fn the_token_never_shows_in_argv_or_output() {
    let state = TempDir::new("attach-token");
    let dir = state.0.display().to_string();
    let mut a = Attach::start(&["--state-dir", &dir, "--launch", "--log-level", "trace"]);
    let gateway_pid = a.hello["pid"].as_u64().unwrap() as u32;
    let _daemon = Daemon(gateway_pid);
    let token = std::fs::read_to_string(state.path("token")).unwrap();
    assert_eq!(token.trim().len(), 64);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    let r = a.call(
        2,
        "POST",
        "/mcps/ts/tools/echo",
        Some(json!({"arguments": {"text": "x"}})),
    );
    assert_eq!(chunk_text(ok_res(&r)), "x");
    for pid in [a.pid(), gateway_pid] {
        let cmd = cmdline(pid);
        assert!(!cmd.is_empty());
        assert!(
            !cmd.windows(token.len()).any(|w| w == token.as_bytes()),
            "the token is in the argv of {pid}"
        );
    }
    assert!(a.finish().success());
    assert!(!a.stdout().contains(&token));
    assert!(!a.stderr().contains(&token));
    assert!(
        a.stderr().contains("relaying to the gateway"),
        "{}",
        a.stderr()
    );
}

#[test]
fn a_gateway_that_dies_fails_its_requests_and_the_session_says_so() {
    // attach relaying itself: it outlives the gateway.
    let (mut gw, mut a) = gateway_and_attach(&["--no-handoff"]);
    a.slow_call_running(2, slow_args(100.0, 10_000, None));
    gw.child.kill().unwrap();
    let killed = Instant::now();
    gw.child.wait().unwrap();
    let last = a.answer(2).pop().unwrap();
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "{:?}",
        killed.elapsed()
    );
    assert!(
        last.t() == "error" || (last.t() == "res" && last.value["status"] == 502),
        "{:?}",
        last.value
    );
    assert!(a.child.try_wait().unwrap().is_none(), "attach exited");

    let r = a.call(3, "GET", "/mcps", None);
    assert_eq!(r["t"], "error", "{r}");
    assert_eq!(r["id"], 3);
    let message = r["message"].as_str().unwrap();
    assert!(message.contains("cannot reach the gateway"), "{message}");
    assert!(message.contains("is gone"), "{message}");
    assert!(a.finish().success());
}

#[test]
fn a_gateway_that_dies_under_a_handed_off_session_ends_it_and_says_so() {
    let (mut gw, mut a) = gateway_and_attach(&[]);
    a.slow_call_running(2, slow_args(100.0, 10_000, None));
    let pid = gw.child.id();
    gw.child.kill().unwrap();
    gw.child.wait().unwrap();
    let status = a.exit();
    assert_eq!(status.code(), Some(1), "{}", a.stderr());
    assert!(a.stderr().contains("handed off"), "{}", a.stderr());
    let said = format!("the gateway (process {pid}) went away in the middle of it");
    assert!(a.stderr().contains(&said), "{}", a.stderr());
}

#[test]
fn on_a_terminal_the_session_runs_raw_and_restores_it() {
    let gw = start_gateway(&[]);
    let (mut master, mut slave) = (0, 0);
    unsafe {
        assert_eq!(
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null()
            ),
            0
        );
    }
    let termios = |fd| unsafe {
        let mut t = std::mem::zeroed::<libc::termios>();
        assert_eq!(libc::tcgetattr(fd, &mut t), 0);
        t
    };
    assert_ne!(termios(slave).c_lflag & libc::ECHO, 0);
    let slave_file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(slave) };
    let mut child = Command::new(gateway_bin())
        .args(["attach", "--port", &gw.port.to_string(), "--token-file"])
        .arg(gw.dir.path("state/token"))
        .stdin(slave_file.try_clone().unwrap())
        .stdout(slave_file.try_clone().unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut master_file = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(master) };
    let (tx, rx) = mpsc::channel();
    let mut reader = master_file.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let read_until = |needle: &str, seen: &mut Vec<u8>| {
        let deadline = Instant::now() + LIMIT;
        while !String::from_utf8_lossy(seen).contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            seen.extend(rx.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no {needle:?} on the terminal: {:?}",
                    String::from_utf8_lossy(seen)
                )
            }));
        }
    };
    read_until("\"t\":\"hello\"", &mut seen);
    let raw = termios(slave);
    assert_eq!(raw.c_lflag & (libc::ECHO | libc::ICANON), 0, "not raw");
    assert_eq!(raw.c_oflag & libc::OPOST, 0, "output still translated");
    master_file
        .write_all(b"{\"t\":\"req\",\"id\":1,\"method\":\"GET\",\"path\":\"/mcps\"}\n")
        .unwrap();
    read_until("\"t\":\"res\"", &mut seen);
    let text = String::from_utf8_lossy(&seen).into_owned();
    assert!(
        !text.contains("\"t\":\"req\""),
        "the input was echoed: {text:?}"
    );
    assert!(!text.contains('\r'), "newlines were translated: {text:?}");
    assert_eq!(text.lines().count(), 2, "{text:?}");
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = wait_child(&mut child, LIMIT);
    assert!(status.success(), "{status}");
    let restored = termios(slave);
    assert_ne!(restored.c_lflag & libc::ECHO, 0, "echo not restored");
    assert_ne!(
        restored.c_oflag & libc::OPOST,
        0,
        "output processing not restored"
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("SIGTERM"), "{stderr}");
}

#[test]
fn a_host_that_stops_reading_does_not_keep_the_session_alive() {
    let gw = start_gateway(&[]);
    let mut child = Command::new(gateway_bin())
        .args(["attach", "--port", &gw.port.to_string(), "--token-file"])
        .arg(gw.dir.path("state/token"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Answers of a few KiB each, never read: stdout's pipe fills and attach's queue behind it.
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut batch = String::new();
    for id in 0..2000 {
        batch.push_str(&format!(
            "{}\n",
            json!({"t": "req", "id": id, "method": "GET", "path": "/openapi.json"})
        ));
    }
    stdin.write_all(batch.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Wait until attach is stuck writing: its stdout pipe holds 64 KiB nobody reads.
    let full = Instant::now();
    loop {
        let mut queued: libc::c_int = 0;
        unsafe {
            libc::ioctl(
                std::os::fd::AsRawFd::as_raw_fd(&stdout),
                libc::FIONREAD,
                &mut queued,
            );
        }
        if queued >= 60 * 1024 {
            break;
        }
        assert!(
            full.elapsed() < LIMIT,
            "stdout never filled ({queued} bytes)"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = wait_child(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "{status}");
    let mut text = String::new();
    BufReader::new(stderr).read_to_string(&mut text).unwrap();
    assert!(text.contains("not all written"), "{text}");
    drop(stdout);
}

#[test]
fn gateway_args_reach_the_launched_gateway_and_a_failed_launch_says_why() {
    let state = TempDir::new("attach-args");
    let dir = state.0.display().to_string();
    let mut failed = spawn_attach(&["--state-dir", &dir, "--launch", "--gateway-arg=--bogus"]);
    assert_eq!(failed.exit().code(), Some(1));
    let stderr = failed.stderr();
    assert!(stderr.contains("the gateway did not start"), "{stderr}");
    assert!(stderr.contains("unknown option --bogus"), "{stderr}");
    assert_eq!(failed.stdout(), "");

    let mut a = Attach::start(&[
        "--state-dir",
        &dir,
        "--launch",
        "--gateway-arg",
        "--call-timeout",
        "--gateway-arg",
        "0.5",
    ]);
    let pid = a.hello["pid"].as_u64().unwrap() as u32;
    let _daemon = Daemon(pid);
    let argv: Vec<String> = cmdline(pid)
        .split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(
        argv.windows(2).any(|w| w == ["--call-timeout", "0.5"]),
        "{argv:?}"
    );
    assert!(argv.contains(&"--ready-file".to_string()), "{argv:?}");
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    let r = a.call(
        2,
        "POST",
        "/mcps/ts/tools/slow",
        Some(slow_args(30.0, 0, None)),
    );
    assert_eq!(
        r["status"], 504,
        "the gateway's own --call-timeout applies: {r}"
    );
    assert!(a.finish().success());
}

#[test]
fn files_on_stdin_or_stdout_are_served_by_threads() {
    let gw = start_gateway(&[]);
    let dir = TempDir::new("attach-files");
    let token_file = gw.dir.path("state/token");

    // Stdout to a file (it cannot be polled): written through the blocking pool, everything
    // written by the exit.
    let out = dir.path("out");
    let mut child = Command::new(gateway_bin())
        .args(["attach", "--port", &gw.port.to_string(), "--token-file"])
        .arg(&token_file)
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for id in 1..=20 {
        writeln!(
            stdin,
            "{}",
            json!({"t": "req", "id": id, "method": "GET", "path": "/mcps"})
        )
        .unwrap();
    }
    stdin.flush().unwrap();
    // The answers are in the file once it holds 21 lines; then end the session.
    let started = Instant::now();
    while std::fs::read_to_string(&out).unwrap().lines().count() < 21 {
        assert!(
            started.elapsed() < LIMIT,
            "{}",
            std::fs::read_to_string(&out).unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(stdin);
    assert!(wait_child(&mut child, LIMIT).success());
    let text = std::fs::read_to_string(&out).unwrap();
    let frames: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames[0]["t"], "hello");
    let mut ids: Vec<u64> = frames[1..]
        .iter()
        .map(|f| {
            assert_eq!(f["status"], 200, "{f}");
            f["id"].as_u64().unwrap()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, (1..=20).collect::<Vec<_>>());

    // Stdin from a file (read through the blocking pool): its end cancels what is still in
    // flight.
    let input = dir.path("in");
    std::fs::write(
        &input,
        "garbage\n{\"t\":\"cancel\",\"id\":99}\n{\"t\":\"req\",\"id\":5,\"method\":\"GET\",\"path\":\"/mcps\"}",
    )
    .unwrap();
    let output = Command::new(gateway_bin())
        .args(["attach", "--port", &gw.port.to_string(), "--token-file"])
        .arg(&token_file)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let frames: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(frames.len(), 3, "{frames:?}");
    assert_eq!(frames[0]["t"], "hello");
    assert_eq!(frames[1]["t"], "error");
    assert_eq!(frames[1]["id"], Value::Null);
    // The last line needs no newline; the request ends one way or the other.
    assert_eq!(frames[2]["id"], 5, "{frames:?}");
    assert!(
        matches!(frames[2]["t"].as_str(), Some("res" | "cancelled")),
        "{frames:?}"
    );
}

#[test]
fn past_the_in_flight_bound_requests_wait_and_can_be_cancelled_while_waiting() {
    let (_gw, mut a) = gateway_and_attach(&["--max-in-flight", "2"]);
    for id in [2, 3] {
        a.req(
            id,
            "POST",
            "/mcps/ts/tools/slow",
            Some(slow_args(100.0, 10_000, None)),
            true,
        );
        assert_eq!(a.next_for(id).t(), "chunk");
    }
    // Both slots are taken: 4 waits, and its cancel is answered at once.
    a.req(4, "GET", "/health", None, false);
    a.cancel(4);
    assert_eq!(a.next_for(4).value, json!({"t": "cancelled", "id": 4}));
    // 5 waits until a slot frees.
    a.req(5, "GET", "/health", None, false);
    a.cancel(2);
    let freed = a.answer(2).pop().unwrap();
    assert_eq!(freed.t(), "cancelled");
    let answered = a.next_for(5);
    assert_eq!(answered.value["text"], "ok");
    assert!(
        answered.at >= freed.at,
        "5 was relayed before a slot was free"
    );
    a.cancel(3);
    assert_eq!(a.answer(3).last().unwrap().t(), "cancelled");
    assert!(a.finish().success());
}
