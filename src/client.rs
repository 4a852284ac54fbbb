//! A client of one gateway in one sandbox, and its operations as sans-IO state machines.
//!
//! An [`Operation`] never runs anything: [`Operation::command`] says which `sh -c` command to run
//! next in the sandbox, [`Operation::complete`] takes its exit status and output, and this
//! repeats until [`Operation::finish`] yields the result. An operation may need several rounds:
//! detecting curl, staging a large body, uploading a binary, confirming a launch. The blocking
//! calls of [`crate::exec`] are a loop over exactly this.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::command::{self, Body, Method, Request, Target, Transport};
use crate::error::{Error, ErrorKind, tail};
use crate::quote::quote;
use crate::random;
use crate::response::{self, HttpResponse, RequestInfo};
use crate::staging;
use crate::wire::output::seconds;
use crate::wire::rest::percent_encode;
use crate::wire::{self, CallToolAnswer, DaemonReady, McpSpec, Tool, ToolChunk};

/// Time a command gets beyond the request's own limit, so that the gateway's or curl's deadline
/// fires (and is reported precisely) before the exec backend gives up.
const EXEC_GRACE: Duration = Duration::from_secs(5);

/// Time curl gets beyond a tool call's deadline, so the gateway's `504` arrives first.
const CALL_GRACE: Duration = Duration::from_secs(5);

/// The default limit of one command's text: under the kernel's 128 KiB per argv string, with
/// room left for backends that wrap the command.
pub const DEFAULT_MAX_COMMAND_BYTES: usize = 120 * 1024;

/// The smallest command limit accepted: every fixed part of a command must fit.
pub const MIN_MAX_COMMAND_BYTES: usize = 4096;

/// How a [`Client`] reaches its gateway.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The gateway binary inside the sandbox; a bare name is looked up on `PATH`.
    /// [`Client::prepare_ensure_gateway_binary`] needs an absolute path.
    pub gateway_path: String,
    /// The loopback address the gateway listens on.
    pub host: String,
    /// The gateway's port: 0 lets [`Client::prepare_start_gateway`] pick a free one; non-zero
    /// with `token_file` attaches to a gateway that is already running.
    pub port: u16,
    /// The token file inside the sandbox; by default `<state_dir>/token`.
    pub token_file: Option<String>,
    /// The per-launch directory for token file and log; by default `/tmp/mcpgw-<16 hex>`.
    pub state_dir: Option<String>,
    /// The nonce of an already running gateway, checked by `health`.
    pub instance_nonce: Option<String>,
    /// curl or the built-in client; `None` detects curl once and falls back to the built-in one.
    pub transport: Option<Transport>,
    /// The timeout of a call that sets none.
    pub timeout: Duration,
    /// Where large bodies are staged; by default the state directory, else `/tmp`.
    pub staging_dir: Option<String>,
    /// The longest command text handed to the exec backend; larger bodies are staged.
    pub max_command_bytes: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            gateway_path: "mcpgw-gateway".into(),
            host: "127.0.0.1".into(),
            port: 0,
            token_file: None,
            state_dir: None,
            instance_nonce: None,
            transport: None,
            timeout: Duration::from_secs(60),
            staging_dir: None,
            max_command_bytes: DEFAULT_MAX_COMMAND_BYTES,
        }
    }
}

/// Per-call options: the scope the MCPs live in, and a timeout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// The agent part of the scope (`""` by default).
    pub agent_id: String,
    /// The session part of the scope (`""` by default).
    pub session_id: String,
    /// Bounds each command of the call; the client's default when `None`. A tool call passes it
    /// to the gateway as the call's deadline.
    pub timeout: Option<Duration>,
}

/// What the client knows about its gateway, learned from launches and probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Session {
    port: Option<u16>,
    token_file: Option<String>,
    state_dir: Option<String>,
    pid: Option<u32>,
    instance_nonce: Option<String>,
    transport: Option<Transport>,
}

#[derive(Debug)]
struct Shared {
    config: Config,
    session: Mutex<Session>,
}

impl Shared {
    fn session(&self) -> MutexGuard<'_, Session> {
        // A panic while holding the lock cannot leave a Session half-written in a harmful way.
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A client of one gateway in one sandbox.
///
/// Cheap to clone (clones share what was learned); `Send + Sync`: operations may be prepared and
/// driven from several threads at once.
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

/// The gateway a [`Client::prepare_start_gateway`] launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayInfo {
    /// Its port.
    pub port: u16,
    /// Its process id inside the sandbox.
    pub pid: u32,
    /// Its token file inside the sandbox.
    pub token_file: String,
    /// Its instance nonce.
    pub instance_nonce: String,
    /// Its state directory (token file and log), removed by `stop_gateway`.
    pub state_dir: String,
}

/// The answer of `GET /health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HealthInfo {
    /// `"ok"`.
    pub status: String,
    /// The gateway's instance nonce, when it was launched with one.
    pub instance_nonce: Option<String>,
}

/// What [`Client::prepare_ensure_gateway_binary`] found or did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BinaryStatus {
    /// Whether the binary was uploaded (false: it was already there, identical).
    pub uploaded: bool,
    /// Its SHA-256, lowercase hex.
    pub sha256: String,
    /// Its path in the sandbox.
    pub path: String,
}

/// The result of a finished operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// `start_gateway`.
    Started(GatewayInfo),
    /// `stop_gateway`.
    Stopped,
    /// `ensure_gateway_binary`.
    Binary(BinaryStatus),
    /// `health`.
    Health(HealthInfo),
    /// `list_mcps`.
    Mcps(Vec<McpSpec>),
    /// `add_mcp`.
    Added,
    /// `remove_mcp`.
    Removed,
    /// `list_tools`.
    Tools(Vec<Tool>),
    /// `call_tool`.
    Chunk(ToolChunk),
    /// `set_runtime_headers`.
    RuntimeHeadersSet,
}

impl Output {
    /// The result as JSON: the gateway info, health, binary status, spec list, tool list or
    /// ToolChunk; `{"ok":true}` for results without content.
    pub fn to_json(&self) -> String {
        let v = match self {
            Output::Started(i) => serde_json::to_string(i),
            Output::Binary(b) => serde_json::to_string(b),
            Output::Health(h) => serde_json::to_string(h),
            Output::Mcps(m) => serde_json::to_string(m),
            Output::Tools(t) => serde_json::to_string(t),
            Output::Chunk(c) => serde_json::to_string(c),
            Output::Stopped | Output::Added | Output::Removed | Output::RuntimeHeadersSet => {
                Ok(r#"{"ok":true}"#.to_owned())
            }
        };
        // These types hold only strings, numbers and JSON values: serializing cannot fail.
        v.unwrap_or_else(|e| format!(r#"{{"error":{:?}}}"#, e.to_string()))
    }
}

/// A command to run in the sandbox with `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The `sh -c` text.
    pub text: String,
    /// How long the backend should let it run before giving up.
    pub timeout: Duration,
}

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Its exit status (128 + N when a signal N ended it).
    pub exit_code: i32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// What running a command gave: its output, or why the backend could not run it.
pub type ExecResult = Result<ExecOutput, String>;

/// One operation on the gateway, as a sans-IO state machine.
///
/// `Send`; it shares the client's learned state (detected transport, launched gateway), which a
/// finished operation updates.
#[derive(Debug)]
pub struct Operation {
    shared: Arc<Shared>,
    name: &'static str,
    state: State,
    command: Option<Command>,
    outcome: Option<Result<Output, Error>>,
}

#[derive(Debug)]
enum State {
    Request(Box<RequestFlow>, Decode),
    Start(Box<StartState>),
    Stop,
    Ensure(Box<EnsureState>),
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decode {
    Health,
    Mcps,
    Added,
    Removed,
    Tools,
    Chunk,
    HeadersSet,
}

/// One gateway request: transport detection, body staging, the request itself.
#[derive(Debug)]
struct RequestFlow {
    what: String,
    method: Method,
    path_and_query: String,
    authenticated: bool,
    body: Option<String>,
    max_time: Duration,
    host: String,
    port: u16,
    token_file: String,
    gateway_path: String,
    staging_dir: String,
    max_command: usize,
    transport: Option<Transport>,
    phase: FlowPhase,
}

#[derive(Debug)]
enum FlowPhase {
    Probe,
    Stage { path: String, offset: usize },
    Sent,
}

enum Flow {
    Exec(Command),
    Response(HttpResponse),
}

#[derive(Debug)]
struct StartState {
    nonce: String,
    state_dir: String,
    token_file: String,
}

#[derive(Debug)]
struct EnsureState {
    binary: Arc<[u8]>,
    sha256: String,
    path: String,
    part: String,
    offset: usize,
    phase: EnsurePhase,
    timeout: Duration,
    max_command: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EnsurePhase {
    Check,
    Upload,
    Install,
}

fn check_path(what: &str, path: &str) -> Result<(), Error> {
    if path.is_empty() {
        return Err(Error::invalid_argument(format!("{what} must not be empty")));
    }
    quote(path).map(|_| ())
}

fn check_mcp_name(name: &str) -> Result<(), Error> {
    if wire::is_valid_name(name) {
        Ok(())
    } else {
        Err(Error::invalid_argument(format!(
            "MCP name {name:?} must match {}",
            wire::spec::NAME_PATTERN
        )))
    }
}

impl Client {
    /// A client with `config`; checks the configuration, runs nothing.
    pub fn new(config: Config) -> Result<Client, Error> {
        check_path("the gateway path", &config.gateway_path)?;
        check_path("the gateway host", &config.host)?;
        for (what, v) in [
            ("the token file", &config.token_file),
            ("the state directory", &config.state_dir),
            ("the staging directory", &config.staging_dir),
            ("the instance nonce", &config.instance_nonce),
        ] {
            if let Some(v) = v {
                check_path(what, v)?;
            }
        }
        if config.max_command_bytes < MIN_MAX_COMMAND_BYTES {
            return Err(Error::invalid_argument(format!(
                "the command size limit must be at least {MIN_MAX_COMMAND_BYTES} bytes"
            )));
        }
        if config.timeout.is_zero() {
            return Err(Error::invalid_argument(
                "the default timeout must not be zero",
            ));
        }
        let session = Session {
            port: (config.port != 0).then_some(config.port),
            token_file: config.token_file.clone(),
            instance_nonce: config.instance_nonce.clone(),
            transport: config.transport,
            ..Session::default()
        };
        Ok(Client {
            shared: Arc::new(Shared {
                config,
                session: Mutex::new(session),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The gateway's port, once known.
    pub fn port(&self) -> Option<u16> {
        self.shared.session().port
    }

    /// The transport in use, once known.
    pub fn transport(&self) -> Option<Transport> {
        self.shared.session().transport
    }

    /// The gateway this client launched and has not stopped.
    pub fn gateway(&self) -> Option<GatewayInfo> {
        let s = self.shared.session();
        Some(GatewayInfo {
            port: s.port?,
            pid: s.pid?,
            token_file: s.token_file.clone()?,
            instance_nonce: s.instance_nonce.clone()?,
            state_dir: s.state_dir.clone()?,
        })
    }

    /// An operation that failed before its first command (e.g. an argument that is not UTF-8).
    pub fn failed_operation(&self, name: &'static str, error: Error) -> Operation {
        self.op(name, Err(error))
    }

    fn op(&self, name: &'static str, state: Result<(State, Command), Error>) -> Operation {
        let mut op = Operation {
            shared: self.shared.clone(),
            name,
            state: State::Finished,
            command: None,
            outcome: None,
        };
        match state {
            Ok((state, command)) => {
                op.state = state;
                op.command = Some(command);
            }
            Err(e) => op.outcome = Some(Err(e.context(name))),
        }
        op
    }

    fn timeout(&self, opts: &CallOptions) -> Duration {
        opts.timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(self.shared.config.timeout)
    }

    fn scope_query(opts: &CallOptions) -> String {
        format!(
            "agent_id={}&session_id={}",
            percent_encode(&opts.agent_id),
            percent_encode(&opts.session_id)
        )
    }

    /// A request flow to the known gateway, or why there is none.
    fn flow(
        &self,
        method: Method,
        path: &str,
        query: Option<String>,
        body: Option<String>,
        max_time: Duration,
    ) -> Result<RequestFlow, Error> {
        let s = self.shared.session().clone();
        let c = &self.shared.config;
        let authenticated = path != "/health";
        let Some(port) = s.port else {
            return Err(Error::new(
                ErrorKind::GatewayNotRunning,
                "no gateway is known to this client: call start_gateway, or configure the port \
                 and token file of a running one",
            ));
        };
        let token_file = match (&s.token_file, authenticated) {
            (Some(t), _) => t.clone(),
            (None, false) => String::new(),
            (None, true) => {
                return Err(Error::invalid_argument(
                    "the gateway's token file is unknown: configure it along with the port",
                ));
            }
        };
        let staging_dir = c
            .staging_dir
            .clone()
            .or(s.state_dir.clone())
            .unwrap_or_else(|| "/tmp".into());
        Ok(RequestFlow {
            what: format!("{} {path}", method.as_str()),
            method,
            path_and_query: match query {
                Some(q) => format!("{path}?{q}"),
                None => path.to_owned(),
            },
            authenticated,
            body,
            max_time,
            host: c.host.clone(),
            port,
            token_file,
            gateway_path: c.gateway_path.clone(),
            staging_dir,
            max_command: c.max_command_bytes,
            transport: s.transport,
            phase: FlowPhase::Probe,
        })
    }

    fn request_op(
        &self,
        name: &'static str,
        decode: Decode,
        build: impl FnOnce() -> Result<RequestFlow, Error>,
    ) -> Operation {
        let state = build().and_then(|mut flow| {
            let cmd = flow.begin()?;
            Ok((State::Request(Box::new(flow), decode), cmd))
        });
        self.op(name, state)
    }

    /// Prepares `GET /health`; checks the instance nonce when the client knows it.
    pub fn prepare_health(&self, opts: &CallOptions) -> Operation {
        let t = self.timeout(opts);
        self.request_op("health", Decode::Health, || {
            self.flow(Method::Get, "/health", None, None, t)
        })
    }

    /// Prepares `GET /mcps`: the specs registered in the scope.
    pub fn prepare_list_mcps(&self, opts: &CallOptions) -> Operation {
        let t = self.timeout(opts);
        self.request_op("list_mcps", Decode::Mcps, || {
            self.flow(Method::Get, "/mcps", Some(Self::scope_query(opts)), None, t)
        })
    }

    /// Prepares `POST /mcps` with `spec_json` (an MCP spec, checked here first).
    pub fn prepare_add_mcp(&self, opts: &CallOptions, spec_json: &str) -> Operation {
        let t = self.timeout(opts);
        self.request_op("add_mcp", Decode::Added, || {
            let spec: McpSpec = serde_json::from_str(spec_json)
                .map_err(|e| Error::invalid_argument(format!("the MCP spec is invalid: {e}")))?;
            spec.validate()
                .map_err(|e| Error::invalid_argument(format!("the MCP spec is invalid: {e}")))?;
            let body = serde_json::to_string(&spec).map_err(|e| {
                Error::invalid_argument(format!("the MCP spec cannot be encoded: {e}"))
            })?;
            self.flow(
                Method::Post,
                "/mcps",
                Some(Self::scope_query(opts)),
                Some(body),
                t,
            )
        })
    }

    /// Prepares `DELETE /mcps/{name}`.
    pub fn prepare_remove_mcp(&self, opts: &CallOptions, name: &str) -> Operation {
        let t = self.timeout(opts);
        self.request_op("remove_mcp", Decode::Removed, || {
            check_mcp_name(name)?;
            self.flow(
                Method::Delete,
                &format!("/mcps/{name}"),
                Some(Self::scope_query(opts)),
                None,
                t,
            )
        })
    }

    /// Prepares `GET /mcps/{name}/tools`.
    pub fn prepare_list_tools(&self, opts: &CallOptions, mcp: &str) -> Operation {
        let t = self.timeout(opts);
        self.request_op("list_tools", Decode::Tools, || {
            check_mcp_name(mcp)?;
            self.flow(
                Method::Get,
                &format!("/mcps/{mcp}/tools"),
                Some(Self::scope_query(opts)),
                None,
                t,
            )
        })
    }

    /// Prepares `POST /mcps/{mcp}/tools/{tool}` with `arguments_json` (a JSON object; empty text
    /// or `null` means no arguments). The timeout is also the gateway's deadline for the call.
    pub fn prepare_call_tool(
        &self,
        opts: &CallOptions,
        mcp: &str,
        tool: &str,
        arguments_json: &str,
    ) -> Operation {
        let t = self.timeout(opts);
        self.request_op("call_tool", Decode::Chunk, || {
            check_mcp_name(mcp)?;
            if tool.is_empty() {
                return Err(Error::invalid_argument("the tool name must not be empty"));
            }
            let args = arguments_json.trim();
            let body = if args.is_empty() || args == "null" {
                r#"{"arguments":{}}"#.to_owned()
            } else {
                // Checked as an object, then sent as given: no re-encoding of large arguments.
                match serde_json::from_str::<Value>(args) {
                    Ok(Value::Object(_)) => format!(r#"{{"arguments":{args}}}"#),
                    Ok(_) => {
                        return Err(Error::invalid_argument(
                            "the tool arguments must be a JSON object",
                        ));
                    }
                    Err(e) => {
                        return Err(Error::invalid_argument(format!(
                            "the tool arguments are not valid JSON: {e}"
                        )));
                    }
                }
            };
            let query = format!("{}&timeout={}", Self::scope_query(opts), seconds(t));
            self.flow(
                Method::Post,
                &format!("/mcps/{mcp}/tools/{}", percent_encode(tool)),
                Some(query),
                Some(body),
                t + CALL_GRACE,
            )
        })
    }

    /// Prepares `PUT /mcps/{mcp}/runtime-headers` with `headers_json`, a JSON object of header
    /// names to values (it replaces the previous set; `{}` clears it).
    pub fn prepare_set_runtime_headers(
        &self,
        opts: &CallOptions,
        mcp: &str,
        headers_json: &str,
    ) -> Operation {
        let t = self.timeout(opts);
        self.request_op("set_runtime_headers", Decode::HeadersSet, || {
            check_mcp_name(mcp)?;
            let headers: std::collections::BTreeMap<String, String> =
                serde_json::from_str(headers_json).map_err(|e| {
                    Error::invalid_argument(format!(
                        "the runtime headers must be a JSON object of strings: {e}"
                    ))
                })?;
            wire::validate_headers(&headers).map_err(Error::invalid_argument)?;
            let body = serde_json::to_string(&wire::RuntimeHeaders { headers })
                .map_err(|e| Error::invalid_argument(e.to_string()))?;
            self.flow(
                Method::Put,
                &format!("/mcps/{mcp}/runtime-headers"),
                Some(Self::scope_query(opts)),
                Some(body),
                t,
            )
        })
    }

    /// Prepares the launch of a gateway: mints the instance nonce, starts
    /// `mcpgw-gateway --daemon` with one command (the gateway mints the token into its 0600
    /// token file inside the sandbox) and confirms the nonce through `/health`.
    pub fn prepare_start_gateway(&self, opts: &CallOptions) -> Operation {
        let timeout = self.timeout(opts);
        let state = (|| {
            let s = self.shared.session().clone();
            let c = &self.shared.config;
            if let Some(pid) = s.pid {
                return Err(Error::invalid_argument(format!(
                    "this client already launched a gateway (pid {pid}, port {}); \
                     stop it with stop_gateway first",
                    s.port.unwrap_or(0)
                )));
            }
            let nonce = random::mint_nonce();
            let state_dir = c
                .state_dir
                .clone()
                .unwrap_or_else(|| format!("/tmp/mcpgw-{}", &nonce[..16]));
            let token_file = c
                .token_file
                .clone()
                .unwrap_or_else(|| format!("{state_dir}/token"));
            let mut text = String::new();
            text.push_str(&format!(
                "umask 077; mkdir -p {dir} && exec {gw} --daemon --host {host} --port {port} \
                 --token-file {token} --instance-nonce {nonce} --log-file {log}",
                dir = quote(&state_dir)?,
                gw = quote(&c.gateway_path)?,
                host = quote(&c.host)?,
                port = c.port,
                token = quote(&token_file)?,
                nonce = quote(&nonce)?,
                log = quote(&format!("{state_dir}/gateway.log"))?,
            ));
            let cmd = Command {
                text,
                timeout: timeout + EXEC_GRACE,
            };
            let st = StartState {
                nonce,
                state_dir,
                token_file,
            };
            Ok((State::Start(Box::new(st)), cmd))
        })();
        self.op("start_gateway", state)
    }

    /// Prepares stopping the gateway this client launched: SIGTERM (only to the process whose
    /// command line carries this launch's nonce), a wait for it to exit, SIGKILL when it has not
    /// within the timeout, then the state directory is removed. Succeeds when it already exited.
    pub fn prepare_stop_gateway(&self, opts: &CallOptions) -> Operation {
        let timeout = self.timeout(opts);
        let state = (|| {
            let s = self.shared.session().clone();
            let (Some(pid), Some(nonce)) = (s.pid, s.instance_nonce.clone()) else {
                return Err(Error::new(
                    ErrorKind::GatewayNotRunning,
                    "this client has not launched a gateway (or already stopped it)",
                ));
            };
            let tenths = timeout.as_millis().div_ceil(100).max(1);
            // A zombie counts as gone: pid 1 of many containers never reaps orphans.
            let mut text = format!(
                "p={pid}; gone() {{ [ ! -e /proc/$p ] || grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null; }}; \
                 if ! gone && tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null | grep -qxF -- {nonce}; then \
                 kill -TERM $p 2>/dev/null; i=0; \
                 while ! gone; do i=$((i+1)); if [ $i -gt {tenths} ]; then kill -KILL $p 2>/dev/null; \
                 echo 'mcpgw: the gateway (pid {pid}) did not exit within {secs} s of SIGTERM and was killed' >&2; r=3; break; fi; \
                 sleep 0.1; done; fi",
                nonce = quote(&nonce)?,
                secs = seconds(timeout),
            );
            if let Some(dir) = &s.state_dir {
                text.push_str(&format!("; rm -rf {}", quote(dir)?));
            }
            text.push_str("; exit ${r:-0}");
            Ok((
                State::Stop,
                Command {
                    text,
                    timeout: timeout + EXEC_GRACE,
                },
            ))
        })();
        self.op("stop_gateway", state)
    }

    /// Prepares making sure the sandbox holds `binary` (the gateway's bytes, read on the host) at
    /// the configured absolute gateway path: compares SHA-256, and when it differs or the file is
    /// missing uploads it in base64 pieces to a temporary file, verifies its SHA-256 there, marks
    /// it executable and renames it into place. Needs `sha256sum` and `base64` in the sandbox.
    pub fn prepare_ensure_gateway_binary(
        &self,
        opts: &CallOptions,
        binary: Arc<[u8]>,
    ) -> Operation {
        let timeout = self.timeout(opts);
        let state = (|| {
            let c = &self.shared.config;
            let path = c.gateway_path.clone();
            if !path.starts_with('/') {
                return Err(Error::invalid_argument(format!(
                    "the gateway path {path:?} must be absolute to install the binary there"
                )));
            }
            if binary.is_empty() {
                return Err(Error::invalid_argument("the gateway binary is empty"));
            }
            let sha256 = hex(&Sha256::digest(&binary));
            let part = format!("{path}.part-{}", &random::uuid4_hex()[..12]);
            let p = quote(&path)?;
            let text = format!(
                "if [ -f {p} ]; then sha256sum < {p} || exit 3; else echo mcpgw-missing; fi"
            );
            Ok((
                State::Ensure(Box::new(EnsureState {
                    binary,
                    sha256,
                    path,
                    part,
                    offset: 0,
                    phase: EnsurePhase::Check,
                    timeout,
                    max_command: c.max_command_bytes,
                })),
                Command {
                    text,
                    timeout: timeout + EXEC_GRACE,
                },
            ))
        })();
        self.op("ensure_gateway_binary", state)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl RequestFlow {
    fn exec_timeout(&self) -> Duration {
        self.max_time + EXEC_GRACE
    }

    fn target(&self) -> Target<'_> {
        Target {
            host: &self.host,
            port: self.port,
            token_file: &self.token_file,
            gateway_path: &self.gateway_path,
        }
    }

    /// The first command: a probe for curl when the transport is still unknown, else the request
    /// (or the first piece of its staged body).
    fn begin(&mut self) -> Result<Command, Error> {
        if self.transport.is_none() {
            self.phase = FlowPhase::Probe;
            return Ok(Command {
                text: command::probe_command().to_owned(),
                timeout: self.exec_timeout(),
            });
        }
        self.send_or_stage()
    }

    fn request_text(&self, body: Body<'_>) -> Result<String, Error> {
        let transport = self.transport.unwrap_or(Transport::Curl);
        command::request_command(
            transport,
            &self.target(),
            &Request {
                method: self.method,
                path_and_query: &self.path_and_query,
                authenticated: self.authenticated,
                body,
                max_time: self.max_time,
            },
        )
    }

    fn send_or_stage(&mut self) -> Result<Command, Error> {
        let body = self.body.as_deref().map_or(Body::None, Body::Inline);
        let text = self.request_text(body)?;
        if text.len() <= self.max_command {
            self.phase = FlowPhase::Sent;
            return Ok(Command {
                text,
                timeout: self.exec_timeout(),
            });
        }
        let path = format!(
            "{}/mcpgw-body-{}",
            self.staging_dir.trim_end_matches('/'),
            random::uuid4_hex()
        );
        self.stage_piece(path, 0)
    }

    fn stage_piece(&mut self, path: String, offset: usize) -> Result<Command, Error> {
        let body = self.body.as_deref().unwrap_or("");
        let budget = self
            .max_command
            .saturating_sub(staging::stage_text_overhead(&path));
        let end = staging::next_text_piece(body, offset, budget);
        let text = staging::stage_text_command(&path, &body[offset..end], offset == 0)?;
        self.phase = FlowPhase::Stage { path, offset: end };
        Ok(Command {
            text,
            timeout: self.exec_timeout(),
        })
    }

    fn feed(&mut self, shared: &Shared, out: ExecOutput) -> Result<Flow, Error> {
        match std::mem::replace(&mut self.phase, FlowPhase::Sent) {
            FlowPhase::Probe => {
                let transport = command::parse_probe(&out.stdout).ok_or_else(|| {
                    Error::new(
                        ErrorKind::CommandFailed,
                        format!(
                            "detecting curl in the sandbox failed (exit {}): {}",
                            out.exit_code,
                            tail(&String::from_utf8_lossy(&out.stderr), 500)
                        ),
                    )
                })?;
                self.transport = Some(transport);
                shared.session().transport.get_or_insert(transport);
                self.send_or_stage().map(Flow::Exec)
            }
            FlowPhase::Stage { path, offset } => {
                if out.exit_code != 0 {
                    return Err(Error::new(
                        ErrorKind::CommandFailed,
                        format!(
                            "staging the request body in {} failed (exit {}): {}; \
                             is the staging directory writable?",
                            path,
                            out.exit_code,
                            tail(&String::from_utf8_lossy(&out.stderr), 500)
                        ),
                    ));
                }
                let len = self.body.as_deref().map_or(0, str::len);
                if offset < len {
                    return self.stage_piece(path, offset).map(Flow::Exec);
                }
                let text = self.request_text(Body::Staged(&path))?;
                Ok(Flow::Exec(Command {
                    text,
                    timeout: self.exec_timeout(),
                }))
            }
            FlowPhase::Sent => {
                let max_time = seconds(self.max_time);
                let info = RequestInfo {
                    what: &self.what,
                    transport: self.transport.unwrap_or(Transport::Curl),
                    port: self.port,
                    token_file: &self.token_file,
                    gateway_path: &self.gateway_path,
                    max_time: &max_time,
                };
                let resp = response::decode_output(&info, out.exit_code, out.stdout, &out.stderr)?;
                response::check_status(&info, resp).map(Flow::Response)
            }
        }
    }
}

impl Operation {
    /// The name of the operation (`call_tool`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The command to run next, or `None` once the operation has finished.
    pub fn command(&self) -> Option<&Command> {
        self.command.as_ref()
    }

    /// Whether the operation has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// The result, once finished.
    pub fn outcome(&self) -> Option<&Result<Output, Error>> {
        self.outcome.as_ref()
    }

    /// Hands back what running [`Operation::command`] gave. Fails with
    /// [`ErrorKind::InvalidState`] when no command was pending.
    pub fn complete(&mut self, result: ExecResult) -> Result<(), Error> {
        if self.command.take().is_none() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                format!(
                    "{}: complete was called, but no command is pending (the operation has finished)",
                    self.name
                ),
            ));
        }
        let step = match result {
            Ok(out) => self.advance(out),
            Err(reason) => Err(Error::new(
                ErrorKind::ExecFailed,
                format!(
                    "the exec callback could not run a command in the sandbox ({}); \
                     is the sandbox alive and the backend reachable?",
                    reason.trim()
                ),
            )),
        };
        match step {
            Ok(Step::Exec(c)) => self.command = Some(c),
            Ok(Step::Done(o)) => {
                self.state = State::Finished;
                self.outcome = Some(Ok(o));
            }
            Err(e) => {
                self.state = State::Finished;
                self.outcome = Some(Err(e.context(self.name)));
            }
        }
        Ok(())
    }

    /// The result. Fails with [`ErrorKind::InvalidState`] when the operation has not finished.
    pub fn finish(self) -> Result<Output, Error> {
        match self.outcome {
            Some(o) => o,
            None => Err(Error::new(
                ErrorKind::InvalidState,
                format!("{}: the operation has not finished", self.name),
            )),
        }
    }

    fn advance(&mut self, out: ExecOutput) -> Result<Step, Error> {
        let shared = self.shared.clone();
        match &mut self.state {
            State::Request(flow, decode) => match flow.feed(&shared, out)? {
                Flow::Exec(c) => Ok(Step::Exec(c)),
                Flow::Response(resp) => decode_response(&shared, *decode, &flow.what, resp),
            },
            State::Start(st) => advance_start(&shared, st, out),
            State::Stop => {
                let mut s = shared.session();
                let killed = out.exit_code == 3;
                if out.exit_code == 0 || killed {
                    s.pid = None;
                    s.port = (shared.config.port != 0).then_some(shared.config.port);
                    s.instance_nonce = shared.config.instance_nonce.clone();
                    s.token_file = shared.config.token_file.clone();
                    s.state_dir = None;
                }
                if out.exit_code == 0 {
                    return Ok(Step::Done(Output::Stopped));
                }
                Err(Error::new(
                    ErrorKind::CommandFailed,
                    format!(
                        "stopping the gateway failed (exit {}): {}{}",
                        out.exit_code,
                        tail(&String::from_utf8_lossy(&out.stderr), 500),
                        if killed {
                            "; its upstream MCP processes may be left running"
                        } else {
                            ""
                        }
                    ),
                ))
            }
            State::Ensure(st) => advance_ensure(st, out),
            State::Finished => Err(Error::new(ErrorKind::InvalidState, "finished")),
        }
    }
}

enum Step {
    Exec(Command),
    Done(Output),
}

fn decode_response(
    shared: &Shared,
    decode: Decode,
    what: &str,
    resp: HttpResponse,
) -> Result<Step, Error> {
    let out = match decode {
        Decode::Health => {
            let health = parse_health(what, &resp.body)?;
            let expected = shared.session().instance_nonce.clone();
            check_nonce(expected.as_deref(), &health)?;
            Output::Health(health)
        }
        Decode::Mcps => Output::Mcps(response::json_body(what, &resp.body)?),
        Decode::Tools => Output::Tools(response::json_body(what, &resp.body)?),
        Decode::Chunk => {
            let answer: CallToolAnswer = response::json_body(what, &resp.body)?;
            Output::Chunk(answer.chunk)
        }
        Decode::Added => Output::Added,
        Decode::Removed => Output::Removed,
        Decode::HeadersSet => Output::RuntimeHeadersSet,
    };
    Ok(Step::Done(out))
}

fn parse_health(what: &str, body: &[u8]) -> Result<HealthInfo, Error> {
    if body.trim_ascii() == b"ok" || body.trim_ascii() == b"\"ok\"" {
        return Ok(HealthInfo {
            status: "ok".into(),
            instance_nonce: None,
        });
    }
    let h: serde_json::Map<String, Value> = response::json_body(what, body)?;
    Ok(HealthInfo {
        status: h
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        instance_nonce: h
            .get("instance_nonce")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn check_nonce(expected: Option<&str>, health: &HealthInfo) -> Result<(), Error> {
    match expected {
        Some(n) if health.instance_nonce.as_deref() != Some(n) => Err(Error::new(
            ErrorKind::GatewayNotRunning,
            format!(
                "a different gateway answers on the port (instance nonce {:?}, expected {n:?}); \
                 the one this client knows has exited",
                health.instance_nonce.as_deref().unwrap_or("none")
            ),
        )),
        _ => Ok(()),
    }
}

fn advance_start(shared: &Shared, st: &mut StartState, out: ExecOutput) -> Result<Step, Error> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let c = &shared.config;
    if out.exit_code != 0 {
        let hint = match out.exit_code {
            126 | 127 => format!(
                "; the gateway binary {} cannot be run in the sandbox: install it there \
                 (ensure_gateway_binary) or set the gateway path",
                c.gateway_path
            ),
            _ => String::new(),
        };
        return Err(Error::new(
            ErrorKind::StartFailed,
            format!(
                "the gateway did not start (exit {}){hint}: {}",
                out.exit_code,
                tail(&stderr, 4000)
            ),
        ));
    }
    // `--daemon` prints this line only after the detached gateway answered its own /health
    // with the nonce, so the launch is confirmed in this one command.
    let ready: DaemonReady = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| {
            Error::new(
                ErrorKind::StartFailed,
                format!(
                    "the gateway's launch printed no readiness line {{\"port\",\"pid\",...}}: \
                     stdout {:?}, stderr {:?}",
                    tail(&stdout, 500),
                    tail(&stderr, 1000)
                ),
            )
        })?;
    if ready.instance_nonce.as_deref() != Some(st.nonce.as_str()) {
        return Err(Error::new(
            ErrorKind::StartFailed,
            format!(
                "the launched gateway reports nonce {:?}, not the one it was given",
                ready.instance_nonce
            ),
        ));
    }
    let token_file = ready
        .token_file
        .clone()
        .unwrap_or_else(|| st.token_file.clone());
    {
        let mut s = shared.session();
        s.port = Some(ready.port);
        s.pid = Some(ready.pid);
        s.token_file = Some(token_file.clone());
        s.state_dir = Some(st.state_dir.clone());
        s.instance_nonce = Some(st.nonce.clone());
        // The binary just ran here, so its built-in client is there too, and it starts faster
        // than curl: in auto mode it is the transport from now on.
        s.transport.get_or_insert(Transport::BuiltIn);
    }
    Ok(Step::Done(Output::Started(GatewayInfo {
        port: ready.port,
        pid: ready.pid,
        token_file,
        instance_nonce: st.nonce.clone(),
        state_dir: st.state_dir.clone(),
    })))
}

fn advance_ensure(st: &mut EnsureState, out: ExecOutput) -> Result<Step, Error> {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let fail = |what: &str| {
        Error::new(
            ErrorKind::CommandFailed,
            format!(
                "{what} (exit {}): {}; the sandbox needs sha256sum and base64 \
                 (coreutils or busybox) and a writable directory for {}",
                out.exit_code,
                tail(&stderr, 500),
                st.path
            ),
        )
    };
    match st.phase {
        EnsurePhase::Check => {
            if out.exit_code != 0 {
                return Err(fail("checking the gateway binary in the sandbox failed"));
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let found = stdout.split_whitespace().next().unwrap_or("");
            if found == st.sha256 {
                return Ok(Step::Done(Output::Binary(BinaryStatus {
                    uploaded: false,
                    sha256: st.sha256.clone(),
                    path: st.path.clone(),
                })));
            }
            st.phase = EnsurePhase::Upload;
            upload_piece(st).map(Step::Exec)
        }
        EnsurePhase::Upload => {
            if out.exit_code != 0 {
                return Err(fail("uploading the gateway binary failed"));
            }
            if st.offset < st.binary.len() {
                return upload_piece(st).map(Step::Exec);
            }
            st.phase = EnsurePhase::Install;
            let part = quote(&st.part)?;
            let path = quote(&st.path)?;
            let text = format!(
                "h=$(sha256sum < {part}) || exit 3; h=${{h%% *}}; \
                 if [ \"$h\" = {sha} ]; then chmod 755 {part} && mv -f {part} {path}; \
                 else rm -f {part}; \
                 printf 'mcpgw: the uploaded gateway binary has SHA-256 %s, expected %s\\n' \"$h\" {sha} >&2; \
                 exit 3; fi",
                sha = st.sha256,
            );
            Ok(Step::Exec(Command {
                text,
                timeout: st.timeout + EXEC_GRACE,
            }))
        }
        EnsurePhase::Install => {
            if out.exit_code != 0 {
                return Err(fail("installing the uploaded gateway binary failed"));
            }
            Ok(Step::Done(Output::Binary(BinaryStatus {
                uploaded: true,
                sha256: st.sha256.clone(),
                path: st.path.clone(),
            })))
        }
    }
}

fn upload_piece(st: &mut EnsureState) -> Result<Command, Error> {
    let first = st.offset == 0;
    let mut text = String::new();
    if first {
        let dir = st.path.rsplit_once('/').map_or("/", |(d, _)| d);
        if !dir.is_empty() {
            text = format!("mkdir -p {} && ", quote(dir)?);
        }
    }
    let n = staging::binary_piece_len(
        st.max_command,
        text.len() + staging::stage_binary_overhead(&st.part),
    );
    let end = (st.offset + n).min(st.binary.len());
    text.push_str(&staging::stage_binary_command(
        &st.part,
        &st.binary[st.offset..end],
        first,
    )?);
    st.offset = end;
    Ok(Command {
        text,
        timeout: st.timeout + EXEC_GRACE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attached(transport: Option<Transport>) -> Client {
        Client::new(Config {
            port: 5600,
            token_file: Some("/run/gw/token".into()),
            transport,
            ..Config::default()
        })
        .unwrap()
    }

    fn ok(stdout: &str) -> ExecResult {
        Ok(ExecOutput {
            exit_code: 0,
            stdout: stdout.as_bytes().to_vec(),
            stderr: vec![],
        })
    }

    #[test]
    fn probe_then_request_and_the_transport_is_remembered() {
        let client = attached(None);
        let opts = CallOptions::default();
        let mut op = client.prepare_list_mcps(&opts);
        assert_eq!(op.command().unwrap().text, command::probe_command());
        op.complete(ok("none\n")).unwrap();
        let cmd = op.command().unwrap().text.clone();
        assert!(cmd.starts_with("'mcpgw-gateway' request GET '/mcps?agent_id=&session_id='"));
        op.complete(ok("[]\nmcpgw-http-status:200\n")).unwrap();
        assert!(op.command().is_none());
        assert_eq!(op.finish().unwrap(), Output::Mcps(vec![]));
        assert_eq!(client.transport(), Some(Transport::BuiltIn));
        // The next operation skips the probe.
        let op = client.prepare_list_mcps(&opts);
        assert!(op.command().unwrap().text.contains(" request GET "));
    }

    #[test]
    fn invalid_arguments_fail_before_any_command() {
        let client = attached(Some(Transport::Curl));
        let opts = CallOptions::default();
        for op in [
            client.prepare_list_tools(&opts, "bad name"),
            client.prepare_call_tool(&opts, "m", "t", "[1]"),
            client.prepare_call_tool(&opts, "m", "t", "{"),
            client.prepare_call_tool(&opts, "m", "", "{}"),
            client.prepare_add_mcp(
                &opts,
                r#"{"name":"x y","mcp_config":{"type":"stdio_mcp","command":"c"}}"#,
            ),
            client.prepare_set_runtime_headers(&opts, "m", r#"{"Host":"x"}"#),
            client.prepare_ensure_gateway_binary(&opts, Arc::from(&b"x"[..])),
        ] {
            assert!(op.is_finished());
            assert!(op.command().is_none());
            let e = op.finish().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        }
        let unknown = Client::new(Config::default()).unwrap();
        let e = unknown.prepare_list_mcps(&opts).finish().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::GatewayNotRunning);
    }

    #[test]
    fn scope_timeout_and_names_are_encoded() {
        let client = attached(Some(Transport::Curl));
        let opts = CallOptions {
            agent_id: "a b".into(),
            session_id: "s&x=1".into(),
            timeout: Some(Duration::from_millis(1500)),
        };
        let op = client.prepare_call_tool(&opts, "fs", "read file", r#"{"p":"it's"}"#);
        let cmd = op.command().unwrap();
        assert!(
            cmd.text.contains(
                "'http://127.0.0.1:5600/mcps/fs/tools/read%20file?agent_id=a%20b&session_id=s%26x%3D1&timeout=1.5'"
            ),
            "{}",
            cmd.text
        );
        assert!(cmd.text.contains("--max-time 6.5"), "{}", cmd.text);
        assert!(
            cmd.text
                .contains(r#"--data-raw '{"arguments":{"p":"it'\''s"}}'"#)
        );
        assert_eq!(cmd.timeout, Duration::from_millis(11500));
    }

    #[test]
    fn large_bodies_are_staged_in_pieces_then_sent_from_the_file() {
        let client = Client::new(Config {
            port: 1,
            token_file: Some("/t".into()),
            transport: Some(Transport::Curl),
            max_command_bytes: MIN_MAX_COMMAND_BYTES,
            ..Config::default()
        })
        .unwrap();
        let text = "x'y".repeat(5000);
        let args = serde_json::json!({ "text": text }).to_string();
        let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "echo", &args);
        let mut staged = String::new();
        let mut rounds = 0;
        let path = loop {
            let cmd = op.command().unwrap().text.clone();
            assert!(cmd.len() <= MIN_MAX_COMMAND_BYTES, "{}", cmd.len());
            if cmd.contains("curl") {
                assert!(cmd.contains("--data-binary @'/tmp/mcpgw-body-"));
                assert!(cmd.ends_with("; exit $s"));
                break cmd;
            }
            // Run the piece through a real sh to collect exactly what it writes.
            let piece = std::process::Command::new("sh")
                .arg("-c")
                .arg(
                    cmd.replace("set -C; umask 077; ", "")
                        .replace(" >> '", " #'")
                        .replace(" > '", " #'"),
                )
                .output()
                .unwrap();
            staged.push_str(std::str::from_utf8(&piece.stdout).unwrap());
            rounds += 1;
            op.complete(ok("")).unwrap();
        };
        assert!(rounds > 3);
        assert_eq!(staged, format!(r#"{{"arguments":{args}}}"#));
        assert!(path.contains("rm -f '/tmp/mcpgw-body-"));
    }

    #[test]
    fn exec_failure_and_out_of_order_completion() {
        let client = attached(Some(Transport::Curl));
        let mut op = client.prepare_health(&CallOptions::default());
        op.complete(Err("docker: no such container".into()))
            .unwrap();
        let e = op.outcome().unwrap().clone().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ExecFailed);
        assert!(e.message().contains("no such container"));
        assert_eq!(
            op.complete(ok("")).unwrap_err().kind(),
            ErrorKind::InvalidState
        );
    }

    #[test]
    fn start_then_health_then_stop() {
        let client = Client::new(Config::default()).unwrap();
        let opts = CallOptions::default();
        let mut op = client.prepare_start_gateway(&opts);
        let launch = op.command().unwrap().text.clone();
        assert!(
            launch.starts_with("umask 077; mkdir -p '/tmp/mcpgw-"),
            "{launch}"
        );
        assert!(launch.contains("--daemon --host '127.0.0.1' --port 0 --token-file '/tmp/mcpgw-"));
        let nonce = launch
            .split("--instance-nonce '")
            .nth(1)
            .unwrap()
            .split('\'')
            .next()
            .unwrap()
            .to_owned();
        // A readiness line with another nonce is refused.
        let mut other = client.prepare_start_gateway(&opts);
        other
            .complete(ok(
                "{\"port\":1,\"pid\":2,\"token_file\":\"/t\",\"instance_nonce\":\"x\"}\n",
            ))
            .unwrap();
        assert_eq!(other.finish().unwrap_err().kind(), ErrorKind::StartFailed);
        let ready = format!(
            "{{\"port\":41000,\"pid\":77,\"token_file\":\"/tmp/x/token\",\"instance_nonce\":\"{nonce}\"}}\n"
        );
        // One command launches and confirms.
        op.complete(ok(&ready)).unwrap();
        assert!(op.is_finished());
        // The launched binary's built-in client becomes the transport.
        assert_eq!(client.transport(), Some(Transport::BuiltIn));
        let Output::Started(info) = op.finish().unwrap() else {
            panic!("not started")
        };
        assert_eq!((info.port, info.pid), (41000, 77));
        assert_eq!(info.token_file, "/tmp/x/token");
        assert_eq!(client.gateway().unwrap(), info);
        // A second launch is refused while this one runs.
        let again = client.prepare_start_gateway(&opts).finish().unwrap_err();
        assert_eq!(again.kind(), ErrorKind::InvalidArgument);
        // A health check that meets another gateway says so.
        let mut h = client.prepare_health(&opts);
        h.complete(ok(
            "{\"status\":\"ok\",\"instance_nonce\":\"other\"}\nmcpgw-http-status:200\n",
        ))
        .unwrap();
        assert_eq!(h.finish().unwrap_err().kind(), ErrorKind::GatewayNotRunning);
        let mut stop = client.prepare_stop_gateway(&opts);
        let text = stop.command().unwrap().text.clone();
        assert!(
            text.contains("p=77;") && text.contains(&nonce) && text.contains("rm -rf '/tmp/mcpgw-")
        );
        stop.complete(ok("")).unwrap();
        assert_eq!(stop.finish().unwrap(), Output::Stopped);
        assert!(client.gateway().is_none());
    }

    #[test]
    fn failed_launch_carries_the_reason() {
        let client = Client::new(Config {
            transport: Some(Transport::Curl),
            ..Config::default()
        })
        .unwrap();
        let mut op = client.prepare_start_gateway(&CallOptions::default());
        op.complete(Ok(ExecOutput {
            exit_code: 1,
            stdout: vec![],
            stderr: b"port 80 is in use\nlog tail: bind: permission denied".to_vec(),
        }))
        .unwrap();
        let e = op.finish().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::StartFailed);
        assert!(e.message().contains("bind: permission denied"), "{e}");
    }

    #[test]
    fn ensure_binary_skips_an_identical_file_and_uploads_otherwise() {
        let client = Client::new(Config {
            gateway_path: "/opt/mcpgw/mcpgw-gateway".into(),
            max_command_bytes: MIN_MAX_COMMAND_BYTES,
            ..Config::default()
        })
        .unwrap();
        let bin: Arc<[u8]> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        let sha = hex(&Sha256::digest(&bin));
        let opts = CallOptions::default();
        let mut op = client.prepare_ensure_gateway_binary(&opts, bin.clone());
        op.complete(ok(&format!("{sha}  -\n"))).unwrap();
        assert!(matches!(
            op.finish().unwrap(),
            Output::Binary(BinaryStatus {
                uploaded: false,
                ..
            })
        ));

        let mut op = client.prepare_ensure_gateway_binary(&opts, bin.clone());
        op.complete(ok("mcpgw-missing\n")).unwrap();
        let mut rounds = 0;
        while let Some(cmd) = op.command() {
            assert!(cmd.text.len() <= MIN_MAX_COMMAND_BYTES);
            if rounds == 0 {
                assert!(cmd.text.starts_with("mkdir -p '/opt/mcpgw' && "));
            }
            rounds += 1;
            op.complete(ok("")).unwrap();
        }
        assert!(rounds >= 8, "{rounds}");
        let Output::Binary(st) = op.finish().unwrap() else {
            panic!()
        };
        assert!(st.uploaded);
        assert_eq!(st.sha256, sha);
    }
}
