//! The REST contract against the real gateway process and real upstreams: the project's test
//! server over stdio and streamable HTTP, server-everything (npm) over stdio and streamable
//! HTTP, and mcp-server-time (PyPI).

use std::time::{Duration, Instant};

use mcpgw_testkit::*;
use serde_json::{Value, json};

fn text_of(chunk: &Value) -> String {
    chunk["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "text")
        .map(|b| b["text"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join("")
}

#[tokio::test]
async fn health_needs_no_token_and_reports_the_nonce() {
    let gw = start_gateway(&["--instance-nonce", "n0nce"]);
    let r = gw
        .send_with("GET", "/health", None, None, &[])
        .await
        .expect(200);
    assert_eq!(r.json(), json!({"status": "ok", "instance_nonce": "n0nce"}));
    let gw = start_gateway(&[]);
    let r = gw
        .send_with("GET", "/health", None, None, &[])
        .await
        .expect(200);
    assert_eq!(r.text(), "ok");
    assert!(r.content_type.starts_with("text/plain"));
}

#[tokio::test]
async fn every_other_endpoint_needs_the_token() {
    let gw = start_gateway(&[]);
    for auth in [
        None,
        Some("Bearer wrong"),
        Some("bearer x"),
        Some(""),
        Some("Bearer "),
    ] {
        let r = gw
            .send_with("GET", "/mcps", None, auth, &[])
            .await
            .expect(401);
        assert_eq!(r.text(), "invalid gateway token");
    }
    let almost = format!("Bearer {}x", gw.token);
    gw.send_with("GET", "/mcps", None, Some(&almost), &[])
        .await
        .expect(401);
    let r = gw
        .send_with("POST", "/mcps/x/tools/y", Some(b"{}".to_vec()), None, &[])
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(gw.get("/mcps").await.expect(200).json(), json!([]));
    // The token never reaches the log.
    assert!(!gw.log().contains(&gw.token));
}

#[tokio::test]
async fn testserver_over_stdio_end_to_end() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    assert_eq!(
        gw.add(testserver_stdio("ts"), "")
            .await
            .expect(409)
            .detail(),
        "'ts' already exists for agent='' session=''"
    );

    let tools = gw.get("/mcps/ts/tools").await.expect(200).json();
    let names = tool_names(&tools);
    for want in TESTSERVER_TOOLS {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let add = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "add")
        .unwrap();
    assert!(
        add["inputSchema"].is_object() && add["outputSchema"].is_object(),
        "{add}"
    );

    let chunk = gw
        .call("ts", "echo", json!({"text": "héllo $(x) `y` 'z'\n"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(text_of(&chunk), "héllo $(x) `y` 'z'\n");
    assert_eq!(chunk["state"], "running");
    assert_eq!(chunk["is_last"], true);
    assert_eq!(chunk["id"].as_str().unwrap().len(), 32);

    let chunk = gw
        .call("ts", "add", json!({"a": 2, "b": 3}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(
        chunk["metadata"]["structured_content"],
        json!({"sum": 5, "product": 6})
    );

    let chunk = gw.call("ts", "media", json!({})).await.expect(200).json()["chunk"].clone();
    let blocks = chunk["content"].as_array().unwrap();
    assert_eq!(blocks.len(), 5, "{chunk}");
    assert_eq!(blocks[0]["source"]["media_type"], "image/png");
    assert_eq!(blocks[1]["source"]["media_type"], "audio/wav");
    assert_eq!(blocks[2]["type"], "text");
    let embedded: Value = serde_json::from_str(blocks[2]["text"].as_str().unwrap()).unwrap();
    assert_eq!(embedded["text"], "hello resource");
    assert_eq!(blocks[3]["source"]["type"], "base64");
    assert_eq!(
        blocks[3]["source"]["media_type"],
        "application/octet-stream"
    );
    assert_eq!(
        blocks[4]["source"],
        json!({"type": "url", "url": "test://resource/link", "media_type": "text/plain"})
    );
    assert_eq!(blocks[4]["name"], "linked");

    let chunk = gw
        .call("ts", "fail", json!({"message": "nope"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(chunk["state"], "error");
    assert_eq!(text_of(&chunk), "nope");

    // The environment and arguments of the spec reach the child.
    let info = gw.call("ts", "info", json!({})).await.expect(200).json()["chunk"]["metadata"]["structured_content"].clone();
    assert_eq!(info["env"]["MCPGW_TEST_MARK"], "ts");
    let pid = info["pid"].as_u64().unwrap() as u32;

    let listed = gw.get("/mcps").await.expect(200).json();
    assert_eq!(listed[0]["name"], "ts");
    assert_eq!(listed[0]["mcp_config"]["env"]["MCPGW_TEST_MARK"], "ts");
    assert_eq!(listed[0]["status"]["state"], "connected");
    assert_eq!(listed[0]["status"]["pid"], pid);

    assert_eq!(
        gw.call("ts", "nope", json!({})).await.expect(404).detail(),
        "Tool 'nope' not found in MCP server 'ts'"
    );
    gw.delete("/mcps/ts").await.expect(200);
    assert!(!process_alive(pid), "the upstream {pid} outlived DELETE");
    gw.call("ts", "echo", json!({"text": "x"}))
        .await
        .expect(404);
    gw.delete("/mcps/ts").await.expect(404);
}

#[tokio::test]
async fn testserver_over_streamable_http_with_runtime_headers() {
    let server = testserver_http();
    let gw = start_gateway(&[]);
    let mut spec = http_spec("web", &server.url);
    spec["mcp_config"]["headers"] = json!({"X-Static": "s", "X-Swap": "static"});
    let mut post = spec.clone();
    post["runtime_headers"] = json!({"X-Runtime": "r1"});
    gw.add(post, "").await.expect(200);
    // runtime_headers is never echoed.
    let listed = gw.get("/mcps").await.expect(200).json();
    assert!(listed[0].get("runtime_headers").is_none(), "{listed}");
    assert_eq!(listed[0]["mcp_config"]["timeout"], 30.0);

    let chunk = gw
        .call("web", "echo", json!({"text": "over http"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(text_of(&chunk), "over http");
    let seen = |r: Reply| r.json()["chunk"]["metadata"]["structured_content"].clone();
    let h = seen(gw.call("web", "headers", json!({})).await.expect(200));
    assert_eq!(h["x-static"], "s");
    assert_eq!(h["x-runtime"], "r1");

    let put = |body: Value| {
        gw.send(
            "PUT",
            "/mcps/web/runtime-headers",
            Some(serde_json::to_vec(&body).unwrap()),
        )
    };
    put(json!({"headers": {"X-Runtime": "r2", "X-Swap": "runtime"}}))
        .await
        .expect(204);
    let h = seen(gw.call("web", "headers", json!({})).await.expect(200));
    assert_eq!(
        (h["x-runtime"].as_str(), h["x-swap"].as_str()),
        (Some("r2"), Some("runtime"))
    );
    put(json!({"headers": {}})).await.expect(204);
    let h = seen(gw.call("web", "headers", json!({})).await.expect(200));
    assert!(h.get("x-runtime").is_none());
    assert_eq!(h["x-swap"], "static");

    assert!(
        put(json!({"headers": {"Host": "evil"}}))
            .await
            .expect(400)
            .detail()
            .contains("Host")
    );
    assert!(
        put(json!({"headers": {"X-Bad": "a\nb"}}))
            .await
            .expect(400)
            .detail()
            .contains("X-Bad")
    );
    assert_eq!(
        put(json!({"headers": []})).await.expect(400).detail(),
        "headers must be a JSON object"
    );
    assert_eq!(
        put(json!({"nothing": 1})).await.expect(400).detail(),
        "headers must be a JSON object"
    );
    gw.send(
        "PUT",
        "/mcps/ghost/runtime-headers",
        Some(br#"{"headers":{}}"#.to_vec()),
    )
    .await
    .expect(404);

    gw.add(testserver_stdio("local"), "").await.expect(200);
    let r = gw
        .send(
            "PUT",
            "/mcps/local/runtime-headers",
            Some(br#"{"headers":{"A":"b"}}"#.to_vec()),
        )
        .await
        .expect(400);
    assert!(r.detail().contains("Streamable HTTP"));
    gw.delete("/mcps/web").await.expect(200);
}

#[tokio::test]
async fn server_everything_over_stdio_and_streamable_http() {
    let gw = start_gateway(&[]);
    let js = everything_js();
    gw.add(
        json!({"name": "ev", "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": "node", "args": [js, "stdio"]}}),
        "",
    )
    .await
    .expect(200);
    let http = everything_http();
    gw.add(http_spec("evh", &http.url), "").await.expect(200);
    for mcp in ["ev", "evh"] {
        let tools = gw
            .get(&format!("/mcps/{mcp}/tools"))
            .await
            .expect(200)
            .json();
        assert!(tools.as_array().unwrap().len() >= 10, "{mcp}: {tools}");
        assert!(
            tools
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["name"] == "get-sum")
        );
        let chunk = gw
            .call(mcp, "echo", json!({"message": "hi"}))
            .await
            .expect(200)
            .json()["chunk"]
            .clone();
        assert_eq!(text_of(&chunk), "Echo: hi");
        let chunk = gw
            .call(mcp, "get-sum", json!({"a": 40, "b": 2}))
            .await
            .expect(200)
            .json()["chunk"]
            .clone();
        assert!(text_of(&chunk).contains("42"), "{chunk}");
        let chunk = gw
            .call(mcp, "get-tiny-image", json!({}))
            .await
            .expect(200)
            .json()["chunk"]
            .clone();
        let image = chunk["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "data")
            .unwrap()
            .clone();
        assert_eq!(image["source"]["media_type"], "image/png");
        let chunk = gw
            .call(
                mcp,
                "get-structured-content",
                json!({"location": "Chicago"}),
            )
            .await
            .expect(200)
            .json()["chunk"]
            .clone();
        assert!(
            chunk["metadata"]["structured_content"].is_object(),
            "{chunk}"
        );
        let chunk = gw
            .call(mcp, "get-resource-links", json!({"count": 2}))
            .await
            .expect(200)
            .json()["chunk"]
            .clone();
        assert!(
            chunk["content"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b["source"]["type"] == "url"),
            "{chunk}"
        );
    }
    // Bad arguments come back from the upstream as an error, not a crash.
    let r = gw.call("ev", "get-sum", json!({"a": "x"})).await;
    assert!(
        r.status == 502 || r.json()["chunk"]["state"] == "error",
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn mcp_server_time_from_pypi() {
    let gw = start_gateway(&[]);
    gw.add(
        json!({"name": "time", "mcp_config": {"type": "stdio_mcp",
        "command": venv_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]}}),
        "",
    )
    .await
    .expect(200);
    let tools = gw.get("/mcps/time/tools").await.expect(200).json();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "get_current_time"),
        "{tools}"
    );
    let chunk = gw
        .call("time", "get_current_time", json!({"timezone": "UTC"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert!(text_of(&chunk).contains("UTC"), "{chunk}");
    let chunk = gw
        .call(
            "time",
            "convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert!(text_of(&chunk).contains("21:00"), "{chunk}");
}

#[tokio::test]
async fn scopes_are_isolated() {
    let gw = start_gateway(&[]);
    let a = "?agent_id=a&session_id=s1";
    let b = "?agent_id=a&session_id=s%202";
    gw.add(testserver_stdio("same"), a).await.expect(200);
    gw.add(testserver_stdio("same"), b).await.expect(200);
    gw.add(testserver_stdio("same"), a).await.expect(409);
    assert_eq!(gw.get("/mcps").await.expect(200).json(), json!([]));
    assert_eq!(
        gw.get(&format!("/mcps{a}"))
            .await
            .expect(200)
            .json()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let pid = |r: Reply| {
        r.json()["chunk"]["metadata"]["structured_content"]["pid"]
            .as_u64()
            .unwrap()
    };
    let pa = pid(gw
        .post(&format!("/mcps/same/tools/info{a}"), json!({}))
        .await
        .expect(200));
    let pb = pid(gw
        .post(&format!("/mcps/same/tools/info{b}"), json!({}))
        .await
        .expect(200));
    assert_ne!(pa, pb, "each scope gets its own upstream session");
    gw.call("same", "echo", json!({"text": "x"}))
        .await
        .expect(404);
    let r = gw
        .delete("/mcps/same?agent_id=a&session_id=nope")
        .await
        .expect(404);
    assert_eq!(r.detail(), "'same' not found for agent='a' session='nope'");
    gw.delete(&format!("/mcps/same{a}")).await.expect(200);
    gw.post(
        &format!("/mcps/same/tools/echo{b}"),
        json!({"arguments": {"text": "still here"}}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn bad_input_gets_a_status_and_a_detail_and_the_gateway_stays_up() {
    let gw = start_gateway(&[]);
    let raw = |body: &'static [u8]| gw.send("POST", "/mcps", Some(body.to_vec()));
    assert!(
        raw(b"{\"name\": \"x\",")
            .await
            .expect(400)
            .detail()
            .contains("not valid JSON")
    );
    assert!(
        raw(b"not json")
            .await
            .expect(400)
            .detail()
            .contains("not valid JSON")
    );
    assert!(
        raw(b"[1,2]")
            .await
            .expect(400)
            .detail()
            .contains("JSON object")
    );
    assert_eq!(raw(b"{}").await.expect(400).detail(), "name required");
    assert_eq!(
        raw(br#"{"name": ""}"#).await.expect(400).detail(),
        "name required"
    );
    assert!(
        raw(br#"{"name": "a/b", "mcp_config": {"type": "stdio_mcp", "command": "x"}}"#)
            .await
            .expect(400)
            .detail()
            .contains("must match")
    );
    assert!(
        raw(br#"{"name": "x"}"#)
            .await
            .expect(400)
            .detail()
            .contains("mcp_config")
    );
    assert!(
        raw(br#"{"name": "x", "mcp_config": {"type": "ftp_mcp"}}"#)
            .await
            .expect(400)
            .detail()
            .contains("ftp_mcp")
    );
    assert!(
        raw(br#"{"name": "x", "mcp_config": {"type": "stdio_mcp"}}"#)
            .await
            .expect(400)
            .detail()
            .contains("command")
    );
    let d = raw(br#"{"name": "x", "is_stateful": "yes", "mcp_config": {"type": "stdio_mcp", "command": "x"}}"#).await.expect(400).detail();
    assert!(d.contains("is_stateful"), "{d}");
    let d =
        raw(br#"{"name": "x", "mcp_config": {"type": "stdio_mcp", "command": "x", "args": [1]}}"#)
            .await
            .expect(400)
            .detail();
    assert!(d.contains("args"), "{d}");
    assert!(raw(br#"{"name": "x", "is_stateful": false, "mcp_config": {"type": "stdio_mcp", "command": "x"}}"#).await.expect(400).detail().contains("stateful"));
    assert!(raw(br#"{"name": "x", "runtime_headers": {"A": "b"}, "mcp_config": {"type": "stdio_mcp", "command": "x"}}"#).await.expect(400).detail().contains("Streamable HTTP"));
    // A command that does not exist, or is not an MCP server, fails to connect with the reason.
    let d =
        raw(br#"{"name": "x", "mcp_config": {"type": "stdio_mcp", "command": "/no/such/binary"}}"#)
            .await
            .expect(500)
            .detail();
    assert!(
        d.starts_with("connect failed:") && d.contains("/no/such/binary"),
        "{d}"
    );
    let d = raw(br#"{"name": "x", "mcp_config": {"type": "stdio_mcp", "command": "sh", "args": ["-c", "echo broken >&2; exit 4"]}}"#).await.expect(500).detail();
    assert!(d.contains("exit status 4") && d.contains("broken"), "{d}");
    let d = raw(
        br#"{"name": "x", "mcp_config": {"type": "http_mcp", "url": "http://127.0.0.1:1/mcp"}}"#,
    )
    .await
    .expect(500)
    .detail();
    assert!(
        d.starts_with("connect failed:") && d.contains("refused"),
        "{d}"
    );
    // A failed registration leaves the name free.
    assert_eq!(gw.get("/mcps").await.expect(200).json(), json!([]));

    // Unknown fields are kept and echoed.
    let mut spec = testserver_stdio("ok");
    spec["owner"] = json!("team");
    spec["mcp_config"]["future"] = json!([1]);
    gw.add(spec, "").await.expect(200);
    let listed = gw.get("/mcps").await.expect(200).json();
    assert_eq!(listed[0]["owner"], "team");
    assert_eq!(listed[0]["mcp_config"]["future"], json!([1]));

    let call = |body: &'static [u8]| gw.send("POST", "/mcps/ok/tools/echo", Some(body.to_vec()));
    assert!(
        call(b"{\"arguments\": ")
            .await
            .expect(400)
            .detail()
            .contains("not valid JSON")
    );
    assert!(
        call(br#"{"arguments": [1]}"#)
            .await
            .expect(400)
            .detail()
            .contains("arguments must be a JSON object")
    );
    assert!(
        call(br#"{"arguments": "x"}"#)
            .await
            .expect(400)
            .detail()
            .contains("arguments")
    );
    // Missing required arguments are the upstream's to judge.
    let r = call(br#"{"arguments": {}}"#).await;
    assert!(
        r.status == 502 || r.json()["chunk"]["state"] == "error",
        "{}",
        r.text()
    );
    // No body at all means no arguments.
    gw.send("POST", "/mcps/ok/tools/info", None)
        .await
        .expect(200);
    assert!(
        gw.send(
            "POST",
            "/mcps/ok/tools/echo?timeout=abc",
            Some(b"{}".to_vec())
        )
        .await
        .expect(400)
        .detail()
        .contains("timeout")
    );
    assert!(
        gw.send(
            "POST",
            "/mcps/ok/tools/echo?timeout=-1",
            Some(b"{}".to_vec())
        )
        .await
        .expect(400)
        .detail()
        .contains("timeout")
    );
    gw.call("ghost", "echo", json!({})).await.expect(404);
    gw.get("/mcps/ghost/tools").await.expect(404);

    let r = gw.get("/nowhere").await.expect(404);
    assert_eq!(r.detail(), "Not Found");
    let r = gw.send("PATCH", "/mcps", None).await.expect(405);
    assert_eq!(r.detail(), "Method Not Allowed");
    assert!(
        gw.get("/mcps?agent_id=a&agent_id=b")
            .await
            .expect(400)
            .detail()
            .contains("query")
    );

    // Still serving.
    let chunk = gw
        .call("ok", "echo", json!({"text": "alive"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(text_of(&chunk), "alive");
}

#[tokio::test]
async fn a_slow_registration_does_not_stall_other_mcps() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("fast"), "").await.expect(200);
    let slow = json!({"name": "slow", "mcp_config": {"type": "stdio_mcp", "command": "sh",
        "args": ["-c", format!("sleep 2; exec {} stdio", testserver_bin().display())]}});
    let started = Instant::now();
    let (registered, calls) = tokio::join!(gw.add(slow, ""), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut latencies = Vec::new();
        for i in 0..10 {
            let t = Instant::now();
            let r = gw
                .call("fast", "echo", json!({"text": format!("{i}")}))
                .await
                .expect(200);
            latencies.push(t.elapsed());
            assert_eq!(text_of(&r.json()["chunk"]), format!("{i}"));
        }
        // While `slow` connects, its name is taken and a call to it says so.
        assert_eq!(gw.add(testserver_stdio("slow"), "").await.status, 409);
        (latencies, started.elapsed())
    });
    registered.expect(200);
    let (latencies, done_at) = calls;
    assert!(
        done_at < Duration::from_millis(1800),
        "calls to another MCP waited for the slow connect: {latencies:?}"
    );
}

#[tokio::test]
async fn concurrent_calls_on_one_upstream_each_get_their_own_answer() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let calls = (0..64).map(|i| {
        let gw = &gw;
        async move {
            let text = format!("call-{i}-{}", "x".repeat(i * 7));
            let r = gw
                .call("ts", "echo", json!({"text": text}))
                .await
                .expect(200);
            assert_eq!(text_of(&r.json()["chunk"]), text);
        }
    });
    futures::future::join_all(calls).await;
    // Two slow calls overlap instead of queueing.
    let t = Instant::now();
    let (a, b) = tokio::join!(
        gw.call("ts", "slow", json!({"seconds": 0.8, "steps": 1})),
        gw.call("ts", "slow", json!({"seconds": 0.8, "steps": 1}))
    );
    a.expect(200);
    b.expect(200);
    assert!(
        t.elapsed() < Duration::from_millis(1100),
        "{:?}",
        t.elapsed()
    );
}

#[tokio::test]
async fn deadlines_and_streaming() {
    let gw = start_gateway(&[]);
    let dir = TempDir::new("cancel");
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let marker = dir.path("cancelled");
    let t = Instant::now();
    let r = gw
        .post(
            "/mcps/ts/tools/slow?timeout=0.3",
            json!({"arguments": {"seconds": 30, "cancel_marker": marker}}),
        )
        .await
        .expect(504);
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(r.detail().contains("0.3s"), "{}", r.detail());
    assert!(
        appears(&marker, Duration::from_secs(5)).await,
        "the cancellation did not reach the upstream"
    );

    let mut spec = testserver_stdio("bounded");
    spec["execution_timeout"] = json!(0.2);
    gw.add(spec, "").await.expect(200);
    let r = gw
        .call("bounded", "slow", json!({"seconds": 5}))
        .await
        .expect(504);
    assert!(r.detail().contains("execution_timeout"), "{}", r.detail());

    let r = gw
        .send_with(
            "POST",
            "/mcps/ts/tools/slow",
            Some(serde_json::to_vec(&json!({"arguments": {"seconds": 0.3, "steps": 3}})).unwrap()),
            Some(&format!("Bearer {}", gw.token)),
            &[("accept", "application/x-ndjson")],
        )
        .await
        .expect(200);
    assert_eq!(r.content_type, "application/x-ndjson");
    let lines: Vec<Value> = r
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "{}", r.text());
    for (i, line) in lines[..3].iter().enumerate() {
        assert_eq!(line["is_last"], false);
        assert_eq!(line["metadata"]["mcp_progress"]["progress"], (i + 1) as f64);
        assert_eq!(line["metadata"]["mcp_progress"]["total"], 3.0);
    }
    assert_eq!(lines[3]["is_last"], true);
    assert_eq!(text_of(&lines[3]), "done after 3 steps");
    // Progress sent right before the result is never lost nor reordered behind it.
    for _ in 0..25 {
        let r = gw
            .send_with(
                "POST",
                "/mcps/ts/tools/slow",
                Some(
                    serde_json::to_vec(&json!({"arguments": {"seconds": 0, "steps": 3}})).unwrap(),
                ),
                Some(&format!("Bearer {}", gw.token)),
                &[("accept", "application/x-ndjson")],
            )
            .await
            .expect(200);
        let lines: Vec<Value> = r
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let progress: Vec<f64> = lines
            .iter()
            .filter_map(|l| l["metadata"]["mcp_progress"]["progress"].as_f64())
            .collect();
        assert_eq!(progress, [1.0, 2.0, 3.0], "{}", r.text());
        assert_eq!(lines.last().unwrap()["is_last"], true);
    }
    // A streamed call that fails before any progress answers with its status.
    gw.send_with(
        "POST",
        "/mcps/ts/tools/nope",
        Some(b"{}".to_vec()),
        Some(&format!("Bearer {}", gw.token)),
        &[("accept", "application/x-ndjson")],
    )
    .await
    .expect(404);
}

#[tokio::test]
async fn sigterm_and_delete_leave_no_process_behind() {
    let mut gw = start_gateway(&[]);
    let mut pids = Vec::new();
    for name in ["a", "b"] {
        gw.add(testserver_stdio(name), "").await.expect(200);
        pids.push(gw.testserver_pid(name).await);
    }
    // A wrapper that starts a grandchild: the whole group goes.
    gw.add(
        json!({"name": "wrapped", "mcp_config": {"type": "stdio_mcp", "command": "sh",
        "args": ["-c", format!("sleep 300 & exec {} stdio", testserver_bin().display())]}}),
        "",
    )
    .await
    .expect(200);
    let wrapped = gw.testserver_pid("wrapped").await;
    let group: Vec<u32> = processes_in_group(wrapped);
    assert!(
        group.len() >= 2,
        "expected the server and its sleeper in one group: {group:?}"
    );
    let status = gw.terminate();
    assert!(status.success(), "{status:?}");
    for pid in pids.iter().chain(group.iter()) {
        assert!(
            wait_gone(*pid, Duration::from_secs(3)),
            "process {pid} outlived the gateway"
        );
    }
    assert!(gw.log().contains("shutting down"));
}

#[tokio::test]
async fn legacy_sse_upstream_server_everything() {
    let server = mcpgw_testkit::servers::everything_in_mode("sse", "/sse");
    let gw = start_gateway(&[]);
    gw.add(http_spec("legacy", &server.url), "")
        .await
        .expect(200);
    let tools = gw.get("/mcps/legacy/tools").await.expect(200).json();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{tools}"
    );
    let chunk = gw
        .call("legacy", "echo", json!({"message": "through sse"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(text_of(&chunk), "Echo: through sse");
    // Progress flows over the event stream too.
    let r = gw
        .send_with(
            "POST",
            "/mcps/legacy/tools/trigger-long-running-operation",
            Some(serde_json::to_vec(&json!({"arguments": {"duration": 0.3, "steps": 3}})).unwrap()),
            Some(&format!("Bearer {}", gw.token)),
            &[("accept", "application/x-ndjson")],
        )
        .await
        .expect(200);
    assert_eq!(r.text().lines().count(), 4, "{}", r.text());
    // Runtime headers are for streamable HTTP only, as in AgentScope.
    gw.send(
        "PUT",
        "/mcps/legacy/runtime-headers",
        Some(br#"{"headers":{"A":"b"}}"#.to_vec()),
    )
    .await
    .expect(400);
    gw.delete("/mcps/legacy").await.expect(200);
}

/// A CA and a certificate for 127.0.0.1 signed by it, made with the openssl command line.
fn make_certificates(dir: &TempDir) {
    let openssl = |args: &[&str]| {
        succeeded(
            std::process::Command::new("openssl")
                .args(args)
                .current_dir(&dir.0),
        );
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=mcpgw test CA",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        dir.path("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
}

#[tokio::test]
async fn https_upstreams_are_verified_against_the_trusted_roots() {
    let dir = TempDir::new("tls");
    make_certificates(&dir);
    let server = testserver_http();
    let port: u16 = server
        .url
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    let mut proxy = std::process::Command::new("python3")
        .arg(repo().join("tests/servers/tls_proxy.py"))
        .args([dir.path("server.pem"), dir.path("server.key")])
        .arg(port.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(proxy.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let _proxy = Guarded(proxy);
    let url = format!("https://127.0.0.1:{}/mcp", line.trim());

    // Trusting the test CA (as a sandbox with its own CA would, through SSL_CERT_FILE).
    let ca = dir.path("ca.pem");
    let gw = start_gateway_with_env(&[], &[("SSL_CERT_FILE", ca.as_os_str())]);
    gw.add(http_spec("secure", &url), "").await.expect(200);
    let chunk = gw
        .call("secure", "echo", json!({"text": "over tls"}))
        .await
        .expect(200)
        .json()["chunk"]
        .clone();
    assert_eq!(text_of(&chunk), "over tls");

    // Without it, the certificate is refused and the reason says so.
    let gw = start_gateway(&[]);
    let d = gw
        .add(http_spec("secure", &url), "")
        .await
        .expect(500)
        .detail();
    assert!(d.to_lowercase().contains("certificate"), "{d}");
}
