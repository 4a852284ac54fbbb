//! `make soak`: 100,000 tool calls at 50 in flight against the static release gateway, through
//! its HTTP surface and through the host driver (a session channel), with faults injected all
//! along: upstream kills, garbage lines from an upstream, slow calls, calls past their deadline,
//! cancellations (callers that hang up, session cancels), registrations cancelled mid-connect,
//! and the session channel's process killed at random every few seconds while calls run over it
//! (they resume on the channel the driver opens again).
//!
//! Every call that should succeed is checked against what it sent, streamed calls for each of
//! their progress chunks once. It prints `soak: N calls, lost L, wrong W, duplicated D, resumed
//! R, channels cut C, rss start/mid/end MiB, fds start/end` and fails on any loss, mismatch or
//! duplicate, on the gateway's RSS growing over 10% in the second half of the run, or on any
//! growth of its open descriptors.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpgw::ErrorKind;
use mcpgw::client::Output;
use mcpgw::driver::{Backend, HostConfig, Op, Submit};
use mcpgw_runner::Host;
use serde_json::{Value, json};
use tokio::runtime::Handle;

/// A keep-alive HTTP/1.1 connection to the gateway.
struct Http {
    port: u16,
    token: String,
    conn: Option<BufReader<TcpStream>>,
}

impl Http {
    fn new(port: u16, token: &str) -> Http {
        Http {
            port,
            token: token.to_owned(),
            conn: None,
        }
    }

    fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        if self.conn.is_none() {
            let s = TcpStream::connect(("127.0.0.1", self.port))?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(Duration::from_secs(60)))?;
            self.conn = Some(BufReader::new(s));
        }
        let result = self.exchange(method, path, body);
        if result.is_err() {
            self.conn = None;
        }
        result
    }

    fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> std::io::Result<(u16, Vec<u8>)> {
        let conn = self.conn.as_mut().expect("connected");
        let body = body.unwrap_or("");
        write!(
            conn.get_mut(),
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            self.token,
            body.len()
        )?;
        let mut line = String::new();
        conn.read_line(&mut line)?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut len = 0usize;
        loop {
            line.clear();
            conn.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut out = vec![0; len];
        conn.read_exact(&mut out)?;
        Ok((status, out))
    }

    /// Sends a call and hangs up before its answer: the gateway cancels it upstream.
    fn hang_up(&self, path: &str, body: &str) {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
            let _ = write!(
                s,
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                self.token,
                body.len()
            );
            let _ = s.flush();
            // Waits until the request is surely read, then drops the connection.
            let _ = s.set_read_timeout(Some(Duration::from_millis(30)));
            let _ = s.read(&mut [0u8; 1]);
        }
    }
}

fn echo_text(chunk: &Value) -> Option<&str> {
    chunk["content"][0]["text"].as_str()
}

fn status_of(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    lost: AtomicU64,
    wrong: AtomicU64,
    duplicated: AtomicU64,
    faults: AtomicU64,
}

/// The session side: the host driver on a runtime, called from the soak's threads.
struct SessionSide {
    host: Host,
    rt: Handle,
}

impl SessionSide {
    fn call(
        &self,
        tool: &str,
        arguments: Value,
        progress: bool,
    ) -> (Result<Output, mcpgw::Error>, usize) {
        let mut submit = Submit::new(Op::CallTool {
            mcp: "ts".into(),
            tool: tool.into(),
            arguments,
        });
        submit.timeout_ms = Some(30_000);
        submit.stream = progress;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let result = self
            .rt
            .block_on(self.host.run(submit, progress.then_some(tx)));
        let mut chunks = 0;
        while rx.try_recv().is_ok() {
            chunks += 1;
        }
        (result, chunks)
    }
}

/// The attach processes relaying to the gateway whose nonce is `nonce`.
fn attaches(nonce: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(" attach ") && text.contains(nonce) {
            out.push(pid);
        }
    }
    out
}

fn main() -> ExitCode {
    let mut total: usize = 100_000;
    let mut in_flight: usize = 50;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--calls" => total = it.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--in-flight" => {
                in_flight = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--in-flight N")
            }
            other => panic!("unknown argument {other} (use --calls N, --in-flight N)"),
        }
    }
    let gateway = std::env::var_os("MCPGW_SOAK_GATEWAY")
        .map_or_else(mcpgw_bench::static_gateway, PathBuf::from);
    let testserver = std::env::var_os("MCPGW_SOAK_TESTSERVER")
        .map_or_else(mcpgw_bench::release_testserver, PathBuf::from);
    for p in [&gateway, &testserver] {
        assert!(p.exists(), "{} is missing: run `make soak`", p.display());
    }
    let state = std::env::temp_dir().join(format!("mcpgw-soak-{}", std::process::id()));
    let launch = Command::new(&gateway)
        .args([
            "--daemon",
            "--port",
            "0",
            "--call-timeout",
            "30",
            "--instance-nonce",
            "soak",
        ])
        .arg("--token-file")
        .arg(state.join("token"))
        .arg("--log-file")
        .arg(state.join("gateway.log"))
        .stderr(Stdio::inherit())
        .output()
        .expect("the gateway launches");
    assert!(launch.status.success(), "the gateway did not start");
    let ready: Value = serde_json::from_slice(&launch.stdout).expect("a ready line");
    let (port, pid) = (
        ready["port"].as_u64().unwrap() as u16,
        ready["pid"].as_u64().unwrap() as u32,
    );
    let token = std::fs::read_to_string(state.join("token"))
        .unwrap()
        .trim()
        .to_owned();

    let mut admin = Http::new(port, &token);
    let ts = testserver.to_string_lossy().into_owned();
    for name in ["ts", "victim"] {
        let spec = json!({"name": name, "mcp_config": {"type": "stdio_mcp", "command": ts, "args": ["stdio"]}});
        let (status, body) = admin
            .request("POST", "/mcps", Some(&spec.to_string()))
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    // The library's path: the host driver's session channel to the running gateway.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut config = HostConfig::new(Backend::Local { cwd: None });
    config.gateway_path = gateway.to_string_lossy().into_owned();
    config.port = port;
    config.token_file = Some(state.join("token").to_string_lossy().into_owned());
    config.instance_nonce = Some("soak".into());
    config.timeout_ms = 30_000;
    let host = runtime.block_on(async { Host::start(config) }).unwrap();
    runtime.block_on(host.op(Op::OpenSession {})).unwrap();
    let session = SessionSide {
        host: host.clone(),
        rt: runtime.handle().clone(),
    };
    // The channel's process killed at random every 1 to 4 seconds while the calls run.
    let stop_cuts = std::sync::atomic::AtomicBool::new(false);
    let cuts = AtomicU64::new(0);

    let tally = Tally::default();
    let next = AtomicUsize::new(0);
    let warm = total / 20;
    let mut start_mark = (0u64, 0usize);
    // The gateway's RSS halfway: its allocator fills to a plateau over the first seconds
    // (10.7 to 13.5 MiB in the first 15 s of a 250,000-call run, then flat for the next 25),
    // so growth is measured over the second half, where a leak still grows and warming does not.
    let mid_rss = AtomicU64::new(0);
    let started = Instant::now();
    let run = |upto: usize| {
        std::thread::scope(|scope| {
            for _ in 0..in_flight {
                scope.spawn(|| {
                    let mut http = Http::new(port, &token);
                    // Claims the next index only while it is below `upto`, so that the
                    // warm-up's last claims do not skip indices of the measured run.
                    while let Ok(i) = next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
                        (i < upto).then_some(i + 1)
                    }) {
                        tally.calls.fetch_add(1, Ordering::Relaxed);
                        one_call(i, &mut http, &session, &ts, &tally);
                    }
                });
            }
        });
    };
    run(warm);
    start_mark.0 = status_of(pid, "VmRSS:");
    start_mark.1 = fds(pid);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut seed = std::process::id() as u64 | 1;
            while !stop_cuts.load(Ordering::Relaxed) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let wait = Duration::from_millis(1000 + seed % 3000);
                let until = Instant::now() + wait;
                while Instant::now() < until && !stop_cuts.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(20));
                    if mid_rss.load(Ordering::Relaxed) == 0
                        && next.load(Ordering::Relaxed) >= total / 2
                    {
                        mid_rss.store(status_of(pid, "VmRSS:"), Ordering::Relaxed);
                    }
                }
                if let Some(pid) = attaches("soak").first() {
                    let _ = Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    cuts.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        run(total);
        stop_cuts.store(true, Ordering::Relaxed);
    });
    let secs = started.elapsed().as_secs_f64();
    // Registrations cancelled mid-connect left nothing behind.
    // A fresh connection: the gateway closed the idle one of the set-up on a long run.
    let mut admin = Http::new(port, &token);
    let (_, listed) = admin.request("GET", "/mcps", None).unwrap();
    let names: Vec<String> = serde_json::from_slice::<Vec<Value>>(&listed)
        .unwrap()
        .iter()
        .filter_map(|m| m["name"].as_str().map(str::to_owned))
        .collect();
    let stuck: Vec<_> = names.iter().filter(|n| n.starts_with("slowreg")).collect();
    if !stuck.is_empty() {
        eprintln!("registrations cancelled mid-connect were left: {stuck:?}");
        tally.lost.fetch_add(stuck.len() as u64, Ordering::Relaxed);
    }
    drop(admin);
    let (rss_end, fds_end) = (status_of(pid, "VmRSS:"), fds(pid));
    let lost = tally.lost.load(Ordering::Relaxed);
    let wrong = tally.wrong.load(Ordering::Relaxed);
    let duplicated = tally.duplicated.load(Ordering::Relaxed);
    let resumed = runtime
        .block_on(host.state())
        .ok()
        .and_then(|s| s["resumed"].as_u64())
        .unwrap_or(0);
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "soak: {} calls, lost {lost}, wrong {wrong}, duplicated {duplicated}, resumed {resumed}, \
         channels cut {}, rss start/mid/end MiB {:.1}/{:.1}/{:.1}, fds start/end {}/{} \
         ({} faults injected, {:.0} calls/s)",
        tally.calls.load(Ordering::Relaxed),
        cuts.load(Ordering::Relaxed),
        mib(start_mark.0),
        mib(mid_rss.load(Ordering::Relaxed)),
        mib(rss_end),
        start_mark.1,
        fds_end,
        tally.faults.load(Ordering::Relaxed),
        tally.calls.load(Ordering::Relaxed) as f64 / secs
    );
    drop(session);
    drop(host);
    drop(runtime);
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = std::fs::remove_dir_all(&state);
    let mid = match mid_rss.load(Ordering::Relaxed) {
        0 => start_mark.0,
        mid => mid,
    };
    let rss_grew = rss_end as f64 > mid as f64 * 1.1;
    let fds_grew = fds_end > start_mark.1;
    if lost > 0 || wrong > 0 || duplicated > 0 || rss_grew || fds_grew {
        eprintln!(
            "soak FAILED: lost {lost}, wrong {wrong}, duplicated {duplicated}, RSS grew over 10% in the second half: {rss_grew}, fds grew: {fds_grew}"
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// One call of the mix: mostly echoes (checked), through HTTP and through the session, and one
/// fault of each kind in every hundred.
fn one_call(i: usize, http: &mut Http, session: &SessionSide, testserver: &str, tally: &Tally) {
    let lose = |what: &str| {
        eprintln!("lost: call {i}: {what}");
        tally.lost.fetch_add(1, Ordering::Relaxed);
    };
    let text = format!("soak {i}");
    let echo = json!({"arguments": {"text": text}}).to_string();
    match i % 100 {
        0 => {
            // The upstream is killed mid-call: a 502 now, a fresh process for the next call.
            tally.faults.fetch_add(1, Ordering::Relaxed);
            let _ = http.request(
                "POST",
                "/mcps/victim/tools/crash",
                Some(r#"{"arguments":{"code":3}}"#),
            );
        }
        1 => match http.request("POST", "/mcps/ts/tools/garbage", Some("{}")) {
            // A line that is not JSON from the upstream is skipped; the answer still comes.
            Ok((200, body)) if String::from_utf8_lossy(&body).contains("ok after garbage") => {}
            other => lose(&format!("garbage: {other:?}")),
        },
        2 => match http.request(
            "POST",
            "/mcps/ts/tools/slow?timeout=10",
            Some(r#"{"arguments":{"seconds":0.05,"steps":2}}"#),
        ) {
            Ok((200, _)) => {}
            other => lose(&format!("slow: {other:?}")),
        },
        3 => {
            // Past its deadline: 504, and the upstream is told to cancel.
            tally.faults.fetch_add(1, Ordering::Relaxed);
            match http.request(
                "POST",
                "/mcps/ts/tools/slow?timeout=0.05",
                Some(r#"{"arguments":{"seconds":5}}"#),
            ) {
                Ok((504, _)) => {}
                other => lose(&format!("deadline: {other:?}")),
            }
        }
        4 => {
            tally.faults.fetch_add(1, Ordering::Relaxed);
            http.hang_up("/mcps/ts/tools/slow", r#"{"arguments":{"seconds":5}}"#);
        }
        5 => {
            // A session call cancelled while it runs (its future dropped at its deadline).
            tally.faults.fetch_add(1, Ordering::Relaxed);
            let mut submit = Submit::new(Op::CallTool {
                mcp: "ts".into(),
                tool: "slow".into(),
                arguments: json!({"seconds": 5}),
            });
            submit.timeout_ms = Some(30_000);
            let run = session.host.run(submit, None);
            let r = session
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_millis(20), run).await });
            // Dropped at 20 ms, the call is cancelled in the gateway; an answer that came
            // first must be an error of the call, never a lost channel.
            if let Ok(Err(e)) = r
                && e.kind() != ErrorKind::Cancelled
            {
                lose(&format!("session cancel: {e}"));
            }
        }
        6 if i % 1000 == 6 => {
            // A registration whose caller hangs up while it connects: nothing is left behind.
            tally.faults.fetch_add(1, Ordering::Relaxed);
            let spec = json!({
                "name": format!("slowreg{i}"),
                "mcp_config": {"type": "stdio_mcp", "command": "sh",
                               "args": ["-c", format!("sleep 1; exec {testserver} stdio")]}
            });
            let body = spec.to_string();
            if let Ok(mut c) = TcpStream::connect(("127.0.0.1", http.port)) {
                let _ = write!(
                    c,
                    "POST /mcps HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
                     Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    http.token,
                    body.len()
                );
                let _ = c.set_read_timeout(Some(Duration::from_millis(100)));
                let _ = c.read(&mut [0u8; 1]);
            }
        }
        10..=29 => match session.call("echo", json!({"text": text}), false).0 {
            Ok(Output::Chunk(chunk)) => {
                if chunk.content.first().and_then(|b| match b {
                    mcpgw::wire::Block::Text(t) => Some(t.text.as_str()),
                    _ => None,
                }) != Some(text.as_str())
                {
                    tally.wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
            other => lose(&format!("session echo: {other:?}")),
        },
        30..=31 => {
            // A streamed call: each of its progress chunks once, across channel cuts.
            let (r, chunks) = session.call("slow", json!({"seconds": 0.3, "steps": 3}), true);
            match r {
                Ok(_) if chunks == 3 => {}
                Ok(_) if chunks > 3 => {
                    eprintln!("duplicated: call {i}: {chunks} progress chunks of 3");
                    tally.duplicated.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) => lose(&format!("session slow: {chunks} progress chunks of 3")),
                Err(e) => lose(&format!("session slow: {e}")),
            }
        }
        _ => match http.request("POST", "/mcps/ts/tools/echo", Some(&echo)) {
            Ok((200, body)) => {
                let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                if echo_text(&v["chunk"]) != Some(text.as_str()) {
                    tally.wrong.fetch_add(1, Ordering::Relaxed);
                }
            }
            other => lose(&format!("echo: {other:?}")),
        },
    }
}
