//! The session channel end to end: the library's session over a real `mcpgw-gateway attach`
//! process, spawned the way hosts spawn it (a local `sh -c`, `nsenter` into a namespace
//! sandbox, `docker exec -i` into a container), relaying to a real gateway and the project's
//! test MCP server.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcpgw::session::Session;
use mcpgw::session::blocking::BlockingSession;
use mcpgw::{CallOptions, Client, Config, ErrorKind, LocalShell};

/// A spawned session channel: the child process and the session driving its pipes.
struct Channel {
    child: Child,
    session: BlockingSession,
    stderr: Arc<Mutex<String>>,
}

/// Opens `client`'s session by running its command under `prefix` (the argv before the
/// `sh -c` text, e.g. `["docker", "exec", "-i", C, "sh", "-c"]`).
fn open(client: &Client, prefix: &[&str]) -> Channel {
    let (session, command) = Session::open(client).expect("a session command");
    let mut child = Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(&command.text)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the channel spawns");
    let stderr = Arc::new(Mutex::new(String::new()));
    let mut pipe = child.stderr.take().unwrap();
    let sink = stderr.clone();
    std::thread::spawn(move || {
        let mut buf = String::new();
        let _ = pipe.read_to_string(&mut buf);
        sink.lock().unwrap().push_str(&buf);
    });
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    let session = match BlockingSession::start(session, stdout, stdin, Duration::from_secs(30)) {
        Ok(s) => s,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the session did not open: {e}; stderr: {}",
                stderr.lock().unwrap()
            );
        }
    };
    Channel {
        child,
        session,
        stderr,
    }
}

impl Channel {
    /// Closes the channel and waits for its process to end (attach exits on end of input).
    fn close(mut self) {
        drop(self.session);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if self.child.try_wait().unwrap().is_some() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "attach did not exit after its stdin closed; stderr: {}",
                self.stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn spec(testserver: &Path) -> String {
    serde_json::json!({
        "name": "test",
        "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}
    })
    .to_string()
}

fn opts() -> CallOptions {
    CallOptions {
        timeout: Some(Duration::from_secs(30)),
        ..CallOptions::default()
    }
}

/// Waits until `path` exists; how long it took.
fn wait_for_file(path: &Path, limit: Duration) -> Duration {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < limit, "{} did not appear", path.display());
        std::thread::sleep(Duration::from_millis(1));
    }
    start.elapsed()
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "mcpgw-session-{tag}-{}",
        &mcpgw::random::uuid4_hex()[..8]
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Whether any process's command line holds `needle`.
fn process_with(needle: &str) -> Option<String> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        text.contains(needle).then_some(text)
    })
}

#[test]
fn a_local_session_launches_the_gateway_and_carries_calls_progress_and_cancels() {
    let (gateway, testserver) = common::binaries();
    let state = temp_dir("local");
    let client = Client::new(Config {
        gateway_path: gateway.to_string_lossy().into_owned(),
        state_dir: Some(state.join("gw").to_string_lossy().into_owned()),
        ..Config::default()
    })
    .unwrap();
    let channel = open(&client, &["sh", "-c"]);
    let hello = channel.session.hello().unwrap();
    assert!(hello.launched, "attach --launch started the gateway");
    // The client now knows the gateway the session launched, as if start_gateway had run.
    let info = client.gateway().expect("the launched gateway is known");
    assert_eq!(info.port, hello.port);
    let s = &channel.session;
    s.call(client.prepare_add_mcp(&opts(), &spec(testserver)), None)
        .unwrap();
    let tools = s
        .call(client.prepare_list_tools(&opts(), "test"), None)
        .unwrap();
    assert!(tools.iter().any(|t| t.name == "slow"));

    // Many calls at once over the one channel, answered by id.
    std::thread::scope(|scope| {
        for i in 0..64 {
            let client = &client;
            scope.spawn(move || {
                let chunk = s
                    .call(
                        client.prepare_call_tool(
                            &opts(),
                            "test",
                            "echo",
                            &serde_json::json!({ "text": format!("call {i}") }).to_string(),
                        ),
                        None,
                    )
                    .unwrap();
                let text = serde_json::to_string(&chunk.content).unwrap();
                assert!(text.contains(&format!("call {i}")), "{text}");
            });
        }
    });

    // Progress reaches the host as it happens, in order, before the last chunk.
    let mut seen: Vec<(f64, Instant)> = Vec::new();
    let started = Instant::now();
    let mut on_progress = |chunk: mcpgw::wire::ToolChunk| {
        assert!(!chunk.is_last);
        let p = chunk.progress().unwrap()["progress"].as_f64().unwrap();
        seen.push((p, Instant::now()));
    };
    let last = s
        .call(
            client.prepare_call_tool(&opts(), "test", "slow", r#"{"seconds": 1.0, "steps": 5}"#),
            Some(&mut on_progress),
        )
        .unwrap();
    let finished = Instant::now();
    assert!(last.is_last);
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0].0 < w[1].0), "in order");
    // Spread over the call: the first arrived well before the end.
    assert!(
        finished - seen[0].1 > Duration::from_millis(500),
        "progress was not live: first after {:?}, call took {:?}",
        seen[0].1 - started,
        finished - started
    );

    // A cancel frame stops the tool upstream: its cancel marker appears at once.
    let marker = state.join("cancelled");
    let mut op = client.prepare_call_tool(
        &opts(),
        "test",
        "slow",
        &serde_json::json!({"seconds": 60, "steps": 60, "cancel_marker": marker}).to_string(),
    );
    let ticket = s.submit(&mut op, true).unwrap();
    let id = ticket.id;
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let waiter = scope.spawn(|| {
            let mut first = Some(first_tx);
            let mut on_progress = |_| {
                if let Some(tx) = first.take() {
                    let _ = tx.send(());
                }
            };
            s.wait(ticket, &mut op, Some(&mut on_progress));
            op
        });
        first_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the call is under way");
        let sent = Instant::now();
        s.cancel(id);
        let took = wait_for_file(&marker, Duration::from_secs(5));
        eprintln!(
            "cancel frame to the upstream's cancel marker: {took:?} (sent {:?} ago)",
            sent.elapsed()
        );
        assert!(took < Duration::from_millis(100), "{took:?}");
        let op = waiter.join().unwrap();
        assert_eq!(op.finish().unwrap_err().kind(), ErrorKind::Cancelled);
    });

    // The gateway outlives the channel; closing it leaves no attach process.
    let nonce = info.instance_nonce.clone();
    channel.close();
    assert!(
        process_with(&format!(
            "attach --state-dir {}",
            state.join("gw").display()
        ))
        .is_none(),
        "an attach process was left"
    );
    client.stop_gateway(&LocalShell::new(), &opts()).unwrap();
    assert!(process_with(&nonce).is_none(), "the gateway was left");
    std::fs::remove_dir_all(&state).unwrap();
}

#[test]
fn a_killed_channel_fails_what_is_in_flight_and_a_new_session_goes_on() {
    let (gateway, testserver) = common::binaries();
    let state = temp_dir("killed");
    let client = Client::new(Config {
        gateway_path: gateway.to_string_lossy().into_owned(),
        state_dir: Some(state.join("gw").to_string_lossy().into_owned()),
        ..Config::default()
    })
    .unwrap();
    let mut channel = open(&client, &["sh", "-c"]);
    let s = &channel.session;
    s.call(client.prepare_add_mcp(&opts(), &spec(testserver)), None)
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let killed_at = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let (client, tx) = (&client, tx.clone());
                scope.spawn(move || {
                    let mut sent = false;
                    let mut on_progress = |_| {
                        if !sent {
                            sent = true;
                            let _ = tx.send(());
                        }
                    };
                    let r = s.call(
                        client.prepare_call_tool(
                            &opts(),
                            "test",
                            "slow",
                            r#"{"seconds": 20, "steps": 20}"#,
                        ),
                        Some(&mut on_progress),
                    );
                    (r.unwrap_err(), Instant::now())
                })
            })
            .collect();
        for _ in 0..4 {
            rx.recv_timeout(Duration::from_secs(10)).expect("under way");
        }
        let killed_at = Instant::now();
        channel.child.kill().unwrap();
        for call in calls {
            let (e, at) = call.join().unwrap();
            assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
            assert!(
                at - killed_at < Duration::from_secs(1),
                "{:?}",
                at - killed_at
            );
        }
        killed_at
    });
    eprintln!(
        "in-flight calls failed within {:?} of the kill",
        killed_at.elapsed()
    );
    let _ = channel.child.wait();
    assert!(channel.session.is_lost());

    // A new session reaches the same gateway, which kept its MCPs.
    let again = open(&client, &["sh", "-c"]);
    assert!(!again.session.hello().unwrap().launched);
    let chunk = again
        .session
        .call(
            client.prepare_call_tool(&opts(), "test", "echo", r#"{"text":"again"}"#),
            None,
        )
        .unwrap();
    assert!(serde_json::to_string(&chunk).unwrap().contains("again"));
    again.close();
    client.stop_gateway(&LocalShell::new(), &opts()).unwrap();
    std::fs::remove_dir_all(&state).unwrap();
}

#[test]
fn a_session_into_a_namespace_sandbox() {
    require_sandbox!();
    let (gateway, testserver) = common::binaries();
    let sandbox = common::Sandbox::full();
    let client = Client::new(Config {
        gateway_path: gateway.to_string_lossy().into_owned(),
        ..Config::default()
    })
    .unwrap();
    let pid = sandbox.pid.to_string();
    let prefix = [
        "nsenter", "-t", &pid, "-n", "-p", "-m", "-r", "-w", "--", "/bin/sh", "-c",
    ];
    let channel = open(&client, &prefix);
    let s = &channel.session;
    s.call(client.prepare_add_mcp(&opts(), &spec(testserver)), None)
        .unwrap();
    let health = s.call(client.prepare_health(&opts()), None).unwrap();
    assert_eq!(
        health.instance_nonce,
        Some(client.gateway().unwrap().instance_nonce)
    );
    // The host cannot reach the gateway's port: only the channel gets there.
    assert!(std::net::TcpStream::connect(("127.0.0.1", client.port().unwrap())).is_err());
    let chunk = s
        .call(
            client.prepare_call_tool(&opts(), "test", "echo", r#"{"text":"inside"}"#),
            None,
        )
        .unwrap();
    assert!(serde_json::to_string(&chunk).unwrap().contains("inside"));
    channel.close();
}
