//! `mcpgw mcp` end to end, into a Docker container with server-everything inside: clients
//! nobody here wrote (`@modelcontextprotocol/inspector-cli`, the worked examples of
//! langchain-mcp-adapters and the Vercel AI SDK), bad input and faults (a sandbox that is gone,
//! a server that cannot start, garbage, a client that leaves mid-call), the HTTP endpoint's
//! rules (token, Origin, sessions, the stateless form), and `--config` with its prefixes,
//! list changes and a multi round-trip tool answered by the client.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{
    DockerBox, HttpEndpoint, client, endpoint_argv, http, initialize, initialize_request,
    mcpgw_bin, start_long_call, text,
};
use mcpgw_testkit::clients::{clients_dir, node_modules};
use mcpgw_testkit::container::EVERYTHING_IN_IMAGE;
use mcpgw_testkit::{RawResponse, static_gateway_bin, tool_names};
use serde_json::{Value, json};

fn run_json(mut cmd: Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{cmd:?} printed {text:?}: {e}"))
}

#[test]
fn inspector_cli_lists_the_tools() {
    let Some(b) = DockerBox::start() else { return };
    // Its build reads its package.json relative to the working directory.
    let build = node_modules().join("@modelcontextprotocol/inspector-cli/build");
    let mut cmd = Command::new("node");
    cmd.arg(build.join("index.js"))
        .args(["--method", "tools/list"])
        .args(endpoint_argv(&b, &[]))
        .current_dir(&build);
    let listed = run_json(cmd);
    let names = tool_names(&listed["tools"]);
    assert!(
        names.contains(&"echo") && names.contains(&"get-sum"),
        "{names:?}"
    );
    b.assert_nothing_left();
}

#[test]
fn the_worked_examples_run_langchain_and_the_ai_sdk() {
    let Some(b) = DockerBox::start() else { return };
    let venv = clients_dir().join(".venv/bin/python");
    assert!(venv.exists(), "{} is missing: make deps", venv.display());
    let mut lc = Command::new(venv);
    lc.arg(clients_dir().join("python/langchain_example.py"))
        .args(endpoint_argv(&b, &[]));
    let got = run_json(lc);
    assert!(
        got["tools"].as_array().unwrap().contains(&json!("get-sum")),
        "{got}"
    );
    assert_eq!(got["echo"][0]["text"], "Echo: from LangChain", "{got}");

    node_modules();
    let mut ai = Command::new("node");
    ai.arg(clients_dir().join("ts/ai_sdk.mjs"))
        .args(endpoint_argv(&b, &[]));
    let got = run_json(ai);
    assert!(
        got["tools"].as_array().unwrap().contains(&json!("echo")),
        "{got}"
    );
    assert_eq!(
        got["echo"]["content"][0]["text"], "Echo: from the AI SDK",
        "{got}"
    );
    b.assert_nothing_left();
}

#[test]
fn a_sandbox_that_is_gone_is_an_error_naming_it() {
    let argv = [
        mcpgw_bin().display().to_string(),
        "mcp".into(),
        "--docker".into(),
        "mcpgw-no-such-container".into(),
        "--gateway-binary".into(),
        static_gateway_bin().display().to_string(),
        "--".into(),
        "node".into(),
        "x.js".into(),
    ];
    let mut c = client(&argv);
    let init = initialize_request(&mut c);
    let message = init["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("No such container"), "{init}");
    // The endpoint stays up for the client, answering each request the same way.
    let again = c.request("tools/list", json!({}));
    assert!(
        again["error"]["message"]
            .as_str()
            .unwrap()
            .contains("No such container")
    );
}

#[test]
fn a_server_that_cannot_start_is_an_error_and_leaves_nothing() {
    let Some(b) = DockerBox::start() else { return };
    let mut argv = endpoint_argv(&b, &[]);
    let at = argv.iter().position(|a| a == "node").unwrap();
    argv[at] = "/no/such/server".into();
    let mut c = client(&argv);
    let init = initialize_request(&mut c);
    let message = init["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("/no/such/server") && message.contains("starting the server"),
        "{init}"
    );
    // It says so in its exit status too, once its client ends.
    assert_eq!(c.finish(Duration::from_secs(30)).code(), Some(1));
    b.wait_nothing_left();
}

#[test]
fn garbage_is_answered_and_a_client_that_leaves_mid_call_leaves_nothing() {
    let Some(b) = DockerBox::start() else { return };
    let mut c = client(&endpoint_argv(&b, &[]));
    initialize(&mut c);
    c.send_raw(b"this is not JSON\n{\"jsonrpc\":\"2.0\"}\n");
    // (What the server announces on its own, its list change after initialized, may come
    // between the answers.)
    let parse = c.answer_to(&Value::Null);
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    let invalid = c.answer_to(&Value::Null);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    let echo = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "ok"}}),
    );
    assert_eq!(echo["result"]["content"][0]["text"], "Echo: ok", "{echo}");
    // A burst in one write, with garbage and a notification amid it: each request gets its
    // own answer, and the garbage its error.
    let mut burst = String::new();
    for i in 0..20 {
        let call = json!({"jsonrpc": "2.0", "id": format!("b{i}"), "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": format!("m{i}")}}});
        burst.push_str(&format!("{call}\n"));
        if i == 10 {
            burst.push_str("not JSON either\n");
            burst.push_str(
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"none\"}}\n",
            );
        }
    }
    c.send_raw(burst.as_bytes());
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 21 {
        let m = c
            .receive(Duration::from_secs(30))
            .expect("every message of the burst answered");
        if m.get("method").is_none() {
            answers.insert(m["id"].to_string(), m);
        }
    }
    for i in 0..20 {
        let a = &answers[&format!("\"b{i}\"")];
        assert_eq!(
            a["result"]["content"][0]["text"],
            format!("Echo: m{i}"),
            "{a}"
        );
    }
    assert_eq!(answers["null"]["error"]["code"], -32700, "{answers:?}");
    // A long call in flight, then the client goes away.
    start_long_call(&mut c);
    assert!(
        b.processes()
            .iter()
            .any(|p| p.contains("server-everything"))
    );
    assert!(c.finish(Duration::from_secs(30)).success());
    b.wait_nothing_left();
}

#[test]
fn http_keeps_its_rules_and_serves_sessions_and_the_stateless_form() {
    let Some(b) = DockerBox::start() else { return };
    // Only loopback is served.
    let out = Command::new(mcpgw_bin())
        .args(["mcp", "--http", "0.0.0.0:0", "--", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("only a loopback address"));

    let endpoint = HttpEndpoint::start(&b, &["--allow-origin", "http://localhost:6274"]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&endpoint.token_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let token = endpoint.token();
    let authority = endpoint
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let post = |headers: &[(&str, &str)], body: &Value| {
        let mut h: Vec<(String, String)> = vec![
            ("Content-Type".into(), "application/json".into()),
            (
                "Accept".into(),
                "application/json, text/event-stream".into(),
            ),
        ];
        h.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        http(&authority, "POST", &h, body.to_string().as_bytes())
    };
    let bearer = format!("Bearer {token}");
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    assert_eq!(post(&[], &init).status, 401);
    assert_eq!(post(&[("Authorization", "Bearer nope")], &init).status, 401);
    assert_eq!(
        post(
            &[
                ("Authorization", &bearer),
                ("Origin", "http://evil.example")
            ],
            &init
        )
        .status,
        403
    );
    // A name that only starts like loopback is another site's.
    assert_eq!(
        post(
            &[
                ("Authorization", &bearer),
                ("Origin", "http://localhost.evil.example:6274")
            ],
            &init
        )
        .status,
        403
    );
    // A page of this machine's loopback, on any port, is a local client's.
    let r = post(
        &[
            ("Authorization", &bearer),
            ("Origin", &format!("http://{authority}")),
        ],
        &init,
    );
    assert_eq!(r.status, 200, "{}", text(&r));
    let r = post(
        &[
            ("Authorization", &bearer),
            ("Origin", "http://localhost:6274"),
        ],
        &init,
    );
    assert_eq!(r.status, 200, "{}", text(&r));
    let sid = r.header("mcp-session-id").expect("a session").to_string();
    assert!(text(&r).contains("\"serverInfo\""), "{}", text(&r));
    let with = [
        ("Authorization", bearer.as_str()),
        ("Mcp-Session-Id", sid.as_str()),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "over http"}}});
    let r = post(&with, &call);
    assert!(text(&r).contains("Echo: over http"), "{}", text(&r));
    assert_eq!(
        post(
            &with,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )
        .status,
        202
    );
    assert_eq!(post(&with, &json!([call])).status, 400);
    let r = http(&authority, "DELETE", &with, b"");
    assert_eq!(r.status, 200);
    assert_eq!(post(&with, &call).status, 404);
    assert_eq!(post(&[("Authorization", &bearer)], &call).status, 400);

    // 2026-07-28 without a session: the headers must match the body.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let modern = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "stateless"}, "_meta": meta}});
    let v = ("MCP-Protocol-Version", "2026-07-28");
    let r = post(
        &[
            ("Authorization", &bearer),
            v,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "get-sum"),
        ],
        &modern,
    );
    assert_eq!(r.status, 400);
    assert!(text(&r).contains("-32020"), "{}", text(&r));
    let r = post(
        &[
            ("Authorization", &bearer),
            v,
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", "echo"),
        ],
        &modern,
    );
    assert!(
        text(&r).contains("Echo: stateless"),
        "{} {}",
        r.status,
        text(&r)
    );
    // What 2026-07-28 asks of a request without a session, before it goes anywhere: its
    // `_meta` (400, -32602), a revision spoken (400, the id, what is spoken), no method of the
    // 2025 revisions alone (404, -32601); an answer that is an error has its status (404 for a
    // method the server lacks).
    let body_of = |r: &RawResponse| -> Value {
        let t = text(r);
        let json = t
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(&t);
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {t}"))
    };
    let request = |id: u64, method: &str, meta: Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"_meta": meta}});
    let no_caps = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"});
    for (id, m) in [(11, json!(null)), (12, json!({})), (13, no_caps)] {
        let h = [
            ("Authorization", bearer.as_str()),
            v,
            ("Mcp-Method", "tools/list"),
        ];
        let r = post(&h, &request(id, "tools/list", m));
        assert_eq!(r.status, 400, "{}", text(&r));
        let got = body_of(&r);
        assert_eq!(
            (&got["id"], &got["error"]["code"]),
            (&json!(id), &json!(-32602)),
            "{got}"
        );
    }
    let r = post(
        &[
            ("Authorization", &bearer),
            ("MCP-Protocol-Version", "v999"),
            ("Mcp-Method", "tools/list"),
        ],
        &request(14, "tools/list", meta.clone()),
    );
    assert_eq!(r.status, 400, "{}", text(&r));
    let got = body_of(&r);
    assert_eq!(got["id"], 14, "{got}");
    assert_eq!(got["error"]["code"], -32022, "{got}");
    assert_eq!(got["error"]["data"]["requested"], "v999", "{got}");
    assert_eq!(got["error"]["data"]["supported"][0], "2026-07-28", "{got}");
    for (id, method) in [
        (15, "ping"),
        (16, "initialize"),
        (17, "logging/setLevel"),
        (18, "no/such"),
    ] {
        let h = [
            ("Authorization", bearer.as_str()),
            v,
            ("Mcp-Method", method),
        ];
        let r = post(&h, &request(id, method, meta.clone()));
        assert_eq!(r.status, 404, "{method}: {}", text(&r));
        let got = body_of(&r);
        assert_eq!(
            (&got["id"], &got["error"]["code"]),
            (&json!(id), &json!(-32601)),
            "{got}"
        );
    }
    endpoint.stop();
    b.assert_nothing_left();
}

#[test]
fn a_config_serves_every_server_prefixed_and_announces_one_that_goes_and_comes_back() {
    let Some(b) = DockerBox::start() else { return };
    let config = b.dir.path("mcp.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "ev": {"command": "node", "args": [EVERYTHING_IN_IMAGE, "stdio"]},
            // 2026-07-28 alone: a 2025 client's session cannot be of its era, so the gateway
            // answers the multi round-trip tool's rounds for it.
            "ts": {"command": "/usr/local/bin/mcpgw-testserver", "args": ["stdio"],
                   "env": {"MCPGW_TEST_PROTOCOLS": "2026-07-28"}}}})
        .to_string(),
    )
    .unwrap();
    let argv = vec![
        mcpgw_bin().display().to_string(),
        "mcp".into(),
        "--docker".into(),
        b.id().into(),
        "--gateway".into(),
        "/usr/local/bin/mcpgw-gateway".into(),
        "--config".into(),
        config.display().to_string(),
    ];
    let mut c = client(&argv);
    let init = c.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25",
               "capabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
               "clientInfo": {"name": "mcpgw-endpoint-test", "version": "1"}}),
    );
    c.notify("notifications/initialized", Value::Null);
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpgw", "{init}");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
    let discover = c.request("server/discover", json!({}));
    assert_eq!(discover["error"]["code"], -32601, "{discover}");
    let tools = c.request("tools/list", json!({}));
    let names = tool_names(&tools["result"]["tools"]);
    assert!(
        names.contains(&"ev__echo") && names.contains(&"ts__echo"),
        "{names:?}"
    );
    let r = c.request(
        "tools/call",
        json!({"name": "ev__echo", "arguments": {"message": "a"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "Echo: a", "{r}");
    let r = c.request(
        "tools/call",
        json!({"name": "ts__echo", "arguments": {"text": "b"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "b", "{r}");
    // The test server's multi round-trip tool (2026-07-28): the gateway asks this 2025 client
    // its questions, which reach it through the endpoint under the endpoint's ids.
    let r = c.request(
        "tools/call",
        json!({"name": "ts__confirm", "arguments": {"action": "deploy"}}),
    );
    let done = &r["result"]["structuredContent"];
    assert_eq!(done["confirmed"], true, "{r}");
    assert_eq!(
        done["summary"], "sampled: Say in a few words what deploy does.",
        "{r}"
    );
    assert_eq!(done["roots"], json!(["file:///work"]), "{r}");
    // (What the result says came from this client's answers; server-everything asks for the
    // roots on its own too, so only the elicitation is looked for here.)
    assert!(
        c.asked
            .iter()
            .any(|m| m["method"] == "elicitation/create" && m["params"]["message"] == "Run deploy?"),
        "{:?}",
        c.asked
    );
    let r = c.request(
        "tools/call",
        json!({"name": "nobody__echo", "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let resources = c.request("resources/list", json!({}));
    let uri = resources["result"]["resources"][0]["uri"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(uri.starts_with("mcpgw://ev/demo://"), "{uri}");
    let read = c.request("resources/read", json!({"uri": uri}));
    assert_eq!(read["result"]["contents"][0]["uri"], uri, "{read}");
    let prompts = c.request("prompts/list", json!({}));
    assert!(
        prompts.to_string().contains("ev__simple-prompt"),
        "{prompts}"
    );
    let p = c.request("prompts/get", json!({"name": "ev__simple-prompt"}));
    assert!(p["result"]["messages"].is_array(), "{p}");
    let done = c.request(
        "completion/complete",
        json!({
        "ref": {"type": "ref/prompt", "name": "ev__completable-prompt"},
        "argument": {"name": "department", "value": "E"}}),
    );
    assert_eq!(
        done["result"]["completion"]["values"][0], "Engineering",
        "{done}"
    );
    // The test server crashes: its tools go, and come back once it is running again.
    c.notifications.clear();
    let crash = c.request("tools/call", json!({"name": "ts__crash", "arguments": {}}));
    assert!(
        crash.get("error").is_some() || crash["result"]["isError"] == true,
        "{crash}"
    );
    c.notification("notifications/tools/list_changed", Duration::from_secs(30))
        .expect("the server's going (or restart) announced");
    let r = c.request(
        "tools/call",
        json!({"name": "ts__echo", "arguments": {"text": "again"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "again", "{r}");
    assert!(c.finish(Duration::from_secs(30)).success());
    b.wait_nothing_left();
}
