//! The `mcpgw` command line.

use std::path::PathBuf;

use mcpgw::driver::{Backend, Container, Pod, Prefix};
use serde_json::{Map, Value, json};

/// The usage text.
pub const USAGE: &str = "\
usage: mcpgw mcp [SANDBOX] [OPTIONS] -- COMMAND [ARG...]
       mcpgw mcp [SANDBOX] [OPTIONS] --url URL [--header NAME=VALUE]...
       mcpgw mcp [SANDBOX] [OPTIONS] --config FILE
       mcpgw --version | --help

An MCP server on this machine, over stdio (or streamable HTTP with --http), for an MCP server
that runs inside a sandbox: COMMAND started there over stdio, an HTTP server there (--url), or
every server of an mcpServers file (--config; their tools, prompts and resources prefixed by
server name). Every message of the protocol crosses unchanged, through one session channel
(`mcpgw-gateway attach`) that is opened again when it is lost.

SANDBOX (one of; default --local):
  --local                 this machine
  --docker CONTAINER      `docker exec` into a running container
  --podman CONTAINER      `podman exec` into a running container
  --kubectl POD           `kubectl exec` into a running pod (--namespace NS, --container C,
                          --context CTX)
  --exec-prefix WORDS     any argv prefix that runs its arguments in the sandbox, as words
                          separated by spaces (e.g. \"nsenter -t 4242 -m -n -p\")
  --backend JSON          the library's backend configuration, e.g. an argv prefix whose
                          program drives a provider's SDK ({\"kind\":\"argv\",\"prefix\":[..],
                          \"channel_args\":[..],\"provider\":\"e2b\"}: what
                          `python -m mcpgw_client mcp --e2b ID` gives)

OPTIONS:
  --name NAME             the server's name in the gateway (default: mcp)
  --env NAME=VALUE        an environment variable of COMMAND (repeatable)
  --secret-env NAME[=SECRET]
                          an environment variable of COMMAND whose value is the host's secret
                          SECRET (default: NAME), read from this process's environment; it
                          crosses in a session frame only, and every answer shows it as
                          [secret:SECRET] (repeatable; --config files write {\"secret\": SECRET})
  --secret-header NAME=SECRET
                          likewise, a header of --url's requests (repeatable)
  --cwd DIR               COMMAND's working directory inside the sandbox
  --gateway PATH          the gateway binary inside the sandbox (default: installed from
                          --gateway-binary at /tmp/mcpgw-bin/mcpgw-gateway-VERSION, or
                          `mcpgw-gateway` on the sandbox's PATH when there is none to install)
  --gateway-binary PATH   the static gateway on this machine to install into the sandbox
                          (default: mcpgw-gateway next to this program, or $MCPGW_GATEWAY_BINARY)
  --http ADDR             serve streamable HTTP at /mcp on ADDR instead of stdio: 127.0.0.1:PORT
                          or [::1]:PORT (loopback only; PORT 0 picks one) or unix:PATH (0600);
                          prints {\"url\":..,\"token_file\":..} once ready
  --token-file PATH       where --http writes its bearer token (0600; default:
                          $XDG_RUNTIME_DIR/mcpgw/ or /tmp/mcpgw-UID/)
  --allow-origin ORIGIN   an Origin header --http accepts besides loopback ones
                          (http://localhost:PORT, 127.0.0.1, [::1]); repeatable
  --policy FILE           the host's rules (JSON): which tools, prompts and resources of which
                          servers a client may reach; what they refuse is not listed, and a
                          request for it is answered with JSON-RPC error -32003 naming the rule
                          (e.g. {\"servers\": {\"fs\": {\"tools\": {\"deny\": [\"write_*\"]}}}})
  --audit-log FILE        one JSON record a line for each call (tools/call, prompts/get,
                          resources/read): time, scope, server, method, name, the arguments'
                          SHA-256 and size, outcome (ok, error, denied, cancelled, timeout,
                          lost), duration and result size, the trace id of a request whose
                          _meta.traceparent has one; appended (created 0600)
  --audit-arguments       the records hold the arguments too (secrets shown by name)
  --timeout SECONDS       a request's time limit (default 600)
  --log-level LEVEL       error, warn (default), info or debug, on stderr
";

/// What `mcpgw mcp` was asked to do.
#[derive(Debug, Clone, PartialEq)]
pub struct McpArgs {
    /// The sandbox.
    pub backend: Backend,
    /// The servers: names and specs (in the gateway's spec form).
    pub servers: Vec<(String, Value)>,
    /// Whether several servers are served prefixed by name (`--config`).
    pub prefixed: bool,
    /// `--gateway`.
    pub gateway: Option<String>,
    /// `--gateway-binary`.
    pub gateway_binary: Option<PathBuf>,
    /// `--http`.
    pub http: Option<String>,
    /// `--token-file`.
    pub token_file: Option<PathBuf>,
    /// `--allow-origin`.
    pub origins: Vec<String>,
    /// `--timeout`, in milliseconds.
    pub timeout_ms: u64,
    /// `--log-level`.
    pub log_level: Level,
    /// `--policy`.
    pub policy: mcpgw::policy::Policy,
    /// `--audit-log`.
    pub audit_log: Option<PathBuf>,
    /// `--audit-arguments`.
    pub audit_arguments: bool,
}

/// A log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// And what happens.
    Info,
    /// And everything.
    Debug,
}

/// What the command line asks.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// `mcpgw mcp ...`.
    Mcp(Box<McpArgs>),
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

fn name_ok(name: &str) -> Result<(), String> {
    mcpgw::wire::spec::check_name(name).map_err(|e| format!("--name: {e}"))
}

/// Reads an `mcpServers` file into specs, named by their keys.
pub fn servers_of_config(text: &str) -> Result<Vec<(String, Value)>, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let Some(servers) = doc.get("mcpServers").and_then(Value::as_object) else {
        return Err("it needs an \"mcpServers\" object".into());
    };
    if servers.is_empty() {
        return Err("its \"mcpServers\" object is empty".into());
    }
    let mut out = Vec::new();
    for (name, s) in servers {
        mcpgw::wire::spec::check_name(name).map_err(|e| format!("server {name:?}: {e}"))?;
        let spec = if let Some(command) = s.get("command").and_then(Value::as_str) {
            json!({"name": name, "is_stateful": true, "mcp_config": {
                "type": "stdio_mcp", "command": command,
                "args": s.get("args").cloned().unwrap_or(json!([])),
                "env": s.get("env").cloned().unwrap_or(json!({})),
                "cwd": s.get("cwd").cloned().unwrap_or(Value::Null)}})
        } else if let Some(url) = s.get("url").and_then(Value::as_str) {
            json!({"name": name, "is_stateful": true, "mcp_config": {
                "type": "http_mcp", "url": url,
                "headers": s.get("headers").cloned().unwrap_or(json!({}))}})
        } else {
            return Err(format!(
                "server {name:?} has neither \"command\" nor \"url\""
            ));
        };
        out.push((name.clone(), spec));
    }
    Ok(out)
}

/// Parses `args` (without the program's name).
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut it = args.iter().peekable();
    match it.next().map(String::as_str) {
        None | Some("-h" | "--help" | "help") => return Ok(Command::Help),
        Some("-V" | "--version") => return Ok(Command::Version),
        Some("mcp") => {}
        Some(other) => {
            return Err(format!(
                "unknown command {other:?} (try `mcpgw mcp --help`)"
            ));
        }
    }
    let mut p = Parsing::default();
    while let Some(arg) = it.next() {
        if arg == "--" {
            p.command.extend(it.by_ref().cloned());
            break;
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("{what} needs a value"))
        };
        if matches!(flag, "-h" | "--help") {
            return Ok(Command::Help);
        }
        if p.sandbox_flag(flag, &mut value)?
            || p.server_flag(flag, &mut value)?
            || p.endpoint_flag(flag, &mut value)?
        {
            continue;
        }
        if flag.starts_with('-') {
            return Err(format!("unknown option {flag} (try `mcpgw mcp --help`)"));
        }
        // The command may also follow the options without `--`.
        p.command.push(arg.clone());
        p.command.extend(it.by_ref().cloned());
        break;
    }
    p.finish().map(|args| Command::Mcp(Box::new(args)))
}

/// What the command line has said so far.
struct Parsing {
    backend: Option<Backend>,
    /// `--namespace`, `--container`, `--context` (with `--kubectl`).
    kube: (Option<String>, Option<String>, Option<String>),
    name: String,
    env: Map<String, Value>,
    cwd: Option<String>,
    url: Option<String>,
    headers: Map<String, Value>,
    config: Option<String>,
    command: Vec<String>,
    out: McpArgs,
}

impl Default for Parsing {
    fn default() -> Parsing {
        Parsing {
            backend: None,
            kube: (None, None, None),
            name: "mcp".to_owned(),
            env: Map::new(),
            cwd: None,
            url: None,
            headers: Map::new(),
            config: None,
            command: Vec::new(),
            out: McpArgs {
                backend: Backend::Local { cwd: None },
                servers: Vec::new(),
                prefixed: false,
                gateway: None,
                gateway_binary: None,
                http: None,
                token_file: None,
                origins: Vec::new(),
                timeout_ms: 600_000,
                log_level: Level::Warn,
                policy: Default::default(),
                audit_log: None,
                audit_arguments: false,
            },
        }
    }
}

/// A flag's value, taken from `--flag=VALUE` or the next argument.
type ValueOf<'a> = dyn FnMut(&str) -> Result<String, String> + 'a;

impl Parsing {
    fn set_backend(&mut self, b: Backend) -> Result<(), String> {
        if self.backend.replace(b).is_some() {
            return Err(
                "give one sandbox (--local, --docker, --podman, --kubectl, --exec-prefix or \
                 --backend)"
                    .into(),
            );
        }
        Ok(())
    }

    /// The sandbox's flags; false for another flag.
    fn sandbox_flag(&mut self, flag: &str, value: &mut ValueOf<'_>) -> Result<bool, String> {
        match flag {
            "--local" => self.set_backend(Backend::Local { cwd: None })?,
            "--docker" | "--podman" => {
                let c = Container {
                    container: value(flag)?,
                    exec_options: vec![],
                    options: vec![],
                    program: None,
                };
                self.set_backend(if flag == "--docker" {
                    Backend::Docker(c)
                } else {
                    Backend::Podman(c)
                })?;
            }
            "--kubectl" => self.set_backend(Backend::Kubectl(Pod {
                pod: value(flag)?,
                namespace: None,
                container: None,
                options: vec![],
                program: None,
            }))?,
            "--namespace" => self.kube.0 = Some(value(flag)?),
            "--container" => self.kube.1 = Some(value(flag)?),
            "--context" => self.kube.2 = Some(value(flag)?),
            "--exec-prefix" => self.set_backend(Backend::Argv(Prefix {
                prefix: value(flag)?.split_whitespace().map(String::from).collect(),
                joins_arguments: false,
                channel_args: Vec::new(),
                provider: None,
            }))?,
            "--backend" => {
                let v = value(flag)?;
                let b: Backend = serde_json::from_str(&v)
                    .map_err(|e| format!("--backend {v:?}: not a backend of the library: {e}"))?;
                if b.runs_through_binding() {
                    return Err(format!(
                        "--backend: a {} backend runs through a binding's functions; give an \
                         argv backend whose program drives its SDK (python -m mcpgw_client mcp \
                         --{} ID does)",
                        b.name(),
                        b.name()
                    ));
                }
                self.set_backend(b)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The server's flags; false for another flag.
    fn server_flag(&mut self, flag: &str, value: &mut ValueOf<'_>) -> Result<bool, String> {
        let pair = |v: &str| -> Result<(String, Value), String> {
            let (k, val) = v
                .split_once('=')
                .ok_or_else(|| format!("{flag} {v:?}: give NAME=VALUE"))?;
            Ok((k.to_owned(), Value::String(val.to_owned())))
        };
        match flag {
            "--name" => {
                self.name = value(flag)?;
                name_ok(&self.name)?;
            }
            "--env" => {
                let (k, v) = pair(&value(flag)?)?;
                self.env.insert(k, v);
            }
            "--header" => {
                let (k, v) = pair(&value(flag)?)?;
                self.headers.insert(k, v);
            }
            "--secret-env" | "--secret-header" => {
                let v = value(flag)?;
                let (k, secret) = match v.split_once('=') {
                    Some((k, s)) => (k, s),
                    None if flag == "--secret-env" => (v.as_str(), v.as_str()),
                    None => return Err(format!("{flag} {v:?}: give NAME=SECRET")),
                };
                mcpgw::wire::spec::check_secret_name(secret).map_err(|e| format!("{flag}: {e}"))?;
                let into = if flag == "--secret-env" {
                    &mut self.env
                } else {
                    &mut self.headers
                };
                into.insert(k.to_owned(), json!({"secret": secret}));
            }
            "--cwd" => self.cwd = Some(value(flag)?),
            "--url" => self.url = Some(value(flag)?),
            "--config" => self.config = Some(value(flag)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The endpoint's own flags; false for another flag.
    fn endpoint_flag(&mut self, flag: &str, value: &mut ValueOf<'_>) -> Result<bool, String> {
        let out = &mut self.out;
        match flag {
            "--audit-log" => out.audit_log = Some(value(flag)?.into()),
            "--audit-arguments" => out.audit_arguments = true,
            "--policy" => {
                let path = value(flag)?;
                let text =
                    std::fs::read_to_string(&path).map_err(|e| format!("--policy {path}: {e}"))?;
                out.policy = mcpgw::policy::Policy::from_json(&text)
                    .map_err(|e| format!("--policy {path}: {}", e.message()))?;
            }
            "--gateway" => out.gateway = Some(value(flag)?),
            "--gateway-binary" => out.gateway_binary = Some(value(flag)?.into()),
            "--http" => out.http = Some(value(flag)?),
            "--token-file" => out.token_file = Some(value(flag)?.into()),
            "--allow-origin" => out.origins.push(value(flag)?),
            "--timeout" => {
                let v = value(flag)?;
                let s: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0 && *s <= 86_400.0)
                    .ok_or_else(|| {
                        format!("--timeout {v:?}: give seconds, more than 0, at most a day")
                    })?;
                out.timeout_ms = (s * 1000.0).ceil() as u64;
            }
            "--log-level" => {
                out.log_level = match value(flag)?.as_str() {
                    "error" => Level::Error,
                    "warn" => Level::Warn,
                    "info" => Level::Info,
                    "debug" => Level::Debug,
                    other => {
                        return Err(format!("--log-level {other:?}: error, warn, info or debug"));
                    }
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The arguments, once every flag is read: the sandbox completed and checked, the servers
    /// built from the one source given and checked.
    fn finish(self) -> Result<McpArgs, String> {
        let mut out = self.out;
        out.backend = self.backend.unwrap_or(Backend::Local { cwd: None });
        if let Backend::Kubectl(p) = &mut out.backend {
            p.namespace = self.kube.0;
            p.container = self.kube.1;
            if let Some(ctx) = self.kube.2 {
                p.options = vec!["--context".into(), ctx];
            }
        } else if self.kube != (None, None, None) {
            return Err("--namespace, --container and --context go with --kubectl".into());
        }
        out.backend.validate().map_err(|e| e.message().to_owned())?;
        let sources = usize::from(!self.command.is_empty())
            + usize::from(self.url.is_some())
            + usize::from(self.config.is_some());
        if out.audit_arguments && out.audit_log.is_none() {
            return Err("--audit-arguments needs --audit-log FILE".into());
        }
        if sources != 1 {
            return Err(
                "give the server: a COMMAND after --, or --url, or --config (one of them)".into(),
            );
        }
        let name = self.name;
        if let Some(path) = self.config {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("--config {path}: {e}"))?;
            out.servers = servers_of_config(&text).map_err(|e| format!("--config {path}: {e}"))?;
            out.prefixed = true;
        } else if let Some(url) = self.url {
            out.servers = vec![(
                name.clone(),
                json!({"name": name, "is_stateful": true,
                       "mcp_config": {"type": "http_mcp", "url": url, "headers": self.headers}}),
            )];
        } else {
            let (program, args) = self.command.split_first().expect("not empty");
            out.servers = vec![(
                name.clone(),
                json!({"name": name, "is_stateful": true, "mcp_config": {
                    "type": "stdio_mcp", "command": program, "args": args, "env": self.env,
                    "cwd": self.cwd}}),
            )];
        }
        for (name, spec) in &out.servers {
            // The secrets it names must be set here (resolved on a copy: the driver resolves
            // them again when it registers the server).
            let mut spec = spec.clone();
            mcpgw::secret::Secrets::default()
                .resolve_spec(&mut spec)
                .map_err(|e| format!("server {name:?}: {e}"))?;
            let parsed: mcpgw::wire::McpSpec =
                serde_json::from_value(spec).map_err(|e| format!("server {name:?}: {e}"))?;
            parsed
                .validate()
                .map_err(|e| format!("server {name:?}: {e}"))?;
        }
        Ok(out)
    }
}

/// Writes a log line to stderr at `level` (stdout carries the MCP stream).
pub fn log(threshold: Level, level: Level, message: &str) {
    if level <= threshold {
        let tag = match level {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        };
        eprintln!("mcpgw mcp: {tag}: {message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_one_line_of_a_client_config_parses() {
        let Command::Mcp(a) = parse(&args(&[
            "mcp",
            "--docker",
            "box",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "/work",
        ]))
        .unwrap() else {
            panic!()
        };
        assert!(matches!(&a.backend, Backend::Docker(c) if c.container == "box"));
        assert_eq!(a.servers[0].1["mcp_config"]["command"], "npx");
        assert_eq!(a.servers[0].1["mcp_config"]["args"][2], "/work");
        let Command::Mcp(a) = parse(&args(&[
            "mcp",
            "--kubectl=web-0",
            "--namespace",
            "agents",
            "--url",
            "http://127.0.0.1:3000/mcp",
        ]))
        .unwrap() else {
            panic!()
        };
        assert!(
            matches!(&a.backend, Backend::Kubectl(p) if p.namespace.as_deref() == Some("agents"))
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        for (line, says) in [
            (&["mcp"][..], "give the server"),
            (&["mcp", "--docker", "-x", "--", "s"][..], "starts with '-'"),
            (
                &["mcp", "--docker", "a", "--podman", "b", "--", "s"][..],
                "one sandbox",
            ),
            (&["mcp", "--name", "a b", "--", "s"][..], "--name"),
            (&["mcp", "--timeout", "0", "--", "s"][..], "--timeout"),
            (&["mcp", "--bogus", "--", "s"][..], "unknown option --bogus"),
            (
                &["mcp", "--namespace", "x", "--", "s"][..],
                "go with --kubectl",
            ),
            (&["serve"][..], "unknown command"),
        ] {
            let e = parse(&args(line)).unwrap_err();
            assert!(e.contains(says), "{line:?}: {e}");
        }
    }

    #[test]
    fn an_mcp_servers_file_becomes_specs() {
        let servers = servers_of_config(
            r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"]}, "web": {"url": "http://127.0.0.1:1/mcp"}}}"#,
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[1].1["mcp_config"]["type"], "http_mcp");
        for (text, says) in [
            ("{}", "mcpServers"),
            (r#"{"mcpServers": {}}"#, "empty"),
            (
                r#"{"mcpServers": {"a b": {"command": "x"}}}"#,
                "server \"a b\"",
            ),
            (r#"{"mcpServers": {"x": {}}}"#, "neither"),
        ] {
            let e = servers_of_config(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
