//! `mcpgw mcp` driven by MCP clients nobody here wrote: the official TypeScript, Python and Go
//! SDK clients run one script of every feature of `@modelcontextprotocol/server-everything`
//! (tools, resources with a subscription and its updates, prompts, completion, logging,
//! progress, cancel, and sampling, elicitation and roots answered by the SDK's own handlers)
//! against the server inside a Docker container, through the endpoint over stdio and over
//! streamable HTTP; every answer is compared with the same client's run straight to a
//! server-everything on this machine. `@modelcontextprotocol/inspector-cli` lists the tools.

mod common;

use std::sync::OnceLock;

use common::{DockerBox, HttpEndpoint, endpoint_argv};
use mcpgw_testkit::clients::{Sdk, assert_same_answers};
use mcpgw_testkit::everything_js;
use serde_json::Value;

/// Each SDK's run straight to server-everything over stdio on this machine, once.
fn direct(sdk: Sdk) -> &'static Value {
    static RUNS: [OnceLock<Value>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let at = Sdk::ALL.iter().position(|s| *s == sdk).unwrap();
    RUNS[at].get_or_init(|| {
        let js = everything_js().display().to_string();
        sdk.run(["stdio", "node", &js, "stdio"])
    })
}

fn over_stdio(sdk: Sdk) {
    let Some(b) = DockerBox::start() else { return };
    let mut args = vec!["stdio".to_string()];
    args.extend(endpoint_argv(&b, &[]));
    let got = sdk.run(&args);
    assert_same_answers(sdk, &got, direct(sdk));
    b.assert_nothing_left();
}

fn over_http(sdk: Sdk) {
    let Some(b) = DockerBox::start() else { return };
    let endpoint = HttpEndpoint::start(&b, &[]);
    let got = sdk.run([
        "http",
        &endpoint.url,
        &endpoint.token_file.display().to_string(),
    ]);
    assert_same_answers(sdk, &got, direct(sdk));
    endpoint.stop();
    b.assert_nothing_left();
}

#[test]
fn typescript_sdk_over_stdio() {
    over_stdio(Sdk::TypeScript);
}

#[test]
fn python_sdk_over_stdio() {
    over_stdio(Sdk::Python);
}

#[test]
fn go_sdk_over_stdio() {
    over_stdio(Sdk::Go);
}

#[test]
fn typescript_sdk_over_http() {
    over_http(Sdk::TypeScript);
}

#[test]
fn python_sdk_over_http() {
    over_http(Sdk::Python);
}

#[test]
fn go_sdk_over_http() {
    over_http(Sdk::Go);
}

/// What server-everything does on its own right after the TypeScript SDK client's
/// `notifications/initialized` (its list change and its `roots/list`), as `after_initialize.mjs`
/// sees it, over `args`.
fn after_initialize<I, S>(args: I) -> Value
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    mcpgw_testkit::clients::node_modules();
    let out = std::process::Command::new("node")
        .arg(mcpgw_testkit::clients::clients_dir().join("ts/after_initialize.mjs"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "after_initialize.mjs failed: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Each client meets the server as straight: with an upstream session of its own, the server's
/// messages right after the client's `notifications/initialized` reach it, over stdio and over
/// HTTP (a shared session was initialized before the client came, and its list changes and
/// `roots/list` went to nobody).
#[test]
fn what_the_server_does_right_after_initialized_reaches_the_client() {
    let js = everything_js().display().to_string();
    let direct = after_initialize(["stdio", "node", &js, "stdio"]);
    assert_eq!(
        direct,
        serde_json::json!({"tools/list_changed": true, "roots/list": true}),
        "straight to server-everything"
    );
    let Some(b) = DockerBox::start() else { return };
    let mut args = vec!["stdio".to_string()];
    args.extend(endpoint_argv(&b, &[]));
    assert_eq!(
        after_initialize(&args),
        direct,
        "through the stdio endpoint"
    );
    let endpoint = HttpEndpoint::start(&b, &[]);
    let http = after_initialize([
        "http",
        &endpoint.url,
        &endpoint.token_file.display().to_string(),
    ]);
    assert_eq!(http, direct, "through the HTTP endpoint");
    endpoint.stop();
    b.wait_nothing_left();
}
