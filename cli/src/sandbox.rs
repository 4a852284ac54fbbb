//! The sandbox as the endpoint sets it up: the gateway installed and launched where needed, the
//! session channel opened, the servers registered; and undone at the end.

use mcpgw::Error;
use mcpgw::client::Output;
use mcpgw::driver::{Backend, HostConfig, Op, Submit};
use std::path::PathBuf;

use crate::cli::log;
use crate::cli::{Level, McpArgs};
use mcpgw_runner::Host;

/// The time limit of each step of the tear-down.
const TEAR_DOWN_STEP_MS: u64 = 10_000;

/// The sandbox set up for the endpoint: its host driver and what to undo at the end.
pub struct Sandbox {
    /// The driver.
    pub host: Host,
    /// The servers registered, by name.
    pub servers: Vec<String>,
    /// Whether the session launched the gateway (then it is stopped at the end).
    launched: bool,
    level: Level,
}

fn submit(op: Op, timeout_ms: u64) -> Submit {
    let mut s = Submit::new(op);
    s.timeout_ms = Some(timeout_ms);
    s
}

impl Sandbox {
    /// Installs and launches the gateway as needed, opens the session, registers the servers.
    pub async fn set_up(args: &McpArgs) -> Result<Sandbox, Error> {
        let binary = host_gateway_binary(args);
        let audit = args
            .audit_log
            .as_deref()
            .map(mcpgw_runner::audit::open_log)
            .transpose()?;
        let mut config = HostConfig::new(args.backend.clone());
        config.audit = audit.is_some();
        config.audit_arguments = args.audit_arguments;
        config.timeout_ms = args.timeout_ms;
        config.policy = args.policy.clone();
        // The endpoint's own gateway, in a directory of its own: ended with the endpoint.
        let tag = mcpgw::random::hex_id();
        config.state_dir = Some(format!("/tmp/mcpgw-mcp-{}", &tag[..12]));
        let install = match (&args.gateway, &binary, &args.backend) {
            (Some(path), _, _) => {
                config.gateway_path = path.clone();
                binary.as_ref().filter(|_| path.starts_with('/'))
            }
            // The local machine runs the binary where it is.
            (None, Some(b), Backend::Local { .. }) => {
                config.gateway_path = b.display().to_string();
                None
            }
            (None, Some(_), _) => {
                config.gateway_path =
                    format!("/tmp/mcpgw-bin/mcpgw-gateway-{}", env!("CARGO_PKG_VERSION"));
                binary.as_ref()
            }
            (None, None, _) => {
                config.gateway_path = "mcpgw-gateway".into();
                None
            }
        };
        let host = Host::start_audited(config, audit)?;
        if let Some(bin) = install {
            host.run(
                submit(
                    Op::EnsureGatewayBinary {
                        binary_path: bin.display().to_string(),
                    },
                    args.timeout_ms,
                ),
                None,
            )
            .await?;
        }
        let launched = match host
            .run(submit(Op::OpenSession {}, args.timeout_ms), None)
            .await?
        {
            Output::Session(hello) => hello.launched,
            _ => false,
        };
        let mut sandbox = Sandbox {
            host,
            servers: Vec::new(),
            launched,
            level: args.log_level,
        };
        for (name, spec) in &args.servers {
            let added = sandbox
                .host
                .run(
                    submit(Op::AddMcp { spec: spec.clone() }, args.timeout_ms),
                    None,
                )
                .await;
            if let Err(e) = added {
                sandbox.tear_down().await;
                return Err(e.context(&format!("starting the server {name:?} in the sandbox")));
            }
            sandbox.servers.push(name.clone());
        }
        Ok(sandbox)
    }

    /// Removes the servers, stops a gateway the session launched, closes the session; each
    /// step bounded by [`TEAR_DOWN_STEP_MS`], so that a sandbox that is gone or hangs does not
    /// hold the endpoint.
    pub async fn tear_down(&self) {
        let op = |op: Op| self.host.run(submit(op, TEAR_DOWN_STEP_MS), None);
        for name in &self.servers {
            if let Err(e) = op(Op::RemoveMcp { name: name.clone() }).await {
                log(self.level, Level::Warn, &format!("removing {name:?}: {e}"));
            }
        }
        if self.launched
            && let Err(e) = op(Op::StopGateway {}).await
        {
            log(
                self.level,
                Level::Warn,
                &format!("stopping the gateway: {e}"),
            );
        }
        let _ = op(Op::CloseSession {}).await;
    }
}

/// The static gateway on this machine to install into the sandbox, if one is known.
pub fn host_gateway_binary(args: &McpArgs) -> Option<PathBuf> {
    if let Some(p) = &args.gateway_binary {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os("MCPGW_GATEWAY_BINARY") {
        return Some(p.into());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("mcpgw-gateway"),
        dir.join("../libexec/mcpgw/mcpgw-gateway"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}
