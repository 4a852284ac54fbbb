//! Finding the gateway to relay to: the one of `--port`, or the one `DIR/gateway.json` names;
//! it must answer `/health` (with the expected instance nonce, when there is one). With
//! `--launch`, when none answers, one is started first, under a lock on the state directory so
//! that concurrent attaches start one gateway between them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::header::HeaderValue;
use mcpgw::wire::output::exit;
use mcpgw::wire::{DaemonReady, Health, frame};

use super::Failure;
use crate::cli::AttachArgs;

/// The ready file of the gateway of a state directory.
pub const READY_FILE: &str = "gateway.json";
/// Its token file.
pub const TOKEN_FILE: &str = "token";
/// Its log.
pub const LOG_FILE: &str = "gateway.log";
/// What concurrent attaches lock before launching.
pub const LOCK_FILE: &str = "attach.lock";

/// How long `/health` may take to answer.
const HEALTH_LIMIT: Duration = Duration::from_secs(5);

/// How long a launch may take (the gateway itself gives up on its own health after 10 s).
const LAUNCH_LIMIT: Duration = Duration::from_secs(30);

/// The gateway a session relays to.
#[derive(Debug, Clone)]
pub struct Gateway {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its process id; 0 when it could not be found.
    pub pid: u32,
    /// The instance nonce it answered `/health` with.
    pub nonce: Option<String>,
    /// Where its token lives.
    pub token_file: Option<PathBuf>,
    /// Whether this attach started it.
    pub launched: bool,
    /// What it announced of its limits.
    pub limits: Limits,
}

/// What the state directory or the command line say about a gateway.
struct Known {
    port: u16,
    pid: Option<u32>,
    nonce: Option<String>,
    token_file: Option<PathBuf>,
}

fn state_file(args: &AttachArgs, name: &str) -> Option<PathBuf> {
    args.state_dir.as_ref().map(|d| d.join(name))
}

fn known(args: &AttachArgs) -> Result<Option<Known>, Failure> {
    let ready = match state_file(args, READY_FILE) {
        Some(path) => crate::ready_file::read(&path).map_err(|e| Failure::new(exit::OTHER, e))?,
        None => None,
    };
    let from_ready = |r: DaemonReady| Known {
        port: r.port,
        pid: Some(r.pid),
        nonce: r.instance_nonce,
        token_file: r.token_file.map(PathBuf::from),
    };
    Ok(match (args.port, ready) {
        (Some(port), Some(r)) if r.port == port => Some(from_ready(r)),
        (Some(port), _) => Some(Known {
            port,
            pid: None,
            nonce: None,
            token_file: None,
        }),
        (None, Some(r)) => Some(from_ready(r)),
        (None, None) => None,
    })
}

fn host(args: &AttachArgs) -> Result<IpAddr, Failure> {
    let ip = if args.host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        args.host
            .parse()
            .map_err(|_| Failure::new(2, format!("--host {:?} is not an IP address", args.host)))?
    };
    if !ip.is_loopback() {
        return Err(Failure::new(
            2,
            format!(
                "--host {ip} is not a loopback address: attach relays to a gateway on this machine only"
            ),
        ));
    }
    Ok(ip)
}

/// Finds (or launches) the gateway and checks that it answers as the one expected.
pub async fn locate(args: &AttachArgs) -> Result<Gateway, Failure> {
    let ip = host(args)?;
    let reason = match known(args)? {
        Some(k) => {
            let addr = SocketAddr::new(ip, k.port);
            let nonce = args.instance_nonce.clone().or(k.nonce.clone());
            match health(addr, nonce.as_deref()).await {
                Ok(limits) => return Ok(found(args, addr, k, nonce, false, limits)),
                Err(reason) => reason,
            }
        }
        None => format!(
            "no gateway is recorded in {} (none was launched with --ready-file there)",
            state_file(args, READY_FILE).unwrap_or_default().display()
        ),
    };
    if !args.launch {
        return Err(Failure::new(
            exit::CONNECT,
            format!("{reason}; not relaying (pass --launch with --state-dir to start a gateway)"),
        ));
    }
    tracing::info!("{reason}: launching one");
    let dir = args
        .state_dir
        .as_deref()
        .expect("--launch needs --state-dir");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Failure::new(exit::OTHER, format!("cannot create {}: {e}", dir.display())))?;
    let _lock = lock(&dir.join(LOCK_FILE)).await?;
    // Another attach may have launched one while this one waited for the lock.
    if let Some(k) = known(args)? {
        let addr = SocketAddr::new(ip, k.port);
        let nonce = args.instance_nonce.clone().or(k.nonce.clone());
        if let Ok(limits) = health(addr, nonce.as_deref()).await {
            return Ok(found(args, addr, k, nonce, false, limits));
        }
    }
    let nonce = args
        .instance_nonce
        .clone()
        .unwrap_or_else(mcpgw::random::mint_nonce);
    let ready = launch(args, dir, &nonce).await?;
    let addr = SocketAddr::new(ip, ready.port);
    let limits = health(addr, Some(&nonce))
        .await
        .map_err(|e| Failure::new(exit::OTHER, format!("the launched gateway {e}")))?;
    let k = Known {
        port: ready.port,
        pid: Some(ready.pid),
        nonce: ready.instance_nonce,
        token_file: ready.token_file.map(PathBuf::from),
    };
    Ok(found(args, addr, k, Some(nonce), true, limits))
}

fn found(
    args: &AttachArgs,
    addr: SocketAddr,
    k: Known,
    nonce: Option<String>,
    launched: bool,
    limits: Limits,
) -> Gateway {
    let token_file = args
        .token_file
        .clone()
        .or(k.token_file)
        .or_else(|| state_file(args, TOKEN_FILE));
    Gateway {
        addr,
        pid: k.pid.or_else(|| pid_listening_on(addr.port())).unwrap_or(0),
        nonce,
        token_file,
        launched,
        limits,
    }
}

/// What the gateway's `/health` announces of its limits (a gateway that announces none gets
/// the defaults of `serve`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Client connections it serves at once.
    pub max_connections: usize,
    /// How long it keeps an idle keep-alive connection.
    pub idle_timeout: Duration,
    /// How long it keeps a resumable call nobody follows; zero: it keeps none.
    pub call_retention: Duration,
    /// The socket it takes sessions on ([`super::handoff`]), when it does.
    pub attach_socket: Option<String>,
}

impl Limits {
    fn from_headers(headers: &http::HeaderMap) -> Limits {
        use mcpgw::wire::rest::header;
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        };
        let defaults = crate::cli::ServeArgs::default();
        Limits {
            max_connections: number(header::MAX_CONNECTIONS)
                .map_or(defaults.max_connections, |n| n as usize),
            idle_timeout: number(header::IDLE_TIMEOUT_MS)
                .map_or(defaults.idle_timeout, Duration::from_millis),
            call_retention: number(header::CALL_RETENTION_MS)
                .map_or(Duration::ZERO, Duration::from_millis),
            attach_socket: headers
                .get(header::ATTACH_SOCKET)
                .and_then(|v| v.to_str().ok())
                .map(String::from),
        }
    }
}

/// Asks `/health` and checks the nonce; the error says what answered instead.
async fn health(addr: SocketAddr, nonce: Option<&str>) -> Result<Limits, String> {
    let request = http::Request::get(mcpgw::wire::rest::route::HEALTH)
        .header(http::header::HOST, addr.to_string())
        .body(Default::default())
        .expect("a valid request");
    let (head, body) = tokio::time::timeout(HEALTH_LIMIT, super::pool::send_once(addr, request))
        .await
        .map_err(|_| format!("{addr} did not answer /health within {HEALTH_LIMIT:?}"))?
        .map_err(|e| format!("no gateway answers at {addr}: {e}"))?;
    let status = head.status;
    let health = Health::parse(&body)
        .filter(|_| status.is_success())
        .ok_or_else(|| {
            format!(
                "{addr} is not a gateway: /health answered {status} {}",
                frame::quoted(&String::from_utf8_lossy(&body))
            )
        })?;
    match nonce {
        Some(want) if health.instance_nonce.as_deref() != Some(want) => Err(format!(
            "the gateway at {addr} is another instance: its /health reports instance nonce {:?}, not {want:?}",
            health.instance_nonce.as_deref().unwrap_or("(none)")
        )),
        _ => Ok(Limits::from_headers(&head.headers)),
    }
}

/// Takes the state directory's lock (released when the file is dropped; never inherited by
/// the launched gateway, as Rust opens files close-on-exec).
async fn lock(path: &Path) -> Result<std::fs::File, Failure> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open the lock file {}: {e}", path.display()))?;
        mcpgw_sys::fs::lock_exclusive(&file)
            .map(|()| file)
            .map_err(|e| format!("cannot lock {}: {e}", path.display()))
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r)
    .map_err(|e| Failure::new(exit::OTHER, e))
}

/// Runs `mcpgw-gateway --daemon ...` (this very binary) and reads its ready line; the daemon
/// detaches itself, its launcher exits once it serves.
async fn launch(args: &AttachArgs, dir: &Path, nonce: &str) -> Result<DaemonReady, Failure> {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let token_file = args
        .token_file
        .clone()
        .unwrap_or_else(|| dir.join(TOKEN_FILE));
    let mut command = tokio::process::Command::new("/proc/self/exe");
    if let Some(arg0) = std::env::args_os().next() {
        command.arg0(arg0);
    }
    command
        .arg("--daemon")
        .arg("--port")
        .arg(args.port.unwrap_or(0).to_string())
        .arg("--host")
        .arg(&args.host)
        .arg("--token-file")
        .arg(&token_file)
        .arg("--instance-nonce")
        .arg(nonce)
        .arg("--log-file")
        .arg(dir.join(LOG_FILE))
        .arg("--ready-file")
        .arg(dir.join(READY_FILE))
        .args(&args.gateway_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = tokio::time::timeout(LAUNCH_LIMIT, command.output())
        .await
        .map_err(|_| {
            Failure::new(
                exit::OTHER,
                format!("launching the gateway took longer than {LAUNCH_LIMIT:?}"),
            )
        })?
        .map_err(|e| Failure::new(exit::OTHER, format!("cannot launch the gateway: {e}")))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(Failure::new(
            exit::OTHER,
            format!(
                "the gateway did not start ({}): {}",
                output.status,
                stderr.trim().trim_start_matches("mcpgw-gateway: ")
            ),
        ));
    }
    serde_json::from_str(stdout.trim()).map_err(|e| {
        Failure::new(
            exit::OTHER,
            format!("the launched gateway printed {stdout:?}, not its ready line: {e}"),
        )
    })
}

/// The `Authorization` header, with the token read from the token file (or `MCPGW_TOKEN`);
/// none when neither exists (a gateway run with `--no-auth`).
pub fn authorization(gateway: &Gateway) -> Result<Option<HeaderValue>, Failure> {
    let token = match &gateway.token_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(text.trim().to_string()),
            Err(e) => {
                return Err(Failure::new(
                    exit::OTHER,
                    format!("cannot read the token file {}: {e}", path.display()),
                ));
            }
        },
        None => std::env::var(crate::auth::TOKEN_ENV).ok(),
    };
    let Some(token) = token else {
        return Ok(None);
    };
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Failure::new(
            exit::OTHER,
            "the token must be non-empty visible ASCII without spaces",
        ));
    }
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).expect("visible ASCII");
    value.set_sensitive(true);
    Ok(Some(value))
}

/// The process that listens on a TCP port, found through `/proc` (best effort).
fn pid_listening_on(port: u16) -> Option<u32> {
    const LISTEN: &str = "0A";
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(&state), Some(&inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let listens_on_port = local
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
                == Some(port);
            if listens_on_port && state == LISTEN {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    if inodes.is_empty() {
        return None;
    }
    for process in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = process
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && inodes.iter().any(|i| target.as_os_str() == i.as_str())
            {
                return Some(pid);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listening_process_is_found_by_its_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port), Some(std::process::id()));
        drop(listener);
        assert_eq!(pid_listening_on(port), None);
    }
}
