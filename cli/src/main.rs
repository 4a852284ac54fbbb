//! `mcpgw`: the host side's command. `mcpgw mcp ...` is an MCP server on this machine for a
//! server that runs inside a sandbox; see `mcpgw --help`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use mcpgw_cli::cli::{self, Command};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let command = match cli::parse(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("mcpgw: {e}");
            return ExitCode::from(2);
        }
    };
    let args = match command {
        Command::Help => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Command::Version => {
            println!("mcpgw {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Command::Mcp(args) => *args,
    };
    // A log that cannot be written is said before anything starts.
    if let Some(path) = &args.audit_log
        && let Err(e) = mcpgw_runner::audit::open_log(path)
    {
        eprintln!("mcpgw: {}", e.message());
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcpgw: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let status = runtime.block_on(async move {
        if args.http.is_some() {
            mcpgw_cli::http::serve(args).await
        } else {
            mcpgw_cli::endpoint::serve_stdio(args).await
        }
    });
    // A read of stdin may still block a thread of the runtime's (it ends only with the
    // client's input): the runtime does not wait for it.
    runtime.shutdown_background();
    ExitCode::from(u8::try_from(status).unwrap_or(1))
}
