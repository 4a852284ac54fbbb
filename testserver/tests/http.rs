//! Runs `mcpgw-testserver http --port 0` and talks to it with a raw HTTP/1.1 client.

use std::{
    io::{Read, Write},
    net::TcpStream,
    process::Command,
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use mcpgw_testkit::{RawResponse, testserver_http, wait_child};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(5);

/// The JSON messages of an SSE body (priming events carry no data).
fn events(response: &RawResponse) -> Vec<Value> {
    String::from_utf8_lossy(&response.body)
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
        .filter(|data| !data.is_empty())
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The test server over HTTP, driven with raw HTTP/1.1.
struct Server(mcpgw_testkit::Server);

impl Server {
    fn start() -> Server {
        let server = testserver_http();
        assert!(
            server.authority().starts_with("127.0.0.1:"),
            "{}",
            server.url
        );
        Server(server)
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.0.authority()).unwrap();
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        stream
    }

    /// Sends one request on a fresh connection; `Host` defaults to the bound authority.
    fn send(&self, method: &str, headers: &[(&str, &str)], body: &str) -> TcpStream {
        let mut stream = self.connect();
        let mut head = format!("{method} /mcp HTTP/1.1\r\nConnection: close\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("Host: {}\r\n", self.0.authority()));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if method == "POST" {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        stream
    }

    fn request(&self, method: &str, headers: &[(&str, &str)], body: &str) -> RawResponse {
        let mut stream = self.send(method, headers, body);
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        RawResponse::parse(&raw)
    }

    /// POSTs a JSON-RPC message within `session` (if any).
    fn post(&self, session: Option<&str>, extra: &[(&str, &str)], message: &Value) -> RawResponse {
        let mut headers = vec![("Accept", "application/json, text/event-stream")];
        if let Some(session) = session {
            headers.push(("Mcp-Session-Id", session));
            headers.push(("MCP-Protocol-Version", "2025-11-25"));
        }
        headers.extend_from_slice(extra);
        self.request("POST", &headers, &message.to_string())
    }

    fn initialize(&self) -> String {
        let init = self.post(
            None,
            &[],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "http-test", "version": "0"}}}),
        );
        assert_eq!(init.status, 200);
        let events = events(&init);
        assert_eq!(
            events[0]["result"]["serverInfo"]["name"],
            "mcpgw-testserver"
        );
        let session = init
            .header("mcp-session-id")
            .expect("session id")
            .to_owned();
        let ack = self.post(
            Some(&session),
            &[],
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(ack.status, 202);
        session
    }

    fn call(&self, session: &str, id: i64, tool: &str, arguments: Value) -> Vec<Value> {
        self.call_with(
            session,
            &[],
            id,
            json!({"name": tool, "arguments": arguments}),
        )
    }

    fn call_with(
        &self,
        session: &str,
        extra: &[(&str, &str)],
        id: i64,
        params: Value,
    ) -> Vec<Value> {
        let response = self.post(
            Some(session),
            extra,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
        );
        assert_eq!(response.status, 200);
        let events = events(&response);
        assert_eq!(events.last().unwrap()["id"], id, "{events:?}");
        events
    }

    fn wait_stderr(&self, needle: &str) {
        self.0.stderr.wait_for(needle, TIMEOUT);
    }
}

/// Reads a live response stream in the background, keeping what arrived so far.
fn collect(mut stream: TcpStream) -> Arc<Mutex<Vec<u8>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    stream.set_read_timeout(None).unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    seen
}

fn wait_for(seen: &Mutex<Vec<u8>>, needle: &str) {
    let deadline = Instant::now() + TIMEOUT;
    while !String::from_utf8_lossy(&seen.lock().unwrap()).contains(needle) {
        assert!(Instant::now() < deadline, "never saw {needle:?}");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn streamable_http_session() {
    let server = Server::start();
    let session = server.initialize();

    let list = server.post(
        Some(&session),
        &[],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let tools = &events(&list)[0]["result"]["tools"];
    assert_eq!(tools.as_array().unwrap().len(), 14, "{tools}");

    let events = server.call_with(
        &session,
        &[("X-Mcpgw-Test", "value \"1\""), ("X-Mcpgw-Test", "second")],
        3,
        json!({"name": "headers", "arguments": {}}),
    );
    let headers = &events[0]["result"]["structuredContent"];
    assert_eq!(headers["x-mcpgw-test"], "value \"1\", second", "{headers}");
    assert_eq!(headers["mcp-session-id"], session.as_str());
    assert_eq!(headers["host"], server.0.authority());

    let events = server.call(&session, 4, "echo", json!({"text": "über $(x) `y`"}));
    assert_eq!(events[0]["result"]["content"][0]["text"], "über $(x) `y`");

    // Progress rides the call's own SSE stream, before the result.
    let events = server.call_with(
        &session,
        &[],
        5,
        json!({"name": "slow", "arguments": {"seconds": 0.2, "steps": 2},
               "_meta": {"progressToken": "hp"}}),
    );
    let methods: Vec<&Value> = events.iter().map(|e| &e["method"]).collect();
    assert_eq!(
        methods,
        [
            &json!("notifications/progress"),
            &json!("notifications/progress"),
            &Value::Null
        ]
    );
    assert_eq!(events[1]["params"]["message"], "step 2/2");
    assert_eq!(
        events[2]["result"]["content"][0]["text"],
        "done after 2 steps"
    );

    // list_changed goes to the session's standalone GET stream.
    let get = server.send(
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        "",
    );
    let standalone = collect(get);
    wait_for(&standalone, "200 OK");
    let events = server.call(&session, 6, "change_tools", json!({}));
    assert_eq!(
        events[0]["result"]["content"][0]["text"],
        "extra tool enabled"
    );
    wait_for(&standalone, "notifications/tools/list_changed");

    // Cancellation over HTTP reaches the handler.
    let marker = std::env::temp_dir().join(format!("mcpgw-testserver-http-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let slow = server.send(
        "POST",
        &[
            ("Accept", "application/json, text/event-stream"),
            ("Mcp-Session-Id", &session),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 30, "steps": 300, "cancel_marker": marker},
            "_meta": {"progressToken": "hc"}}})
        .to_string(),
    );
    let slow_stream = collect(slow);
    wait_for(&slow_stream, "step 1/300");
    let ack = server.post(
        Some(&session),
        &[],
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "http test"}}),
    );
    assert_eq!(ack.status, 202);
    let deadline = Instant::now() + TIMEOUT;
    while !marker.exists() {
        assert!(Instant::now() < deadline, "cancel marker not written");
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "cancelled");
    let _ = std::fs::remove_file(&marker);
    server.wait_stderr("cancelled: slow (request 7)");
}

#[test]
fn host_header_is_checked() {
    let server = Server::start();
    let port = server.0.authority().rsplit_once(':').unwrap().1.to_owned();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "host-test", "version": "0"}}});
    let accept = ("Accept", "application/json, text/event-stream");
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "localhost".to_owned(),
    ] {
        let response = server.post(None, &[accept, ("Host", &host)], &init);
        assert_eq!(response.status, 200, "Host: {host}");
    }
    let response = server.post(None, &[accept, ("Host", "evil.example")], &init);
    assert_eq!(response.status, 403);
}

#[test]
fn sigterm_exits_cleanly() {
    let mut server = Server::start();
    let session = server.initialize();
    // An open standalone stream must not hold up the exit.
    let _stream = collect(server.send(
        "GET",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &session),
        ],
        "",
    ));
    let started = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &server.0.child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_child(&mut server.0.child, TIMEOUT);
    assert!(started.elapsed() < TIMEOUT, "still running after SIGTERM");
    assert_eq!(status.code(), Some(0));
    server.wait_stderr("SIGTERM received");
}
