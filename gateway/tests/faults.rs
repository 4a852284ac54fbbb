//! Faults against the real process: upstreams that die, hang or write garbage, floods of calls,
//! oversized bodies, changing tool lists.

use std::time::{Duration, Instant};

use mcpgw_testkit::*;
use serde_json::{Value, json};

fn status_of(listed: &Value, name: &str) -> Value {
    listed
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .unwrap()["status"]
        .clone()
}

#[tokio::test]
async fn an_upstream_killed_mid_call_fails_the_call_at_once_and_the_next_call_respawns_it() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let pid = gw.testserver_pid("ts").await;

    let started = Instant::now();
    let (reply, ()) = tokio::join!(gw.call("ts", "slow", json!({"seconds": 30})), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGKILL);
        }
    });
    let r = reply.expect(502);
    assert!(
        started.elapsed() < Duration::from_millis(1300),
        "took {:?}",
        started.elapsed()
    );
    assert!(r.detail().contains("killed by signal 9"), "{}", r.detail());
    assert!(r.detail().contains("not retried"), "{}", r.detail());

    let r = gw
        .call("ts", "echo", json!({"text": "back"}))
        .await
        .expect(200);
    assert_eq!(r.json()["chunk"]["content"][0]["text"], "back");
    let new_pid = gw.testserver_pid("ts").await;
    assert_ne!(new_pid, pid);
    let status = status_of(&gw.get("/mcps").await.expect(200).json(), "ts");
    assert_eq!(status["state"], "connected");
    assert_eq!(status["restarts"], 1);
    assert_eq!(status["pid"], new_pid);
    assert!(
        status["last_error"].as_str().unwrap().contains("signal 9"),
        "{status}"
    );
}

#[tokio::test]
async fn an_upstream_that_exits_reports_its_status_and_stderr_and_crash_loops_are_named() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let r = gw
        .call(
            "ts",
            "crash",
            json!({"code": 7, "message": "out of coffee"}),
        )
        .await
        .expect(502);
    assert!(r.detail().contains("exit status 7"), "{}", r.detail());
    assert!(r.detail().contains("out of coffee"), "{}", r.detail());
    // Keep crashing it: restarts back off, then the gateway says it keeps crashing.
    let mut last = String::new();
    for _ in 0..8 {
        let r = gw.call("ts", "crash", json!({})).await;
        assert_eq!(r.status, 502, "{}", r.text());
        last = r.detail();
        if last.contains("keeps crashing") {
            break;
        }
    }
    assert!(last.contains("keeps crashing"), "{last}");
    let status = status_of(&gw.get("/mcps").await.expect(200).json(), "ts");
    assert_eq!(status["state"], "crashing");
    // The gateway itself is fine.
    gw.add(testserver_stdio("other"), "").await.expect(200);
    gw.call("other", "echo", json!({"text": "x"}))
        .await
        .expect(200);
}

#[tokio::test]
async fn a_hanging_upstream_meets_its_deadline_and_learns_it_was_cancelled() {
    let gw = start_gateway(&[]);
    let dir = TempDir::new("hang");
    let mut spec = testserver_stdio("ts");
    spec["execution_timeout"] = json!(0.5);
    gw.add(spec, "").await.expect(200);
    let marker = dir.path("marker");
    let started = Instant::now();
    let r = gw
        .call(
            "ts",
            "slow",
            json!({"seconds": 3600, "cancel_marker": marker}),
        )
        .await
        .expect(504);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(450) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert!(r.detail().contains("0.5s"), "{}", r.detail());
    appears(&marker, Duration::from_secs(3)).await;
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "cancelled");
    // The session survives a cancelled call.
    gw.call("ts", "echo", json!({"text": "after"}))
        .await
        .expect(200);
    // A caller that goes away cancels its call upstream too.
    let marker2 = dir.path("marker2");
    let gone = tokio::time::timeout(
        Duration::from_millis(300),
        gw.call(
            "ts",
            "slow",
            json!({"seconds": 3600, "cancel_marker": marker2}),
        ),
    )
    .await;
    assert!(gone.is_err());
    assert!(
        appears(&marker2, Duration::from_secs(3)).await,
        "a disconnected caller's call was not cancelled upstream"
    );
}

#[tokio::test]
async fn garbage_on_an_upstreams_stdout_is_skipped() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    for _ in 0..3 {
        let r = gw.call("ts", "garbage", json!({})).await.expect(200);
        assert_eq!(r.json()["chunk"]["content"][0]["text"], "ok after garbage");
    }
    gw.call("ts", "echo", json!({"text": "still fine"}))
        .await
        .expect(200);
    assert!(
        gw.log().contains("not JSON-RPC"),
        "the garbage should be logged"
    );
    // A server that prints nothing but garbage fails to connect with a reason, in time.
    let started = Instant::now();
    let spec = json!({"name": "junk", "mcp_config": {"type": "stdio_mcp", "command": "sh",
        "args": ["-c", "while true; do echo 'not json'; sleep 0.05; done"]}});
    let gw2 = start_gateway(&["--connect-timeout", "1"]);
    let r = gw2.add(spec, "").await.expect(500);
    assert!(r.detail().contains("initialize"), "{}", r.detail());
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn four_hundred_concurrent_calls_each_get_their_own_answer() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("a"), "").await.expect(200);
    gw.add(testserver_stdio("b"), "").await.expect(200);
    let calls = (0..420).map(|i| {
        let gw = &gw;
        async move {
            let mcp = if i % 2 == 0 { "a" } else { "b" };
            let payload = json!({"i": i, "pad": "p".repeat(i % 97), "nested": {"k": [i, i * 2]}});
            let r = gw.call(mcp, "echo_json", payload.clone()).await.expect(200);
            assert_eq!(
                r.json()["chunk"]["metadata"]["structured_content"],
                payload,
                "call {i}"
            );
        }
    });
    futures::future::join_all(calls).await;
}

#[tokio::test]
async fn an_oversized_body_gets_413_and_the_gateway_lives_on() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let big = vec![b'x'; 80 << 20];
    let r = gw.send("POST", "/mcps/ts/tools/echo", Some(big)).await;
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.detail().contains("too large"), "{}", r.text());
    gw.call("ts", "echo", json!({"text": "alive"}))
        .await
        .expect(200);
    // The cap is configurable.
    let small = start_gateway(&["--max-body-bytes", "1000"]);
    let r = small.send("POST", "/mcps", Some(vec![b' '; 2000])).await;
    assert_eq!(r.status, 413);
    // Large but allowed bodies and results pass intact.
    let text = "0123456789abcdef".repeat(10 << 16);
    let r = gw
        .call("ts", "echo", json!({"text": text}))
        .await
        .expect(200);
    assert_eq!(chunk_text(&r.json()).len(), text.len());
    let r = gw
        .call("ts", "big", json!({"bytes": 20 << 20}))
        .await
        .expect(200);
    assert_eq!(chunk_text(&r.json()).len(), 20 << 20);
}

#[tokio::test]
async fn tool_list_changes_reach_the_tool_list() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let names = |v: Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(
        !names(gw.get("/mcps/ts/tools").await.expect(200).json()).contains(&"extra".to_string())
    );
    gw.call("ts", "change_tools", json!({})).await.expect(200);
    let waited = Instant::now();
    loop {
        if names(gw.get("/mcps/ts/tools").await.expect(200).json()).contains(&"extra".to_string()) {
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(3),
            "list_changed was not applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.call("ts", "extra", json!({})).await.expect(200);
    gw.call("ts", "change_tools", json!({})).await.expect(200);
    let waited = Instant::now();
    while names(gw.get("/mcps/ts/tools").await.expect(200).json()).contains(&"extra".to_string()) {
        assert!(waited.elapsed() < Duration::from_secs(3));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gw.call("ts", "extra", json!({})).await.expect(404);
    // enable_tools / disable_tools filter the list, as AgentScope's gateway does.
    let mut spec = testserver_stdio("filtered");
    spec["enable_tools"] = json!(["echo", "add", "media"]);
    gw.add(spec, "").await.expect(200);
    assert_eq!(
        names(gw.get("/mcps/filtered/tools").await.expect(200).json()),
        ["echo", "add", "media"]
    );
    let mut spec = testserver_stdio("filtered2");
    spec["disable_tools"] = json!(["media", "crash"]);
    gw.add(spec, "").await.expect(200);
    let listed = names(gw.get("/mcps/filtered2/tools").await.expect(200).json());
    assert!(
        listed.contains(&"echo".to_string())
            && !listed.contains(&"media".to_string())
            && !listed.contains(&"crash".to_string())
    );
    // A tool filtered out is not called either, whatever the answer's form: the refusal names
    // the tool, the MCP and the rule, and the server never saw the call (`crash` would have
    // ended it, and the next call would have started another one).
    let auth = format!("Bearer {}", gw.token);
    let body = serde_json::to_vec(&json!({"arguments": {"code": 3, "message": "ran"}})).unwrap();
    for (mcp, rule) in [
        ("filtered", "not in enable_tools"),
        ("filtered2", "disable_tools"),
    ] {
        let before = status_of(&gw.get("/mcps").await.expect(200).json(), mcp);
        assert!(before["pid"].is_u64(), "{before}");
        let refusal = json!({
            "detail": format!("tool \"crash\" of MCP \"{mcp}\" is disabled by its spec ({rule})")
        });
        for (query, accept) in [
            ("", "application/json"),
            ("", "application/x-ndjson"),
            ("?format=mcp", "application/json"),
        ] {
            let r = gw
                .send_with(
                    "POST",
                    &format!("/mcps/{mcp}/tools/crash{query}"),
                    Some(body.clone()),
                    Some(&auth),
                    &[("accept", accept)],
                )
                .await;
            assert_eq!(r.status, 403, "{mcp} {query} {accept}: {}", r.text());
            assert_eq!(r.content_type, "application/json", "{mcp} {query} {accept}");
            assert_eq!(r.json(), refusal, "{mcp} {query} {accept}");
        }
        let r = gw
            .call(mcp, "echo", json!({"text": "still here"}))
            .await
            .expect(200);
        assert_eq!(r.json()["chunk"]["content"][0]["text"], "still here");
        let after = status_of(&gw.get("/mcps").await.expect(200).json(), mcp);
        assert_eq!(after["pid"], before["pid"], "{after}");
        assert_eq!(after["restarts"], 0, "{after}");
        assert_eq!(after["state"], "connected", "{after}");
    }
}

#[tokio::test]
async fn delete_while_calls_run_fails_them_and_leaves_nothing() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let pid = gw.testserver_pid("ts").await;
    let (call, deleted) = tokio::join!(gw.call("ts", "slow", json!({"seconds": 30})), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        let r = gw.delete("/mcps/ts").await;
        (r, t.elapsed())
    });
    assert_eq!(deleted.0.status, 200);
    assert!(
        deleted.1 < Duration::from_secs(5),
        "delete took {:?}",
        deleted.1
    );
    assert!(call.status >= 500, "{}", call.text());
    assert!(!process_alive(pid));
}

#[tokio::test]
async fn metrics_and_openapi_describe_the_gateway() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "?agent_id=a%22b")
        .await
        .expect(200);
    gw.post(
        "/mcps/ts/tools/echo?agent_id=a%22b",
        json!({"arguments": {"text": "x"}}),
    )
    .await
    .expect(200);
    gw.post(
        "/mcps/ts/tools/fail?agent_id=a%22b",
        json!({"arguments": {}}),
    )
    .await
    .expect(200);
    gw.post("/mcps/ts/tools/nope?agent_id=a%22b", json!({}))
        .await
        .expect(404);
    let r = gw.get("/metrics").await.expect(200);
    assert!(r.content_type.starts_with("text/plain"));
    let text = r.text();
    let labels = r#"agent_id="a\"b",session_id="",mcp="ts""#;
    assert!(
        text.contains(&format!("mcpgw_tool_calls_total{{{labels}}} 3")),
        "{text}"
    );
    assert!(
        text.contains(&format!("mcpgw_tool_call_errors_total{{{labels}}} 1")),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "mcpgw_tool_call_duration_seconds_count{{{labels}}} 3"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("mcpgw_upstream_restarts_total{{{labels}}} 0")),
        "{text}"
    );
    assert!(
        text.contains(&format!("mcpgw_upstream_up{{{labels}}} 1")),
        "{text}"
    );
    assert!(text.contains("mcpgw_mcps 1"));
    gw.send_with("GET", "/metrics", None, None, &[])
        .await
        .expect(401);

    let doc = gw.get("/openapi.json").await.expect(200).json();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/health",
        "/mcps",
        "/mcps/{name}",
        "/mcps/{name}/runtime-headers",
        "/mcps/{name}/tools",
        "/mcps/{name}/tools/{tool}",
        "/metrics",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} undocumented");
    }
}

#[tokio::test]
async fn an_http_upstream_that_never_answers_is_bounded_by_its_timeout() {
    // Accepts connections (the kernel completes them) but never answers a byte.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let gw = start_gateway(&[]);
    let started = Instant::now();
    let r = gw
        .add(json!({"name": "mute", "mcp_config": {"type": "http_mcp", "url": format!("http://127.0.0.1:{port}/mcp"), "timeout": 0.5}}), "")
        .await
        .expect(500);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(r.detail().contains("500ms"), "{}", r.detail());
    drop(silent);
}
