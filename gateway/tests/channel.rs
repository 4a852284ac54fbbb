//! The session channel's reliability, against real processes (the gateway, `attach`, the
//! project's test server): bursts within the documented limits, one final frame per id,
//! heartbeats, and calls that outlive their channel.

use std::collections::HashMap;

use mcpgw_testkit::*;
use serde_json::json;

/// A burst far past the in-flight bound, with the gateway allowing few connections: every
/// request gets its own answer and none fails, and the gateway never has to close a connection
/// attach is about to use.
#[test]
fn a_burst_within_the_limits_completes_without_an_error() {
    let gw = start_gateway(&["--log-level", "debug"]);
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token").display().to_string();
    let mut a = Attach::start(&["--port", &port, "--token-file", &token_file]);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    const CALLS: u64 = 5000;
    let mut batch = String::new();
    for id in 100..100 + CALLS {
        let frame = if id % 3 != 0 {
            json!({"t": "req", "id": id, "method": "GET", "path": "/health"})
        } else {
            json!({"t": "req", "id": id, "method": "POST", "path": "/mcps/ts/tools/slow",
                   "body": slow_args(0.05 + (id % 5) as f64 * 0.01, 0, None)})
        };
        batch.push_str(&format!("{frame}\n"));
    }
    a.send(&batch);
    let mut answered = HashMap::new();
    let mut failed = Vec::new();
    while answered.len() < CALLS as usize {
        let f = a.next();
        let id = f
            .id()
            .unwrap_or_else(|| panic!("a frame without an id: {:?}", f.value));
        if f.t() != "res" || f.value["status"] != 200 {
            failed.push(f.value.clone());
        } else if id % 3 != 0 {
            assert_eq!(f.value["text"], "ok", "{:?}", f.value);
        } else {
            assert_eq!(chunk_text(&f.value["body"]), "done after 0 steps");
        }
        assert!(answered.insert(id, ()).is_none(), "{id} answered twice");
    }
    assert!(
        failed.is_empty(),
        "{} of {CALLS} failed, e.g. {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(a.finish().success(), "{}", a.stderr());
    let log = std::fs::read_to_string(gw.dir.path("gateway.log")).unwrap();
    assert!(
        !log.contains("closing the longest-idle connection"),
        "the gateway had to evict: {log}"
    );
}
