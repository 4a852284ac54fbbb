//! Drop-in compatibility: AgentScope 2.0.11's own host client (`GatewayClient` with its
//! `LocalBackend`, installed from PyPI) drives mcpgw-gateway launched with AgentScope's flags.

use std::process::{Command, Stdio};

use mcpgw_testkit::*;

#[test]
fn agentscope_host_client_drives_the_gateway() {
    let python = venv_bin("python");
    let port = free_port();
    // secrets.token_urlsafe can begin with '-': the launch line must take it.
    let token = "-Kx9_token-with-dash";
    let nonce = mcpgw::random::mint_nonce();
    let mut gateway = Command::new(gateway_bin())
        .args([
            "--port",
            &port.to_string(),
            "--auth-token",
            token,
            "--instance-nonce",
            &nonce,
        ])
        .env_remove("MCPGW_TOKEN")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_port(port);
    let http = testserver_http();
    let path = format!(
        "{}:{}",
        python.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(&python)
        .arg(repo().join("tests/compat/agentscope_host.py"))
        .env("PATH", path)
        .env("GW_PORT", port.to_string())
        .env("GW_TOKEN", token)
        .env("GW_NONCE", &nonce)
        .env("TESTSERVER", testserver_bin())
        .env("TESTSERVER_HTTP_URL", &http.url)
        .output()
        .unwrap();
    let _ = gateway.kill();
    let _ = gateway.wait();
    assert!(
        out.status.success(),
        "AgentScope's host client failed against mcpgw-gateway:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
