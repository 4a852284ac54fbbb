//! mcpgw-gateway: the in-sandbox MCP gateway.
//!
//! It owns the upstream MCP sessions (stdio children, streamable HTTP) of a sandbox and serves
//! them on loopback through a small REST surface, wire-compatible with AgentScope 2.0's gateway,
//! behind a per-launch bearer token. `mcpgw-gateway request` is its built-in client;
//! `mcpgw-gateway attach` carries a host's requests over one long-lived exec's stdin and stdout.
//!
//! Its system calls are `mcpgw-sys`'s; the only `unsafe` here sets the allocator's options.

#![deny(unsafe_code)]

mod attach;
mod auth;
mod cli;
mod client;
mod config;
mod error;
mod log_file;
mod mcp;
mod ready_file;
mod registry;
mod rest;
mod scope;
mod serve;
mod upstream;

use std::process::ExitCode;

fn main() -> ExitCode {
    release_memory_promptly();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match cli::parse(&args) {
        Ok(cli::Command::Serve(args)) => serve::run(*args),
        Ok(cli::Command::Request(args)) => client::run(args),
        Ok(cli::Command::Attach(args)) => attach::run(*args),
        Ok(cli::Command::Help) => {
            println!("{}", cli::USAGE);
            ExitCode::SUCCESS
        }
        Ok(cli::Command::Version) => {
            println!("mcpgw-gateway {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpgw-gateway: {e}\n\n{}", cli::USAGE);
            ExitCode::from(2)
        }
    }
}

/// mimalloc: under load it halves the time the gateway spends in the allocator. It is built to
/// commit arena memory as it is used (see .cargo/config.toml), which keeps the gateway near
/// 9 MiB resident.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in mimalloc 3's `mi_option_t`; the binding
/// names no constant for it): how many milliseconds freed memory waits before it goes back to
/// the system.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Freed memory goes back to the system at once. mimalloc delays it (a second by default) and
/// only acts on the delay when it next allocates or frees on that thread, so a gateway that goes
/// quiet after one large message kept the memory for good. `MIMALLOC_PURGE_DELAY` in the
/// environment still wins.
#[allow(unsafe_code)]
fn release_memory_promptly() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's numeric options; called before any other thread exists.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(unsafe_code)]
    fn the_purge_delay_option_is_the_one_set() {
        // SAFETY: reads and sets mimalloc options.
        unsafe {
            // mimalloc 3's default delay is 1000 ms: the index names that option.
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                assert_eq!(
                    libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                    1000
                );
            }
            super::release_memory_promptly();
            if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
                assert_eq!(
                    libmimalloc_sys::mi_option_get(super::MI_OPTION_PURGE_DELAY),
                    0
                );
            }
        }
    }
}
