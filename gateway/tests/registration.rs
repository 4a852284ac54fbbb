//! Registration is atomic as callers see it: it ends with the MCP ready, or leaves nothing behind
//! (no reserved name, no process), whoever gave up: the caller that hung up, the upstream that
//! never answered, or a DELETE of the name while it connected.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use mcpgw_testkit::*;

/// A stdio spec whose server writes its pid to `pidfile`, then runs `then` (sh).
fn sh_spec(name: &str, pidfile: &std::path::Path, then: &str) -> Value {
    json!({"name": name, "mcp_config": {"type": "stdio_mcp", "command": "sh",
        "args": ["-c", format!("echo $$ > {}; {then}", pidfile.display())]}})
}

/// The pid the server wrote (waiting without blocking the test's runtime).
async fn pid_in(pidfile: &std::path::Path) -> u32 {
    let started = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the name is free (404, not 503 "still connecting").
async fn wait_free(gw: &Gateway, name: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        let r = gw.get(&format!("/mcps/{name}/tools")).await;
        if r.status == 404 {
            return;
        }
        assert!(
            started.elapsed() < limit,
            "{name} still reserved after {limit:?}: {} {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_caller_that_hangs_up_mid_connect_leaves_no_name_and_no_process() {
    let gw = start_gateway(&[]);
    let dir = TempDir::new("hangup");
    for (case, then) in [
        // Slow to start, then a real server.
        (
            "slow",
            format!("sleep 3; exec {} stdio", testserver_bin().display()),
        ),
        // Never answers initialize.
        ("mute", "exec sleep 300".to_string()),
    ] {
        let pidfile = dir.path(case);
        let spec = sh_spec("x", &pidfile, &then);
        let gone = tokio::time::timeout(Duration::from_millis(500), gw.add(spec, "")).await;
        assert!(gone.is_err(), "{case}: the registration finished early");
        let pid = pid_in(&pidfile).await;
        wait_free(&gw, "x", Duration::from_secs(1)).await;
        assert_eq!(gw.get("/mcps").await.expect(200).json(), json!([]));
        assert!(
            wait_gone(pid, Duration::from_secs(2)),
            "{case}: the server {pid} outlived its abandoned registration"
        );
        // The name can be registered again at once.
        gw.add(testserver_stdio("x"), "").await.expect(200);
        gw.delete("/mcps/x").await.expect(200);
    }
}

#[tokio::test]
async fn delete_during_connect_cancels_that_registration_and_frees_the_name() {
    let gw = start_gateway(&[]);
    let dir = TempDir::new("aba");
    let pidfile = dir.path("first");
    let first = sh_spec(
        "aba",
        &pidfile,
        &format!("sleep 1.5; exec {} stdio", testserver_bin().display()),
    );
    let (first_answer, ()) = tokio::join!(gw.add(first, ""), async {
        let pid = pid_in(&pidfile).await;
        let started = Instant::now();
        gw.delete("/mcps/aba").await.expect(200);
        assert!(
            // The connect sleeps 1.5 s after the pid appears: a DELETE that waited for it
            // would take at least that long.
            started.elapsed() < Duration::from_millis(1400),
            "DELETE waited for the connect: {:?}",
            started.elapsed()
        );
        assert!(
            !process_alive(pid),
            "the first registration's server survived"
        );
        // Another spec under the same name, at once.
        let mut second = testserver_stdio("aba");
        second["mcp_config"]["env"]["MCPGW_TEST_MARK"] = json!("second");
        gw.add(second, "").await.expect(200);
    });
    let r = first_answer.expect(409);
    assert!(r.detail().contains("removed"), "{}", r.detail());
    let listed = gw.get("/mcps").await.expect(200).json();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["mcp_config"]["env"]["MCPGW_TEST_MARK"], "second");
    gw.call("aba", "echo", json!({"text": "second"}))
        .await
        .expect(200);
    // The first registration, finished late, did not take the name back.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let listed = gw.get("/mcps").await.expect(200).json();
    assert_eq!(listed[0]["mcp_config"]["env"]["MCPGW_TEST_MARK"], "second");
}

/// A secret in a spec's `env` (`{"secret": NAME, "value": V}`, as the host driver sends it): the
/// server gets V; `GET /mcps`, the registration's answer and the log show the name alone; a
/// secret without its value is refused with the field named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_in_a_spec_reaches_the_server_and_is_never_echoed() {
    let gw = start_gateway(&[]);
    let value = format!("value-of-{}", mcpgw::random::uuid4_hex());
    let mut spec = testserver_stdio("sec");
    spec["mcp_config"]["env"]["MCPGW_TEST_KEY"] = json!({"secret": "KEY", "value": value});
    let added = gw.add(spec.clone(), "").await.expect(200);
    assert!(!added.text().contains(&value), "{}", added.text());
    let info = gw.call("sec", "info", json!({})).await.expect(200).json();
    assert!(
        info.to_string()
            .contains(&format!("\"MCPGW_TEST_KEY\":\"{value}\"")),
        "the server's environment holds the value: {info}"
    );
    let listed = gw.get("/mcps").await.expect(200).json();
    let env = &listed.as_array().unwrap()[0]["mcp_config"]["env"];
    assert_eq!(env["MCPGW_TEST_KEY"], json!({"secret": "KEY"}), "{listed}");
    assert_eq!(env["MCPGW_TEST_MARK"], "sec", "{listed}");
    assert!(!listed.to_string().contains(&value), "{listed}");

    spec["name"] = json!("nameonly");
    spec["mcp_config"]["env"]["MCPGW_TEST_KEY"] = json!({"secret": "KEY"});
    let refused = gw.add(spec.clone(), "").await.expect(400);
    assert!(
        refused
            .detail()
            .contains("mcp_config.env.MCPGW_TEST_KEY names secret \"KEY\" without its value"),
        "{}",
        refused.text()
    );
    spec["mcp_config"]["env"]["MCPGW_TEST_KEY"] = json!({"secret": "KEY", "extra": 1});
    let refused = gw.add(spec, "").await.expect(400);
    assert!(refused.detail().contains("\"extra\""), "{}", refused.text());
    assert!(!gw.log().contains(&value), "{}", gw.log());
}
