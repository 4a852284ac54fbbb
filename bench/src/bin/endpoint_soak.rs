//! `make soak`, the host endpoint's part: 5,000 tool calls at 32 in flight through
//! `mcpgw mcp --http` into a Docker container (the project's test server inside), with hostile
//! clients alongside: idle connections that never send a request, slow clients dribbling a
//! request head, malformed requests (not JSON, ids JSON-RPC forbids, unknown protocol
//! versions). Near the end the container is killed: every call still gets an answer (an error
//! naming the loss). Half the callers take SSE answers, half JSON ones.
//!
//! It prints `endpoint soak: N calls at 32 in flight, answered A (E errors after the kill),
//! lost L, wrong W; malformed refused R of M; idle connections cut C; rss start/end MiB; cpu S
//! s` and fails on any loss or mismatch, on a malformed request not refused with 400, on RSS
//! growth over 25% once the hostile clients are gone, or when the endpoint does not exit 0.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcpgw_testkit::{RawResponse, TempDir, raw_request};
use serde_json::{Value, json};

const CALLS: usize = 5_000;
const IN_FLIGHT: usize = 32;
/// The kill comes after this many calls were answered.
const KILL_AFTER: usize = 4_600;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The endpoint's resident memory (KiB) and CPU time (seconds).
fn usage(pid: u32) -> (u64, f64) {
    let rss = mcpgw_testkit::rss_kib(pid);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, r)| r.split_whitespace().collect());
    // SAFETY: sysconf(3) reads a constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = fields.get(11..13).map_or(0.0, |f| {
        f.iter().filter_map(|v| v.parse::<f64>().ok()).sum::<f64>()
    }) / ticks;
    (rss, cpu)
}

/// One POST of `body` on a connection of its own, with the session header when given.
fn post(
    at: &str,
    token: &str,
    session: Option<&str>,
    accept: &str,
    extra: &str,
    body: &str,
) -> RawResponse {
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nAccept: {accept}\r\n{session}{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    raw_request(at, request.as_bytes(), Duration::from_secs(120))
}

/// The answer to request `id` in a response (JSON, or the SSE events of one).
fn answer_of(r: &RawResponse, id: &Value) -> Option<Value> {
    let body = String::from_utf8_lossy(&r.body);
    let messages: Vec<Value> = if r.header("content-type") == Some("application/json") {
        serde_json::from_str(&body).into_iter().collect()
    } else {
        body.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str(d).ok())
            .collect()
    };
    messages
        .into_iter()
        .find(|m| &m["id"] == id && m.get("method").is_none())
}

#[derive(Default)]
struct Tally {
    answered: AtomicUsize,
    errors_after_kill: AtomicUsize,
    lost: AtomicUsize,
    wrong: AtomicUsize,
    malformed: AtomicUsize,
    refused: AtomicUsize,
    idle_cut: AtomicUsize,
}

fn main() -> ExitCode {
    if let Some(why) =
        mcpgw_testkit::container::unavailable(mcpgw_testkit::container::Engine::Docker)
    {
        println!("endpoint soak: SKIPPED: {why}");
        return ExitCode::SUCCESS;
    }
    let image = String::from_utf8(
        Command::new("sh")
            .arg(repo().join("tests/docker/sandbox.sh"))
            .arg("image")
            .output()
            .expect("sandbox.sh")
            .stdout,
    )
    .expect("an image name");
    let container = mcpgw_testkit::container::Container::start_image(
        mcpgw_testkit::container::Engine::Docker,
        image.trim(),
    );
    let dir = TempDir::new("endpoint-soak");
    let token_file = dir.path("token");
    let endpoint = repo().join("target/release/mcpgw");
    let (mut child, line) = mcpgw_testkit::servers::spawn_first_line(
        Command::new(&endpoint)
            .args(["mcp", "--http", "127.0.0.1:0", "--docker", &container.id])
            .args(["--gateway", "/usr/local/bin/mcpgw-gateway", "--token-file"])
            .arg(&token_file)
            .args(["--", "/usr/local/bin/mcpgw-testserver", "stdio"])
            .stderr(Stdio::null()),
    );
    let ready: Value = serde_json::from_str(&line).expect("the ready line");
    let at = ready["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let pid = child.id();

    // The callers' sessions, and a warm-up call each.
    let sessions: Vec<String> = (0..IN_FLIGHT)
        .map(|i| {
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": format!("soak-{i}"), "version": "1"}}});
            let r = post(
                &at,
                &token,
                None,
                "application/json, text/event-stream",
                "",
                &init.to_string(),
            );
            let sid = r.header("mcp-session-id").expect("a session").to_owned();
            post(
                &at,
                &token,
                Some(&sid),
                "application/json",
                "",
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            );
            sid
        })
        .collect();
    let (rss_start, cpu_start) = usage(pid);

    let tally = Arc::new(Tally::default());
    let next = Arc::new(AtomicUsize::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let stop_hostile = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    std::thread::scope(|scope| {
        // Hostile clients alongside.
        for _ in 0..4 {
            let (at, tally, stop) = (&at, &tally, &stop_hostile);
            scope.spawn(move || {
                // Idle connections: they send nothing and are cut at the header deadline.
                while !stop.load(Ordering::Relaxed) {
                    let idle: Vec<TcpStream> = (0..25)
                        .filter_map(|_| TcpStream::connect(at).ok())
                        .collect();
                    for mut s in idle {
                        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                        if matches!(s.read(&mut [0u8; 1]), Ok(0)) {
                            tally.idle_cut.fetch_add(1, Ordering::Relaxed);
                        }
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                    }
                }
            });
        }
        {
            let (at, stop) = (&at, &stop_hostile);
            scope.spawn(move || {
                // A slow client: a head a byte at a time, every 200 ms.
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut s) = TcpStream::connect(at) else {
                        continue;
                    };
                    for b in b"POST /mcp HTTP/1.1\r\nHost: x\r\n".iter().cycle().take(60) {
                        if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
            });
        }
        {
            let (at, token, tally, stop, sid) = (&at, &token, &tally, &stop_hostile, &sessions[0]);
            scope.spawn(move || {
                let bad = [
                    ("", "this is not JSON"),
                    ("", r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#),
                    ("", r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
                    ("", r#"{"jsonrpc":"2.0","method":"x","params":5}"#),
                    (
                        "MCP-Protocol-Version: 2099-01-01\r\n",
                        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                    ),
                    ("", "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]"),
                ];
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (extra, body) = bad[i % bad.len()];
                    i += 1;
                    tally.malformed.fetch_add(1, Ordering::Relaxed);
                    let r = post(
                        at,
                        token,
                        Some(sid),
                        "application/json, text/event-stream",
                        extra,
                        body,
                    );
                    if r.status == 400 {
                        tally.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        // The callers.
        let callers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(w, sid)| {
                let (at, token, tally, next, killed) = (&at, &token, &tally, &next, &killed);
                let container = &container;
                scope.spawn(move || {
                    let accept = if w % 2 == 0 {
                        "application/json, text/event-stream"
                    } else {
                        "application/json"
                    };
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        if n >= CALLS {
                            return;
                        }
                        if n == KILL_AFTER {
                            container.kill();
                            killed.store(true, Ordering::Relaxed);
                        }
                        let text = format!("call {n} of caller {w}");
                        let id = json!(n as u64 + 1);
                        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"text": text}}});
                        let r = post(at, token, Some(sid), accept, "", &call.to_string());
                        match answer_of(&r, &id) {
                            Some(a) if a["result"]["content"][0]["text"] == text.as_str() => {
                                tally.answered.fetch_add(1, Ordering::Relaxed);
                            }
                            // After the kill (or in flight when it came): an error naming the loss.
                            Some(a) if a["error"].is_object() && killed.load(Ordering::Relaxed) => {
                                tally.answered.fetch_add(1, Ordering::Relaxed);
                                tally.errors_after_kill.fetch_add(1, Ordering::Relaxed);
                            }
                            Some(a) => {
                                eprintln!("wrong answer to {id}: {a}");
                                tally.wrong.fetch_add(1, Ordering::Relaxed);
                            }
                            None => {
                                eprintln!(
                                    "no answer to {id}: {} {}",
                                    r.status,
                                    String::from_utf8_lossy(&r.body)
                                );
                                tally.lost.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
        stop_hostile.store(true, Ordering::Relaxed);
    });
    let elapsed = started.elapsed();
    // Let the endpoint close what the hostile clients left, then read its memory.
    std::thread::sleep(Duration::from_secs(11));
    let (rss_end, cpu_end) = usage(pid);
    // SAFETY: kill(2) of our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let status = mcpgw_testkit::wait_child(&mut child, Duration::from_secs(60));
    let t = |a: &AtomicUsize| a.load(Ordering::Relaxed);
    let calls_per_s = CALLS as f64 / elapsed.as_secs_f64();
    println!(
        "endpoint soak: {CALLS} calls at {IN_FLIGHT} in flight in {:.1} s ({calls_per_s:.0}/s), answered {} \
         ({} errors after the kill), lost {}, wrong {}; malformed refused {} of {}; idle connections \
         cut {}; rss start/end {:.1}/{:.1} MiB; cpu {:.2} s",
        elapsed.as_secs_f64(),
        t(&tally.answered),
        t(&tally.errors_after_kill),
        t(&tally.lost),
        t(&tally.wrong),
        t(&tally.refused),
        t(&tally.malformed),
        t(&tally.idle_cut),
        rss_start as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        cpu_end - cpu_start,
    );
    let mut ok = true;
    for (bad, what) in [
        (t(&tally.lost) > 0, "calls were lost"),
        (t(&tally.wrong) > 0, "calls got another's answer"),
        (t(&tally.answered) != CALLS, "not every call was answered"),
        (
            t(&tally.refused) != t(&tally.malformed),
            "a malformed request was not refused with 400",
        ),
        (
            rss_end as f64 > rss_start as f64 * 1.25 + 4096.0,
            "the endpoint's memory grew",
        ),
        (!status.success(), "the endpoint did not exit 0"),
    ] {
        if bad {
            eprintln!("endpoint soak: FAILED: {what}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
