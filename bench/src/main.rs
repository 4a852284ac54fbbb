//! `make bench`: what mcpgw costs, measured side by side with its baselines in one run.
//!
//! Gateway side, one upstream (the project's test server over stdio, tool `echo`), interleaved
//! rounds at 1 and 32 concurrent callers:
//! - direct: rmcp calls straight to the upstream from this process (the floor);
//! - mcpgw: the static release `mcpgw-gateway`, driven by wrk;
//! - agentscope: AgentScope 2.0.11's Python gateway, driven by the same wrk script.
//!
//! plus the gateway's RSS with one upstream and its cold start to listening.
//!
//! Host side: the cost of one call through a local `sh -c` exec with curl, with the gateway's
//! built-in client, and with AgentScope's own python3 shim (`GatewayClient.exec_request`), all
//! against the same gateway; and the library's own time to build a call and decode its result.

mod channel;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mcpgw::{CallOptions, Client, Config, Exec, ExecOutput, LocalShell, Transport};
use mcpgw_bench::{Run, median};
use mcpgw_testkit::succeeded;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

const CONCURRENCY: [usize; 2] = [1, 32];

struct Paths {
    root: PathBuf,
    gateway: PathBuf,
    testserver: PathBuf,
    /// The static test server, for the busybox-only container image.
    static_testserver: PathBuf,
    python: PathBuf,
}

impl Paths {
    fn find() -> Paths {
        let root = mcpgw_bench::repo_root();
        let target = mcpgw_bench::target_dir();
        let paths = Paths {
            gateway: mcpgw_bench::static_gateway(),
            testserver: mcpgw_bench::release_testserver(),
            static_testserver: target.join("x86_64-unknown-linux-gnu/release/mcpgw-testserver"),
            python: root.join(".venv/bin/python"),
            root,
        };
        for p in [
            &paths.gateway,
            &paths.testserver,
            &paths.static_testserver,
            &paths.python,
        ] {
            assert!(p.exists(), "{} is missing: run `make bench`", p.display());
        }
        paths
    }
}

/// Runs of one system at one concurrency, over the rounds.
#[derive(Default)]
struct Series(Vec<Run>);

impl Series {
    fn calls_per_sec(&self) -> f64 {
        let calls: u64 = self.0.iter().map(|r| r.calls).sum();
        let secs: f64 = self.0.iter().map(|r| r.secs).sum();
        calls as f64 / secs
    }
    fn p50(&self) -> f64 {
        median(self.0.iter().map(|r| r.p50_ms).collect())
    }
    fn p99(&self) -> f64 {
        median(self.0.iter().map(|r| r.p99_ms).collect())
    }
    fn errors(&self) -> u64 {
        self.0.iter().map(|r| r.errors).sum()
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16, limit: Duration) -> Duration {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(t.elapsed() < limit, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(2));
    }
    t.elapsed()
}

/// A gateway process under test, killed on drop.
struct Gateway {
    child: Child,
    port: u16,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn rss_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Registers the test server through the gateway's REST contract (both gateways speak it), using
/// the gateway binary's built-in client.
fn register(paths: &Paths, port: u16, token: &str) {
    let spec = json!({"name": "ts", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": paths.testserver, "args": ["stdio"]}});
    let out = Command::new(&paths.gateway)
        .args([
            "request",
            "POST",
            "/mcps",
            "--port",
            &port.to_string(),
            "--data",
        ])
        .arg(spec.to_string())
        .env("MCPGW_TOKEN", token)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.ends_with("mcpgw-http-status:200\n"),
        "registering on port {port} failed: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the gateway in the foreground with `args` and returns it with the port of its ready line.
fn spawn_gateway(paths: &Paths, args: &[&str], token: Option<&str>) -> Gateway {
    let mut cmd = Command::new(&paths.gateway);
    cmd.args(["--port", "0", "--log-level", "warn"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(token) = token {
        cmd.env("MCPGW_TOKEN", token);
    }
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    let port = ready["port"].as_u64().unwrap() as u16;
    Gateway { child, port }
}

fn start_mcpgw(paths: &Paths, token: &str, extra: &[String]) -> Gateway {
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let gateway = spawn_gateway(paths, &extra, Some(token));
    register(paths, gateway.port, token);
    gateway
}

fn start_agentscope(paths: &Paths, token: &str) -> Gateway {
    let port = free_port();
    let child = Command::new(&paths.python)
        .args([
            "-m",
            "agentscope.workspace._mcp_gateway",
            "--port",
            &port.to_string(),
            "--auth-token",
            token,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port, Duration::from_secs(60));
    register(paths, port, token);
    Gateway { child, port }
}

fn wrk(port: u16, token: &str, callers: usize, secs: u64, script: &Path) -> Run {
    let url = format!("http://127.0.0.1:{port}/mcps/ts/tools/echo");
    mcpgw_bench::wrk(&url, token, callers, secs, script)
}

/// The floor: `callers` tasks calling `echo` on one rmcp session to the upstream, back to back.
async fn direct(peer: &rmcp::service::Peer<rmcp::RoleClient>, callers: usize, secs: u64) -> Run {
    let until = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let peer = peer.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut errors = 0;
                let args = json!({"text": "hello"}).as_object().unwrap().clone();
                while Instant::now() < until {
                    let t = Instant::now();
                    let params = CallToolRequestParams::new("echo").with_arguments(args.clone());
                    match peer.call_tool(params).await {
                        Ok(_) => latencies.push(t.elapsed().as_secs_f64()),
                        Err(_) => errors += 1,
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        all.extend(l);
        errors += e;
    }
    Run::from_latencies(all, started.elapsed().as_secs_f64(), errors)
}

fn cold_start(paths: &Paths, runs: usize) -> Vec<f64> {
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            let gateway = spawn_gateway(paths, &["--no-auth"], None);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            drop(gateway);
            ms
        })
        .collect()
}

fn agentscope_cold_start(paths: &Paths) -> f64 {
    let port = free_port();
    let t = Instant::now();
    let _gw = Gateway {
        child: Command::new(&paths.python)
            .args([
                "-m",
                "agentscope.workspace._mcp_gateway",
                "--port",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
        port,
    };
    wait_port(port, Duration::from_secs(60));
    t.elapsed().as_secs_f64() * 1e3
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "meets target" } else { "MISSES target" }
}

/// Per-call wall time of `calls` echo calls through `client` and `exec`.
fn host_calls(client: &Client, exec: &impl Exec, calls: usize) -> Vec<f64> {
    let opts = CallOptions::default();
    (0..calls)
        .map(|_| {
            let t = Instant::now();
            let chunk = client
                .call_tool(exec, &opts, "ts", "echo", r#"{"text":"hello"}"#)
                .unwrap();
            let ms = t.elapsed().as_secs_f64() * 1e3;
            assert_eq!(chunk.content.len(), 1);
            ms
        })
        .collect()
}

/// The library's own time for one call: prepare, build the command, decode `answer` into a
/// ToolChunk. No process runs.
fn library_time(client: &Client, answer: &ExecOutput, iterations: usize) -> f64 {
    let opts = CallOptions::default();
    let t = Instant::now();
    for _ in 0..iterations {
        let mut op = client.prepare_call_tool(&opts, "ts", "big", r#"{"bytes":1}"#);
        let text_len = op.command().map(|c| c.text.len()).unwrap_or(0);
        assert!(text_len > 0);
        op.complete(Ok(answer.clone())).unwrap();
        let out = op.finish().unwrap();
        std::hint::black_box(out);
    }
    t.elapsed().as_secs_f64() * 1e6 / iterations as f64
}

fn main() {
    let mut secs = 3;
    let mut rounds = 3;
    let mut gateway_args = Vec::new();
    let mut gateway_only = false;
    let mut docker_only = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => secs = it.next().and_then(|v| v.parse().ok()).expect("--seconds N"),
            "--rounds" => rounds = it.next().and_then(|v| v.parse().ok()).expect("--rounds N"),
            "--quick" => (secs, rounds) = (1, 1),
            "--gateway-arg" => gateway_args.push(it.next().expect("--gateway-arg ARG").clone()),
            "--gateway-only" => gateway_only = true,
            "--docker-only" => docker_only = true,
            other => panic!(
                "unknown argument {other} (use --seconds N, --rounds N, --quick, --gateway-arg ARG, --gateway-only, --docker-only)"
            ),
        }
    }
    let paths = Paths::find();
    if docker_only {
        channel::docker_side(&paths, secs);
        return;
    }
    let script = paths.root.join("bench/call.lua");
    let token = mcpgw::random::mint_token();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "mcpgw bench: {cores} cores, {rounds} interleaved rounds of {secs}s per system and concurrency"
    );
    println!(
        "upstream: mcpgw-testserver over stdio, tool `echo`; load: wrk (HTTP), rmcp (direct)\n"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut upstream = tokio::process::Command::new(&paths.testserver)
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let transport = (
        upstream.stdout.take().unwrap(),
        upstream.stdin.take().unwrap(),
    );
    let service = runtime.block_on(async { ().serve(transport).await.unwrap() });
    let peer = service.peer().clone();

    let mcpgw = start_mcpgw(&paths, &token, &gateway_args);
    let agentscope = start_agentscope(&paths, &token);
    // Warm-up: first connections, JIT-free but caches and allocators settle.
    wrk(mcpgw.port, &token, 4, 1, &script);
    wrk(agentscope.port, &token, 4, 1, &script);
    runtime.block_on(direct(&peer, 4, 1));

    let mut series: Vec<[Series; 3]> = CONCURRENCY.iter().map(|_| Default::default()).collect();
    for round in 0..rounds {
        for (i, &callers) in CONCURRENCY.iter().enumerate() {
            series[i][0]
                .0
                .push(runtime.block_on(direct(&peer, callers, secs)));
            series[i][1]
                .0
                .push(wrk(mcpgw.port, &token, callers, secs, &script));
            series[i][2]
                .0
                .push(wrk(agentscope.port, &token, callers, secs, &script));
        }
        eprintln!("round {}/{rounds} done", round + 1);
    }

    println!(
        "{:<12} {:>7} {:>11} {:>9} {:>9} {:>7}",
        "system", "callers", "calls/s", "p50 ms", "p99 ms", "errors"
    );
    for (i, &callers) in CONCURRENCY.iter().enumerate() {
        for (name, s) in ["direct rmcp", "mcpgw", "agentscope"]
            .iter()
            .zip(&series[i])
        {
            println!(
                "{name:<12} {callers:>7} {:>11.0} {:>9.3} {:>9.3} {:>7}",
                s.calls_per_sec(),
                s.p50(),
                s.p99(),
                s.errors()
            );
        }
    }
    let [d1, m1, _] = &series[0];
    let [d32, m32, a32] = &series[1];
    let vs_agentscope = m32.calls_per_sec() / a32.calls_per_sec();
    let vs_floor = m32.calls_per_sec() / d32.calls_per_sec();
    let overhead = m1.p50() - d1.p50();
    println!();
    println!(
        "at 32 callers: mcpgw serves {vs_agentscope:.1}x AgentScope's calls/s (target >= 10x: {})",
        verdict(vs_agentscope >= 10.0)
    );
    println!(
        "at 32 callers: mcpgw serves {:.0}% of the direct floor (target >= 70%: {})",
        vs_floor * 100.0,
        verdict(vs_floor >= 0.7)
    );
    println!(
        "at 1 caller: mcpgw adds {:.3} ms at p50 over direct (target <= 0.1 ms: {})",
        overhead,
        verdict(overhead <= 0.1)
    );

    let rss = rss_kib(mcpgw.child.id(), "VmRSS:");
    let hwm = rss_kib(mcpgw.child.id(), "VmHWM:");
    let as_rss = rss_kib(agentscope.child.id(), "VmRSS:");
    println!(
        "mcpgw RSS with one upstream: {:.1} MiB now, {:.1} MiB peak (target <= 12 MiB: {}); AgentScope's gateway: {:.1} MiB",
        rss as f64 / 1024.0,
        hwm as f64 / 1024.0,
        verdict(hwm as f64 / 1024.0 <= 12.0),
        as_rss as f64 / 1024.0
    );
    let starts = cold_start(&paths, 25);
    let start_p50 = median(starts.clone());
    let as_start = agentscope_cold_start(&paths);
    println!(
        "cold start to listening: mcpgw {start_p50:.1} ms p50 of {} (target <= 20 ms: {}); AgentScope's gateway {as_start:.0} ms",
        starts.len(),
        verdict(start_p50 <= 20.0)
    );
    let size = std::fs::metadata(&paths.gateway)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "static gateway binary: {:.1} MiB",
        size as f64 / (1 << 20) as f64
    );
    drop(mcpgw);
    drop(agentscope);

    if !gateway_only {
        host_side(&paths, secs);
        let wrk_direct = |port: u16, token: &str, callers: usize| {
            let run = wrk(port, token, callers, secs, &script);
            run.calls as f64 / run.secs
        };
        channel::channel_side(&paths, secs, &wrk_direct);
    }
    drop(service);
}

fn host_side(paths: &Paths, secs: u64) {
    println!("\nhost side: one tool call through a local `sh -c` exec (libmcpgw), same gateway");
    let sandbox = std::env::temp_dir().join(format!("mcpgw-bench-{}", std::process::id()));
    std::fs::create_dir_all(&sandbox).unwrap();
    let exec = LocalShell::new().in_dir(&sandbox);
    let launcher = Client::new(Config {
        gateway_path: paths.gateway.display().to_string(),
        state_dir: Some(sandbox.join("state").display().to_string()),
        ..Config::default()
    })
    .unwrap();
    let info = launcher
        .start_gateway(&exec, &CallOptions::default())
        .unwrap();
    let spec = json!({"name": "ts", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": paths.testserver, "args": ["stdio"]}});
    launcher
        .add_mcp(&exec, &CallOptions::default(), &spec.to_string())
        .unwrap();
    let attached = |transport| {
        Client::new(Config {
            gateway_path: paths.gateway.display().to_string(),
            port: info.port,
            token_file: Some(info.token_file.clone()),
            transport: Some(transport),
            ..Config::default()
        })
        .unwrap()
    };
    let curl = attached(Transport::Curl);
    let builtin = attached(Transport::BuiltIn);
    let calls = (secs as usize * 40).max(40);
    let (mut via_curl, mut via_builtin) = (Vec::new(), Vec::new());
    for _ in 0..4 {
        via_curl.extend(host_calls(&curl, &exec, calls / 4));
        via_builtin.extend(host_calls(&builtin, &exec, calls / 4));
    }
    let token = std::fs::read_to_string(&info.token_file).unwrap();
    let out = succeeded(
        Command::new(&paths.python)
            .arg(paths.root.join("bench/agentscope_shim.py"))
            .args([&info.port.to_string(), token.trim(), "30"]),
    );
    let shim: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shim: Vec<f64> = shim["ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let bare: Vec<f64> = (0..50)
        .map(|_| {
            let t = Instant::now();
            exec.exec(&mcpgw::Command::new("true", Duration::from_secs(5)))
                .unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (c, b, s) = (
        median(via_curl.clone()),
        median(via_builtin.clone()),
        median(shim.clone()),
    );
    println!("{:<34} {:>9} {:>9}", "transport", "p50 ms", "mean ms");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    println!(
        "{:<34} {:>9.2} {:>9.2}",
        "bare `sh -c true` (the exec floor)",
        median(bare.clone()),
        mean(&bare)
    );
    println!("{:<34} {c:>9.2} {:>9.2}", "curl", mean(&via_curl));
    println!(
        "{:<34} {b:>9.2} {:>9.2}",
        "mcpgw-gateway request (built-in)",
        mean(&via_builtin)
    );
    println!(
        "{:<34} {s:>9.2} {:>9.2}",
        "AgentScope python3 shim",
        mean(&shim)
    );
    println!(
        "built-in client: {:.1}x faster than AgentScope's shim; curl: {:.1}x",
        s / b,
        s / c
    );
    println!(
        "per call with curl: {c:.2} ms (target <= 5 ms: {})",
        verdict(c <= 5.0)
    );
    println!(
        "per call with the built-in client: {b:.2} ms (target <= 3 ms: {})",
        verdict(b <= 3.0)
    );

    // Library time: real gateway answers, replayed through prepare/complete in-process.
    let capture = |bytes: usize| {
        let op = builtin.prepare_call_tool(
            &CallOptions::default(),
            "ts",
            "big",
            &json!({"bytes": bytes}).to_string(),
        );
        let cmd = op.command().unwrap().clone();
        exec.exec(&cmd).unwrap()
    };
    for (label, bytes, iterations) in [("1 KiB", 1024, 20_000), ("1 MiB", 1 << 20, 100)] {
        let answer = capture(bytes);
        let us = library_time(&builtin, &answer, iterations);
        let note = if bytes == 1024 {
            format!(" (target < 20 us: {})", verdict(us < 20.0))
        } else {
            String::new()
        };
        println!("library time for a call with a {label} result: {us:.1} us{note}");
    }
    launcher
        .stop_gateway(&exec, &CallOptions::default())
        .unwrap();
    let _ = std::fs::remove_dir_all(&sandbox);
}
