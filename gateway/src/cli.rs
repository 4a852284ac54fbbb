//! The command line, parsed by hand: AgentScope's launch line must work unchanged, including
//! `--flag=value`, `--flag value` and values that begin with `-` (its tokens can).

use std::path::PathBuf;
use std::time::Duration;

/// The usage text, printed for `--help` and after a usage error.
pub const USAGE: &str = include_str!("usage.txt").trim_ascii_end();

/// What the process was asked to do.
#[derive(Debug)]
pub enum Command {
    /// Run the gateway.
    Serve(Box<ServeArgs>),
    /// Send one request to a running gateway.
    Request(RequestArgs),
    /// Relay a session channel on stdin and stdout to a gateway.
    Attach(Box<AttachArgs>),
    /// Print the usage.
    Help,
    /// Print the version.
    Version,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object a line.
    Json,
}

/// Options of `serve`.
#[derive(Debug, Clone)]
pub struct ServeArgs {
    /// TCP port; 0 picks a free one.
    pub port: u16,
    /// Address to bind.
    pub host: String,
    /// Where the token lives (minted when missing).
    pub token_file: Option<PathBuf>,
    /// A token given on the command line.
    pub auth_token: Option<String>,
    /// Reported by `/health` so a host can tell this launch from another.
    pub instance_nonce: Option<String>,
    /// An `mcpServers` file to preload into the default scope.
    pub config: Option<PathBuf>,
    /// Log destination; stderr when absent.
    pub log_file: Option<PathBuf>,
    /// Log line format.
    pub log_format: LogFormat,
    /// Least severe level logged.
    pub log_level: tracing::Level,
    /// Detach and return once listening.
    pub daemon: bool,
    /// Serve without a token.
    pub no_auth: bool,
    /// Permit a non-loopback bind address.
    pub allow_remote: bool,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Largest single message accepted from an upstream.
    pub max_reply_bytes: usize,
    /// How long a client may take to send a request head.
    pub header_timeout: Duration,
    /// How long a keep-alive connection may sit idle.
    pub idle_timeout: Duration,
    /// Client connections served at once.
    pub max_connections: usize,
    /// Log lines per second per upstream.
    pub log_rate: u32,
    /// Deadline of a tool call when neither the MCP nor the call sets one.
    pub call_timeout: Duration,
    /// Deadline of connecting to an upstream (spawn, initialize, first tool list).
    pub connect_timeout: Duration,
    /// Worker threads of the async runtime; 0 means half the cores, at least 1, at most 4.
    pub threads: usize,
    /// Where to keep the ready line while the gateway runs.
    pub ready_file: Option<PathBuf>,
    /// Virtual MCP connections open at once.
    pub max_mcp_connections: usize,
    /// Messages queued for a connection's client before it is cut off.
    pub max_connection_queue: usize,
    /// The upstream's requests waiting for one connection's client.
    pub max_pending_host_requests: usize,
    /// How long a resumable call is kept once nobody follows it, or once it ended; zero: calls
    /// are not resumable.
    pub call_retention: Duration,
    /// The memory resumable calls may hold together.
    pub call_retention_bytes: usize,
}

impl Default for ServeArgs {
    fn default() -> Self {
        ServeArgs {
            port: 5600,
            host: "127.0.0.1".into(),
            token_file: None,
            auth_token: None,
            instance_nonce: None,
            config: None,
            log_file: None,
            log_format: LogFormat::Text,
            log_level: tracing::Level::INFO,
            daemon: false,
            no_auth: false,
            allow_remote: false,
            max_body_bytes: 64 << 20,
            max_reply_bytes: 64 << 20,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            log_rate: 20,
            call_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(60),
            threads: 0,
            ready_file: None,
            max_mcp_connections: 256,
            max_connection_queue: 1024,
            max_pending_host_requests: 64,
            call_retention: Duration::from_secs(600),
            call_retention_bytes: 64 << 20,
        }
    }
}

/// Options of `request`.
#[derive(Debug, Clone, Default)]
pub struct RequestArgs {
    /// HTTP method.
    pub method: String,
    /// Path and query, e.g. `/mcps?agent_id=a`.
    pub path: String,
    /// Gateway port.
    pub port: u16,
    /// Gateway host.
    pub host: String,
    /// Token file to read the bearer token from.
    pub token_file: Option<PathBuf>,
    /// File holding the request body, `-` for stdin.
    pub body_file: Option<String>,
    /// The request body itself.
    pub data: Option<String>,
    /// Extra request headers (`Name: value`).
    pub headers: Vec<String>,
    /// Seconds the whole exchange may take.
    pub max_time: Option<Duration>,
}

/// Options of `attach`.
#[derive(Debug, Clone)]
pub struct AttachArgs {
    /// Where a launched gateway keeps its token, log, ready file and lock.
    pub state_dir: Option<PathBuf>,
    /// The gateway's port (else the ready file's).
    pub port: Option<u16>,
    /// The gateway's loopback address.
    pub host: String,
    /// Where the token lives (else the ready file's, else `DIR/token`).
    pub token_file: Option<PathBuf>,
    /// The nonce the gateway must answer `/health` with.
    pub instance_nonce: Option<String>,
    /// Start a gateway when none answers.
    pub launch: bool,
    /// Extra arguments for a launched gateway.
    pub gateway_args: Vec<String>,
    /// The longest input line accepted.
    pub max_frame_bytes: usize,
    /// Requests relayed at once, when given (never more than the gateway allows a session).
    pub max_in_flight: Option<usize>,
    /// Virtual MCP connections open at once on the channel.
    pub max_mcp_connections: usize,
    /// How long attach may write nothing before it writes a `ping`; zero: never.
    pub heartbeat: Duration,
    /// How long the host may send nothing (once it has sent a `ping`) before the session
    /// ends; zero: forever.
    pub heartbeat_timeout: Duration,
    /// Relay here even when the gateway would take the session over.
    pub no_handoff: bool,
    /// Log destination; stderr when absent.
    pub log_file: Option<PathBuf>,
    /// Least severe level logged.
    pub log_level: tracing::Level,
}

/// Turns argv (without the program name) into a [`Command`]; the error is a one-line reason.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut args = args;
    match args.first().map(String::as_str) {
        Some("request") => return parse_request(&args[1..]).map(Command::Request),
        Some("attach") => return parse_attach(&args[1..]).map(|a| Command::Attach(Box::new(a))),
        Some("serve") => args = &args[1..],
        Some("--help" | "-h" | "help") => return Ok(Command::Help),
        Some("--version" | "-V") => return Ok(Command::Version),
        _ => {}
    }
    parse_serve(args).map(|a| Command::Serve(Box::new(a)))
}

/// Walks `--flag`, `--flag value` and `--flag=value` forms. A flag named in `valued` always takes
/// the next argument as its value, even one that begins with `-`.
struct Flags<'a> {
    args: &'a [String],
    at: usize,
}

enum Arg<'a> {
    Flag(&'a str, Option<String>),
    Positional(&'a str),
}

impl<'a> Flags<'a> {
    fn new(args: &'a [String]) -> Self {
        Flags { args, at: 0 }
    }

    fn next(&mut self, valued: &[&str]) -> Result<Option<Arg<'a>>, String> {
        let Some(arg) = self.args.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        let Some(body) = arg.strip_prefix("--") else {
            return Ok(Some(Arg::Positional(arg)));
        };
        if let Some((name, value)) = body.split_once('=') {
            if !valued.contains(&name) {
                return Err(format!("--{name} takes no value"));
            }
            return Ok(Some(Arg::Flag(name, Some(value.to_string()))));
        }
        if valued.contains(&body) {
            let value = self
                .args
                .get(self.at)
                .ok_or_else(|| format!("--{body} needs a value"))?;
            self.at += 1;
            return Ok(Some(Arg::Flag(body, Some(value.clone()))));
        }
        Ok(Some(Arg::Flag(body, None)))
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("--{flag}: {value:?} is not a valid number"))
}

fn at_least(flag: &str, value: &str, min: usize) -> Result<usize, String> {
    let n: usize = number(flag, value)?;
    if n < min {
        return Err(format!("--{flag} must be at least {min}"));
    }
    Ok(n)
}

fn level(flag: &str, value: &str) -> Result<tracing::Level, String> {
    value
        .parse()
        .map_err(|_| format!("--{flag}: {value:?} is not a level"))
}

/// Seconds as the wire contract bounds every deadline: positive, at most a day.
fn seconds(flag: &str, value: &str) -> Result<Duration, String> {
    mcpgw::wire::spec::timeout_secs(&format!("--{flag}"), number(flag, value)?)
}

/// Like [`seconds`], or 0 for "never".
fn seconds_or_zero(flag: &str, value: &str) -> Result<Duration, String> {
    if number::<f64>(flag, value)? == 0.0 {
        Ok(Duration::ZERO)
    } else {
        seconds(flag, value)
    }
}

fn parse_serve(args: &[String]) -> Result<ServeArgs, String> {
    const VALUED: &[&str] = &[
        "port",
        "host",
        "token-file",
        "auth-token",
        "instance-nonce",
        "config",
        "log-file",
        "log-format",
        "log-level",
        "max-body-bytes",
        "max-reply-bytes",
        "header-timeout",
        "idle-timeout",
        "max-connections",
        "log-rate",
        "call-timeout",
        "connect-timeout",
        "threads",
        "ready-file",
        "max-mcp-connections",
        "max-connection-queue",
        "max-pending-host-requests",
        "call-retention",
        "call-retention-bytes",
    ];
    let mut out = ServeArgs::default();
    let mut flags = Flags::new(args);
    while let Some(arg) = flags.next(VALUED)? {
        let (name, value) = match arg {
            Arg::Positional(p) => return Err(format!("unexpected argument {p:?}")),
            Arg::Flag(name, value) => (name, value.unwrap_or_default()),
        };
        match name {
            "port" => out.port = number(name, &value)?,
            "host" => out.host = value,
            "token-file" => out.token_file = Some(PathBuf::from(value)),
            "auth-token" => out.auth_token = Some(value),
            "instance-nonce" => out.instance_nonce = Some(value),
            "config" => out.config = Some(PathBuf::from(value)),
            "log-file" => out.log_file = Some(PathBuf::from(value)),
            "log-format" => {
                out.log_format = match value.as_str() {
                    "text" => LogFormat::Text,
                    "json" => LogFormat::Json,
                    other => return Err(format!("--log-format: {other:?} is not text or json")),
                }
            }
            "log-level" => out.log_level = level(name, &value)?,
            "max-body-bytes" => out.max_body_bytes = number(name, &value)?,
            "max-reply-bytes" => out.max_reply_bytes = at_least(name, &value, 1024)?,
            "header-timeout" => out.header_timeout = seconds(name, &value)?,
            "idle-timeout" => out.idle_timeout = seconds(name, &value)?,
            "max-connections" => out.max_connections = at_least(name, &value, 1)?,
            "log-rate" => out.log_rate = number(name, &value)?,
            "call-timeout" => out.call_timeout = seconds(name, &value)?,
            "connect-timeout" => out.connect_timeout = seconds(name, &value)?,
            "threads" => out.threads = number(name, &value)?,
            "ready-file" => out.ready_file = Some(PathBuf::from(value)),
            "max-mcp-connections" => out.max_mcp_connections = at_least(name, &value, 1)?,
            "max-connection-queue" => out.max_connection_queue = at_least(name, &value, 1)?,
            "max-pending-host-requests" => {
                out.max_pending_host_requests = at_least(name, &value, 1)?
            }
            "call-retention" => out.call_retention = seconds_or_zero(name, &value)?,
            "call-retention-bytes" => out.call_retention_bytes = at_least(name, &value, 4096)?,
            "daemon" => out.daemon = true,
            "no-auth" => out.no_auth = true,
            "allow-remote" => out.allow_remote = true,
            other => return Err(format!("unknown option --{other}")),
        }
    }
    Ok(out)
}

fn parse_attach(args: &[String]) -> Result<AttachArgs, String> {
    const VALUED: &[&str] = &[
        "state-dir",
        "port",
        "host",
        "token-file",
        "instance-nonce",
        "gateway-arg",
        "max-frame-bytes",
        "max-in-flight",
        "max-mcp-connections",
        "heartbeat",
        "heartbeat-timeout",
        "log-file",
        "log-level",
    ];
    let mut out = AttachArgs {
        state_dir: None,
        port: None,
        host: "127.0.0.1".into(),
        token_file: None,
        instance_nonce: None,
        launch: false,
        gateway_args: Vec::new(),
        max_frame_bytes: ServeArgs::default().max_body_bytes + mcpgw::wire::frame::ENVELOPE_BYTES,
        max_in_flight: None,
        max_mcp_connections: 64,
        heartbeat: Duration::from_secs(5),
        heartbeat_timeout: Duration::from_secs(15),
        no_handoff: false,
        log_file: None,
        log_level: tracing::Level::INFO,
    };
    let mut flags = Flags::new(args);
    while let Some(arg) = flags.next(VALUED)? {
        let (name, value) = match arg {
            Arg::Positional(p) => return Err(format!("unexpected argument {p:?}")),
            Arg::Flag(name, value) => (name, value.unwrap_or_default()),
        };
        match name {
            "state-dir" => out.state_dir = Some(PathBuf::from(value)),
            "port" => out.port = Some(number(name, &value)?),
            "host" => out.host = value,
            "token-file" => out.token_file = Some(PathBuf::from(value)),
            "instance-nonce" => out.instance_nonce = Some(value),
            "launch" => out.launch = true,
            "no-handoff" => out.no_handoff = true,
            "gateway-arg" => out.gateway_args.push(value),
            "max-frame-bytes" => out.max_frame_bytes = at_least(name, &value, 1024)?,
            "max-in-flight" => out.max_in_flight = Some(at_least(name, &value, 1)?),
            "max-mcp-connections" => out.max_mcp_connections = at_least(name, &value, 1)?,
            "heartbeat" => out.heartbeat = seconds_or_zero(name, &value)?,
            "heartbeat-timeout" => out.heartbeat_timeout = seconds_or_zero(name, &value)?,
            "log-file" => out.log_file = Some(PathBuf::from(value)),
            "log-level" => out.log_level = level(name, &value)?,
            other => return Err(format!("unknown option --{other}")),
        }
    }
    if out.port.is_none() && out.state_dir.is_none() {
        return Err("attach needs --port or --state-dir".into());
    }
    if out.launch && out.state_dir.is_none() {
        return Err("attach --launch needs --state-dir (where the gateway keeps its token, log and ready file)".into());
    }
    Ok(out)
}

fn parse_request(args: &[String]) -> Result<RequestArgs, String> {
    const VALUED: &[&str] = &[
        "port",
        "host",
        "token-file",
        "body-file",
        "data",
        "header",
        "max-time",
    ];
    let mut out = RequestArgs {
        port: 5600,
        host: "127.0.0.1".into(),
        ..RequestArgs::default()
    };
    let mut positional = Vec::new();
    let mut flags = Flags::new(args);
    while let Some(arg) = flags.next(VALUED)? {
        let (name, value) = match arg {
            Arg::Positional(p) => {
                positional.push(p.to_string());
                continue;
            }
            Arg::Flag(name, value) => (name, value.unwrap_or_default()),
        };
        match name {
            "port" => out.port = number(name, &value)?,
            "host" => out.host = value,
            "token-file" => out.token_file = Some(PathBuf::from(value)),
            "body-file" => out.body_file = Some(value),
            "data" => out.data = Some(value),
            "header" => out.headers.push(value),
            "max-time" => out.max_time = Some(seconds(name, &value)?),
            other => return Err(format!("unknown option --{other}")),
        }
    }
    let [method, path] = <[String; 2]>::try_from(positional)
        .map_err(|_| "request needs exactly METHOD and PATH".to_string())?;
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(format!("{method:?} is not an HTTP method (e.g. GET, POST)"));
    }
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "{path:?} is not a request path (it starts with / and holds no spaces)"
        ));
    }
    if out.body_file.is_some() && out.data.is_some() {
        return Err("give --body-file or --data, not both".into());
    }
    out.method = method;
    out.path = path;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    fn serve(s: &[&str]) -> ServeArgs {
        match parse(&argv(s)).unwrap() {
            Command::Serve(a) => *a,
            other => panic!("not serve: {other:?}"),
        }
    }

    #[test]
    fn agentscope_launch_line_parses_in_every_form() {
        let a = serve(&[
            "--port",
            "5601",
            "--auth-token",
            "-tok",
            "--instance-nonce",
            "n",
        ]);
        assert_eq!(a.port, 5601);
        assert_eq!(a.auth_token.as_deref(), Some("-tok"));
        assert_eq!(a.instance_nonce.as_deref(), Some("n"));
        let b = serve(&["serve", "--port=0", "--auth-token=-x=y", "--daemon"]);
        assert_eq!(b.port, 0);
        assert_eq!(b.auth_token.as_deref(), Some("-x=y"));
        assert!(b.daemon);
        let c = serve(&["--auth-token", "--port"]);
        assert_eq!(c.auth_token.as_deref(), Some("--port"));
    }

    #[test]
    fn usage_errors_name_the_flag() {
        for (args, needle) in [
            (&["--port"][..], "--port needs a value"),
            (&["--port", "x"][..], "--port"),
            (&["--port", "70000"][..], "--port"),
            (&["--bogus"][..], "--bogus"),
            (&["--daemon=1"][..], "--daemon takes no value"),
            (&["stray"][..], "stray"),
            (&["--log-format", "xml"][..], "--log-format"),
            (&["--call-timeout", "-1"][..], "--call-timeout"),
        ] {
            let err = parse(&argv(args)).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }

    #[test]
    fn request_parses() {
        let Command::Request(r) = parse(&argv(&[
            "request",
            "POST",
            "/mcps?agent_id=a",
            "--port",
            "9",
            "--data",
            "-{}",
            "--header",
            "Accept: x",
        ]))
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.port),
            ("POST", "/mcps?agent_id=a", 9)
        );
        assert_eq!(r.data.as_deref(), Some("-{}"));
        assert_eq!(r.headers, ["Accept: x"]);
        assert!(parse(&argv(&["request", "GET"])).is_err());
        assert!(parse(&argv(&["request", "get", "/x"])).is_err());
        assert!(parse(&argv(&["request", "GET", "x y"])).is_err());
    }

    #[test]
    fn attach_parses() {
        let Command::Attach(a) = parse(&argv(&[
            "attach",
            "--state-dir=/s",
            "--launch",
            "--gateway-arg",
            "--call-timeout",
            "--gateway-arg=30",
            "--instance-nonce",
            "-n",
        ]))
        .unwrap() else {
            panic!()
        };
        assert_eq!(a.state_dir.as_deref(), Some(std::path::Path::new("/s")));
        assert!(a.launch);
        assert_eq!(a.gateway_args, ["--call-timeout", "30"]);
        assert_eq!(a.instance_nonce.as_deref(), Some("-n"));
        assert_eq!(a.max_frame_bytes, (64 << 20) + (64 << 10));
        for (args, needle) in [
            (&["attach"][..], "--port or --state-dir"),
            (&["attach", "--port", "1", "--launch"][..], "--state-dir"),
            (
                &["attach", "--port", "1", "--max-frame-bytes", "10"][..],
                "1024",
            ),
            (
                &["attach", "--port", "1", "--launch=1"][..],
                "takes no value",
            ),
        ] {
            let err = parse(&argv(args)).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
        let Command::Serve(s) = parse(&argv(&["--ready-file", "/r"])).unwrap() else {
            panic!()
        };
        assert_eq!(s.ready_file.as_deref(), Some(std::path::Path::new("/r")));
    }

    #[test]
    fn heartbeats_and_retention_parse_with_zero_for_off() {
        let Command::Attach(a) = parse(&argv(&["attach", "--port", "1"])).unwrap() else {
            panic!()
        };
        assert_eq!(
            (a.heartbeat, a.heartbeat_timeout, a.max_in_flight),
            (Duration::from_secs(5), Duration::from_secs(15), None)
        );
        let Command::Attach(a) = parse(&argv(&[
            "attach",
            "--port=1",
            "--heartbeat=0.25",
            "--heartbeat-timeout",
            "0",
            "--max-in-flight",
            "8",
        ]))
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            (a.heartbeat, a.heartbeat_timeout, a.max_in_flight),
            (Duration::from_millis(250), Duration::ZERO, Some(8))
        );
        let s = serve(&[]);
        assert_eq!(
            (s.call_retention, s.call_retention_bytes),
            (Duration::from_secs(600), 64 << 20)
        );
        let s = serve(&["--call-retention", "0", "--call-retention-bytes", "4096"]);
        assert_eq!(
            (s.call_retention, s.call_retention_bytes),
            (Duration::ZERO, 4096)
        );
        for (args, needle) in [
            (
                &["attach", "--port", "1", "--heartbeat", "-1"][..],
                "--heartbeat",
            ),
            (
                &["attach", "--port", "1", "--heartbeat-timeout", "x"][..],
                "--heartbeat-timeout",
            ),
            (&["--call-retention", "-5"][..], "--call-retention"),
            (&["--call-retention-bytes", "100"][..], "4096"),
        ] {
            let err = parse(&argv(args)).unwrap_err();
            assert!(err.contains(needle), "{args:?}: {err}");
        }
    }
}
