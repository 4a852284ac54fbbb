//! The exec channel, through the host driver (`mcpgw-runner`): one-shot commands against the
//! session channel, through a real Docker container (`docker exec` per call against one
//! `docker exec -i` channel) and locally; REST over the session against a virtual MCP connection
//! on the same channel; and the gateway binary's upload with stdin against staged pieces.

use std::future::Future;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpgw::client::Output;
use mcpgw::driver::{Backend, Container as Target, HostConfig, Op, Submit};
use mcpgw::{CallOptions, Client, Config, ExecOutput, ExecResult};
use mcpgw_runner::{ConnectionEvent, Host};
use mcpgw_testkit::stdout_of;
use serde_json::{Value, json};

use crate::{Paths, median, verdict};

fn echo() -> Submit {
    Submit::new(Op::CallTool {
        mcp: "ts".into(),
        tool: "echo".into(),
        arguments: json!({"text": "hello"}),
    })
}

/// One `echo` call through `host`: one-shot, or over its session once one is open.
async fn call(host: &Host) {
    host.run(echo(), None).await.unwrap();
}

/// Milliseconds of each of `n` sequential calls of `call`.
async fn sequential(n: usize, mut call: impl AsyncFnMut()) -> Vec<f64> {
    let mut ms = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        call().await;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms
}

/// Calls per second with `callers` tasks calling `echo` through `host` for `secs`.
async fn concurrent(host: &Host, callers: usize, secs: f64) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let t = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (host, stop, done) = (host.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    call(&host).await;
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

fn spec(testserver: &str) -> Value {
    json!({
        "name": "ts",
        "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}
    })
}

/// Runs `f` on a runtime of its own (the measurements' callers are plain threads): one thread,
/// so the caller and the runner's I/O wake each other without a hand-off between threads.
fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Why Docker cannot be used here, if it cannot.
fn docker_unavailable(paths: &Paths) -> Option<String> {
    let out = Command::new(paths.root.join("tests/docker/sandbox.sh"))
        .arg("check")
        .output()
        .ok()?;
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A container of the test image, removed on drop.
struct Container(String);

impl Container {
    fn start(paths: &Paths) -> Container {
        let script = paths.root.join("tests/docker/sandbox.sh");
        let image = stdout_of(
            Command::new(&script)
                .args(["image", "--gateway"])
                .arg(&paths.gateway)
                .arg("--testserver")
                .arg(&paths.static_testserver),
        );
        Container(stdout_of(Command::new(&script).args(["start", &image])))
    }

    /// The p50 in ms of `n` lines echoed one at a time by `cat` over one `docker exec -i`: the
    /// floor of a round trip on the channel, with nothing of mcpgw's on it.
    fn echo_p50(&self, n: usize) -> f64 {
        use std::io::{BufRead, BufReader, Write};
        let mut cat = Command::new("docker")
            .args(["exec", "-i", &self.0, "cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker exec -i cat");
        let mut input = cat.stdin.take().unwrap();
        let mut output = BufReader::new(cat.stdout.take().unwrap());
        let mut line = String::new();
        let mut once = || {
            let t = Instant::now();
            input.write_all(b"{\"echo\":\"bench\"}\n").unwrap();
            line.clear();
            output.read_line(&mut line).unwrap();
            assert_eq!(line, "{\"echo\":\"bench\"}\n", "cat echoes the line");
            t.elapsed().as_secs_f64() * 1e3
        };
        for _ in 0..50 {
            once();
        }
        let times: Vec<f64> = (0..n).map(|_| once()).collect();
        drop(input);
        let _ = cat.wait();
        median(times)
    }

    /// A host configuration for this container, its gateway at `gateway_path`.
    fn config(&self, gateway_path: &str) -> HostConfig {
        let mut config = HostConfig::new(Backend::Docker(Target {
            container: self.0.clone(),
            exec_options: Vec::new(),
            options: Vec::new(),
            program: None,
        }));
        config.gateway_path = gateway_path.into();
        config
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The docker and local measurements of the session channel.
pub fn channel_side(paths: &Paths, secs: u64, wrk_direct: &dyn Fn(u16, &str, usize) -> f64) {
    println!(
        "\nexec channel: one-shot `docker exec` per call against one `docker exec -i` session"
    );
    docker_side(paths, secs);
    local(paths, secs, wrk_direct);
}

/// The Docker measurements alone (`mcpgw-bench --docker-only`).
pub fn docker_side(paths: &Paths, secs: u64) {
    match docker_unavailable(paths) {
        Some(why) => println!("docker: SKIPPED ({why})"),
        None => {
            let container = Container::start(paths);
            let floor = container.echo_p50(500);
            block_on(docker(paths, secs, &container, floor));
        }
    }
}

async fn docker(paths: &Paths, secs: u64, container: &Container, floor: f64) {
    let host = Host::start(container.config("/usr/local/bin/mcpgw-gateway")).unwrap();
    host.op(Op::StartGateway {}).await.unwrap();
    host.op(Op::AddMcp {
        spec: spec("/usr/local/bin/mcpgw-testserver"),
    })
    .await
    .unwrap();
    let window = secs.max(3) as f64;
    // No session yet: every call is a `docker exec` of its own.
    call(&host).await;
    let x = median(sequential(30, async || call(&host).await).await);
    let w = concurrent(&host, 16, window).await;
    // From here on every REST call travels over the one `docker exec -i` channel.
    host.op(Op::OpenSession {}).await.unwrap();
    call(&host).await;
    let y = median(sequential(500, async || call(&host).await).await);
    println!(
        "docker one-shot call p50 ms: {x:.2}\ndocker session call p50 ms: {y:.3} ({:.0}x below one-shot; bare `docker exec -i cat` echo of a line: {floor:.3}, {:.2}x of it; target <= 1 ms: {})",
        x / y,
        y / floor,
        verdict(y <= 1.0)
    );
    let z = concurrent(&host, 16, window).await;
    println!(
        "docker session calls/s at 16 in flight: {z:.0} (one-shot: {w:.1}); {:.0}x (target >= 100x: {})",
        z / w,
        verdict(z >= 100.0 * w)
    );

    // The same call as a virtual MCP connection's tools/call, over the same channel.
    let mut mcp = McpConnection::open(&host).await;
    for _ in 0..50 {
        mcp.call().await;
    }
    let c = median(sequential(500, async || mcp.call().await).await);
    let r = mcp.rate(16, window).await;
    println!(
        "docker mcp connection call p50 ms: {c:.3} (rest over session: {y:.3}); {:.2}x (target <= 1.1x: {})",
        c / y,
        verdict(c <= 1.1 * y)
    );
    println!(
        "docker mcp connection calls/s at 16 in flight: {r:.0} (rest over session: {z:.0}); {:.2}x (target >= 0.9x: {})",
        r / z,
        verdict(r >= 0.9 * z)
    );
    drop(mcp);
    host.op(Op::CloseSession {}).await.unwrap();

    // The 10 MiB static gateway into a fresh path: one exec with stdin (the docker backend
    // passes stdin), or staged pieces (what an exec function without stdin gets).
    let stdin_host = Host::start(container.config("/opt/stdin/mcpgw-gateway")).unwrap();
    let t = Instant::now();
    let status = stdin_host
        .op(Op::EnsureGatewayBinary {
            binary_path: paths.gateway.to_string_lossy().into_owned(),
        })
        .await
        .unwrap();
    let s = t.elapsed().as_secs_f64();
    assert!(
        matches!(status, Output::Binary(ref b) if b.uploaded),
        "{status:?}"
    );
    let t = tokio::task::block_in_place(|| staged_upload(paths, &container.0));
    println!(
        "upload 10 MiB gateway: stdin {s:.2} s, staged {t:.2} s (target stdin <= 1 s: {})",
        verdict(s <= 1.0)
    );
    host.op(Op::StopGateway {}).await.unwrap();
}

/// Seconds to install the gateway binary into `container` through an exec function that cannot
/// pass stdin (`docker exec` without `-i`): the binary goes in base64 pieces, one exec each.
fn staged_upload(paths: &Paths, container: &str) -> f64 {
    let exec = |command: &mcpgw::Command| -> ExecResult {
        let out = Command::new("docker")
            .args(["exec", container, "sh", "-c", &command.text])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run docker: {e}"))?;
        Ok(ExecOutput {
            exit_code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    };
    let client = Client::new(Config {
        gateway_path: "/opt/staged/mcpgw-gateway".into(),
        exec_stdin: false,
        ..Config::default()
    })
    .unwrap();
    let t = Instant::now();
    let status = client
        .ensure_gateway_binary(&exec, &CallOptions::default(), &paths.gateway)
        .unwrap();
    assert!(status.uploaded);
    t.elapsed().as_secs_f64()
}

/// A virtual MCP connection to the test server `ts` over a host's session channel: one
/// `tools/call` of `echo` at a time, or many in flight.
struct McpConnection {
    conn: mcpgw_runner::Connection,
    next: u64,
}

impl McpConnection {
    async fn open(host: &Host) -> McpConnection {
        let conn = host.connect("ts", "", "", false).await.unwrap();
        let mut c = McpConnection { conn, next: 0 };
        match c.conn.recv().await {
            Some(ConnectionEvent::Opened) => {}
            other => panic!("the connection did not open: {other:?}"),
        }
        c.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        )
        .await;
        c.answer().await;
        c.conn
            .send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .unwrap();
        c
    }

    async fn request(&mut self, method: &str, params: Value) {
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.conn.send(&msg.to_string()).await.unwrap();
    }

    /// Waits for one answer (notifications pass by), checking it is a result.
    async fn answer(&mut self) {
        loop {
            match self.conn.recv().await {
                Some(ConnectionEvent::Message(m)) => {
                    let m: Value = serde_json::from_str(m.get()).unwrap();
                    if m.get("id").is_some() {
                        assert!(m.get("result").is_some(), "{m}");
                        return;
                    }
                }
                other => panic!("the connection ended: {other:?}"),
            }
        }
    }

    async fn send_call(&mut self) {
        self.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hello"}}),
        )
        .await;
    }

    async fn call(&mut self) {
        self.send_call().await;
        self.answer().await;
    }

    /// Calls per second with `in_flight` calls outstanding for `secs`.
    async fn rate(&mut self, in_flight: usize, secs: f64) -> f64 {
        for _ in 0..in_flight {
            self.send_call().await;
        }
        let t = Instant::now();
        let mut done = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            self.answer().await;
            done += 1;
            self.send_call().await;
        }
        let rate = done as f64 / t.elapsed().as_secs_f64();
        for _ in 0..in_flight {
            self.answer().await;
        }
        rate
    }
}

fn local(paths: &Paths, secs: u64, wrk_direct: &dyn Fn(u16, &str, usize) -> f64) {
    let state = std::env::temp_dir().join(format!("mcpgw-bench-session-{}", std::process::id()));
    block_on(local_session(paths, &state, secs, wrk_direct));
    let _ = std::fs::remove_dir_all(&state);
}

async fn local_session(
    paths: &Paths,
    state: &std::path::Path,
    secs: u64,
    wrk_direct: &dyn Fn(u16, &str, usize) -> f64,
) {
    let mut config = HostConfig::new(Backend::Local { cwd: None });
    config.gateway_path = paths.gateway.to_string_lossy().into_owned();
    config.state_dir = Some(state.to_string_lossy().into_owned());
    let host = Host::start(config).unwrap();
    // The session launches the gateway (attach --launch): one exec gives a ready session.
    host.op(Op::OpenSession {}).await.unwrap();
    host.op(Op::AddMcp {
        spec: spec(&paths.testserver.to_string_lossy()),
    })
    .await
    .unwrap();
    for _ in 0..200 {
        call(&host).await;
    }
    let v = median(sequential(5000, async || call(&host).await).await);
    println!(
        "local session call p50 ms: {v:.3} (target <= 0.3 ms: {})",
        verdict(v <= 0.3)
    );
    let session_rate = concurrent(&host, 32, secs.max(3) as f64).await;
    let gateway = host.state().await.unwrap()["gateway"].clone();
    let port = gateway["port"].as_u64().unwrap() as u16;
    let token = std::fs::read_to_string(gateway["token_file"].as_str().unwrap()).unwrap();
    let direct = tokio::task::block_in_place(|| wrk_direct(port, token.trim(), 32));
    println!(
        "local session calls/s at 32 in flight: {session_rate:.0}; wrk on the gateway's port: {direct:.0}; {:.0}% (target >= 50%: {})",
        session_rate / direct * 100.0,
        verdict(session_rate >= 0.5 * direct)
    );
    host.op(Op::CloseSession {}).await.unwrap();
    host.op(Op::StopGateway {}).await.unwrap();
}
