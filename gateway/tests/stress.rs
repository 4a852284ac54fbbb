//! No reply is lost or crossed under load: thousands of `echo` calls with 4 to 64 KiB texts, 8
//! to 64 in flight, to a stdio, a streamable HTTP and a legacy SSE upstream, straight over HTTP
//! and through `attach`; every call must get exactly its own text back. (A reader that drops
//! part of a line when its future is cancelled loses a few replies in every such run.)

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use mcpgw_testkit::*;
use serde_json::{Value, json};

/// How long a run may take before its missing answers count as lost.
const LIMIT: Duration = Duration::from_secs(60);

/// The sizes of the texts, cycled.
const SIZES: [usize; 4] = [4 << 10, 8 << 10, 16 << 10, 64 << 10];

/// Call `i`'s text: its number first, then filler up to its size.
fn text(i: usize) -> String {
    let mut t = format!("call-{i}-");
    let size = SIZES[i % SIZES.len()];
    t.extend(std::iter::repeat_n('p', size - t.len()));
    t
}

/// An upstream under test: its MCP name, its echo tool, and how to read the echo.
struct Echo {
    mcp: &'static str,
    tool: &'static str,
    /// The argument the tool echoes.
    arg: &'static str,
    /// What the tool puts before the text.
    prefix: &'static str,
}

impl Echo {
    fn body(&self, i: usize) -> Value {
        json!({"arguments": {self.arg: text(i)}})
    }

    /// Whether a call's answer body is call `i`'s own.
    fn check(&self, i: usize, body: &Value) -> Result<(), String> {
        let got = body["chunk"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        let want = format!("{}{}", self.prefix, text(i));
        if got == want {
            Ok(())
        } else {
            let shown: String = body.to_string().chars().take(200).collect();
            Err(format!("call {i} got {shown}"))
        }
    }
}

const STDIO: Echo = Echo {
    mcp: "s",
    tool: "echo",
    arg: "text",
    prefix: "",
};
const HTTP: Echo = Echo {
    mcp: "h",
    tool: "echo",
    arg: "text",
    prefix: "",
};
const SSE: Echo = Echo {
    mcp: "e",
    tool: "echo",
    arg: "message",
    prefix: "Echo: ",
};

/// `calls` calls straight over HTTP, `in_flight` at a time; panics naming what was lost or
/// crossed.
async fn over_http(gw: &Gateway, echo: &Echo, calls: usize, in_flight: usize) {
    let path = format!("/mcps/{}/tools/{}", echo.mcp, echo.tool);
    let started = Instant::now();
    let results: Vec<Result<(), String>> = futures::stream::iter(0..calls)
        .map(|i| {
            let path = &path;
            async move {
                let sent = gw.post(path, echo.body(i));
                match tokio::time::timeout(LIMIT, sent).await {
                    Ok(r) if r.status == 200 => echo.check(i, &r.json()),
                    Ok(r) => Err(format!("call {i}: {} {}", r.status, r.text())),
                    Err(_) => Err(format!("call {i}: no answer within {LIMIT:?}")),
                }
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    report("http", echo, calls, in_flight, started, results);
}

fn report(
    path: &str,
    echo: &Echo,
    calls: usize,
    in_flight: usize,
    started: Instant,
    results: Vec<Result<(), String>>,
) {
    let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(
        failed.is_empty(),
        "{path} to {}: {} of {calls} calls at {in_flight} in flight went wrong:\n{}",
        echo.mcp,
        failed.len(),
        failed
            .iter()
            .take(10)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "{path} to {}: {calls} calls at {in_flight} in flight, each its own answer, in {:?}",
        echo.mcp,
        started.elapsed()
    );
}

/// `calls` calls through one `attach`, `in_flight` at a time.
fn over_attach(gw: &Gateway, echo: &Echo, calls: usize, in_flight: usize) {
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token");
    let mut child = Command::new(gateway_bin())
        .args(["attach", "--port", &port, "--token-file"])
        .arg(&token_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, frames) = mpsc::channel::<Value>();
    let stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let frame: Value = serde_json::from_str(&line).expect("attach writes JSON lines");
            if tx.send(frame).is_err() {
                return;
            }
        }
    });
    let hello = frames.recv_timeout(LIMIT).expect("a hello");
    assert_eq!(hello["t"], "hello");
    let path = format!("/mcps/{}/tools/{}", echo.mcp, echo.tool);
    let started = Instant::now();
    let mut next = 0;
    let mut waiting: HashMap<u64, usize> = HashMap::new();
    let mut results = Vec::with_capacity(calls);
    let deadline = started + LIMIT;
    while results.len() < calls {
        while waiting.len() < in_flight && next < calls {
            let frame = json!({"t": "req", "id": next as u64 + 1, "method": "POST",
                               "path": path, "body": echo.body(next)});
            let mut line = serde_json::to_vec(&frame).unwrap();
            line.push(b'\n');
            stdin.write_all(&line).unwrap();
            waiting.insert(next as u64 + 1, next);
            next += 1;
        }
        let Ok(frame) = frames.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        else {
            let mut lost: Vec<_> = waiting.values().copied().collect();
            lost.sort_unstable();
            results.extend(
                lost.into_iter()
                    .map(|i| Err(format!("call {i}: never answered"))),
            );
            break;
        };
        let id = frame["id"].as_u64().unwrap_or(0);
        let Some(i) = waiting.remove(&id) else {
            results.push(Err(format!("a frame for no call in flight: {frame}")));
            continue;
        };
        results.push(match frame["t"].as_str() {
            Some("res") if frame["status"] == 200 => echo.check(i, &frame["body"]),
            _ => Err(format!("call {i}: {frame}")),
        });
    }
    drop(stdin);
    let status = wait_child(&mut child, LIMIT);
    reader.join().unwrap();
    assert!(status.success(), "attach exited with {status}");
    report("attach", echo, calls, in_flight, started, results);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_call_gets_exactly_its_own_answer_under_load() {
    let gw = start_gateway(&[]);
    let http = testserver_http();
    let sse = everything_sse();
    gw.add(testserver_stdio(STDIO.mcp), "").await.expect(200);
    gw.add(http_spec(HTTP.mcp, &http.url), "").await.expect(200);
    gw.add(
        json!({"name": SSE.mcp, "mcp_config": {"type": "http_mcp", "url": sse.url}}),
        "",
    )
    .await
    .expect(200);
    // 2,600 calls in all: most to stdio, whose reader was the one that lost replies.
    for (echo, calls) in [(&STDIO, 400), (&HTTP, 150), (&SSE, 100)] {
        for in_flight in [8, 64] {
            over_http(&gw, echo, calls, in_flight).await;
        }
    }
    let gw = &gw;
    for (echo, calls) in [(&STDIO, 400), (&HTTP, 150), (&SSE, 100)] {
        for in_flight in [16, 64] {
            tokio::task::block_in_place(|| over_attach(gw, echo, calls, in_flight));
        }
    }
}
