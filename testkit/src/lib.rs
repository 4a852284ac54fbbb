//! What the test suites of the gateway and of the test server share, so that no helper is
//! written twice: temporary directories, processes and their output, ports and raw HTTP, a real
//! gateway process with a client for its REST surface, a host's end of a session channel, Docker
//! sandboxes, and the MCP servers the tests run.
//!
//! Dev-only: nothing here ships.

pub mod attach;
pub mod clients;
pub mod container;
pub mod fs;
pub mod gateway;
pub mod mcp;
pub mod net;
pub mod process;
pub mod servers;

pub use attach::{
    Attach, Daemon, Frame, LIMIT, attach_command, chunk_text, echo_requests, gateway_and_attach,
    gateway_of_and_attach, ok_res, slow_args, spawn_attach, spawn_channel, wait_file,
};
pub use fs::{TempDir, appears, wait_for_file};
pub use gateway::{Gateway, Reply, start_gateway, start_gateway_with, start_gateway_with_env};
pub use mcp::{strings_at, tool_names};
pub use net::{RawResponse, free_port, raw_request, wait_port};
pub use process::{
    Captured, Guarded, RssSampler, peak_rss_kib, process_alive, processes_in_group,
    processes_where, rss_kib, stdout_of, succeeded, wait_child, wait_gone,
};
pub use servers::{
    Server, TESTSERVER_TOOLS, everything_http, everything_js, everything_sse, gateway_bin,
    http_spec, repo, rogue_sse, rogue_stdio, static_gateway_bin, static_gateway_path, target_root,
    testserver_bin, testserver_http, testserver_stdio, venv_bin,
};
