//! What the endpoint's tests share: a Docker container with node and server-everything inside,
//! the `mcpgw mcp` command line into it, an HTTP endpoint process, and the check that nothing
//! the endpoint started is left running in the container.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcpgw_testkit::container::{self, Container, EVERYTHING_IN_IMAGE, Engine};
use mcpgw_testkit::mcp::Client;
use mcpgw_testkit::{RawResponse, TempDir, static_gateway_bin, wait_child};
use serde_json::{Value, json};

/// The `mcpgw` binary under test.
pub fn mcpgw_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpgw"))
}

/// A Docker container of the test image with node and the npm servers inside.
pub struct DockerBox {
    /// The container.
    pub container: Container,
    /// A directory for the test's files.
    pub dir: TempDir,
}

impl DockerBox {
    /// Starts one; `None` (having said why) when Docker cannot run here.
    pub fn start() -> Option<DockerBox> {
        if let Some(why) = container::unavailable(Engine::Docker) {
            eprintln!("SKIPPED: {why}");
            return None;
        }
        Some(DockerBox {
            container: Container::start_image(Engine::Docker, container::node_image()),
            dir: TempDir::new("endpoint"),
        })
    }

    /// The container's id.
    pub fn id(&self) -> &str {
        &self.container.id
    }

    /// The command lines of the container's processes (busybox `ps`), but for its init, its
    /// `sleep` and the `ps` itself.
    pub fn processes(&self) -> Vec<String> {
        let out = Command::new("docker")
            .args(["exec", self.id(), "ps", "-o", "pid,args"])
            .output()
            .unwrap();
        assert!(out.status.success(), "docker exec ps failed: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .map(|l| l.trim().to_string())
            .filter(|l| {
                let args = l.split_once(' ').map_or("", |(_, a)| a.trim());
                !(args.starts_with("/sbin/docker-init")
                    || args.starts_with("sleep ")
                    || args.starts_with("ps "))
            })
            .collect()
    }

    /// Waits (up to 30 s) until nothing runs in the container but what it started with: the
    /// endpoint's tear-down after its client went away.
    pub fn wait_nothing_left(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "left running in the container: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Asserts that nothing runs in the container but what it started with.
    pub fn assert_nothing_left(&self) {
        let left = self.processes();
        assert!(left.is_empty(), "left running in the container: {left:?}");
    }
}

/// `mcpgw mcp` into `b`'s container serving server-everything over stdio, with `extra`
/// options; the gateway is installed from this machine's static binary.
pub fn endpoint_argv(b: &DockerBox, extra: &[&str]) -> Vec<String> {
    let mut argv = vec![
        mcpgw_bin().display().to_string(),
        "mcp".into(),
        "--docker".into(),
        b.id().into(),
        "--gateway-binary".into(),
        static_gateway_bin().display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(["--", "node", EVERYTHING_IN_IMAGE, "stdio"].map(String::from));
    argv
}

/// `mcpgw mcp --http` running, with the address it serves and its token's file.
pub struct HttpEndpoint {
    child: Child,
    /// The MCP endpoint's URL.
    pub url: String,
    /// The bearer token's file.
    pub token_file: PathBuf,
    /// What it printed when ready.
    pub ready: Value,
}

impl HttpEndpoint {
    /// Starts `mcpgw mcp --http 127.0.0.1:0` into `b` with `extra` options, and waits for its
    /// ready line.
    pub fn start(b: &DockerBox, extra: &[&str]) -> HttpEndpoint {
        let token_file = b.dir.path("http-token");
        let mut options = vec!["--http", "127.0.0.1:0", "--token-file"];
        let token_path = token_file.display().to_string();
        options.push(&token_path);
        options.extend_from_slice(extra);
        let argv = endpoint_argv(b, &options);
        HttpEndpoint::spawn(&argv, token_file)
    }

    /// Runs `argv` (an `mcpgw mcp --http` command line) and waits for its ready line.
    pub fn spawn(argv: &[String], token_file: PathBuf) -> HttpEndpoint {
        let (child, line) = mcpgw_testkit::servers::spawn_first_line(
            Command::new(&argv[0])
                .args(&argv[1..])
                .stderr(Stdio::inherit()),
        );
        let ready: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("the ready line {line:?} is not JSON: {e}"));
        HttpEndpoint {
            child,
            url: ready["url"].as_str().expect("a url").to_string(),
            token_file,
            ready,
        }
    }

    /// The bearer token.
    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap()
            .trim()
            .to_string()
    }

    /// Stops it as a user would (SIGTERM) and waits for it to exit 0.
    pub fn stop(mut self) {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = wait_child(&mut self.child, Duration::from_secs(30));
        assert!(status.success(), "mcpgw mcp --http exited {status}");
    }
}

impl Drop for HttpEndpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw JSON-RPC client on `argv` (an `mcpgw mcp` command line).
pub fn client(argv: &[String]) -> Client {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    Client::direct(cmd)
}

/// The `initialize` request of a 2025-11-25 client with no capabilities; its answer.
pub fn initialize_request(c: &mut Client) -> Value {
    c.request(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "mcpgw-endpoint-test", "version": "1"}}),
    )
}

/// The handshake of a 2025-11-25 client; the `initialize` answer.
pub fn initialize(c: &mut Client) -> Value {
    let init = initialize_request(c);
    c.notify("notifications/initialized", Value::Null);
    init
}

/// A client of `mcpgw mcp` over stdio into `b`'s server-everything, past its handshake.
pub fn stdio_client(b: &DockerBox) -> Client {
    let mut c = client(&endpoint_argv(b, &[]));
    initialize(&mut c);
    c
}

/// Starts server-everything's minute-long operation over `c` and waits until its first progress
/// arrives; the call's id.
pub fn start_long_call(c: &mut Client) -> u64 {
    let id = c.take_id();
    c.send(
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60},
        "_meta": {"progressToken": "p"}}}),
    );
    c.notification("notifications/progress", Duration::from_secs(30))
        .expect("the call runs");
    id
}

/// One HTTP/1.1 request to `/mcp` as bytes, for a connection of its own (`Connection: close`).
pub fn request_bytes(
    authority: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let mut req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// One HTTP/1.1 request to `/mcp` on a connection of its own, its whole response.
pub fn http(authority: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> RawResponse {
    let bytes = request_bytes(authority, method, headers, body);
    mcpgw_testkit::raw_request(authority, &bytes, Duration::from_secs(60))
}

/// A response's body as text.
pub fn text(r: &RawResponse) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}
