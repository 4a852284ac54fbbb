//! The session channel end to end, driven by the host driver (`mcpgw-runner`'s tokio runner):
//! a real `mcpgw-gateway attach` process spawned the way the driver's backends spawn it (a
//! local `sh -c`, `nsenter` into a namespace sandbox), relaying to a real gateway and the
//! project's test MCP server. (Docker and podman: `cli/tests/e2e.rs`.)

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mcpgw::client::Output;
use mcpgw::driver::{Backend, HostConfig, Op, Prefix, Submit};
use mcpgw::wire::ToolChunk;
use mcpgw::{Error, ErrorKind};
use mcpgw_runner::Host;
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn config(backend: Backend, state: &Path) -> HostConfig {
    let (gateway, _) = common::binaries();
    let mut c = HostConfig::new(backend);
    c.gateway_path = gateway.display().to_string();
    c.state_dir = Some(state.join("gw").display().to_string());
    c.timeout_ms = 30_000;
    c
}

fn spec(testserver: &Path) -> Value {
    json!({"name": "test", "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}})
}

fn call(tool: &str, arguments: Value, stream: bool) -> Submit {
    let mut s = Submit::new(Op::CallTool {
        mcp: "test".into(),
        tool: tool.into(),
        arguments,
    });
    s.stream = stream;
    s
}

fn chunk(out: Output) -> ToolChunk {
    match out {
        Output::Chunk(c) => c,
        other => panic!("not a chunk: {other:?}"),
    }
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

async fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_session_launches_the_gateway_and_carries_calls_progress_and_cancels() {
    let (_, testserver) = common::binaries();
    let state = temp_dir("local");
    let host = Host::start(config(Backend::Local { cwd: None }, &state)).unwrap();
    let Output::Session(hello) = host.op(Op::OpenSession {}).await.unwrap() else {
        panic!()
    };
    assert!(hello.launched, "attach --launch started the gateway");
    let gateway = host.state().await.unwrap()["gateway"].clone();
    assert_eq!(gateway["port"], hello.port);
    host.op(Op::AddMcp {
        spec: spec(testserver),
    })
    .await
    .unwrap();
    let Output::Tools(tools) = host.op(Op::ListTools { mcp: "test".into() }).await.unwrap() else {
        panic!()
    };
    assert!(tools.iter().any(|t| t.name == "slow"));

    // Many calls at once over the one channel, answered by id.
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let host = host.clone();
            tokio::spawn(async move {
                let c = chunk(
                    host.run(
                        call("echo", json!({"text": format!("call {i}")}), false),
                        None,
                    )
                    .await
                    .unwrap(),
                );
                let text = serde_json::to_string(&c.content).unwrap();
                assert!(text.contains(&format!("call {i}")), "{text}");
            })
        })
        .collect();
    for c in calls {
        c.await.unwrap();
    }

    // Progress reaches the host as it happens, in order, before the last chunk.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let running = tokio::spawn({
        let host = host.clone();
        async move {
            host.run(
                call("slow", json!({"seconds": 1.0, "steps": 5}), true),
                Some(tx),
            )
            .await
        }
    });
    let mut seen = Vec::new();
    while let Some(raw) = rx.recv().await {
        let c: ToolChunk = serde_json::from_str(raw.get()).unwrap();
        assert!(!c.is_last);
        seen.push(c.progress().unwrap()["progress"].as_f64().unwrap());
        // Live: the call has not finished when its first progress arrives.
        if seen.len() == 1 {
            assert!(!running.is_finished());
        }
    }
    let last = chunk(running.await.unwrap().unwrap());
    assert!(last.is_last);
    assert_eq!(seen.len(), 5, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order");

    // A cancel stops the tool upstream: its cancel marker appears.
    let marker = state.join("cancelled");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let running = tokio::spawn({
        let host = host.clone();
        let args = json!({"seconds": 60, "steps": 60, "cancel_marker": marker});
        async move { host.run(call("slow", args, true), Some(tx)).await }
    });
    rx.recv().await.expect("the call is under way");
    running.abort();
    wait_until(
        "the upstream's cancel marker",
        Duration::from_secs(10),
        || marker.exists(),
    )
    .await;

    // The gateway outlives the channel; closing it leaves no attach process.
    let nonce = gateway["instance_nonce"].as_str().unwrap().to_owned();
    host.op(Op::CloseSession {}).await.unwrap();
    let needle = format!("attach --state-dir {}", state.join("gw").display());
    wait_until("attach's exit", Duration::from_secs(10), || {
        process_with(&needle).is_none()
    })
    .await;
    host.op(Op::StopGateway {}).await.unwrap();
    assert!(process_with(&nonce).is_none(), "the gateway was left");
    std::fs::remove_dir_all(&state).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_channel_is_opened_again_and_the_gateway_kept_its_mcps() {
    let (_, testserver) = common::binaries();
    let state = temp_dir("killed");
    let host = Host::start(config(Backend::Local { cwd: None }, &state)).unwrap();
    let Output::Session(hello) = host.op(Op::OpenSession {}).await.unwrap() else {
        panic!()
    };
    host.op(Op::AddMcp {
        spec: spec(testserver),
    })
    .await
    .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let (host, tx) = (host.clone(), tx.clone());
            tokio::spawn(async move {
                let (ptx, mut prx) = mpsc::unbounded_channel();
                let run = tokio::spawn({
                    let host = host.clone();
                    async move {
                        host.run(
                            call("slow", json!({"seconds": 3, "steps": 6}), true),
                            Some(ptx),
                        )
                        .await
                    }
                });
                prx.recv().await.expect("under way");
                let _ = tx.send(());
                let mut progress = 1;
                while prx.recv().await.is_some() {
                    progress += 1;
                }
                (run.await.unwrap(), progress)
            })
        })
        .collect();
    for _ in 0..4 {
        rx.recv().await.unwrap();
    }
    let needle = format!("attach --state-dir {}", state.join("gw").display());
    let attach = process_with(&needle).expect("the channel runs");
    let pid: i32 = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find_map(|e| {
            let c = std::fs::read(e.path().join("cmdline")).ok()?;
            (String::from_utf8_lossy(&c).replace('\0', " ") == attach)
                .then(|| e.file_name().to_string_lossy().parse().ok())?
        })
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    for c in calls {
        let (result, progress): (Result<Output, Error>, usize) = c.await.unwrap();
        if hello.retention_ms > 0 {
            // Resumed on a new channel: the call finishes with each progress chunk once.
            assert!(matches!(result, Ok(Output::Chunk(_))), "{result:?}");
            assert_eq!(progress, 6);
        } else {
            assert_eq!(result.unwrap_err().kind(), ErrorKind::SessionLost);
        }
    }
    // The channel was opened again to the same gateway, which kept its MCPs.
    let again = chunk(
        host.run(call("echo", json!({"text": "again"}), false), None)
            .await
            .unwrap(),
    );
    assert!(serde_json::to_string(&again).unwrap().contains("again"));
    host.op(Op::StopGateway {}).await.unwrap();
    std::fs::remove_dir_all(&state).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_into_a_namespace_sandbox() {
    if let Some(why) = common::sandbox_unavailable() {
        eprintln!("SKIPPED: this test needs a Linux-namespace sandbox: {why}");
        return;
    }
    let (_, testserver) = common::binaries();
    let sandbox = common::Sandbox::full();
    let state = temp_dir("ns");
    let pid = sandbox.pid.to_string();
    let backend = Backend::Argv(Prefix {
        prefix: ["nsenter", "-t", &pid, "-n", "-p", "-m", "-r", "-w", "--"]
            .map(String::from)
            .to_vec(),
        joins_arguments: false,
        ..Default::default()
    });
    let mut c = config(backend, &state);
    // The sandbox's private /tmp.
    c.state_dir = None;
    let host = Host::start(c).unwrap();
    host.op(Op::OpenSession {}).await.unwrap();
    host.op(Op::AddMcp {
        spec: spec(testserver),
    })
    .await
    .unwrap();
    let Output::Health(health) = host.op(Op::Health {}).await.unwrap() else {
        panic!()
    };
    let gateway = host.state().await.unwrap()["gateway"].clone();
    assert_eq!(
        health.instance_nonce.as_deref(),
        gateway["instance_nonce"].as_str()
    );
    // The host cannot reach the gateway's port: only the channel gets there.
    let port = gateway["port"].as_u64().unwrap() as u16;
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    let c = chunk(
        host.run(call("echo", json!({"text": "inside"}), false), None)
            .await
            .unwrap(),
    );
    assert!(serde_json::to_string(&c).unwrap().contains("inside"));
    host.op(Op::CloseSession {}).await.unwrap();
    std::fs::remove_dir_all(&state).unwrap();
}
