//! What the gateway's integration tests share: a real gateway process, real upstreams, and an
//! HTTP client for the REST surface.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The gateway binary under test.
pub fn gateway_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpgw-gateway"))
}

/// The project's own MCP test server, built next to the gateway.
pub fn testserver_bin() -> PathBuf {
    let bin = gateway_bin().with_file_name("mcpgw-testserver");
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build -p mcpgw-testserver` (make test does)",
        bin.display()
    );
    bin
}

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

/// The Python virtualenv with AgentScope and mcp-server-time.
pub fn venv_bin(name: &str) -> PathBuf {
    let bin = repo().join(".venv/bin").join(name);
    assert!(
        bin.exists(),
        "{} is missing: run `make .venv` (make test does)",
        bin.display()
    );
    bin
}

/// A fresh private directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("mcpgw-test-{tag}-{}", mcpgw::random::uuid4_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A gateway running in the foreground, killed on drop.
pub struct Gateway {
    pub child: Child,
    pub port: u16,
    pub token: String,
    pub dir: TempDir,
    pub http: reqwest::Client,
}

/// Starts `mcpgw-gateway --port 0 --token-file DIR/token` plus `extra` and waits for its ready
/// line.
pub fn start_gateway(extra: &[&str]) -> Gateway {
    start_gateway_with_env(extra, &[])
}

/// [`start_gateway`] with extra environment variables.
pub fn start_gateway_with_env(extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Gateway {
    // The tests' own HTTP client shares reqwest's build with the gateway, which brings its own
    // TLS setup; plain-HTTP tests still need a crypto provider installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    let dir = TempDir::new("gw");
    let token_file = dir.path("state/token");
    let mut args = vec![
        "--port".to_string(),
        "0".into(),
        "--token-file".into(),
        token_file.display().to_string(),
        "--log-file".into(),
        dir.path("gateway.log").display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut child = Command::new(gateway_bin())
        .args(&args)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
        panic!(
            "no ready line from the gateway ({e}): {line:?}; log: {}",
            std::fs::read_to_string(dir.path("gateway.log")).unwrap_or_default()
        )
    });
    let token = std::fs::read_to_string(&token_file).unwrap();
    Gateway {
        child,
        port: ready["port"].as_u64().unwrap() as u16,
        token,
        dir,
        http,
    }
}

/// A response: status and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub content_type: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn detail(&self) -> String {
        self.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Panics with the body unless the status is `want`.
    pub fn expect(self, want: u16) -> Self {
        assert_eq!(self.status, want, "body: {}", self.text());
        self
    }
}

impl Gateway {
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Sends a request with the right token.
    pub async fn send(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Reply {
        self.send_with(
            method,
            path,
            body,
            Some(&format!("Bearer {}", self.token)),
            &[],
        )
        .await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        auth: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self.http.request(method.parse().unwrap(), self.url(path));
        if let Some(auth) = auth {
            req = req.header("authorization", auth);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(body) = body {
            req = req.header("content-type", "application/json").body(body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        Reply {
            status,
            body: resp.bytes().await.unwrap().to_vec(),
            content_type,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(serde_json::to_vec(&body).unwrap()))
            .await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send("DELETE", path, None).await
    }

    /// Registers an MCP in a scope given as a query string (`""` for the default scope).
    pub async fn add(&self, spec: Value, query: &str) -> Reply {
        self.post(&format!("/mcps{query}"), spec).await
    }

    /// Calls a tool and returns the reply.
    pub async fn call(&self, mcp: &str, tool: &str, args: Value) -> Reply {
        self.post(
            &format!("/mcps/{mcp}/tools/{tool}"),
            json!({"arguments": args}),
        )
        .await
    }

    /// The gateway's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path("gateway.log")).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        wait_child(&mut self.child, Duration::from_secs(10))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for a child to exit, panicking past `limit`.
pub fn wait_child(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < limit,
            "process {} did not exit within {limit:?}",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
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

/// A server started by a test (e.g. a streamable HTTP MCP server), killed on drop.
pub struct Server {
    pub child: Child,
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `mcpgw-testserver http --port 0` and reads the URL it prints.
pub fn testserver_http() -> Server {
    let mut child = Command::new(testserver_bin())
        .args(["http", "--port", "0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    Server { child, url }
}

/// A free TCP port on loopback (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `server-everything` in streamable HTTP mode and waits until it accepts connections.
pub fn everything_http() -> Server {
    let port = free_port();
    let child = Command::new("node")
        .arg(everything_js())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_port(port);
    Server {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Waits until something listens on the port.
pub fn wait_port(port: u16) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "nothing listens on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process exists (zombies count as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().chars().next());
            !matches!(state, Some(Some('Z')) | None)
        }
        Err(_) => false,
    }
}

/// Waits up to `limit` for a process to be gone.
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while process_alive(pid) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

use std::os::unix::process::CommandExt as _;
