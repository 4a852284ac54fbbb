//! The workspace's binaries and the MCP servers the tests run: the project's test server (stdio
//! and streamable HTTP), `@modelcontextprotocol/server-everything` (npm), and the virtualenv's
//! programs (PyPI).

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::net::{free_port, wait_port};
use crate::process::Captured;

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Where cargo put the workspace's binaries for the running test (`target/<profile>`; a test
/// executable lives in its `deps`).
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().to_path_buf()
}

/// A binary of the workspace, built for this test run.
fn workspace_bin(name: &str, how: &str) -> PathBuf {
    let bin = bin_dir().join(name);
    assert!(
        bin.exists(),
        "{} is missing: build it with `{how}` (make test does)",
        bin.display()
    );
    bin
}

/// The gateway binary.
pub fn gateway_bin() -> PathBuf {
    workspace_bin("mcpgw-gateway", "cargo build -p mcpgw-gateway")
}

/// Cargo's target directory: `$CARGO_TARGET_DIR`, else `target/` in the repository.
pub fn target_root() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from)
}

/// Where the statically linked release gateway is, built or not (`make static` builds it;
/// `$MCPGW_STATIC_GATEWAY` names another): the one installed into sandboxes that have no libc.
pub fn static_gateway_path() -> PathBuf {
    std::env::var_os("MCPGW_STATIC_GATEWAY").map_or_else(
        || target_root().join("x86_64-unknown-linux-gnu/release/mcpgw-gateway"),
        PathBuf::from,
    )
}

/// The statically linked release gateway, which must have been built.
pub fn static_gateway_bin() -> PathBuf {
    let path = static_gateway_path();
    assert!(
        path.exists(),
        "{} is missing: build the static gateway with `make static` (make test does)",
        path.display()
    );
    path
}

/// The project's own MCP test server.
pub fn testserver_bin() -> PathBuf {
    workspace_bin("mcpgw-testserver", "cargo build -p mcpgw-testserver")
}

/// The test server's tools, in the order it lists them.
pub const TESTSERVER_TOOLS: [&str; 14] = [
    "echo",
    "echo_json",
    "add",
    "media",
    "fail",
    "slow",
    "change_tools",
    "big",
    "crash",
    "garbage",
    "info",
    "headers",
    "confirm",
    "task",
];

/// `@modelcontextprotocol/server-everything`'s entry point.
pub fn everything_js() -> PathBuf {
    let js = repo()
        .join("tests/servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        js.exists(),
        "{} is missing: run `npm ci --prefix tests/servers` (make test does)",
        js.display()
    );
    js
}

/// A program of the Python virtualenv (AgentScope, mcp-server-time).
pub fn venv_bin(name: &str) -> PathBuf {
    let bin = repo().join(".venv/bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `make deps` (make test does)",
        bin.display()
    );
    bin
}

/// A stdio spec for the project's test server.
pub fn testserver_stdio(name: &str) -> Value {
    json!({
        "name": name, "is_stateful": true,
        "mcp_config": {"type": "stdio_mcp", "command": testserver_bin(), "args": ["stdio"],
                       "env": {"MCPGW_TEST_MARK": name}}
    })
}

/// An HTTP spec for a streamable HTTP server at `url`.
pub fn http_spec(name: &str, url: &str) -> Value {
    json!({"name": name, "is_stateful": true, "mcp_config": {"type": "http_mcp", "url": url}})
}

/// A server started by a test, killed on drop.
pub struct Server {
    /// The process.
    pub child: Child,
    /// Its MCP endpoint (empty when it has none).
    pub url: String,
    /// Its stderr, when captured.
    pub stderr: Captured,
}

impl Server {
    /// `127.0.0.1:PORT` of the URL.
    pub fn authority(&self) -> &str {
        let rest = self.url.strip_prefix("http://").unwrap_or(&self.url);
        rest.split('/').next().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns `cmd` (stdin closed, stdout piped) and reads its first line, e.g. a ready line.
pub fn spawn_first_line(cmd: &mut Command) -> (Child, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

/// Spawns `cmd` (stdout piped) and reads the URL from its first line, `listening URL`.
fn listening(cmd: &mut Command) -> (Child, String) {
    let (child, line) = spawn_first_line(cmd);
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, url)
}

/// Runs `mcpgw-testserver http --port 0`, reads the URL it prints, and captures its stderr.
pub fn testserver_http() -> Server {
    let mut cmd = Command::new(testserver_bin());
    cmd.args(["http", "--port", "0"]).stderr(Stdio::piped());
    let (mut child, url) = listening(&mut cmd);
    let stderr = Captured::start(child.stderr.take().unwrap());
    Server { child, url, stderr }
}

/// Runs `server-everything` in `mode` (`streamableHttp`, `sse`) and waits until it accepts
/// connections; `path` is its MCP endpoint.
pub fn everything_in_mode(mode: &str, path: &str) -> Server {
    let port = free_port();
    let child = Command::new("node")
        .arg(everything_js())
        .arg(mode)
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_port(port);
    Server {
        child,
        url: format!("http://127.0.0.1:{port}{path}"),
        stderr: Captured::default(),
    }
}

/// `server-everything` over streamable HTTP.
pub fn everything_http() -> Server {
    everything_in_mode("streamableHttp", "/mcp")
}

/// `server-everything` over the legacy SSE transport (`GET /sse`, `POST /message`).
pub fn everything_sse() -> Server {
    everything_in_mode("sse", "/sse")
}

/// A stdio spec for `gateway/tests/servers/rogue_mcp.py`, the server that misbehaves on
/// request (junk, huge replies, endless lines, floods, escaping processes).
pub fn rogue_stdio(name: &str) -> Value {
    json!({"name": name, "mcp_config": {"type": "stdio_mcp", "command": "python3",
        "args": [repo().join("gateway/tests/servers/rogue_mcp.py")]}})
}

/// `gateway/tests/servers/rogue_sse.py`: a legacy SSE MCP server whose tool `endless` answers
/// with an event that never ends.
pub fn rogue_sse() -> Server {
    let (child, url) =
        listening(Command::new("python3").arg(repo().join("gateway/tests/servers/rogue_sse.py")));
    Server {
        child,
        url,
        stderr: Captured::default(),
    }
}
