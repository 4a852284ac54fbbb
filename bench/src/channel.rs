//! The exec channel: one-shot commands against the session channel, through a real Docker
//! container (`docker exec` / `docker exec -i`) and a local pipe, in one run; and the gateway
//! binary's upload with stdin against staged pieces.

use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use mcpgw::session::Session;
use mcpgw::session::blocking::BlockingSession;
use mcpgw::{CallOptions, Client, Config, Exec, ExecOutput, ExecResult};

use crate::{Paths, median, verdict};

/// `docker exec [-i] CONTAINER sh -c TEXT`, passing stdin when the command has some.
struct DockerExec {
    container: String,
}

impl Exec for DockerExec {
    fn exec(&self, command: &mcpgw::Command) -> ExecResult {
        let mut cmd = Command::new("docker");
        cmd.arg("exec");
        if command.stdin.is_some() {
            cmd.arg("-i");
        }
        let mut child = cmd
            .args([&self.container, "sh", "-c", &command.text])
            .stdin(if command.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run docker: {e}"))?;
        if let (Some(bytes), Some(mut pipe)) = (command.stdin.clone(), child.stdin.take()) {
            std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            });
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        Ok(ExecOutput {
            exit_code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// A session channel spawned under `prefix` (the argv before the `sh -c` text).
struct Channel {
    child: Child,
    session: BlockingSession,
}

fn open(client: &Client, prefix: &[&str]) -> Channel {
    let (session, command) = Session::open(client).unwrap();
    let mut child = Command::new(prefix[0])
        .args(&prefix[1..])
        .arg(&command.text)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (stdout, stdin) = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
    let session = BlockingSession::start(session, stdout, stdin, Duration::from_secs(30))
        .expect("the session opens");
    Channel { child, session }
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.session.close();
        let _ = self.child.wait();
    }
}

fn opts() -> CallOptions {
    CallOptions {
        timeout: Some(Duration::from_secs(60)),
        ..CallOptions::default()
    }
}

const ECHO: &str = r#"{"text":"hello"}"#;

/// Milliseconds of each of `n` sequential calls of `call`.
fn sequential(n: usize, mut call: impl FnMut()) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            call();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

/// Calls per second with `callers` threads calling `call` for `secs`.
fn concurrent(callers: usize, secs: f64, call: impl Fn() + Sync) -> f64 {
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let t = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..callers {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    call();
                    done.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
    });
    done.load(Ordering::Relaxed) as f64 / t.elapsed().as_secs_f64()
}

fn spec(testserver: &str) -> String {
    serde_json::json!({
        "name": "ts",
        "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}
    })
    .to_string()
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
        let image = Command::new(&script)
            .args(["image", "--gateway"])
            .arg(&paths.gateway)
            .arg("--testserver")
            .arg(&paths.static_testserver)
            .output()
            .unwrap();
        assert!(
            image.status.success(),
            "{}",
            String::from_utf8_lossy(&image.stderr)
        );
        let image = String::from_utf8_lossy(&image.stdout).trim().to_owned();
        let id = Command::new(&script)
            .args(["start", &image])
            .output()
            .unwrap();
        assert!(
            id.status.success(),
            "{}",
            String::from_utf8_lossy(&id.stderr)
        );
        Container(String::from_utf8_lossy(&id.stdout).trim().to_owned())
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
        None => docker(paths, secs),
    }
}

fn docker(paths: &Paths, secs: u64) {
    let container = Container::start(paths);
    let exec = DockerExec {
        container: container.0.clone(),
    };
    let client = Client::new(Config {
        gateway_path: "/usr/local/bin/mcpgw-gateway".into(),
        state_dir: Some(DOCKER_STATE.into()),
        ..Config::default()
    })
    .unwrap();
    client.start_gateway(&exec, &opts()).unwrap();
    client
        .add_mcp(&exec, &opts(), &spec("/usr/local/bin/mcpgw-testserver"))
        .unwrap();
    let one_shot = || {
        client
            .call_tool(&exec, &opts(), "ts", "echo", ECHO)
            .unwrap();
    };
    one_shot();
    let x = median(sequential(30, one_shot));
    let prefix = ["docker", "exec", "-i", container.0.as_str(), "sh", "-c"];
    let channel = open(&client, &prefix);
    let session_call = || {
        channel
            .session
            .call(client.prepare_call_tool(&opts(), "ts", "echo", ECHO), None)
            .unwrap();
    };
    session_call();
    let y = median(sequential(500, session_call));
    println!(
        "docker one-shot call p50 ms: {x:.2}\ndocker session call p50 ms: {y:.3} ({:.0}x below one-shot; target <= 1 ms: {})",
        x / y,
        verdict(y <= 1.0)
    );
    let window = secs.max(3) as f64;
    let z = concurrent(16, window, session_call);
    let w = concurrent(16, window, one_shot);
    println!(
        "docker session calls/s at 16 in flight: {z:.0} (one-shot: {w:.1}); {:.0}x (target >= 100x: {})",
        z / w,
        verdict(z >= 100.0 * w)
    );
    drop(channel);

    // The same call as a virtual MCP connection's tools/call, over its own docker exec -i.
    let mut mcp = McpConnection::open(&container.0, client.port().unwrap());
    for _ in 0..50 {
        mcp.call();
    }
    let c = median(sequential(500, || mcp.call()));
    let r = mcp.rate(16, window);
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

    // The 10 MiB static gateway into a fresh path: one exec with stdin, or staged pieces.
    let upload = |stdin: bool, path: &str| {
        let client = Client::new(Config {
            gateway_path: path.into(),
            exec_stdin: stdin,
            ..Config::default()
        })
        .unwrap();
        let t = Instant::now();
        let status = client
            .ensure_gateway_binary(&exec, &opts(), &paths.gateway)
            .unwrap();
        assert!(status.uploaded);
        t.elapsed().as_secs_f64()
    };
    let s = upload(true, "/opt/stdin/mcpgw-gateway");
    let t = upload(false, "/opt/staged/mcpgw-gateway");
    println!(
        "upload 10 MiB gateway: stdin {s:.2} s, staged {t:.2} s (target stdin <= 1 s: {})",
        verdict(s <= 1.0)
    );
    client.stop_gateway(&exec, &opts()).unwrap();
}

/// Where the gateway of the Docker measurements keeps its token.
const DOCKER_STATE: &str = "/tmp/mcpgw-bench";

/// A virtual MCP connection to the test server `ts` over `attach` in a container, spoken at
/// the frame level: one `tools/call` of `echo` at a time, or many in flight.
struct McpConnection {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Vec<u8>>,
    next: u64,
}

impl McpConnection {
    fn open(container: &str, port: u16) -> McpConnection {
        let mut child = Command::new("docker")
            .args([
                "exec",
                "-i",
                container,
                "/usr/local/bin/mcpgw-gateway",
                "attach",
                "--port",
            ])
            .arg(port.to_string())
            .args(["--token-file", &format!("{DOCKER_STATE}/token")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            let mut reader = std::io::BufReader::new(stdout);
            loop {
                let mut line = Vec::new();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut c = McpConnection {
            child,
            stdin,
            lines,
            next: 0,
        };
        c.frame_of("hello");
        c.send(r#"{"t":"open","id":1,"path":"/mcps/ts/connection?agent_id=&session_id="}"#);
        c.frame_of("opened");
        c.request(
            r#""initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#,
        );
        c.answer();
        c.send(
            r#"{"t":"msg","id":1,"msg":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#,
        );
        c
    }

    fn send(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.write_all(b"\n").unwrap();
    }

    fn frame_of(&mut self, t: &str) -> serde_json::Value {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("a frame");
            let frame: serde_json::Value = serde_json::from_slice(&line).unwrap();
            if frame["t"] == t {
                return frame;
            }
        }
    }

    /// Sends request `method_and_params` (the JSON text after `"method":`).
    fn request(&mut self, method_and_params: &str) {
        self.next += 1;
        let line = format!(
            r#"{{"t":"msg","id":1,"msg":{{"jsonrpc":"2.0","id":{},"method":{method_and_params}}}}}"#,
            self.next
        );
        self.send(&line);
    }

    /// Waits for one answer, checking it is one.
    fn answer(&mut self) {
        let frame = self.frame_of("msg");
        assert!(frame["msg"].get("result").is_some(), "{frame}");
    }

    fn send_call(&mut self) {
        self.request(r#""tools/call","params":{"name":"echo","arguments":{"text":"hello"}}"#);
    }

    fn call(&mut self) {
        self.send_call();
        self.answer();
    }

    /// Calls per second with `in_flight` calls outstanding for `secs`.
    fn rate(&mut self, in_flight: usize, secs: f64) -> f64 {
        for _ in 0..in_flight {
            self.send_call();
        }
        let t = Instant::now();
        let mut done = 0u64;
        while t.elapsed().as_secs_f64() < secs {
            self.answer();
            done += 1;
            self.send_call();
        }
        let rate = done as f64 / t.elapsed().as_secs_f64();
        for _ in 0..in_flight {
            self.answer();
        }
        rate
    }
}

impl Drop for McpConnection {
    fn drop(&mut self) {
        let _ = self.stdin.write_all(b"{\"t\":\"close\",\"id\":1}\n");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn local(paths: &Paths, secs: u64, wrk_direct: &dyn Fn(u16, &str, usize) -> f64) {
    let state = std::env::temp_dir().join(format!("mcpgw-bench-session-{}", std::process::id()));
    let client = Client::new(Config {
        gateway_path: paths.gateway.to_string_lossy().into_owned(),
        state_dir: Some(state.to_string_lossy().into_owned()),
        ..Config::default()
    })
    .unwrap();
    // The session launches the gateway (attach --launch): one exec gives a ready session.
    let channel = open(&client, &["sh", "-c"]);
    let testserver = paths.testserver.to_string_lossy().into_owned();
    channel
        .session
        .call(client.prepare_add_mcp(&opts(), &spec(&testserver)), None)
        .unwrap();
    let call = || {
        channel
            .session
            .call(client.prepare_call_tool(&opts(), "ts", "echo", ECHO), None)
            .unwrap();
    };
    for _ in 0..200 {
        call();
    }
    let v = median(sequential(5000, call));
    println!(
        "local session call p50 ms: {v:.3} (target <= 0.3 ms: {})",
        verdict(v <= 0.3)
    );
    let session_rate = concurrent(32, secs.max(3) as f64, call);
    let port = client.port().unwrap();
    let token = std::fs::read_to_string(state.join("token")).unwrap();
    let direct = wrk_direct(port, token.trim(), 32);
    println!(
        "local session calls/s at 32 in flight: {session_rate:.0}; wrk on the gateway's port: {direct:.0}; {:.0}% (target >= 50%: {})",
        session_rate / direct * 100.0,
        verdict(session_rate >= 0.5 * direct)
    );
    drop(channel);
    client
        .stop_gateway(&mcpgw::LocalShell::new(), &opts())
        .unwrap();
    let _ = std::fs::remove_dir_all(&state);
}
