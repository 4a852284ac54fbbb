//! The host driver end to end through real processes: the real gateway and `attach`, the
//! project's test server, a local sandbox, real Docker and podman containers.

use std::time::Duration;

use mcpgw::client::Output;
use mcpgw::driver::{Backend, Container as Target, HostConfig, Op, Submit};
use mcpgw::{Error, ErrorKind};
use mcpgw_runner::Host;
use mcpgw_testkit::container::{self, Container, Engine};
use mcpgw_testkit::{TempDir, gateway_bin, processes_where, testserver_bin};
use serde_json::{Value, json};
use tokio::sync::mpsc;

fn local(dir: &TempDir) -> HostConfig {
    let mut c = HostConfig::new(Backend::Local { cwd: None });
    c.gateway_path = gateway_bin().display().to_string();
    c.state_dir = Some(dir.path("state").display().to_string());
    c.timeout_ms = 30_000;
    c
}

fn in_container(c: &Container) -> HostConfig {
    let target = Target {
        container: c.id.clone(),
        exec_options: vec![],
        options: vec![],
        program: None,
    };
    let mut config = HostConfig::new(match c.engine {
        Engine::Docker => Backend::Docker(target),
        Engine::Podman => Backend::Podman(target),
    });
    config.gateway_path = "/usr/local/bin/mcpgw-gateway".into();
    config.timeout_ms = 30_000;
    config
}

fn ts_spec(command: &str) -> Value {
    json!({"name": "ts", "is_stateful": true,
           "mcp_config": {"type": "stdio_mcp", "command": command, "args": ["stdio"]}})
}

fn call(tool: &str, arguments: Value, stream: bool) -> Submit {
    let mut s = Submit::new(Op::CallTool {
        mcp: "ts".into(),
        tool: tool.into(),
        arguments,
    });
    s.stream = stream;
    s
}

fn text_of(output: Output) -> String {
    let Output::Chunk(chunk) = output else {
        panic!("not a chunk: {output:?}")
    };
    let v = serde_json::to_value(&chunk).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The attach processes serving `needle`'s state directory or container.
fn attaches(needle: &str) -> Vec<u32> {
    processes_where(|_, _, _| true)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    let c = String::from_utf8_lossy(&c).replace('\0', " ");
                    c.contains(" attach ") && c.contains(needle) && !c.contains(" exec ")
                })
                .unwrap_or(false)
                // attach itself, not a shell that runs it
                && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|comm| comm.trim() == "mcpgw-gateway")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_one_shot_then_over_a_session_with_progress() {
    let dir = TempDir::new("host-local");
    let host = Host::start(local(&dir)).unwrap();
    let Output::Started(info) = host.op(Op::StartGateway {}).await.unwrap() else {
        panic!()
    };
    host.op(Op::AddMcp {
        spec: ts_spec(&testserver_bin().display().to_string()),
    })
    .await
    .unwrap();
    let one_shot = host
        .run(call("echo", json!({"text": "one-shot"}), false), None)
        .await
        .unwrap();
    assert_eq!(text_of(one_shot), "one-shot");

    let Output::Session(hello) = host.op(Op::OpenSession {}).await.unwrap() else {
        panic!()
    };
    assert_eq!(hello.port, info.port);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let out = host
        .run(
            call("slow", json!({"seconds": 0.3, "steps": 3}), true),
            Some(tx),
        )
        .await
        .unwrap();
    let mut progress = 0;
    while rx.try_recv().is_ok() {
        progress += 1;
    }
    assert_eq!(progress, 3);
    assert!(matches!(out, Output::Chunk(_)));
    // An unknown tool over the session is the gateway's 404, decoded as one-shot would.
    let e = host
        .run(call("nope", json!({}), false), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    host.op(Op::CloseSession {}).await.unwrap();
    host.op(Op::StopGateway {}).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_channel_is_killed_resumes_or_fails_as_the_gateway_allows() {
    let dir = TempDir::new("host-kill");
    let state = dir.path("state").display().to_string();
    let host = Host::start(local(&dir)).unwrap();
    let Output::Session(hello) = host.op(Op::OpenSession {}).await.unwrap() else {
        panic!()
    };
    host.op(Op::AddMcp {
        spec: ts_spec(&testserver_bin().display().to_string()),
    })
    .await
    .unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let running = tokio::spawn({
        let host = host.clone();
        async move {
            host.run(
                call("slow", json!({"seconds": 2.0, "steps": 4}), true),
                Some(tx),
            )
            .await
        }
    });
    // The first progress chunk, then the channel's process is killed.
    let first = tokio::time::timeout(Duration::from_secs(20), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(first.get().contains("\"is_last\":false"));
    let pids = attaches(&state);
    assert_eq!(pids.len(), 1, "{pids:?}");
    unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
    let result = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap()
        .unwrap();
    let mut progress = 1;
    while rx.try_recv().is_ok() {
        progress += 1;
    }
    if hello.retention_ms > 0 {
        // Resumed on a new channel: the call finishes, with every progress chunk once.
        assert!(matches!(result, Ok(Output::Chunk(_))), "{result:?}");
        assert_eq!(progress, 4);
        let state = host.state().await.unwrap();
        assert_eq!(state["resumed"], 1, "{state}");
    } else {
        eprintln!("this gateway keeps no calls: the call ends with its channel");
        let e: Error = result.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
    }
    // The session was opened again: later calls go over a new channel.
    let out = host
        .run(call("echo", json!({"text": "after"}), false), None)
        .await
        .unwrap();
    assert_eq!(text_of(out), "after");
    assert_eq!(attaches(&state).len(), 1);
    host.op(Op::StopGateway {}).await.unwrap();
}

async fn container_flow(engine: Engine) {
    if let Some(why) = container::unavailable(engine) {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let c = Container::start(engine);
    let host = Host::start(in_container(&c)).unwrap();
    let Output::Session(hello) = host.op(Op::OpenSession {}).await.unwrap() else {
        panic!()
    };
    assert!(hello.launched);
    host.op(Op::AddMcp {
        spec: ts_spec("/usr/local/bin/mcpgw-testserver"),
    })
    .await
    .unwrap();
    let out = host
        .run(call("echo", json!({"text": "in the box"}), false), None)
        .await
        .unwrap();
    assert_eq!(text_of(out), "in the box");
    // The container killed under a call: the call is lost, the next one finds it gone.
    let running = tokio::spawn({
        let host = host.clone();
        async move {
            host.run(
                call("slow", json!({"seconds": 20.0, "steps": 2}), true),
                None,
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.kill();
    let e = tokio::time::timeout(Duration::from_secs(30), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
    let e = host
        .run(call("echo", json!({"text": "x"}), false), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    let backend = e.backend().expect("a backend failure");
    assert_eq!(backend.target, c.id);
    assert_eq!(backend.backend, engine.program());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_session_then_the_container_killed() {
    container_flow(Engine::Docker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn podman_session_then_the_container_killed() {
    container_flow(Engine::Podman).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_that_does_not_exist_is_the_backends_failure() {
    if let Some(why) = container::unavailable(Engine::Docker) {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut config = HostConfig::new(Backend::Docker(Target {
        container: "mcpgw-no-such-container".into(),
        exec_options: vec![],
        options: vec![],
        program: None,
    }));
    config.timeout_ms = 30_000;
    let host = Host::start(config).unwrap();
    let e = host.op(Op::OpenSession {}).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    assert!(e.message().contains("No such container"), "{e}");
    let e = host.op(Op::StartGateway {}).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_connection_carries_json_rpc_both_ways() {
    use mcpgw_runner::ConnectionEvent;
    let dir = TempDir::new("host-conn");
    let host = Host::start(local(&dir)).unwrap();
    host.op(Op::OpenSession {}).await.unwrap();
    host.op(Op::AddMcp {
        spec: ts_spec(&testserver_bin().display().to_string()),
    })
    .await
    .unwrap();
    // No such MCP: the open is refused with the gateway's 404.
    let mut nope = host.connect("nope", "", "", false).await.unwrap();
    match nope.recv().await {
        Some(ConnectionEvent::Closed {
            status,
            reason,
            kind,
        }) => {
            assert_eq!(status, Some(404), "{reason:?}");
            assert_eq!(kind, Some(mcpgw::error::ErrorKind::NotFound), "{reason:?}");
        }
        other => panic!("{other:?}"),
    }
    let mut conn = host.connect("ts", "", "", false).await.unwrap();
    assert!(matches!(conn.recv().await, Some(ConnectionEvent::Opened)));
    conn.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e", "version": "1"}}})
        .to_string(),
    )
    .await
    .unwrap();
    let Some(ConnectionEvent::Message(init)) = conn.recv().await else {
        panic!()
    };
    let init: Value = serde_json::from_str(init.get()).unwrap();
    assert_eq!(init["id"], 1);
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    conn.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .unwrap();
    conn.send(
        &json!({"jsonrpc": "2.0", "id": "two", "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "over the connection"}}})
        .to_string(),
    )
    .await
    .unwrap();
    let reply = loop {
        let Some(ConnectionEvent::Message(m)) = conn.recv().await else {
            panic!("the connection closed")
        };
        let m: Value = serde_json::from_str(m.get()).unwrap();
        if m["id"] == "two" {
            break m;
        }
    };
    assert_eq!(
        reply["result"]["content"][0]["text"], "over the connection",
        "{reply}"
    );
    conn.close();
    match conn.recv().await {
        Some(ConnectionEvent::Closed { .. }) | None => {}
        other => panic!("{other:?}"),
    }
    host.op(Op::StopGateway {}).await.unwrap();
}
