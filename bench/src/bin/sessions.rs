//! `make bench`: one host process holding many open sessions (one `attach` process each, over
//! the local backend, against a few gateways) and calling across all of them, through the Rust
//! host driver on one runtime thread. Prints
//! `host sessions: N open, library KiB per session: X, threads: T, calls/s: Z`, with the
//! process's threads and memory before the sessions beside.
//!
//! `mcpgw-sessions [SESSIONS] [GATEWAYS] [SECONDS]` (default 1000, 4, 5).

use std::time::{Duration, Instant};

use mcpgw::client::Output;
use mcpgw::driver::{Backend, HostConfig, Op, Submit};
use mcpgw_runner::Host;
use serde_json::json;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// Raises the open-file limit to its hard limit: each session holds three pipes.
fn raise_nofile() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn config(gateway: &str, state: &str) -> HostConfig {
    let mut c = HostConfig::new(Backend::Local { cwd: None });
    c.gateway_path = gateway.to_owned();
    c.state_dir = Some(state.to_owned());
    c.timeout_ms = 120_000;
    c.open_timeout_ms = 300_000;
    c
}

/// A host of the running gateway `info` (port, token file, nonce) describes.
fn attached(gateway: &str, info: &serde_json::Value) -> HostConfig {
    let mut c = config(gateway, info["state_dir"].as_str().unwrap_or("/tmp"));
    c.port = info["port"].as_u64().unwrap() as u16;
    c.token_file = info["token_file"].as_str().map(String::from);
    c.instance_nonce = info["instance_nonce"].as_str().map(String::from);
    c
}

fn echo(i: usize) -> Submit {
    Submit::new(Op::CallTool {
        mcp: "ts".into(),
        tool: "echo".into(),
        arguments: json!({"text": format!("call {i}")}),
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let sessions: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let gateways: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(4);
    let secs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(5);
    raise_nofile();
    let gateway = mcpgw_bench::static_gateway().display().to_string();
    let testserver = mcpgw_bench::release_testserver().display().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let base = std::env::temp_dir().join(format!("mcpgw-sessions-{}", std::process::id()));
        // The gateways, each launched by a session of its own that then stays as one of many.
        let mut launchers = Vec::new();
        for g in 0..gateways {
            let state = base.join(format!("gw{g}")).display().to_string();
            let host = Host::start(config(&gateway, &state)).unwrap();
            host.op(Op::OpenSession {}).await.unwrap();
            host.op(Op::AddMcp {
                spec: json!({"name": "ts", "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]}}),
            })
            .await
            .unwrap();
            let info = host.state().await.unwrap()["gateway"].clone();
            launchers.push((host, info));
        }
        // Warm the runtime and the allocator before the baseline.
        launchers[0].0.run(echo(0), None).await.unwrap();
        let (rss0, threads0) = (rss_kib(), threads());
        let opened = Instant::now();
        let mut hosts = Vec::with_capacity(sessions);
        let mut opening = Vec::new();
        for i in 0..sessions {
            let host = Host::start(attached(&gateway, &launchers[i % gateways].1)).unwrap();
            let h = host.clone();
            opening.push(tokio::spawn(async move { h.op(Op::OpenSession {}).await }));
            hosts.push(host);
            // Spawning a thousand processes at once only queues them; a few at a time opens
            // them as fast.
            if opening.len() == 32 {
                for o in opening.drain(..) {
                    let r = o.await.unwrap();
                    assert!(matches!(r, Ok(Output::Session(_))), "{r:?}");
                }
            }
        }
        for o in opening.drain(..) {
            let r = o.await.unwrap();
            assert!(matches!(r, Ok(Output::Session(_))), "{r:?}");
        }
        let open_secs = opened.elapsed().as_secs_f64();
        let (rss1, threads1) = (rss_kib(), threads());
        // Calls across all of them: each caller picks the sessions in turn.
        let callers = 64;
        let deadline = Instant::now() + Duration::from_secs(secs);
        let hosts = std::sync::Arc::new(hosts);
        let started = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|c| {
                let hosts = hosts.clone();
                tokio::spawn(async move {
                    let mut done = 0u64;
                    let mut i = c;
                    while Instant::now() < deadline {
                        hosts[i % hosts.len()].run(echo(i), None).await.unwrap();
                        done += 1;
                        i += callers;
                    }
                    done
                })
            })
            .collect();
        let mut calls = 0;
        for t in tasks {
            calls += t.await.unwrap();
        }
        let rate = calls as f64 / started.elapsed().as_secs_f64();
        let per_session = (rss1.saturating_sub(rss0)) as f64 / sessions as f64;
        println!(
            "host sessions: {sessions} open, library KiB per session: {per_session:.1}, threads: {threads1}, calls/s: {rate:.0}"
        );
        println!(
            "  (before them: {threads0} threads, {rss0} KiB; opened in {open_secs:.1} s across {gateways} gateways; target KiB per session <= 64: {}, threads independent of sessions: {})",
            if per_session <= 64.0 { "met" } else { "MISSED" },
            if threads1 == threads0 { "met" } else { "MISSED" }
        );
        drop(hosts);
        for (host, _) in &launchers {
            let _ = host.op(Op::StopGateway {}).await;
        }
        drop(launchers);
        // The hosts' tasks close their channels as they end.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = std::fs::remove_dir_all(&base);
    });
}
