//! The audit under load: 1,000 tool calls at 32 in flight through one host driver with a policy,
//! over a session channel that is killed three times while calls run (they resume on the next
//! channel), against the real gateway and the project's test server in a local sandbox. The
//! audit log must hold exactly one record per call, whose outcome is the call's own.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpgw::driver::{Backend, HostConfig, Op, Submit};
use mcpgw::policy::Policy;
use mcpgw::{Error, ErrorKind};
use mcpgw_runner::Host;
use mcpgw_testkit::{TempDir, gateway_bin, processes_where, testserver_bin};
use serde_json::{Value, json};

const CALLS: usize = 1000;
const IN_FLIGHT: usize = 32;
const CUTS: [usize; 3] = [200, 450, 700];

/// The attach processes of the session whose state directory is `state`.
fn attaches(state: &str) -> Vec<u32> {
    processes_where(|_, _, _| true)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                let c = String::from_utf8_lossy(&c).replace('\0', " ");
                c.contains(" attach ") && c.contains(state)
            }) && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "mcpgw-gateway")
        })
        .collect()
}

/// Call `i`: mostly `echo`, every seventh a `slow` one that spans a cut, every 25th a tool the
/// policy denies.
fn call(i: usize) -> Submit {
    let (tool, arguments) = if i.is_multiple_of(25) {
        ("crash", json!({}))
    } else if i.is_multiple_of(7) {
        ("slow", json!({"seconds": 0.3, "steps": 2}))
    } else {
        ("echo", json!({"text": format!("call {i}")}))
    };
    Submit::new(Op::CallTool {
        mcp: "ts".into(),
        tool: tool.into(),
        arguments,
    })
}

fn outcome_of(result: &Result<mcpgw::client::Output, Error>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(e) if e.kind() == ErrorKind::PolicyDenied => "denied",
        Err(_) => "failed",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_per_call_under_load_with_the_channel_cut() {
    let dir = TempDir::new("audit-load");
    let state = dir.path("state").display().to_string();
    let log = dir.path("audit.jsonl");
    let mut config = HostConfig::new(Backend::Local { cwd: None });
    config.gateway_path = gateway_bin().display().to_string();
    config.state_dir = Some(state.clone());
    config.timeout_ms = 60_000;
    config.audit = true;
    config.policy =
        Policy::from_json(r#"{"servers": {"ts": {"tools": {"deny": ["crash"]}}}}"#).unwrap();
    let sink = mcpgw_runner::audit::open_log(&log).unwrap();
    let host = Host::start_audited(config, Some(sink)).unwrap();
    host.op(Op::OpenSession {}).await.unwrap();
    host.op(Op::AddMcp {
        spec: json!({"name": "ts", "mcp_config": {"type": "stdio_mcp",
                     "command": testserver_bin(), "args": ["stdio"]}}),
    })
    .await
    .unwrap();

    let done = Arc::new(AtomicUsize::new(0));
    let slots = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let cutter = tokio::spawn({
        let (done, state) = (done.clone(), state.clone());
        async move {
            let mut cut = 0;
            for at in CUTS {
                while done.load(Ordering::SeqCst) < at {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                // The channel that carries calls now (a new one once the last cut reopened).
                let pids = loop {
                    let pids = attaches(&state);
                    if pids.len() == 1 {
                        break pids;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                unsafe { libc::kill(pids[0] as i32, libc::SIGKILL) };
                cut += 1;
            }
            cut
        }
    });
    let mut tasks = Vec::new();
    for i in 1..=CALLS {
        let permit = slots.clone().acquire_owned().await.unwrap();
        let (host, done) = (host.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let result = host.run(call(i), None).await;
            done.fetch_add(1, Ordering::SeqCst);
            drop(permit);
            outcome_of(&result)
        }));
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for t in tasks {
        *seen.entry(t.await.unwrap()).or_default() += 1;
    }
    assert_eq!(cutter.await.unwrap(), CUTS.len());
    let resumed = host.state().await.unwrap()["resumed"].as_u64().unwrap();
    host.op(Op::StopGateway {}).await.unwrap();
    drop(host);

    // Every record is written by the time its call's end is reported.
    let text = std::fs::read_to_string(&log).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(records.len(), CALLS, "one record per call");
    let ids: HashSet<&str> = records.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), CALLS, "each call recorded once");
    let mut recorded: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &records {
        let outcome = match r["outcome"].as_str().unwrap() {
            o @ ("ok" | "denied") => o,
            _ => "failed",
        };
        *recorded.entry(outcome).or_default() += 1;
    }
    assert_eq!(recorded, seen, "the records' outcomes are the calls' own");
    assert_eq!(seen.get("denied"), Some(&(CALLS / 25)));
    // Calls were in flight at each cut and came through it.
    assert!(resumed >= 1, "no call was resumed: {resumed}");
    assert_eq!(seen.get("failed"), None, "{seen:?}");
    eprintln!("outcomes {seen:?}, calls resumed after the cuts: {resumed}");
}
