//! `mcpgw-testserver`: the MCP server mcpgw's tests run against, over stdio or streamable HTTP.
//!
//! ```text
//! mcpgw-testserver [stdio]
//! mcpgw-testserver http [--host 127.0.0.1] [--port P]
//! ```
//! In HTTP mode the server prints one line, `listening http://HOST:PORT/mcp`, once it is bound.

mod rounds;
mod server;
mod stdout;
mod tools;

use std::{io::Write as _, process::ExitCode, sync::Arc, time::Duration};

use rmcp::{
    ServiceExt as _,
    transport::{
        StreamableHttpServerConfig, StreamableHttpService,
        streamable_http_server::session::local::LocalSessionManager,
    },
};

use crate::server::{Shared, TestServer, Transport};

const USAGE: &str = "usage: mcpgw-testserver [stdio]
       mcpgw-testserver http [--host HOST] [--port PORT]

  stdio   MCP over stdin/stdout (the default)
  http    streamable HTTP at /mcp; prints `listening http://HOST:PORT/mcp` once bound
          (--host defaults to 127.0.0.1, --port to 0: any free port)
";

/// Upper bound for one HTTP request body; above the gateway's own 64 MiB cap,
/// so a request the gateway accepts is never refused here.
const MAX_HTTP_BODY: usize = 128 * 1024 * 1024;

/// How long open streams may delay exit after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Writes one line about a notable event to stderr.
pub fn log(message: &str) {
    eprintln!("mcpgw-testserver[{}]: {message}", std::process::id());
}

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
enum Command {
    Stdio,
    Http { host: String, port: u16 },
    Help,
}

fn parse_args(args: &[String]) -> Result<Command, String> {
    let Some((mode, rest)) = args.split_first() else {
        return Ok(Command::Stdio);
    };
    match mode.as_str() {
        "stdio" if rest.is_empty() => Ok(Command::Stdio),
        "stdio" => Err(format!("unexpected argument `{}`", rest[0])),
        "-h" | "--help" | "help" => Ok(Command::Help),
        "http" => {
            let mut host = "127.0.0.1".to_owned();
            let mut port = 0u16;
            let mut rest = rest.iter();
            while let Some(arg) = rest.next() {
                let (flag, inline) = match arg.split_once('=') {
                    Some((flag, value)) if flag.starts_with("--") => (flag, Some(value.to_owned())),
                    _ => (arg.as_str(), None),
                };
                if flag != "--host" && flag != "--port" {
                    return Err(format!("unexpected argument `{arg}`"));
                }
                let value = match inline {
                    Some(value) => value,
                    None => rest
                        .next()
                        .cloned()
                        .ok_or_else(|| format!("{flag} needs a value"))?,
                };
                if flag == "--host" {
                    // Accept the bracketed form of an IPv6 address too.
                    host = value
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .to_owned();
                    if host.is_empty() {
                        return Err("--host must not be empty".to_owned());
                    }
                } else {
                    port = value
                        .parse()
                        .map_err(|_| format!("invalid port `{value}`"))?;
                }
            }
            Ok(Command::Http { host, port })
        }
        other => Err(format!("unknown command `{other}`")),
    }
}

fn main() -> ExitCode {
    let args: Result<Vec<String>, _> = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string())
        .collect();
    let command = match args {
        Ok(args) => parse_args(&args),
        Err(arg) => Err(format!("argument is not UTF-8: {}", arg.to_string_lossy())),
    };
    let command = match command {
        Ok(command) => command,
        Err(message) => {
            eprint!("mcpgw-testserver: {message}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if command == Command::Help {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            log(&format!("cannot start the tokio runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        match command {
            Command::Http { host, port } => serve_http(&host, port).await,
            _ => serve_stdio().await,
        }
    });
    // Exit without dropping the runtime: a blocking stdin read cannot be interrupted
    // and would hold the process open.
    let _ = std::io::stdout().flush();
    std::process::exit(code)
}

async fn serve_stdio() -> i32 {
    log(&format!(
        "version {} serving MCP over stdio",
        env!("CARGO_PKG_VERSION")
    ));
    let (reader, writer) = rmcp::transport::stdio_pipes();
    let (writer, injector, relay) = stdout::relay(writer);
    let reader = stdout::Bounded::new(reader, injector.clone());
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(reader, writer)
        .with_max_line_length(stdout::MAX_LINE_BYTES + 1);
    let server = TestServer::new(Shared::new(), Transport::Stdio(injector));
    let code = async {
        let running = match server.serve(transport).await {
            Ok(running) => running,
            Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
                log("stdin closed before initialize");
                return 0;
            }
            Err(e) => {
                log(&format!("session failed to start: {e}"));
                return 1;
            }
        };
        match running.waiting().await {
            Ok(reason) => {
                log(&format!("stdio session ended ({reason:?})"));
                0
            }
            Err(e) => {
                log(&format!("stdio session failed: {e}"));
                1
            }
        }
    }
    .await;
    // Everything rmcp wrote reaches stdout before the process exits.
    let _ = relay.await;
    code
}

async fn serve_http(host: &str, port: u16) -> i32 {
    let listener = match tokio::net::TcpListener::bind((host, port)).await {
        Ok(listener) => listener,
        Err(e) => {
            log(&format!("cannot listen on {host} port {port}: {e}"));
            return 1;
        }
    };
    let addr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            log(&format!("cannot read the bound address: {e}"));
            return 1;
        }
    };

    // rmcp checks Host headers against this list (entries without a port match any port).
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts([
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
            host.to_owned(),
            addr.ip().to_string(),
        ])
        .with_max_request_body_bytes(MAX_HTTP_BODY);
    if addr.ip().is_unspecified() {
        // Bound to every interface: any address of the machine may be in Host.
        config = config.disable_allowed_hosts();
    }
    let stop = config.cancellation_token.clone();
    let shared = Shared::new();
    let service = StreamableHttpService::new(
        move || Ok(TestServer::new(shared.clone(), Transport::Http)),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let app = axum::Router::new().route_service("/mcp", service);

    log(&format!(
        "version {} serving MCP over streamable HTTP at http://{addr}/mcp",
        env!("CARGO_PKG_VERSION")
    ));
    let mut out = std::io::stdout().lock();
    if writeln!(out, "listening http://{addr}/mcp")
        .and_then(|()| out.flush())
        .is_err()
    {
        log("cannot write the listening line to stdout");
    }
    drop(out);

    let graceful_stop = stop.clone();
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        let signal = shutdown_signal().await;
        log(&format!("{signal} received, shutting down"));
        // Ends the SSE streams and sessions, which graceful shutdown waits for.
        graceful_stop.cancel();
    });
    tokio::select! {
        result = serve => match result {
            Ok(()) => 0,
            Err(e) => {
                log(&format!("HTTP server failed: {e}"));
                1
            }
        },
        () = async { stop.cancelled().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            log("connections still open after the grace period; exiting anyway");
            0
        }
    }
}

/// Waits for SIGTERM or SIGINT and names it.
async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return "SIGINT";
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "SIGINT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        parse_args(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    fn http(host: &str, port: u16) -> Command {
        Command::Http {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn command_line() {
        assert_eq!(parse(&[]), Ok(Command::Stdio));
        assert_eq!(parse(&["stdio"]), Ok(Command::Stdio));
        assert_eq!(parse(&["http"]), Ok(http("127.0.0.1", 0)));
        assert_eq!(
            parse(&["http", "--port", "8080", "--host", "localhost"]),
            Ok(http("localhost", 8080))
        );
        assert_eq!(
            parse(&["http", "--port=0", "--host=[::1]"]),
            Ok(http("::1", 0))
        );
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
        for bad in [
            &["stdio", "x"][..],
            &["serve"],
            &["http", "--port"],
            &["http", "--port", "65536"],
            &["http", "--port", "-1"],
            &["http", "--host", ""],
            &["http", "--verbose"],
            &["http", "8080"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
