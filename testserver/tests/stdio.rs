//! Drives the built binary over stdio with raw JSON-RPC lines.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, channel},
    thread,
    time::{Duration, Instant},
};

use mcpgw_testkit::{
    Captured, TESTSERVER_TOOLS, TempDir, strings_at, tool_names, wait_child, wait_for_file,
};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mcpgw-testserver");
const TIMEOUT: Duration = Duration::from_secs(5);

/// One server process and its pipes.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Captured,
    next_id: i64,
}

impl Server {
    fn spawn(configure: impl FnOnce(&mut Command)) -> Server {
        let mut command = Command::new(BIN);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        configure(&mut command);
        let mut child = command.spawn().expect("spawn the test server");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Captured::start(child.stderr.take().unwrap());
        let stdin = child.stdin.take();
        Server {
            child,
            stdin,
            lines,
            stderr,
            next_id: 1,
        }
    }

    /// A server that has completed the initialize handshake.
    fn initialized() -> Server {
        Self::initialized_with(|_| {})
    }

    fn initialized_with(configure: impl FnOnce(&mut Command)) -> Server {
        let mut server = Server::spawn(configure);
        let init = server.request(
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "stdio-test", "version": "0"}
            }),
        );
        assert_eq!(init["result"]["serverInfo"]["name"], "mcpgw-testserver");
        assert_eq!(
            init["result"]["serverInfo"]["version"],
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true);
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    fn line(&self, timeout: Duration) -> Option<String> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Timeout) => panic!(
                "no output within {timeout:?}; stderr:\n{}",
                self.stderr.text()
            ),
            Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    fn message(&self) -> Value {
        let line = self.line(TIMEOUT).expect("stdout closed");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Reads messages up to the response to `id`; returns it and what came before.
    fn response(&self, id: i64) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.message();
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return (message, before);
            }
            before.push(message);
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        let (response, before) = self.response(id);
        assert!(before.is_empty(), "unexpected messages: {before:?}");
        response
    }

    /// `tools/call`, returning the result (panics on a JSON-RPC error).
    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        response
            .get("result")
            .unwrap_or_else(|| panic!("{tool}: {response}"))
            .clone()
    }

    fn tool_names(&mut self) -> Vec<String> {
        let list = self.request("tools/list", json!({}));
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn close_stdin(&mut self) {
        self.stdin.take();
    }

    fn wait(&mut self, timeout: Duration) -> ExitStatus {
        wait_child(&mut self.child, timeout)
    }

    fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// Waits until stderr contains `needle` (the reader thread may lag behind the process).
    fn wait_stderr(&self, needle: &str) -> String {
        self.stderr.wait_for(needle, TIMEOUT)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn only_text(result: &Value) -> &str {
    let content = result["content"].as_array().unwrap();
    assert_eq!(content.len(), 1, "{result}");
    assert_eq!(content[0]["type"], "text");
    content[0]["text"].as_str().unwrap()
}

#[test]
fn lists_every_tool_with_schemas() {
    let mut server = Server::initialized();
    let list = server.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    assert_eq!(tool_names(&list["result"]["tools"]), TESTSERVER_TOOLS);
    for tool in tools {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(!tool["description"].as_str().unwrap().is_empty(), "{tool}");
    }
    let add = tools.iter().find(|t| t["name"] == "add").unwrap();
    assert_eq!(add["inputSchema"]["required"], json!(["a", "b"]));
    assert_eq!(add["outputSchema"]["required"], json!(["sum", "product"]));
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["inputSchema"]["properties"]["text"]["type"], "string");
}

#[test]
fn simple_tools() {
    let mut server = Server::initialized_with(|c| {
        c.env("MCPGW_TEST_ALPHA", "a b $c")
            .env("OTHER_VARIABLE", "hidden")
            .current_dir(std::env::temp_dir())
            .arg("stdio");
    });

    let tricky =
        "quotes \" ' `backticks` $(echo no) ${HOME} \\ back\nnew line\ttab é 漢字 🦀 \u{0}";
    let echo = server.call("echo", json!({"text": tricky}));
    assert_eq!(only_text(&echo), tricky);
    assert_eq!(echo["isError"], false);

    let args = json!({"s": tricky, "n": 1.5, "i": -3, "big": 12345678901234567i64,
                      "nested": {"list": [null, true, "x"]}, "empty": {}});
    let result = server.call("echo_json", args.clone());
    assert_eq!(result["structuredContent"], args);
    let text = only_text(&result);
    assert!(!text.contains('\n'), "compact JSON");
    assert_eq!(serde_json::from_str::<Value>(text).unwrap(), args);
    let result = server.call("echo_json", json!({}));
    assert_eq!(only_text(&result), "{}");

    let sum = server.call("add", json!({"a": 2, "b": 3}));
    assert_eq!(sum["structuredContent"], json!({"sum": 5, "product": 6}));
    assert_eq!(
        serde_json::from_str::<Value>(only_text(&sum)).unwrap(),
        json!({"sum": 5, "product": 6})
    );
    let sum = server.call("add", json!({"a": 0.5, "b": -4}));
    assert_eq!(
        sum["structuredContent"],
        json!({"sum": -3.5, "product": -2.0})
    );
    let bad = server.call("add", json!({"a": "1", "b": 2}));
    assert_eq!(bad["isError"], true);
    assert!(only_text(&bad).contains("`a`"), "{bad}");

    let fail = server.call("fail", json!({}));
    assert_eq!(fail["isError"], true);
    assert_eq!(only_text(&fail), "tool failed");
    let fail = server.call("fail", json!({"message": "custom failure"}));
    assert_eq!(fail["isError"], true);
    assert_eq!(only_text(&fail), "custom failure");

    for len in [0usize, 17, 100_000] {
        let big = server.call("big", json!({"bytes": len}));
        let text = only_text(&big);
        assert_eq!(text.len(), len);
        assert_eq!(text, &"0123456789abcdef".repeat(len / 16 + 1)[..len]);
    }
    let too_big = server.call("big", json!({"bytes": 64 * 1024 * 1024 + 1}));
    assert_eq!(too_big["isError"], true);

    let info = server.call("info", json!({}));
    let info_value = &info["structuredContent"];
    assert_eq!(info_value["pid"], server.child.id());
    assert_eq!(info_value["env"], json!({"MCPGW_TEST_ALPHA": "a b $c"}));
    assert_eq!(info_value["args"], json!([BIN, "stdio"]));
    let cwd = std::env::temp_dir().canonicalize().unwrap();
    assert_eq!(info_value["cwd"], cwd.to_str().unwrap());
    assert_eq!(
        &serde_json::from_str::<Value>(only_text(&info)).unwrap(),
        info_value
    );

    let headers = server.call("headers", json!({}));
    assert_eq!(headers["structuredContent"], json!({}));

    let unknown = server.request("tools/call", json!({"name": "nope", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    server.wait_stderr("serving MCP over stdio");
    server.wait_stderr("initialize from stdio-test");
}

#[test]
fn media_content_in_order() {
    let mut server = Server::initialized();
    let media = server.call("media", json!({}));
    let content = media["content"].as_array().unwrap();
    assert_eq!(
        strings_at(&media["content"], "type"),
        ["image", "audio", "resource", "resource", "resource_link"]
    );
    assert_eq!(content[0]["mimeType"], "image/png");
    assert!(
        content[0]["data"]
            .as_str()
            .unwrap()
            .starts_with("iVBORw0KGgo")
    );
    assert_eq!(content[1]["mimeType"], "audio/wav");
    assert!(
        content[1]["data"].as_str().unwrap().starts_with("UklGR"),
        "RIFF"
    );
    assert_eq!(
        content[2]["resource"],
        json!({"uri": "test://resource/text", "mimeType": "text/plain", "text": "hello resource"})
    );
    assert_eq!(content[3]["resource"]["uri"], "test://resource/blob");
    assert_eq!(
        content[3]["resource"]["mimeType"],
        "application/octet-stream"
    );
    let blob = content[3]["resource"]["blob"].as_str().unwrap();
    assert_eq!(blob.len(), 344, "base64 of 256 bytes");
    assert!(blob.starts_with("AAECAwQFBgcICQoLDA0ODxAREhMU"));
    assert!(blob.ends_with("+/w=="));
    assert_eq!(content[4]["uri"], "test://resource/link");
    assert_eq!(content[4]["name"], "linked");
    assert_eq!(content[4]["mimeType"], "text/plain");
}

#[test]
fn garbage_line_then_normal_answer() {
    let mut server = Server::initialized();
    let id = server.send_request("tools/call", json!({"name": "garbage", "arguments": {}}));
    assert_eq!(server.line(TIMEOUT).unwrap(), "this is not json {{{");
    let (response, before) = server.response(id);
    assert!(before.is_empty());
    assert_eq!(only_text(&response["result"]), "ok after garbage");
    // Still in sync afterwards.
    let echo = server.call("echo", json!({"text": "after"}));
    assert_eq!(only_text(&echo), "after");
}

/// Requests of 16 MiB and more (rmcp's own limit) are served up to the gateway's largest body;
/// past the server's limit a request is answered with an error naming it, never dropped.
#[test]
fn large_requests_are_served_and_longer_ones_answered_with_an_error() {
    let mut server = Server::initialized();
    let text = "x".repeat(20 << 20);
    let echo = server.call("echo", json!({"text": text}));
    assert_eq!(only_text(&echo).len(), 20 << 20);
    let mut line = br#"{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"echo","arguments":{"text":""#.to_vec();
    line.resize(line.len() + (129 << 20), b'y');
    line.extend_from_slice(b"\"}}}\n");
    server.stdin.as_mut().unwrap().write_all(&line).unwrap();
    let refusal = server.message();
    assert_eq!(refusal["id"], "huge", "{refusal}");
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than")
    );
    let echo = server.call("echo", json!({"text": "after"}));
    assert_eq!(only_text(&echo), "after");
}

#[test]
fn slow_sends_progress() {
    let mut server = Server::initialized();
    let id = server.send_request(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.3, "steps": 3},
               "_meta": {"progressToken": "tok-1"}}),
    );
    let started = Instant::now();
    let (response, before) = server.response(id);
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert_eq!(only_text(&response["result"]), "done after 3 steps");
    let progress: Vec<(f64, f64, &str)> = before
        .iter()
        .map(|n| {
            assert_eq!(n["method"], "notifications/progress");
            assert_eq!(n["params"]["progressToken"], "tok-1");
            (
                n["params"]["progress"].as_f64().unwrap(),
                n["params"]["total"].as_f64().unwrap(),
                n["params"]["message"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [
            (1.0, 3.0, "step 1/3"),
            (2.0, 3.0, "step 2/3"),
            (3.0, 3.0, "step 3/3")
        ]
    );

    // Without a progress token there are no notifications; steps defaults to 5.
    let result = server.call("slow", json!({"seconds": 0}));
    assert_eq!(only_text(&result), "done after 5 steps");
}

#[test]
fn cancellation_reaches_slow() {
    let mut server = Server::initialized();
    let dir = TempDir::new("testserver");
    let marker = dir.path("cancel-marker");
    let id = server.send_request(
        "tools/call",
        json!({"name": "slow",
               "arguments": {"seconds": 30, "steps": 300, "cancel_marker": marker},
               "_meta": {"progressToken": 9}}),
    );
    // Once progress flows the call is surely running.
    let first = server.message();
    assert_eq!(first["method"], "notifications/progress", "{first}");
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "test says stop"}}),
    );
    let text = wait_for_file(&marker, TIMEOUT).expect("cancel marker written");
    assert_eq!(text, "cancelled");
    let stderr = server.wait_stderr("cancelled: slow");
    assert!(stderr.contains("test says stop"), "{stderr}");

    // No response for the cancelled call; progress stops.
    let echo_id = server.send_request(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    loop {
        let message = server.message();
        if message["id"] == json!(echo_id) {
            break;
        }
        assert_ne!(message["id"], json!(id), "response to a cancelled call");
    }
    thread::sleep(Duration::from_millis(300));
    assert!(
        server.lines.try_recv().is_err(),
        "output after cancellation"
    );
}

#[test]
fn session_end_is_not_a_cancellation() {
    let mut server = Server::initialized();
    let dir = TempDir::new("testserver");
    let marker = dir.path("no-cancel-marker");
    server.send_request(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 30, "cancel_marker": marker}}),
    );
    thread::sleep(Duration::from_millis(100));
    server.close_stdin();
    // rmcp lets in-flight handlers run up to 5 s after stdin closes, then cancels them.
    let status = server.wait(Duration::from_secs(9));
    assert!(status.success(), "{status:?}");
    server.wait_stderr("stdio session ended");
    assert!(
        !marker.exists(),
        "marker written without notifications/cancelled"
    );
    assert!(!server.stderr().contains("cancelled: slow"));
}

#[test]
fn change_tools_toggles_extra() {
    let mut server = Server::initialized();
    assert!(!server.tool_names().contains(&"extra".to_owned()));
    let unknown = server.request("tools/call", json!({"name": "extra", "arguments": {}}));
    assert_eq!(unknown["error"]["code"], -32602);

    let id = server.send_request(
        "tools/call",
        json!({"name": "change_tools", "arguments": {}}),
    );
    let (response, before) = server.response(id);
    assert_eq!(
        before,
        [json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})]
    );
    assert_eq!(only_text(&response["result"]), "extra tool enabled");
    assert_eq!(server.tool_names().last().unwrap(), "extra");
    assert_eq!(only_text(&server.call("extra", json!({}))), "extra");

    let id = server.send_request(
        "tools/call",
        json!({"name": "change_tools", "arguments": {}}),
    );
    let (response, before) = server.response(id);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0]["method"], "notifications/tools/list_changed");
    assert_eq!(only_text(&response["result"]), "extra tool disabled");
    assert!(!server.tool_names().contains(&"extra".to_owned()));
}

#[test]
fn crash_exits_without_answering() {
    let mut server = Server::initialized();
    server.send_request(
        "tools/call",
        json!({"name": "crash", "arguments": {"code": 7, "message": "boom on purpose"}}),
    );
    assert_eq!(server.line(TIMEOUT), None, "no answer before exit");
    let status = server.wait(TIMEOUT);
    assert_eq!(status.code(), Some(7));
    server.wait_stderr("boom on purpose");

    let mut server = Server::initialized();
    server.send_request("tools/call", json!({"name": "crash", "arguments": {}}));
    assert_eq!(server.wait(TIMEOUT).code(), Some(3));
    server.wait_stderr("crashing on purpose");
}

#[test]
fn bad_command_line_exits_2() {
    for args in [
        &["serve"][..],
        &["http", "--port", "x"],
        &["stdio", "extra"],
    ] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(output.stdout.is_empty());
        assert!(String::from_utf8_lossy(&output.stderr).contains("usage:"));
    }
}
