//! `mcpgw-gateway attach`: one long-lived exec (`docker exec -i`, `kubectl exec -i`, an E2B
//! background command with stdin, a local pipe) carries every request of a host, multiplexed,
//! in the frames of [`mcpgw::wire::frame`].
//!
//! One thread does it all when stdin and stdout can be polled (pipes, sockets, terminals: every
//! exec channel), so a frame never waits for another thread to be scheduled: a single-threaded
//! async runtime reads and parses frames ([`input`]), relays requests to the gateway over a
//! keep-alive connection pool that fits the gateway's limits ([`pool`]), many at once
//! ([`relay`]), writes each burst of answers with one `write` ([`output`]), and keeps the
//! heartbeat ([`liveness`]). Stdin or stdout that is a file gets a blocking thread instead.
//! Before any of it, [`locate`] finds the gateway (and with `--launch` starts one), checks that
//! it is the one asked for, and reads its limits.

mod acks;
mod connection;
mod exchange;
pub mod handoff;
mod input;
mod liveness;
pub mod locate;
mod output;
mod pool;
mod relay;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use mcpgw::wire::frame::{GatewayFrame, Hello, VERSION};

use crate::cli::AttachArgs;

/// How long the end of a session waits for stdout to take the last frames.
pub(crate) const FLUSH_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

/// A reason to exit before the session starts, with the exit status.
#[derive(Debug)]
pub struct Failure {
    /// The exit status.
    pub code: u8,
    /// Why, for a person.
    pub message: String,
}

impl Failure {
    fn new(code: i32, message: impl Into<String>) -> Failure {
        Failure {
            code: code as u8,
            message: message.into(),
        }
    }
}

/// Runs a session until stdin ends; returns the process exit status.
pub fn run(args: AttachArgs) -> ExitCode {
    // Raw mode before anything is read, so a PTY echoes none of the host's frames back.
    let terminal = mcpgw_sys::tty::RawMode::enter();
    let code = match attach(args, terminal.is_active()) {
        Ok(code) => code,
        Err(f) => {
            let _ = writeln!(std::io::stderr(), "mcpgw-gateway attach: {}", f.message);
            ExitCode::from(f.code)
        }
    };
    drop(terminal);
    code
}

fn attach(args: AttachArgs, on_terminal: bool) -> Result<ExitCode, Failure> {
    init_logging(&args, on_terminal)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new(1, format!("cannot start the async runtime: {e}")))?;
    let gateway = runtime.block_on(locate::locate(&args))?;
    let auth = locate::authorization(&gateway)?;
    let (max_in_flight, connections) = relay::fit(
        args.max_in_flight.unwrap_or(usize::MAX),
        gateway.limits.max_connections,
    );
    if let Some(asked) = args.max_in_flight.filter(|&n| n > max_in_flight) {
        tracing::info!(
            "relaying at most {max_in_flight} requests at once (not --max-in-flight {asked}): the gateway serves {} connections (--max-connections)",
            gateway.limits.max_connections
        );
    }
    tracing::info!(
        port = gateway.addr.port(),
        pid = gateway.pid,
        launched = gateway.launched,
        "relaying to the gateway at {}",
        gateway.addr
    );

    let hello = GatewayFrame::Hello(Hello {
        v: VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
        port: gateway.addr.port(),
        pid: gateway.pid,
        instance_nonce: gateway.nonce.clone(),
        token_file: gateway.token_file.as_ref().map(|p| p.display().to_string()),
        launched: gateway.launched,
        max_frame_bytes: args.max_frame_bytes as u64,
        heartbeat_ms: args.heartbeat.as_millis() as u64,
        retention_ms: gateway.limits.call_retention.as_millis() as u64,
    });
    let mut signals = {
        let _inside = runtime.enter();
        Signals::install()
    };
    if let Some(socket) = gateway.limits.attach_socket.as_deref()
        && !args.no_handoff
    {
        let offer = handoff::Offer {
            authorization: auth
                .as_ref()
                .map(|a| a.to_str().expect("visible ASCII").into()),
            first: String::from_utf8(relay::encode(&hello)).expect("JSON"),
            max_frame_bytes: args.max_frame_bytes,
            heartbeat_ms: args.heartbeat.as_millis() as u64,
            heartbeat_timeout_ms: args.heartbeat_timeout.as_millis() as u64,
            max_in_flight: args.max_in_flight,
            max_mcp_connections: args.max_mcp_connections,
        };
        let offered = handoff::offer(socket, gateway.pid, &offer, &mut signals);
        if let Some(code) = handed_off(runtime.block_on(offered))? {
            return Ok(code);
        }
    }
    let (ending, written) = runtime.block_on(async {
        let live = liveness::Liveness::new(args.heartbeat, args.heartbeat_timeout);
        let (out, writer) = output::start(
            output::stdout(),
            relay::encode(&hello),
            live.written.clone(),
        );
        let (frames, _reader) =
            input::start(input::stdin(), args.max_frame_bytes, live.read.clone());
        // Reused only well within the gateway's idle timeout: it never closes one under a
        // request.
        let pool = pool::Pool::new(gateway.addr, connections, gateway.limits.idle_timeout / 2);
        let relay = Arc::new(relay::Relay::new(
            &gateway,
            relay::Route::Pool(pool),
            auth,
            out.clone(),
            args.max_mcp_connections,
        ));
        let stop = async { relay::Ending::Signal(signals.next().await) };
        let ending = relay::run(relay, frames, max_in_flight, live, FLUSH_LIMIT, stop).await;
        (ending, writer.finish(&out, FLUSH_LIMIT).await)
    });
    // Dropping the runtime drops every request task left (its connection closes, which
    // cancels the call in the gateway) and the stdin and stdout registrations, which put back
    // their files' blocking mode.
    drop(runtime);
    if let Err(e) = &written {
        tracing::warn!("the last frames were not all written: {e}");
    }
    tracing::info!("session ended: {ending}");
    Ok(if ended_well(ending, &written) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The exit status of a session the gateway served; `None` when attach is to relay it.
fn handed_off(
    offered: Result<handoff::Served, handoff::NotTaken>,
) -> Result<Option<ExitCode>, Failure> {
    match offered {
        Ok(served) => {
            tracing::info!("session ended: {}", served.ending);
            Ok(Some(if served.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }))
        }
        Err(handoff::NotTaken::Declined(why)) => {
            tracing::info!("the gateway did not take the session ({why}): relaying it here");
            Ok(None)
        }
        Err(handoff::NotTaken::Unknown(why)) => Err(Failure::new(
            1,
            format!("handing the session to the gateway failed: {why}"),
        )),
    }
}

/// Whether a session that ended so ended well: a silent host, a closed stdout or frames not
/// all written are failures.
fn ended_well(ending: relay::Ending, written: &std::io::Result<()>) -> bool {
    !matches!(
        (ending, written),
        (relay::Ending::OutputClosed | relay::Ending::Silent(_), _) | (_, Err(_))
    )
}

/// The signals that stop a session.
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers (inside the runtime).
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        Signals {
            term: signal(SignalKind::terminate()).expect("installing a SIGTERM handler"),
            int: signal(SignalKind::interrupt()).expect("installing a SIGINT handler"),
            hup: signal(SignalKind::hangup()).expect("installing a SIGHUP handler"),
        }
    }

    /// The names [`Signals::next`] gives.
    pub const NAMES: [&'static str; 3] = ["SIGTERM", "SIGINT", "SIGHUP"];

    /// The next signal's name.
    pub async fn next(&mut self) -> &'static str {
        let [term, int, hup] = Self::NAMES;
        tokio::select! {
            _ = self.term.recv() => term,
            _ = self.int.recv() => int,
            _ = self.hup.recv() => hup,
        }
    }
}

/// Logs go to `--log-file`, else stderr, except on a terminal session where stderr is the
/// same terminal as stdout: log lines there would land among the frames.
fn init_logging(args: &AttachArgs, on_terminal: bool) -> Result<(), Failure> {
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::prelude::*;
    let (writer, level): (Box<dyn Write + Send>, LevelFilter) = match &args.log_file {
        Some(path) => (
            Box::new(crate::log_file::open(path).map_err(|e| Failure::new(1, e))?),
            LevelFilter::from_level(args.log_level),
        ),
        None if on_terminal && mcpgw_sys::fs::is_terminal(2) => {
            (Box::new(std::io::sink()), LevelFilter::OFF)
        }
        None => (
            Box::new(std::io::stderr()),
            LevelFilter::from_level(args.log_level),
        ),
    };
    tracing_subscriber::registry()
        .with(level)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_target(false)
                .with_writer(std::sync::Mutex::new(writer)),
        )
        .init();
    Ok(())
}
