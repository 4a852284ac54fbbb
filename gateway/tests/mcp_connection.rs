//! Virtual MCP connections through `attach`, against a server nobody here wrote
//! (`@modelcontextprotocol/server-everything`) and the project's test server: every request a
//! host client makes is answered as the same request sent straight to the same server is
//! (identical but for ids and times); the server's own requests (sampling, elicitation, roots)
//! reach the host client and its answers go back; progress, list changes, resource updates,
//! log messages and cancellation cross the gateway; bad input is answered and the connection
//! stays usable.

use std::process::Command;
use std::time::Duration;

use mcpgw_testkit::mcp::{
    Channel, Client, Pipe, attach_channel, connect, host_meta, normalized, open_connection,
};
use mcpgw_testkit::*;
use serde_json::{Value, json};

/// What a host of revision `version` declares: everything the tests answer.
fn capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
}

fn everything_stdio(name: &str) -> Value {
    json!({"name": name, "mcp_config": {"type": "stdio_mcp", "command": "node",
        "args": [everything_js(), "stdio"]}})
}

fn initialize(client: &mut Client, version: &str) -> Value {
    let init = client.request(
        "initialize",
        json!({"protocolVersion": version, "capabilities": capabilities(),
               "clientInfo": {"name": "mcpgw-test", "version": "1"}}),
    );
    client.notify("notifications/initialized", Value::Null);
    init
}

/// Every request of the script, with its answer, in order. The tool list of server-everything
/// settles after `initialized` (it announces its capability-dependent tools), so the script
/// waits for it first.
fn everything_script(client: &mut Client) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut ask = |client: &mut Client, label: &str, method: &str, params: Value| {
        let answer = client.request(method, params);
        out.push((label.to_string(), answer.clone()));
        answer
    };
    // server-everything announces the tools that depend on the client's capabilities, then
    // asks for the roots: the tool list is settled once it asked.
    assert!(client.asked_for("roots/list", Duration::from_secs(20)));
    ask(client, "tools/list", "tools/list", json!({}));
    ask(client, "prompts/list", "prompts/list", Value::Null);
    let resources = ask(client, "resources/list", "resources/list", json!({}));
    ask(client, "templates", "resources/templates/list", json!({}));
    for (tool, args) in [
        ("echo", json!({"message": "hi"})),
        ("get-sum", json!({"a": 2, "b": 3.5})),
        ("get-tiny-image", json!({})),
        ("get-structured-content", json!({"location": "Chicago"})),
        ("get-resource-links", json!({"count": 2})),
        (
            "get-resource-reference",
            json!({"resourceType": "Text", "resourceId": 2}),
        ),
        (
            "get-resource-reference",
            json!({"resourceType": "Blob", "resourceId": 3}),
        ),
        (
            "get-annotated-message",
            json!({"messageType": "error", "includeImage": true}),
        ),
        (
            "trigger-sampling-request",
            json!({"prompt": "hello", "maxTokens": 10}),
        ),
        ("trigger-elicitation-request", json!({})),
        ("get-roots-list", json!({})),
        ("no-such-tool", json!({})),
    ] {
        ask(
            client,
            &format!("call {tool}"),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        );
    }
    let first = resources["result"]["resources"][0]["uri"].clone();
    for uri in [
        first.clone(),
        json!("demo://resource/dynamic/text/5"),
        json!("demo://resource/dynamic/blob/6"),
    ] {
        ask(
            client,
            &format!("read {uri}"),
            "resources/read",
            json!({"uri": uri}),
        );
    }
    ask(
        client,
        "prompt simple",
        "prompts/get",
        json!({"name": "simple-prompt"}),
    );
    ask(
        client,
        "prompt args",
        "prompts/get",
        json!({"name": "args-prompt", "arguments": {"city": "Lyon"}}),
    );
    ask(
        client,
        "prompt resource",
        "prompts/get",
        json!({"name": "resource-prompt", "arguments": {"resourceType": "Text", "resourceId": "1"}}),
    );
    ask(
        client,
        "complete",
        "completion/complete",
        json!({
        "ref": {"type": "ref/prompt", "name": "completable-prompt"},
        "argument": {"name": "department", "value": "E"}}),
    );
    ask(
        client,
        "setLevel",
        "logging/setLevel",
        json!({"level": "debug"}),
    );
    ask(client, "ping", "ping", Value::Null);
    // Progress of a long call, by the client's own token.
    let answer = ask(
        client,
        "long",
        "tools/call",
        json!({"name": "trigger-long-running-operation",
        "arguments": {"duration": 1, "steps": 3}, "_meta": {"progressToken": "tok-1"}}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let progress: Vec<Value> = client
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"].clone())
        .collect();
    out.push(("progress".into(), json!(progress)));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_stdio_answers_as_it_does_directly() {
    let gw = start_gateway(&[]);
    gw.add(everything_stdio("ev"), "").await.expect(200);
    let want = tokio::task::block_in_place(|| {
        let mut direct = Client::direct({
            let mut c = Command::new("node");
            c.arg(everything_js()).arg("stdio");
            c
        });
        let mut through = connect(&gw, "ev");
        let want_init = initialize(&mut direct, "2025-11-25");
        let got_init = initialize(&mut through, "2025-11-25");
        assert_eq!(normalized(&got_init), normalized(&want_init));
        let want = everything_script(&mut direct);
        let got = everything_script(&mut through);
        assert_eq!(got.len(), want.len());
        for ((label, g), (_, w)) in got.iter().zip(&want) {
            assert_eq!(normalized(g), normalized(w), "{label}");
        }
        // The server's requests were the host's to answer, over both.
        let methods = |c: &Client| -> Vec<String> {
            c.asked
                .iter()
                .map(|r| r["method"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(methods(&through), methods(&direct));
        assert!(methods(&through).contains(&"sampling/createMessage".to_string()));
        assert!(methods(&through).contains(&"elicitation/create".to_string()));
        assert!(methods(&through).contains(&"roots/list".to_string()));
        // Subscriptions with updates, and log messages, through the gateway.
        let uri = "demo://resource/static/document/architecture.md";
        through.request("resources/subscribe", json!({"uri": uri}));
        through.request(
            "tools/call",
            json!({"name": "toggle-subscriber-updates", "arguments": {}}),
        );
        let update = through
            .notification("notifications/resources/updated", Duration::from_secs(15))
            .expect("a resource update");
        assert_eq!(update["params"]["uri"], uri);
        through.request(
            "tools/call",
            json!({"name": "toggle-simulated-logging", "arguments": {}}),
        );
        through
            .notification("notifications/message", Duration::from_secs(15))
            .expect("a log message");
        want
    });
    // The REST surface's lossless routes give what the server gave over its stdio.
    let direct =
        |label: &str| normalized(&want.iter().find(|(l, _)| l == label).unwrap().1["result"]);
    let raw = gw
        .post(
            "/mcps/ev/tools/get-annotated-message?format=mcp",
            json!({"arguments": {"messageType": "error", "includeImage": true}}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(normalized(&raw), direct("call get-annotated-message"));
    let read = gw
        .post(
            "/mcps/ev/resources/read",
            json!({"uri": "demo://resource/dynamic/text/5"}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(
        normalized(&read),
        direct("read \"demo://resource/dynamic/text/5\"")
    );
    let prompt = gw
        .post(
            "/mcps/ev/prompts/args-prompt",
            json!({"arguments": {"city": "Lyon"}}),
        )
        .await
        .expect(200)
        .json();
    assert_eq!(normalized(&prompt), direct("prompt args"));
    let listed = gw.get("/mcps/ev/resources").await.expect(200).json();
    assert_eq!(
        normalized(&json!({"resources": listed})),
        direct("resources/list")
    );
    let prompts = gw.get("/mcps/ev/prompts").await.expect(200).json();
    assert_eq!(
        normalized(&json!({"prompts": prompts})),
        direct("prompts/list")
    );
    gw.get("/mcps/ev/resource-templates").await.expect(200);
}

/// The project's test server, speaking only `protocols` (all it knows when `None`).
fn testserver(name: &str, protocols: Option<&str>) -> Value {
    let mut spec = testserver_stdio(name);
    if let Some(p) = protocols {
        spec["mcp_config"]["env"]["MCPGW_TEST_PROTOCOLS"] = json!(p);
    }
    spec
}

/// Opens the connection as a host of `version` would: `initialize` for the legacy revisions,
/// `server/discover` for 2026-07-28. Returns what the `_meta` of its requests must carry.
fn handshake(client: &mut Client, version: &str) -> Value {
    if version == "2026-07-28" {
        let meta = host_meta(version, json!({}));
        let found = client.request("server/discover", json!({"_meta": meta}));
        let versions = &found["result"]["supportedVersions"];
        assert!(
            versions.as_array().unwrap().contains(&json!(version)),
            "{found}"
        );
        assert_eq!(
            found["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "mcpgw-testserver",
            "{found}"
        );
        meta
    } else {
        let init = initialize(client, version);
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        assert_eq!(
            init["result"]["serverInfo"]["name"], "mcpgw-testserver",
            "{init}"
        );
        assert!(init["result"]["instructions"].is_string(), "{init}");
        json!({})
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_of_each_revision_work_against_upstreams_of_each_revision() {
    let gw = start_gateway(&[]);
    for (name, protocols) in [
        ("modern", None),
        ("nov", Some("2025-11-25")),
        ("june", Some("2025-06-18")),
    ] {
        gw.add(testserver(name, protocols), "").await.expect(200);
    }
    tokio::task::block_in_place(|| {
        for mcp in ["modern", "nov", "june"] {
            for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
                let mut client = connect(&gw, mcp);
                let meta = handshake(&mut client, version);
                let tools = client.request("tools/list", json!({"_meta": meta}));
                let names: Vec<&str> = tools["result"]["tools"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{mcp} as {version}: {tools}"))
                    .iter()
                    .map(|t| t["name"].as_str().unwrap())
                    .collect();
                assert!(names.contains(&"echo"), "{mcp} as {version}: {names:?}");
                let mut params = json!({"name": "echo_json", "arguments": {"n": 1.50, "s": "é"}});
                params["_meta"] = meta.clone();
                params["_meta"]["progressToken"] = json!("p");
                let echoed = client.request("tools/call", params);
                assert_eq!(
                    echoed["result"]["structuredContent"],
                    json!({"n": 1.5, "s": "é"}),
                    "{mcp} as {version}: {echoed}"
                );
                // Every result of 2026-07-28 has its type, a legacy upstream's too; a legacy
                // host gets results as its revision writes them.
                for result in [&tools["result"], &echoed["result"]] {
                    let want = (version == "2026-07-28").then_some("complete");
                    assert_eq!(
                        result["resultType"].as_str(),
                        want,
                        "{mcp} as {version}: {result}"
                    );
                }
                let Pipe::Connection { channel, .. } = &mut client.pipe else {
                    unreachable!()
                };
                channel.send(&json!({"t": "close", "id": 1}));
                let closed = channel.next_for(1);
                assert_eq!(closed["t"], "closed", "{closed}");
            }
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_answered_and_cancel_and_restart_cross_the_gateway() {
    let gw = start_gateway(&[]);
    gw.add(testserver("t", Some("2025-11-25")), "")
        .await
        .expect(200);
    let marker = gw.dir.path("cancelled");
    tokio::task::block_in_place(|| {
        let mut client = connect(&gw, "t");
        initialize(&mut client, "2025-11-25");
        // Malformed JSON-RPC gets a JSON-RPC error; the connection stays usable.
        for (bad, code, id) in [
            (json!("not an object"), -32600, Value::Null),
            (json!({"jsonrpc": "2.0", "id": 5}), -32600, json!(5)),
            (
                json!({"jsonrpc": "1.0", "id": 6, "method": "ping"}),
                -32600,
                json!(6),
            ),
            (
                json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 3}),
                -32600,
                json!(7),
            ),
        ] {
            client.send(&bad);
            let answer = client.receive(Duration::from_secs(10)).expect("an answer");
            assert_eq!(answer["error"]["code"], code, "{bad}: {answer}");
            assert_eq!(answer["id"], id, "{bad}: {answer}");
        }
        // A slow call with progress, then an id reused while it runs, then its cancel.
        let slow = client.take_id();
        client.send(
            &json!({"jsonrpc": "2.0", "id": slow, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 60, "steps": 60, "cancel_marker": marker},
            "_meta": {"progressToken": 77}}}),
        );
        let progress = client
            .notification("notifications/progress", Duration::from_secs(20))
            .expect("progress");
        assert_eq!(progress["params"]["progressToken"], 77, "{progress}");
        client.send(&json!({"jsonrpc": "2.0", "id": slow, "method": "ping"}));
        let refused = client.receive(Duration::from_secs(10)).expect("an answer");
        assert_eq!(refused["id"], slow);
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("already in flight"),
            "{refused}"
        );
        client.notify(
            "notifications/cancelled",
            json!({"requestId": slow, "reason": "test"}),
        );
        assert!(
            wait_for_file(&marker, Duration::from_secs(20)).is_some(),
            "the upstream never saw the cancel"
        );
        let pong = client.request("ping", Value::Null);
        assert_eq!(pong["result"], json!({}), "{pong}");
        // The upstream restarting closes its connections, saying why.
        client.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
            "params": {"name": "crash", "arguments": {"code": 3}}}));
        let Pipe::Connection { channel, .. } = &mut client.pipe else {
            unreachable!()
        };
        let closed = loop {
            let frame = channel.next_for(1);
            if frame["t"] == "closed" {
                break frame;
            }
        };
        let reason = closed["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("session ended"), "{closed}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opens_that_cannot_be_served_are_closed_with_the_status() {
    let gw = start_gateway(&[]);
    tokio::task::block_in_place(|| {
        let mut channel = attach_channel(&gw);
        let closed = channel.open(3, "nowhere");
        assert_eq!(
            (closed["t"].as_str(), closed["status"].as_u64()),
            (Some("closed"), Some(404)),
            "{closed}"
        );
        assert!(
            closed["reason"].as_str().unwrap().contains("not found"),
            "{closed}"
        );
        channel.send(&json!({"t": "msg", "id": 3, "msg": {"jsonrpc": "2.0", "method": "x"}}));
        let dropped = channel.next_for_any();
        assert_eq!(dropped["t"], "error", "{dropped}");
        assert!(channel.finish().success());
    });
}

/// `sh script check`: why the script's sandbox cannot be made here, if it cannot.
fn script_check(script: &std::path::Path) -> Result<(), String> {
    let check = Command::new("sh")
        .arg(script)
        .arg("check")
        .output()
        .unwrap();
    if check.status.success() {
        return Ok(());
    }
    Err(String::from_utf8_lossy(&check.stdout).trim().to_string())
}

/// A namespace sandbox (tests/sandbox.sh): its init's pid, stopped on drop.
struct Sandbox {
    dir: TempDir,
    pid: String,
}

impl Sandbox {
    /// One, or why there can be none here.
    fn start() -> Result<Sandbox, String> {
        let script = repo().join("tests/sandbox.sh");
        script_check(&script)?;
        let dir = TempDir::new("mcp-sandbox");
        let pid = stdout_of(Command::new("sh").arg(&script).arg("start").arg(&dir.0));
        Ok(Sandbox { dir, pid })
    }

    /// `argv` run inside.
    fn command(&self, argv: &[&std::ffi::OsStr]) -> Command {
        let mut c = Command::new("nsenter");
        c.args(["-t", &self.pid, "-n", "-p", "-m", "-r", "-w"])
            .args(argv);
        c
    }

    /// `attach --launch` inside: a gateway there, and a channel to it.
    fn attach(&self) -> Channel {
        let gateway = gateway_bin();
        Channel::start(self.command(&[
            gateway.as_os_str(),
            "attach".as_ref(),
            "--state-dir".as_ref(),
            "/tmp/mcpgw-state".as_ref(),
            "--launch".as_ref(),
        ]))
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg(repo().join("tests/sandbox.sh"))
            .arg("stop")
            .arg(&self.dir.0)
            .status();
    }
}

/// A REST request over a channel; its `res` frame.
fn rest(channel: &mut Channel, id: u64, method: &str, path: &str, body: Value) -> Value {
    channel.send(&json!({"t": "req", "id": id, "method": method, "path": path, "body": body}));
    channel.next_for(id)
}

#[test]
fn server_everything_through_a_namespace_sandbox_over_stdio_and_streamable_http() {
    let sandbox = match Sandbox::start() {
        Ok(s) => s,
        Err(why) => {
            eprintln!("SKIPPED: no namespace sandbox here: {why}");
            return;
        }
    };
    let want = everything_directly();
    let mut setup = sandbox.attach();
    let res = rest(&mut setup, 1, "POST", "/mcps", everything_stdio("ev"));
    assert_eq!(res["status"], 200, "{res}");
    // server-everything over streamable HTTP, inside the sandbox's own network.
    let port = free_port();
    let node = which("node");
    let mut http = sandbox.command(&[
        node.as_os_str(),
        everything_js().as_os_str(),
        "streamableHttp".as_ref(),
    ]);
    http.env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let _server = Guarded(http.spawn().unwrap());
    register_when_up(
        &mut setup,
        http_spec("evh", &format!("http://127.0.0.1:{port}/mcp")),
    );
    for mcp in ["ev", "evh"] {
        answers_as_directly(sandbox.attach(), mcp, &want);
    }
}

/// What server-everything answers the script straight over its stdio.
fn everything_directly() -> Vec<(String, Value)> {
    let mut direct = Client::direct({
        let mut c = Command::new("node");
        c.arg(everything_js()).arg("stdio");
        c
    });
    initialize(&mut direct, "2025-11-25");
    everything_script(&mut direct)
}

/// Over a connection of `channel` to `mcp` (a server-everything), the script gets `want`; a
/// long call cancelled by the host ends without an answer, and the connection goes on.
fn answers_as_directly(channel: Channel, mcp: &str, want: &[(String, Value)]) {
    let mut through = open_connection(channel, mcp);
    initialize(&mut through, "2025-11-25");
    let got = everything_script(&mut through);
    assert_eq!(got.len(), want.len());
    for ((label, g), (_, w)) in got.iter().zip(want) {
        assert_eq!(normalized(g), normalized(w), "{mcp}: {label}");
    }
    let long = through.take_id();
    through.send(
        &json!({"jsonrpc": "2.0", "id": long, "method": "tools/call", "params": {
        "name": "trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30},
        "_meta": {"progressToken": "c"}}}),
    );
    through
        .notification("notifications/progress", Duration::from_secs(20))
        .expect("progress");
    through.notify(
        "notifications/cancelled",
        json!({"requestId": long, "reason": "test"}),
    );
    let pong = through.request("ping", Value::Null);
    assert_eq!(pong["result"], json!({}), "{mcp}: {pong}");
}

/// Registers `spec` over `channel` once its server answers (a server just started in a
/// sandbox refuses connections until it listens).
fn register_when_up(channel: &mut Channel, spec: Value) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for id in 1000.. {
        let res = rest(channel, id, "POST", "/mcps", spec.clone());
        if res["status"] == 200 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{res}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A container of the test image with node and the npm servers, removed on drop.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("sh")
            .arg(repo().join("tests/docker/sandbox.sh"))
            .args(["stop", &self.0])
            .status();
    }
}

#[test]
fn server_everything_in_a_docker_container_over_stdio_and_streamable_http() {
    let script = repo().join("tests/docker/sandbox.sh");
    if let Err(why) = script_check(&script) {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let image = stdout_of(Command::new("sh").arg(&script).args(["image", "--node"]));
    let container = Container(stdout_of(
        Command::new("sh").arg(&script).args(["start", &image]),
    ));
    let attach = || {
        let mut c = Command::new("docker");
        c.args([
            "exec",
            "-i",
            &container.0,
            "mcpgw-gateway",
            "attach",
            "--state-dir",
        ])
        .args(["/tmp/mcpgw-state", "--launch"]);
        Channel::start(c)
    };
    let want = everything_directly();
    let js = "/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let mut setup = attach();
    let spec = json!({"name": "ev",
        "mcp_config": {"type": "stdio_mcp", "command": "node", "args": [js, "stdio"]}});
    let res = rest(&mut setup, 1, "POST", "/mcps", spec);
    assert_eq!(res["status"], 200, "{res}");
    let port = 47000;
    let up = Command::new("docker")
        .args(["exec", "-d", "-e", &format!("PORT={port}"), &container.0])
        .args(["node", js, "streamableHttp"])
        .status()
        .unwrap();
    assert!(up.success());
    register_when_up(
        &mut setup,
        http_spec("evh", &format!("http://127.0.0.1:{port}/mcp")),
    );
    for mcp in ["ev", "evh"] {
        answers_as_directly(attach(), mcp, &want);
    }
}

/// The full path of a program on PATH.
fn which(program: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(program))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{program} is not on PATH"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_never_answers_makes_the_upstreams_request_fail_at_the_deadline() {
    let gw = start_gateway(&[]);
    let mut spec = everything_stdio("ev");
    spec["execution_timeout"] = json!(2);
    gw.add(spec, "").await.expect(200);
    tokio::task::block_in_place(|| {
        let mut client = connect(&gw, "ev");
        initialize(&mut client, "2025-11-25");
        // Its tool list settles before it asks for the roots.
        assert!(client.asked_for("roots/list", Duration::from_secs(20)));
        let call = client.take_id();
        client.send(
            &json!({"jsonrpc": "2.0", "id": call, "method": "tools/call",
            "params": {"name": "trigger-sampling-request", "arguments": {"prompt": "hi"}}}),
        );
        // The sampling request comes, and is left unanswered.
        let asked = loop {
            let m = client
                .receive(Duration::from_secs(20))
                .expect("the sampling request");
            if m["method"] == "sampling/createMessage" {
                break m;
            }
        };
        // At the MCP's deadline the host is told the request is withdrawn, and the upstream's
        // request failed: the call ends (the server reports the failure) without a hang.
        let mut cancelled = false;
        let answer = loop {
            let m = client
                .receive(Duration::from_secs(20))
                .expect("the call's end");
            if m["method"] == "notifications/cancelled" {
                assert_eq!(m["params"]["requestId"], asked["id"], "{m}");
                cancelled = true;
            } else if m["id"] == call && m.get("method").is_none() {
                break m;
            }
        };
        // The call's deadline and the request's are the same: the withdrawal may come after
        // the call's answer.
        while !cancelled {
            let m = client
                .receive(Duration::from_secs(10))
                .expect("the host is told the request is withdrawn");
            if m["method"] == "notifications/cancelled" {
                assert_eq!(m["params"]["requestId"], asked["id"], "{m}");
                cancelled = true;
            }
        }
        let text = answer.to_string();
        assert!(
            text.contains("did not") || text.contains("deadline") || answer.get("error").is_some(),
            "{answer}"
        );
    });
}

/// What a 2026-07-28 host of these tests puts in the `_meta` of its requests: it answers
/// input requests and takes tasks.
fn modern_meta() -> Value {
    host_meta(
        "2026-07-28",
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    )
}

/// Drives `confirm` as a 2026-07-28 client does: each `input_required` answered (by
/// [`mcp::answer`]) and the call sent again with `inputResponses` and the `requestState`.
/// Every result, in order.
fn confirm_rounds(client: &mut Client, action: &str) -> Vec<Value> {
    let mut params = json!({"name": "confirm", "arguments": {"action": action},
        "_meta": modern_meta()});
    let mut results = Vec::new();
    loop {
        let answer = client.request("tools/call", params.clone());
        let result = answer["result"].clone();
        assert!(result.is_object(), "{answer}");
        results.push(result.clone());
        if result["resultType"] != "input_required" {
            return results;
        }
        assert!(results.len() < 5, "{results:?}");
        let responses: serde_json::Map<String, Value> = result["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(key, r)| {
                let method = r["method"].as_str().unwrap();
                (
                    key.clone(),
                    mcpgw_testkit::mcp::answer(method, &r["params"]),
                )
            })
            .collect();
        params["inputResponses"] = Value::Object(responses);
        params["requestState"] = result["requestState"].clone();
    }
}

/// Rounds of `confirm`, normalized, their `requestState` handles replaced.
fn without_state(results: &[Value]) -> Vec<Value> {
    results
        .iter()
        .map(|r| {
            let mut r = normalized(r);
            if r.get("requestState").is_some() {
                r["requestState"] = json!("<state>");
            }
            r
        })
        .collect()
}

/// A task's state from `tasks/get`, polled until it is `status` (at its poll interval).
fn task_until(client: &mut Client, task: &str, status: &str) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = client.request("tasks/get", json!({"taskId": task, "_meta": modern_meta()}));
        let result = &got["result"];
        assert_eq!(result["taskId"], task, "{got}");
        if result["status"] == status {
            return result.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never {status}: {got}"
        );
        let every = result["pollIntervalMs"].as_u64().unwrap_or(20);
        std::thread::sleep(Duration::from_millis(every));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_round_trip_requests_and_tasks_cross_the_gateway() {
    let gw = start_gateway(&[]);
    gw.add(testserver("t", None), "").await.expect(200);
    // The same server speaking 2026-07-28 alone: a 2025 host's session cannot be of its era.
    gw.add(testserver("t26", Some("2026-07-28")), "")
        .await
        .expect(200);
    let http = testserver_http();
    gw.add(http_spec("th", &http.url), "").await.expect(200);
    // The one-shot REST path cannot answer input requests, and says so.
    let rest = gw.call("t", "confirm", json!({"action": "x"})).await;
    assert!(
        rest.text().contains("multi round-trip") && rest.status != 200,
        "{} {}",
        rest.status,
        rest.text()
    );
    tokio::task::block_in_place(|| {
        // A 2026-07-28 host drives the rounds itself: each is the upstream's own answer,
        // as a direct run of the same server gives it (the requestState handles aside).
        let mut direct = Client::direct(Command::new(testserver_bin()));
        let found = direct.request("server/discover", json!({"_meta": modern_meta()}));
        assert!(found["result"]["supportedVersions"].is_array(), "{found}");
        let want = confirm_rounds(&mut direct, "deploy");
        for mcp in ["t", "th"] {
            over_stdio_and_http(&gw, mcp, &without_state(&want));
        }
        // A 2025 host alone on a server of both eras gets a session of its own era (the
        // session is started again for it), and the server's own answer, as straight.
        let legacy_call = |client: &mut Client| {
            initialize(client, "2025-11-25");
            client.request(
                "tools/call",
                json!({"name": "confirm", "arguments": {"action": "deploy"}}),
            )
        };
        let mut alone = connect(&gw, "t");
        let through = legacy_call(&mut alone);
        let mut straight = Client::direct(Command::new(testserver_bin()));
        let want = legacy_call(&mut straight);
        assert!(want["error"]["message"].is_string(), "{want}");
        assert_eq!(through["error"], want["error"], "{through}");
        drop(alone);

        // A host that cannot answer one of them gets an error that names it.
        let mut bare = connect(&gw, "t26");
        let init = bare.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                   "clientInfo": {"name": "mcpgw-test", "version": "1"}}),
        );
        assert!(init["result"].is_object(), "{init}");
        let refused = bare.request(
            "tools/call",
            json!({"name": "confirm", "arguments": {"action": "deploy"}}),
        );
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("sampling/createMessage") && message.contains("did not declare"),
            "{refused}"
        );
        // Nothing was asked of it first.
        assert_eq!(bare.asked.len(), 0, "{:?}", bare.asked);

        // A host that cancels its call while it is asked is told the question is withdrawn.
        let mut legacy = connect(&gw, "t26");
        initialize(&mut legacy, "2025-11-25");
        let call = legacy.take_id();
        legacy.send(
            &json!({"jsonrpc": "2.0", "id": call, "method": "tools/call",
            "params": {"name": "confirm", "arguments": {"action": "stop"}}}),
        );
        let question = legacy.receive(Duration::from_secs(20)).expect("a question");
        assert_eq!(question["method"], "elicitation/create", "{question}");
        legacy.notify(
            "notifications/cancelled",
            json!({"requestId": call, "reason": "changed my mind"}),
        );
        let withdrawn = legacy
            .notification("notifications/cancelled", Duration::from_secs(20))
            .expect("the question withdrawn");
        assert_eq!(
            withdrawn["params"]["requestId"], question["id"],
            "{withdrawn}"
        );
        let pong = legacy.request("ping", Value::Null);
        assert_eq!(pong["result"], json!({}), "{pong}");
    });
}

/// Over MCP `mcp` of `gw`: the rounds of `confirm` as a 2026-07-28 host drives them (`want`,
/// normalized), tasks, and the same call of a 2025 host, which the gateway answers rounds for.
fn over_stdio_and_http(gw: &Gateway, mcp: &str, want: &[Value]) {
    let mut client = connect(gw, mcp);
    handshake(&mut client, "2026-07-28");
    let through = confirm_rounds(&mut client, "deploy");
    assert_eq!(without_state(&through), want, "{mcp}");
    assert_eq!(through.len(), 3, "{through:?}");
    assert_eq!(through[0]["resultType"], "input_required");
    assert_eq!(
        through[2]["structuredContent"]["roots"],
        json!(["file:///work"]),
        "{through:?}"
    );

    // Tasks: created, polled to completion; a long one cancelled.
    let call = |client: &mut Client, ms: u64| {
        client.request(
            "tools/call",
            json!({"name": "task", "arguments": {"ms": ms, "text": "finished"},
                "_meta": modern_meta()}),
        )
    };
    let created = call(&mut client, 200);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    let task = created["result"]["taskId"].as_str().unwrap().to_string();
    let done = task_until(&mut client, &task, "completed");
    assert_eq!(done["result"]["content"][0]["text"], "finished", "{done}");
    let long = call(&mut client, 60_000);
    let long = long["result"]["taskId"].as_str().unwrap().to_string();
    let ack = client.request(
        "tasks/cancel",
        json!({"taskId": long, "_meta": modern_meta()}),
    );
    assert!(ack["result"].is_object(), "{ack}");
    task_until(&mut client, &long, "cancelled");
    // Without the extension declared the same call answers inline.
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let inline = client.request(
        "tools/call",
        json!({"name": "task", "arguments": {"ms": 10}, "_meta": meta}),
    );
    assert_eq!(inline["result"]["content"][0]["text"], "done", "{inline}");

    // A 2025 host against the same 2026-07-28 upstream: the gateway asks it each input
    // request as a 2025 server would, and the host gets the final result only.
    let mut legacy = connect(gw, mcp);
    initialize(&mut legacy, "2025-11-25");
    let bridged = legacy.request(
        "tools/call",
        json!({"name": "confirm", "arguments": {"action": "deploy"}}),
    );
    assert_eq!(
        bridged["result"], through[2],
        "a 2025 host gets what the 2026-07-28 host got in its last round"
    );
    let asked: Vec<&str> = legacy
        .asked
        .iter()
        .map(|m| m["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        asked,
        ["elicitation/create", "sampling/createMessage", "roots/list"]
    );
    assert_eq!(
        normalized(&legacy.asked[0]["params"]),
        normalized(&through[0]["inputRequests"]["confirm"]["params"])
    );
}
