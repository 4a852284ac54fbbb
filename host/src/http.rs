//! The streamable HTTP endpoint.

use crate::cli::McpArgs;

/// Serves over streamable HTTP until interrupted; returns the exit status.
pub async fn serve(_args: McpArgs) -> i32 {
    eprintln!("mcpgw mcp: --http is not available in this build");
    2
}
