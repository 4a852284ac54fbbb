//! Every server of an `mcpServers` file behind one endpoint, their names prefixed.

use crate::cli::McpArgs;

/// Serves the servers of `args` over stdio until the client ends; returns the exit status.
pub async fn serve_stdio(_args: McpArgs) -> i32 {
    eprintln!("mcpgw mcp: --config is not available in this build");
    2
}
