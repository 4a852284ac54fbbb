//! `make demo`: the main job end to end through libmcpgw, on an embedded default.
//!
//! A local directory plays the sandbox: every command the library builds runs there with
//! `sh -c`, exactly as it would through `docker exec` or `kubectl exec`. The gateway is launched
//! in it, the bundled test MCP server is registered, its tools are listed, one is called and the
//! ToolChunk printed; then the gateway is stopped and the directory removed.
//!
//! ```text
//! cargo run --example demo [-- GATEWAY TESTSERVER]
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use mcpgw::{CallOptions, Client, Config, LocalShell};

fn run(gateway: &Path, testserver: &Path, sandbox: &Path) -> Result<(), mcpgw::Error> {
    let exec = LocalShell::new().in_dir(sandbox);
    let client = Client::new(Config {
        gateway_path: gateway.display().to_string(),
        state_dir: Some(sandbox.join("state").display().to_string()),
        ..Config::default()
    })?;
    let opts = CallOptions::default();

    let info = client.start_gateway(&exec, &opts)?;
    println!(
        "== gateway launched in {}: port {}, pid {} (token in {})",
        sandbox.display(),
        info.port,
        info.pid,
        info.token_file
    );
    let result = (|| {
        let spec = serde_json::json!({
            "name": "demo",
            "is_stateful": true,
            "mcp_config": {"type": "stdio_mcp", "command": testserver, "args": ["stdio"]},
        });
        client.add_mcp(&exec, &opts, &spec.to_string())?;
        println!("== registered the bundled test server as \"demo\"");
        let tools = client.list_tools(&exec, &opts, "demo")?;
        println!("== {} tools:", tools.len());
        for tool in &tools {
            println!(
                "   {:<14} {}",
                tool.name,
                tool.description.as_deref().unwrap_or("")
            );
        }
        let chunk = client.call_tool(
            &exec,
            &opts,
            "demo",
            "echo",
            r#"{"text": "hello from inside the sandbox"}"#,
        )?;
        println!("== echo answered with this ToolChunk:");
        println!(
            "{}",
            serde_json::to_string_pretty(&chunk).expect("serializable")
        );
        Ok(())
    })();
    client.stop_gateway(&exec, &opts)?;
    println!("== gateway stopped");
    result
}

fn main() -> ExitCode {
    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/debug");
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let gateway = args.next().unwrap_or_else(|| target.join("mcpgw-gateway"));
    let testserver = args
        .next()
        .unwrap_or_else(|| target.join("mcpgw-testserver"));
    for bin in [&gateway, &testserver] {
        if !bin.exists() {
            eprintln!(
                "{} is missing: run `make demo` (it builds it)",
                bin.display()
            );
            return ExitCode::FAILURE;
        }
    }
    let sandbox = std::env::temp_dir().join(format!("mcpgw-demo-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&sandbox) {
        eprintln!("cannot create {}: {e}", sandbox.display());
        return ExitCode::FAILURE;
    }
    let outcome = run(&gateway, &testserver, &sandbox);
    let _ = std::fs::remove_dir_all(&sandbox);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::FAILURE
        }
    }
}
