//! `serve`: bind, optionally detach, run the REST surface, shut down cleanly.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use mcpgw_sys::process::Forked;

use crate::auth;
use crate::cli::{LogFormat, ServeArgs};
use crate::config;
use crate::registry::Registry;
use crate::rest::api::{self, AppState};
use crate::scope::Scope;
use crate::upstream::Settings;

/// How long a launch waits for the detached gateway to answer its /health.
const HEALTH_LIMIT: Duration = Duration::from_secs(10);

/// How long shutdown may take to close every upstream.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(5);

/// Runs the gateway; returns when it has shut down (or, with `--daemon`, in the launching
/// process once the detached gateway listens). A start that fails says why on stderr (and in
/// the log) and removes what it created: the token file it minted, the log file it opened, and
/// the token file's directory when that is left empty.
pub fn run(args: ServeArgs) -> ExitCode {
    let mut leftovers = Leftovers::before_start(&args);
    let logged = args.log_file.is_some();
    match start(args, &mut leftovers) {
        Ok(code) => {
            if code != ExitCode::SUCCESS {
                leftovers.remove();
            }
            code
        }
        Err(e) => {
            if logged {
                tracing::error!("{e}");
            }
            eprintln!("mcpgw-gateway: {e}");
            leftovers.remove();
            ExitCode::FAILURE
        }
    }
}

/// What a start may create, so that a start that fails can remove it.
#[derive(Debug, Default)]
struct Leftovers {
    /// Whether this process is the one to clean up (a detached gateway leaves it to its
    /// launcher, which reads the log first).
    owner: bool,
    /// The token file, once this start minted it.
    token_file: Option<PathBuf>,
    /// The log file, when it did not exist before this start.
    log_file: Option<PathBuf>,
    /// The token file's directory: the launcher made it for this gateway (`mkdir -p`), so it
    /// goes too when nothing else is in it.
    state_dir: Option<PathBuf>,
    /// The log file's directory, when it did not exist before this start.
    log_dir: Option<PathBuf>,
}

impl Leftovers {
    fn before_start(args: &ServeArgs) -> Leftovers {
        Leftovers {
            owner: true,
            token_file: None,
            log_file: args.log_file.clone().filter(|p| !p.exists()),
            log_dir: args
                .log_file
                .as_ref()
                .and_then(|l| l.parent())
                .filter(|d| !d.as_os_str().is_empty() && !d.exists())
                .map(PathBuf::from),
            state_dir: args
                .token_file
                .as_ref()
                .and_then(|t| t.parent())
                .filter(|d| !d.as_os_str().is_empty())
                .map(PathBuf::from),
        }
    }

    fn remove(&self) {
        if !self.owner {
            return;
        }
        for file in [&self.token_file, &self.log_file].into_iter().flatten() {
            let _ = std::fs::remove_file(file);
        }
        for dir in [&self.state_dir, &self.log_dir].into_iter().flatten() {
            // Only an empty directory is removed.
            let _ = std::fs::remove_dir(dir);
        }
    }
}

fn bind_address(args: &ServeArgs) -> Result<SocketAddr, String> {
    let ip: IpAddr = if args.host == "localhost" {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        args.host.parse().map_err(|_| {
            format!(
                "--host {:?} is not an IP address (use 127.0.0.1, ::1 or, with --allow-remote, another address)",
                args.host
            )
        })?
    };
    if !ip.is_loopback() && !args.allow_remote {
        return Err(format!(
            "refusing to listen on {ip}: it is not a loopback address; pass --allow-remote to expose the gateway beyond this machine"
        ));
    }
    Ok(SocketAddr::new(ip, args.port))
}

fn start(args: ServeArgs, leftovers: &mut Leftovers) -> Result<ExitCode, String> {
    // Logging first: every refusal below reaches the configured log too.
    init_logging(&args)?;
    let addr = bind_address(&args)?;
    let resolved = auth::resolve(&args)?;
    leftovers.token_file = resolved.minted;
    let listener = TcpListener::bind(addr).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?
        .port();

    let mut ready_pipe = if args.daemon {
        match detach(&args)? {
            Detached::Parent(code) => return Ok(code),
            Detached::Child(pipe) => {
                leftovers.owner = false;
                Some(pipe)
            }
        }
    } else {
        None
    };

    crate::upstream::process::become_subreaper();
    let workers = match args.threads {
        // Half the cores, at most 4: the upstreams and the sandbox's own work need the
        // rest (measured: on 2 cores one worker serves more calls than two).
        0 => std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4)),
        n => n,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let started = Started {
        token: resolved.token,
        listener,
        port,
        one_worker: workers == 1,
    };
    let result = runtime.block_on(serve(args, started, &mut ready_pipe));
    // Upstream tasks may still hold process groups if a close timed out; and whatever an
    // upstream left behind, wherever it went, ends with the gateway.
    crate::upstream::stdio::kill_all_groups();
    crate::upstream::process::kill_everything();
    crate::upstream::process::reap_orphans();
    runtime.shutdown_timeout(Duration::from_millis(200));
    if let Err(e) = &result {
        // A detached gateway tells its launcher why it did not come up.
        if let Some(pipe) = ready_pipe.take() {
            let mut pipe = std::fs::File::from(pipe);
            let _ = pipe.write_all(e.as_bytes());
        }
    }
    result.map(|()| ExitCode::SUCCESS)
}

/// What `start` made ready for `serve`.
struct Started {
    token: Option<auth::Token>,
    listener: TcpListener,
    port: u16,
    /// Whether the runtime has one worker (handed-off sessions run on it, else on a thread of
    /// their own).
    one_worker: bool,
}

async fn serve(
    args: ServeArgs,
    started: Started,
    ready_pipe: &mut Option<OwnedFd>,
) -> Result<(), String> {
    let Started {
        token,
        listener,
        port,
        one_worker,
    } = started;
    tokio::spawn(crate::upstream::process::reap_forever());
    let fd_limit = mcpgw_net::conn::raise_fd_limit();
    let limits = mcpgw_net::conn::Limits {
        header_timeout: args.header_timeout,
        idle_timeout: args.idle_timeout,
        // Half the descriptors at most: the upstreams' pipes and connections need the rest.
        max_connections: args
            .max_connections
            .min(usize::try_from(fd_limit / 2).unwrap_or(usize::MAX))
            .max(1),
    };
    tracing::debug!(
        fd_limit,
        max_connections = limits.max_connections,
        "client connection limits"
    );
    let handoff = crate::attach::handoff::bind()
        .inspect_err(|e| tracing::info!("sessions are not taken over: {e}"))
        .ok();
    let mut state = app_state(&args, token, &limits);
    if let Some((_, name)) = &handoff {
        let (header, value) = crate::attach::handoff::announce(name);
        Arc::get_mut(&mut state)
            .expect("not shared yet")
            .health_headers
            .insert(header, value);
    }
    if let Some(path) = &args.config {
        preload(&state, path).await?;
    }
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the bound address: {e}"))?;

    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot configure the listener: {e}"))?;
    let listener = tokio::net::TcpListener::from_std(listener)
        .map_err(|e| format!("cannot register the listener: {e}"))?;
    let app = api::router(state.clone(), args.max_body_bytes);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut sessions = None;
    if let Some((socket, _)) = handoff {
        let host = handoff_host(&args, &state, &limits, app.clone(), bound);
        let started =
            crate::attach::handoff::Sessions::start(socket, host, stop_rx.clone(), one_worker);
        // Without them, the socket is closed: attach, refused at it, relays itself.
        sessions = started
            .await
            .inspect_err(|e| tracing::warn!("sessions are not taken over: {e}"))
            .ok();
    }

    announce(&args, port, ready_pipe)?;
    let service = api::hyper_service(app);
    let warn: mcpgw_net::conn::Warn = Arc::new(|message: &str| tracing::warn!("{message}"));
    let server = tokio::spawn(mcpgw_net::conn::serve(
        listener,
        service,
        limits,
        stop_rx,
        Duration::from_secs(2),
        warn,
    ));
    wait_for_signal().await;
    tracing::info!("shutting down: closing every upstream");
    let _ = stop_tx.send(true);
    // Closing the upstreams fails their in-flight calls at once, so the server drains quickly.
    state.registry.shutdown(SHUTDOWN_LIMIT).await;
    let _ = server.await;
    if let Some(sessions) = sessions {
        sessions.end().await;
    }
    if let Some(path) = &args.ready_file {
        crate::ready_file::remove_if_ours(path);
    }
    tracing::info!("stopped");
    Ok(())
}

/// What handed-off sessions are served with: the gateway as attach would have found it.
fn handoff_host(
    args: &ServeArgs,
    state: &AppState,
    limits: &mcpgw_net::conn::Limits,
    router: axum::Router,
    addr: SocketAddr,
) -> Arc<crate::attach::handoff::Taker> {
    use crate::attach::locate::{Gateway, Limits};
    Arc::new(crate::attach::handoff::Taker {
        router,
        gateway: Gateway {
            addr,
            pid: std::process::id(),
            nonce: args.instance_nonce.clone(),
            token_file: args.token_file.clone(),
            launched: false,
            limits: Limits {
                max_connections: limits.max_connections,
                idle_timeout: limits.idle_timeout,
                call_retention: args.call_retention,
                attach_socket: None,
            },
        },
        token: state.token.clone(),
    })
}

/// The state every request shares.
fn app_state(
    args: &ServeArgs,
    token: Option<auth::Token>,
    limits: &mcpgw_net::conn::Limits,
) -> Arc<AppState> {
    Arc::new(AppState {
        registry: Registry::new(Settings {
            call_timeout: args.call_timeout,
            connect_timeout: args.connect_timeout,
            max_reply_bytes: args.max_reply_bytes,
            log_lines_per_sec: args.log_rate,
        }),
        token,
        instance_nonce: args.instance_nonce.clone(),
        health_headers: api::health_headers(limits, args.call_retention),
        calls: crate::rest::calls::Calls::new(crate::rest::calls::Settings {
            retention: args.call_retention,
            budget: args.call_retention_bytes,
        }),
        openapi: serde_json::to_vec(&crate::rest::openapi::document(
            api::surface().into_iter().map(|r| r.doc),
            args.max_body_bytes,
        ))
        .expect("the document serializes")
        .into(),
        connections: Arc::default(),
        connection_limits: crate::mcp::Limits {
            max_connections: args.max_mcp_connections,
            max_queued: args.max_connection_queue,
            max_pending: args.max_pending_host_requests,
            max_line_bytes: args.max_body_bytes,
        },
    })
}

/// Registers the servers of `--config` (each in its own task; a failure is logged).
async fn preload(state: &Arc<AppState>, path: &std::path::Path) -> Result<(), String> {
    let specs = config::load(path)?;
    let scope = Scope::default_scope();
    let adds = specs.into_iter().map(|spec| {
        let (state, scope) = (state.clone(), scope.clone());
        async move {
            let name = spec.name.clone();
            if let Err(e) = state.registry.add(&scope, spec, Default::default()).await {
                tracing::error!(mcp = %name, "preloading from the config failed: {e}");
            }
        }
    });
    futures::future::join_all(adds).await;
    Ok(())
}

/// Says the gateway is ready: the ready file, and the ready line on the pipe or stdout.
fn announce(args: &ServeArgs, port: u16, ready_pipe: &mut Option<OwnedFd>) -> Result<(), String> {
    let ready = mcpgw::wire::DaemonReady {
        port,
        pid: std::process::id(),
        token_file: args.token_file.as_ref().map(|p| p.display().to_string()),
        instance_nonce: args.instance_nonce.clone(),
    };
    if let Some(path) = &args.ready_file {
        crate::ready_file::write(path, &ready)?;
    }
    let ready = serde_json::to_string(&ready).expect("serializable");
    tracing::info!(port, "listening on {}:{port}", args.host);
    match ready_pipe.take() {
        Some(pipe) => {
            let mut pipe = std::fs::File::from(pipe);
            let _ = pipe.write_all(ready.as_bytes());
        }
        None => {
            println!("{ready}");
            let _ = std::io::stdout().flush();
        }
    }
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

fn init_logging(args: &ServeArgs) -> Result<(), String> {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let writer: Box<dyn Write + Send> = match &args.log_file {
        Some(path) => Box::new(crate::log_file::open(path)?),
        None => Box::new(std::io::stderr()),
    };
    let writer = std::sync::Mutex::new(writer);
    let level = LevelFilter::from_level(args.log_level);
    let filter = Targets::new().with_default(level);
    let ansi = args.log_file.is_none() && !args.daemon;
    let registry = tracing_subscriber::registry().with(filter);
    match args.log_format {
        LogFormat::Json => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_target(false)
                    .with_writer(writer),
            )
            .init(),
        LogFormat::Text => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_target(false)
                    .with_writer(writer),
            )
            .init(),
    }
    Ok(())
}

enum Detached {
    /// In the launching process: exit with this once the gateway reported.
    Parent(ExitCode),
    /// In the detached gateway: write the ready line here.
    Child(OwnedFd),
}

/// Forks while the process is still single-threaded (no runtime yet). The child starts a new
/// session with stdio on /dev/null, so the exec channel that launched it sees EOF and returns;
/// the parent waits on a pipe for the child's ready line (or its death) and relays it.
fn detach(args: &ServeArgs) -> Result<Detached, String> {
    // No runtime yet: the process is still single-threaded.
    match mcpgw_sys::process::fork_detached() {
        Err(e) => Err(format!("fork: {e}")),
        Ok(Forked::Child(write_end)) => Ok(Detached::Child(write_end)),
        Ok(Forked::Parent(read_end)) => {
            let mut report = String::new();
            let _ = std::fs::File::from(read_end).read_to_string(&mut report);
            if report.starts_with('{') {
                // Listening is not yet serving: the launch counts only once the gateway answers
                // its own /health with the nonce it was given.
                let port = serde_json::from_str::<mcpgw::wire::DaemonReady>(&report)
                    .map(|r| r.port)
                    .map_err(|e| format!("the gateway reported {report:?}: {e}"))?;
                let mut addr = bind_address(args)?;
                addr.set_port(port);
                if addr.ip().is_unspecified() {
                    addr.set_ip(if addr.is_ipv4() {
                        Ipv4Addr::LOCALHOST.into()
                    } else {
                        std::net::Ipv6Addr::LOCALHOST.into()
                    });
                }
                match crate::client::confirm_health(
                    addr,
                    args.instance_nonce.as_deref(),
                    HEALTH_LIMIT,
                ) {
                    Ok(()) => {
                        println!("{report}");
                        return Ok(Detached::Parent(ExitCode::SUCCESS));
                    }
                    Err(e) => report = format!("the gateway listens on port {port} but {e}"),
                }
            }
            let mut message = if report.trim().is_empty() {
                "the gateway exited during start-up".to_string()
            } else {
                report.trim().to_string()
            };
            if let Some(log) = &args.log_file
                && let Ok(text) = std::fs::read(log)
            {
                let tail = &text[text.len().saturating_sub(4000)..];
                message.push_str(&format!(
                    "\n--- last lines of {} ---\n{}",
                    log.display(),
                    String::from_utf8_lossy(tail)
                ));
            }
            eprintln!("mcpgw-gateway: {message}");
            Ok(Detached::Parent(ExitCode::FAILURE))
        }
    }
}
