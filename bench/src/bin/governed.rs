//! `make bench`: what the host's policy and audit cost a call. Two hosts on one gateway (local
//! backend, the test server): one plain, one with a 50-rule policy, audit on (records
//! appended to a file) and one secret redacted from what it reads. Calls alternate between them, over a virtual connection (`tools/call`)
//! and as operations (`call_tool`), and each path prints
//! `governed call p50 ms: X (plain: Y)` with the difference beside (target <= 0.05 ms).
//!
//! `mcpgw-governed [CALLS]` (default 2000 per host and path).

use std::time::Instant;

use mcpgw::driver::{Backend, HostConfig, Op, Submit};
use mcpgw::policy::Policy;
use mcpgw_bench::median;
use mcpgw_runner::{Connection, ConnectionEvent, Host};
use serde_json::{Value, json};

fn config(gateway: &str, state: &str) -> HostConfig {
    let mut c = HostConfig::new(Backend::Local { cwd: None });
    c.gateway_path = gateway.to_owned();
    c.state_dir = Some(state.to_owned());
    c.timeout_ms = 60_000;
    c
}

/// 50 rules: 45 entries for other servers, and five that apply to `ts` (allow and deny lists
/// of tools, resources by prefix, prompts, and a fixed argument of another tool).
fn policy() -> Policy {
    let mut servers = serde_json::Map::new();
    for i in 0..45 {
        servers.insert(
            format!("other-{i}"),
            json!({"tools": {"deny": [format!("tool_{i}_*"), "write_*"]}}),
        );
    }
    servers.insert(
        "ts".into(),
        json!({"tools": {"allow": ["echo", "add", "slow", "read_*", "list_*"],
                         "deny": ["crash", "fail*", "read_secret"]},
               "resources": {"deny": ["file:///etc/", "file:///root/"]},
               "prompts": {"deny": ["*"]},
               "arguments": {"add": {"a": 1}}}),
    );
    servers.insert("t*".into(), json!({"tools": {"deny": ["rm_*"]}}));
    servers.insert("*".into(), json!({"tools": {"deny": ["shutdown"]}}));
    let scopes = json!({"agent-*": {"servers": {"ts": {"tools": {"deny": ["big"]}}}},
                        "ops": {"servers": {"*": {"tools": {"deny": ["*"]}}}}});
    let policy = json!({"servers": servers, "scopes": scopes});
    Policy::from_json(&policy.to_string()).unwrap()
}

async fn call(conn: &mut Connection, id: u64) -> f64 {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": format!("call {id}")}}});
    let t = Instant::now();
    conn.send(&msg.to_string()).await.unwrap();
    loop {
        match conn.recv().await {
            Some(ConnectionEvent::Message(m)) => {
                let v: Value = serde_json::from_str(m.get()).unwrap();
                if v["id"] == id {
                    assert!(v.get("result").is_some(), "{v}");
                    return t.elapsed().as_secs_f64() * 1e3;
                }
            }
            Some(ConnectionEvent::Opened) => {}
            other => panic!("the connection ended: {other:?}"),
        }
    }
}

async fn connect(host: &Host) -> Connection {
    let mut conn = host.connect("ts", "", "", false).await.unwrap();
    assert!(matches!(conn.recv().await, Some(ConnectionEvent::Opened)));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}});
    conn.send(&init.to_string()).await.unwrap();
    while let Some(ev) = conn.recv().await {
        if let ConnectionEvent::Message(m) = ev
            && serde_json::from_str::<Value>(m.get()).unwrap()["id"] == 0
        {
            break;
        }
    }
    conn.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .unwrap();
    conn
}

fn echo(i: usize) -> Submit {
    Submit::new(Op::CallTool {
        mcp: "ts".into(),
        tool: "echo".into(),
        arguments: json!({"text": format!("call {i}")}),
    })
}

fn report(path: &str, governed: Vec<f64>, plain: Vec<f64>) {
    let (g, p) = (median(governed), median(plain));
    let verdict = if g - p <= 0.05 { "met" } else { "MISSED" };
    println!(
        "{path}: governed call p50 ms: {g:.3} (plain: {p:.3}); the policy, audit and redaction add {:.3} ms (target <= 0.05 ms: {verdict})",
        g - p
    );
}

fn main() {
    let calls: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let gateway = mcpgw_bench::static_gateway().display().to_string();
    let testserver = mcpgw_bench::release_testserver().display().to_string();
    let base = std::env::temp_dir().join(format!("mcpgw-governed-{}", std::process::id()));
    std::fs::create_dir_all(&base).unwrap();
    let audit_path = base.join("audit.jsonl");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let state = base.join("state").display().to_string();
        let plain = Host::start(config(&gateway, &state)).unwrap();
        plain.op(Op::OpenSession {}).await.unwrap();
        plain
            .op(Op::AddMcp {
                spec: json!({"name": "ts", "mcp_config": {"type": "stdio_mcp",
                             "command": testserver, "args": ["stdio"]}}),
            })
            .await
            .unwrap();
        let info = plain.state().await.unwrap()["gateway"].clone();
        let mut governed_config = config(&gateway, &state);
        governed_config.port = info["port"].as_u64().unwrap() as u16;
        governed_config.token_file = info["token_file"].as_str().map(String::from);
        governed_config.instance_nonce = info["instance_nonce"].as_str().map(String::from);
        governed_config.policy = policy();
        governed_config.audit = true;
        governed_config.secrets.0.insert(
            "MCPGW_BENCH_KEY".into(),
            format!("bench-secret-{}", mcpgw::random::uuid4_hex()),
        );
        let sink = mcpgw_runner::audit::open_log(&audit_path).unwrap();
        let governed = Host::start_audited(governed_config, Some(sink)).unwrap();
        governed.op(Op::OpenSession {}).await.unwrap();
        // A server registered with a secret: from then on every line the governed host reads
        // is searched for the secret's forms.
        governed
            .op(Op::AddMcp {
                spec: json!({"name": "sec", "mcp_config": {"type": "stdio_mcp",
                             "command": testserver, "args": ["stdio"],
                             "env": {"MCPGW_TEST_KEY": {"secret": "MCPGW_BENCH_KEY"}}}}),
            })
            .await
            .unwrap();

        let (mut cp, mut cg) = (connect(&plain).await, connect(&governed).await);
        // Warm both paths.
        for i in 1..=50 {
            call(&mut cp, i).await;
            call(&mut cg, i).await;
        }
        let (mut p, mut g) = (Vec::new(), Vec::new());
        for i in 0..calls as u64 {
            p.push(call(&mut cp, 1000 + i).await);
            g.push(call(&mut cg, 1000 + i).await);
        }
        report("connection (tools/call)", g, p);
        let (mut p, mut g) = (Vec::new(), Vec::new());
        for i in 0..calls {
            let t = Instant::now();
            plain.run(echo(i), None).await.unwrap();
            p.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            governed.run(echo(i), None).await.unwrap();
            g.push(t.elapsed().as_secs_f64() * 1e3);
        }
        report("operation (call_tool)", g, p);
        let records = std::fs::read_to_string(&audit_path)
            .unwrap_or_default()
            .lines()
            .count();
        println!(
            "  audit records written: {records} (calls made through the governed host: {})",
            2 * calls + 50
        );
        drop((cp, cg));
        drop(governed);
        let _ = plain.op(Op::StopGateway {}).await;
        drop(plain);
        // The hosts' tasks close their channels as they end.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    });
    let _ = std::fs::remove_dir_all(&base);
}
