//! A real gateway process, and a client for its REST surface.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::fs::TempDir;
use crate::process::wait_child;
use crate::servers::gateway_bin;

/// A gateway running in the foreground, killed on drop.
pub struct Gateway {
    /// The process.
    pub child: Child,
    /// The port it listens on.
    pub port: u16,
    /// Its bearer token.
    pub token: String,
    /// Its state: the token file (`state/token`) and the log (`gateway.log`).
    pub dir: TempDir,
    /// The HTTP client.
    pub http: reqwest::Client,
    /// The gateway's `/openapi.json`, fetched on first use: every answer a test gets is checked
    /// against it.
    openapi: tokio::sync::OnceCell<Value>,
}

/// Starts `mcpgw-gateway --port 0 --token-file DIR/state/token --log-file DIR/gateway.log`
/// plus `extra` and waits for its ready line.
pub fn start_gateway(extra: &[&str]) -> Gateway {
    start_gateway_with(extra, |_| {})
}

/// [`start_gateway`] with extra environment variables.
pub fn start_gateway_with_env(extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Gateway {
    start_gateway_with(extra, |cmd| {
        cmd.envs(env.iter().copied());
    })
}

/// [`start_gateway`] with the command adjusted by `configure` before it is spawned.
pub fn start_gateway_with(extra: &[&str], configure: impl FnOnce(&mut Command)) -> Gateway {
    // The tests' HTTP client shares reqwest's build with the gateway, which brings its own TLS
    // setup; plain-HTTP clients still need a crypto provider installed.
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
    let mut cmd = Command::new(gateway_bin());
    cmd.args(&args)
        .env_remove("MCPGW_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    configure(&mut cmd);
    let mut child = cmd.spawn().unwrap();
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
        openapi: tokio::sync::OnceCell::new(),
    }
}

/// A response: status and body.
#[derive(Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: Vec<u8>,
    /// The `Content-Type`.
    pub content_type: String,
}

impl Reply {
    /// The body as JSON; panics with the body when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `detail` of an error body.
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
    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `127.0.0.1:PORT`.
    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The gateway's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a request with the right token.
    pub async fn send(&self, method: &str, path: &str, body: Option<Vec<u8>>) -> Reply {
        let auth = format!("Bearer {}", self.token);
        self.send_with(method, path, body, Some(&auth), &[]).await
    }

    /// Sends a request with the given `Authorization` (none when `None`) and headers.
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
        let reply = Reply {
            status,
            body: resp.bytes().await.unwrap().to_vec(),
            content_type,
        };
        self.assert_documented(method, path, &reply).await;
        reply
    }

    /// The gateway's OpenAPI document.
    pub async fn openapi(&self) -> &Value {
        self.openapi
            .get_or_init(|| async {
                let resp = self
                    .http
                    .get(self.url("/openapi.json"))
                    .header("authorization", format!("Bearer {}", self.token))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), 200);
                serde_json::from_slice(&resp.bytes().await.unwrap()).unwrap()
            })
            .await
    }

    /// Panics unless the document lists the reply's status for the request's route and method
    /// (routes and methods it does not list are the router's fallbacks: not checked).
    pub async fn assert_documented(&self, method: &str, path: &str, reply: &Reply) {
        let doc = self.openapi().await;
        let path = path.split('?').next().unwrap();
        let Some((route, op)) = operation(doc, method, path) else {
            return;
        };
        let documented = op["responses"]
            .as_object()
            .is_some_and(|r| r.contains_key(&reply.status.to_string()));
        assert!(
            documented,
            "{method} {path} answered {} ({}), which /openapi.json does not list for {route}",
            reply.status,
            reply.text()
        );
    }

    /// `GET`.
    pub async fn get(&self, path: &str) -> Reply {
        self.send("GET", path, None).await
    }

    /// `POST` with a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send("POST", path, Some(serde_json::to_vec(&body).unwrap()))
            .await
    }

    /// `DELETE`.
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

    /// The pid of a test server upstream, as its `info` tool reports it.
    pub async fn testserver_pid(&self, mcp: &str) -> u32 {
        let info = self.call(mcp, "info", json!({})).await.expect(200).json();
        info["chunk"]["metadata"]["structured_content"]["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("no pid in {info}")) as u32
    }

    /// The gateway's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path("gateway.log")).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) on our own child.
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

/// The route template of the document that `path` matches, and its operation for `method`.
pub fn operation<'a>(doc: &'a Value, method: &str, path: &str) -> Option<(&'a str, &'a Value)> {
    let segments: Vec<&str> = path.split('/').collect();
    doc["paths"].as_object()?.iter().find_map(|(route, item)| {
        let template: Vec<&str> = route.split('/').collect();
        let matches = template.len() == segments.len()
            && template
                .iter()
                .zip(&segments)
                .all(|(t, s)| t == s || (t.starts_with('{') && t.ends_with('}') && !s.is_empty()));
        let op = item.get(method.to_ascii_lowercase())?;
        matches.then_some((route.as_str(), op))
    })
}
