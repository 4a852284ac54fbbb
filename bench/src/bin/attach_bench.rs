//! What a session channel costs: `mcpgw-gateway attach` over local pipes against wrk on the
//! gateway's own port, in one run, one upstream (the test server over stdio, tool `echo`).
//!
//! - sequential: one `req` frame at a time, p50 and p99 from writing the frame to reading its
//!   `res` line (the host's whole round trip through attach, the gateway and the upstream);
//! - 32 in flight: a closed loop that writes the next frame as each answer arrives;
//! - wrk at 1 and 32 connections with `bench/call.lua`, the same call and body.
//!
//! Rounds interleave the systems so that drift on a shared machine hits both alike.
//! `cargo run --release -p mcpgw-bench --bin attach_bench [-- SECONDS ROUNDS [THREADS]]` (the
//! gateway's `--threads`; its default when not given); the gateway is
//! the static release build when there is one (`make static`), else `target/release`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use mcpgw_bench::{Run, median};
use serde_json::{Value, json};

const ECHO_PATH: &str = "/mcps/ts/tools/echo";
const ECHO_BODY: &str = r#"{"arguments":{"text":"hello"}}"#;

struct Paths {
    root: PathBuf,
    gateway: PathBuf,
    testserver: PathBuf,
}

fn paths() -> Paths {
    let root = mcpgw_bench::repo_root();
    let target = mcpgw_bench::target_dir();
    let static_gateway = mcpgw_bench::static_gateway();
    let gateway = std::env::var_os("MCPGW_BENCH_GATEWAY")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            if static_gateway.exists() {
                static_gateway
            } else {
                target.join("release/mcpgw-gateway")
            }
        });
    let testserver = target.join("release/mcpgw-testserver");
    for p in [&gateway, &testserver] {
        assert!(
            p.exists(),
            "{} is missing: cargo build --release -p mcpgw-gateway -p mcpgw-testserver",
            p.display()
        );
    }
    Paths {
        root,
        gateway,
        testserver,
    }
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One attach session driven from this thread.
struct Session {
    _child: Killed,
    pid: u32,
    input: std::io::BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
}

impl Session {
    fn start(gateway: &PathBuf, port: u16, token_file: &std::path::Path) -> Session {
        let mut child = Command::new(gateway)
            .args(["attach", "--port", &port.to_string(), "--token-file"])
            .arg(token_file)
            .args(["--log-level", "warn"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut s = Session {
            pid: child.id(),
            input: std::io::BufWriter::with_capacity(64 * 1024, child.stdin.take().unwrap()),
            output: BufReader::with_capacity(256 * 1024, child.stdout.take().unwrap()),
            _child: Killed(child),
            line: String::new(),
            next_id: 1,
        };
        let hello = s.read();
        assert!(hello.contains("\"t\":\"hello\""), "{hello}");
        s
    }

    /// The next frame, skipping attach's heartbeats.
    fn read(&mut self) -> String {
        loop {
            self.line.clear();
            self.output.read_line(&mut self.line).unwrap();
            assert!(!self.line.is_empty(), "attach closed its stdout");
            if self.line.trim_end() != "{\"t\":\"ping\"}" {
                return self.line.clone();
            }
        }
    }

    /// Queues a call; returns its id.
    fn write_call(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        writeln!(
            self.input,
            "{{\"t\":\"req\",\"id\":{id},\"method\":\"POST\",\"path\":\"{ECHO_PATH}\",\"body\":{ECHO_BODY}}}"
        )
        .unwrap();
        id
    }

    /// Reads one answer line: its id, and whether it is a 200.
    fn read_answer(&mut self) -> (u64, bool) {
        self.read();
        let line = &self.line;
        let id_at = line.find("\"id\":").expect("an id") + 5;
        let digits = line[id_at..].bytes().take_while(u8::is_ascii_digit).count();
        let id = line[id_at..id_at + digits].parse().unwrap();
        (
            id,
            line.starts_with("{\"t\":\"res\"") && line.contains("\"status\":200"),
        )
    }

    fn request(&mut self, method: &str, path: &str, body: &Value) -> String {
        let frame = json!({"t": "req", "id": 0, "method": method, "path": path, "body": body});
        writeln!(self.input, "{frame}").unwrap();
        self.input.flush().unwrap();
        self.read()
    }
}

/// One call at a time for `secs`.
fn sequential(s: &mut Session, secs: f64) -> Run {
    let mut latencies = Vec::new();
    let mut errors = 0;
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < secs {
        let t = Instant::now();
        let id = s.write_call();
        s.input.flush().unwrap();
        let (got, ok) = s.read_answer();
        latencies.push(t.elapsed().as_secs_f64());
        assert_eq!(got, id);
        errors += u64::from(!ok);
    }
    Run::from_latencies(latencies, started.elapsed().as_secs_f64(), errors)
}

/// `depth` calls in flight for `secs`: the next one is written as each answer arrives.
fn in_flight(s: &mut Session, depth: usize, secs: f64) -> Run {
    let mut sent = std::collections::HashMap::with_capacity(depth * 2);
    for _ in 0..depth {
        let id = s.write_call();
        sent.insert(id, Instant::now());
    }
    s.input.flush().unwrap();
    let mut latencies = Vec::new();
    let mut errors = 0;
    let started = Instant::now();
    let mut stopping = false;
    while !sent.is_empty() {
        let (id, ok) = s.read_answer();
        let t = sent.remove(&id).expect("an answer to a call in flight");
        latencies.push(t.elapsed().as_secs_f64());
        errors += u64::from(!ok);
        stopping |= started.elapsed().as_secs_f64() >= secs;
        if !stopping {
            let id = s.write_call();
            sent.insert(id, Instant::now());
        }
        // Flush once per burst: only when no further answer is already buffered.
        if !s.output.buffer().contains(&b'\n') {
            s.input.flush().unwrap();
        }
    }
    Run::from_latencies(latencies, started.elapsed().as_secs_f64(), errors)
}

fn wrk(paths: &Paths, port: u16, token: &str, connections: usize, secs: u64) -> Run {
    let url = format!("http://127.0.0.1:{port}{ECHO_PATH}");
    mcpgw_bench::wrk(
        &url,
        token,
        connections,
        secs,
        &paths.root.join("bench/call.lua"),
    )
}

fn median_by(runs: &[Run], f: impl Fn(&Run) -> f64) -> f64 {
    median(runs.iter().map(f).collect())
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, r)| r.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the command name.
    fields
        .get(11)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let secs: u64 = args.first().map_or(3, |s| s.parse().unwrap());
    let rounds: usize = args.get(1).map_or(3, |s| s.parse().unwrap());
    // The gateway's workers (its own default when not given).
    let threads = args.get(2).map_or("0", String::as_str);
    let paths = paths();
    let dir = std::env::temp_dir().join(format!("mcpgw-attach-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("token");

    let mut gateway = Command::new(&paths.gateway)
        .args(["--port", "0", "--log-level", "warn", "--threads", threads])
        .arg("--token-file")
        .arg(&token_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(gateway.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let gateway_pid = gateway.id();
    let _gateway = Killed(gateway);
    let port = serde_json::from_str::<Value>(&ready).unwrap()["port"]
        .as_u64()
        .unwrap() as u16;
    let token = std::fs::read_to_string(&token_file).unwrap();

    let mut session = Session::start(&paths.gateway, port, &token_file);
    let spec = json!({"name": "ts", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": paths.testserver, "args": ["stdio"]}});
    let added = session.request("POST", "/mcps", &spec);
    assert!(added.contains("\"status\":200"), "{added}");

    println!(
        "gateway {} (port {port}); upstream mcpgw-testserver over stdio, tool echo; {rounds} rounds of {secs} s",
        paths.gateway.display()
    );
    // Warm up both paths (connections, caches, the upstream).
    sequential(&mut session, 0.5);
    in_flight(&mut session, 32, 0.5);
    wrk(&paths, port, &token, 32, 1);

    let (mut seq, mut par, mut w1, mut w32) = (vec![], vec![], vec![], vec![]);
    // CPU seconds per call of attach and of the gateway, from /proc (less sensitive to a busy
    // machine than wall-clock figures).
    let (mut attach_cpu, mut gateway_cpu_attach, mut gateway_cpu_wrk) = (vec![], vec![], vec![]);
    for round in 1..=rounds {
        seq.push(sequential(&mut session, secs as f64));
        let (a0, g0) = (cpu_ticks(session.pid), cpu_ticks(gateway_pid));
        par.push(in_flight(&mut session, 32, secs as f64));
        let calls = par.last().unwrap().calls as f64;
        attach_cpu.push((cpu_ticks(session.pid) - a0) as f64 / 100.0 / calls);
        gateway_cpu_attach.push((cpu_ticks(gateway_pid) - g0) as f64 / 100.0 / calls);
        w1.push(wrk(&paths, port, &token, 1, secs));
        let g0 = cpu_ticks(gateway_pid);
        w32.push(wrk(&paths, port, &token, 32, secs));
        let calls = w32.last().unwrap().calls as f64;
        gateway_cpu_wrk.push((cpu_ticks(gateway_pid) - g0) as f64 / 100.0 / calls);
        let last = |v: &Vec<Run>| *v.last().unwrap();
        println!(
            "round {round}: attach seq {:.0}/s p50 {:.3} ms | attach x32 {:.0}/s | wrk c1 {:.0}/s p50 {:.3} ms | wrk c32 {:.0}/s",
            last(&seq).per_sec(),
            last(&seq).p50_ms,
            last(&par).per_sec(),
            last(&w1).per_sec(),
            last(&w1).p50_ms,
            last(&w32).per_sec(),
        );
    }
    let errors: u64 = [&seq, &par, &w1, &w32]
        .iter()
        .flat_map(|v| v.iter())
        .map(|r| r.errors)
        .sum();
    println!("\nmedians over {rounds} rounds ({errors} errors):");
    println!("| | in flight | calls/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    for (name, depth, runs) in [
        ("attach (pipes)", 1, &seq),
        ("wrk on the port", 1, &w1),
        ("attach (pipes)", 32, &par),
        ("wrk on the port", 32, &w32),
    ] {
        println!(
            "| {name} | {depth} | {:.0} | {:.3} | {:.3} |",
            median_by(runs, Run::per_sec),
            median_by(runs, |r| r.p50_ms),
            median_by(runs, |r| r.p99_ms),
        );
    }
    let ratio = median_by(&par, Run::per_sec) / median_by(&w32, Run::per_sec);
    let p50 = median_by(&seq, |r| r.p50_ms);
    println!(
        "\nsequential p50 through attach: {p50:.3} ms (target <= 0.3 ms: {})",
        if p50 <= 0.3 { "met" } else { "MISSED" }
    );
    println!(
        "32 in flight: attach serves {:.0}% of wrk's calls/s (target >= 50%: {})",
        ratio * 100.0,
        if ratio >= 0.5 { "met" } else { "MISSED" },
    );
    println!(
        "CPU per call at 32 in flight: attach {:.1} us; the gateway {:.1} us behind attach, {:.1} us behind wrk",
        median(attach_cpu) * 1e6,
        median(gateway_cpu_attach) * 1e6,
        median(gateway_cpu_wrk) * 1e6,
    );
    drop(session);
    let _ = std::fs::remove_dir_all(&dir);
}
