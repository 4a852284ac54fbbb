//! Launching and stopping the gateway.

use super::operation::{ExecOutput, Job, Operation, State, Step};
use super::output::GatewayInfo;
use super::request::EXEC_GRACE;
use super::{CallOptions, Client, Shared};
use crate::command::Command;
use crate::command::gateway::{self as text, Launch, STOP_KILLED};
use crate::error::{Error, ErrorKind, tail};
use crate::random;
use crate::wire::DaemonReady;
use crate::wire::output::exit;

/// The launch in flight: what it was given, to check the ready line against.
#[derive(Debug)]
struct StartJob {
    nonce: String,
    state_dir: String,
    token_file: String,
}

/// The stop in flight.
#[derive(Debug)]
struct StopJob;

/// The files and nonce of a new launch: the configured state directory and token file, or
/// fresh ones named after a fresh nonce.
pub(crate) struct NewLaunch {
    pub nonce: String,
    pub state_dir: String,
    pub token_file: String,
}

impl Shared {
    pub(crate) fn new_launch(&self) -> NewLaunch {
        let c = &self.config;
        let nonce = random::mint_nonce();
        let state_dir = c
            .state_dir
            .clone()
            .unwrap_or_else(|| format!("/tmp/mcpgw-{}", &nonce[..16]));
        let token_file = c
            .token_file
            .clone()
            .unwrap_or_else(|| format!("{state_dir}/token"));
        NewLaunch {
            nonce,
            state_dir,
            token_file,
        }
    }
}

impl NewLaunch {
    pub(crate) fn launch<'a>(&'a self, shared: &'a Shared) -> Launch<'a> {
        Launch {
            gateway_path: &shared.config.gateway_path,
            host: &shared.config.host,
            port: shared.config.port,
            state_dir: &self.state_dir,
            token_file: &self.token_file,
            nonce: &self.nonce,
        }
    }
}

impl Client {
    /// Prepares the launch of a gateway: mints the instance nonce, starts
    /// `mcpgw-gateway --daemon` with one command (the gateway mints the token into its 0600
    /// token file inside the sandbox) and confirms the nonce through `/health`.
    pub fn prepare_start_gateway(&self, opts: &CallOptions) -> Operation<GatewayInfo> {
        let timeout = self.timeout(opts);
        let start = (|| {
            if let Some(info) = self.gateway() {
                return Err(Error::invalid_argument(format!(
                    "this client already launched a gateway (pid {}, port {}); \
                     stop it with stop_gateway first",
                    info.pid, info.port
                )));
            }
            let new = self.shared.new_launch();
            let command = Command::new(
                text::launch(&new.launch(&self.shared))?,
                timeout + EXEC_GRACE,
            );
            let job = StartJob {
                nonce: new.nonce,
                state_dir: new.state_dir,
                token_file: new.token_file,
            };
            Ok((State::Job(Box::new(job)), command))
        })();
        Operation::new(self.shared.clone(), "start_gateway", start)
    }

    /// Prepares stopping the gateway this client launched: SIGTERM (only to the process whose
    /// command line carries this launch's nonce), a wait for it to exit, SIGKILL when it has not
    /// within the timeout, then the state directory is removed. Succeeds when it already exited.
    pub fn prepare_stop_gateway(&self, opts: &CallOptions) -> Operation<()> {
        let timeout = self.timeout(opts);
        let start = (|| {
            let Some(info) = self.gateway() else {
                return Err(Error::new(
                    ErrorKind::GatewayNotRunning,
                    "this client has not launched a gateway (or already stopped it)",
                ));
            };
            let text = text::stop(
                info.pid,
                &info.instance_nonce,
                timeout,
                Some(&info.state_dir),
            )?;
            Ok((
                State::Job(Box::new(StopJob) as Box<dyn Job<()>>),
                Command::new(text, timeout + EXEC_GRACE),
            ))
        })();
        Operation::new(self.shared.clone(), "stop_gateway", start)
    }
}

impl Job<GatewayInfo> for StartJob {
    fn advance(&mut self, shared: &Shared, out: ExecOutput) -> Result<Step<GatewayInfo>, Error> {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.exit_code != 0 {
            let hint = match out.exit_code {
                exit::NOT_EXECUTABLE | exit::NOT_FOUND => format!(
                    "; the gateway binary {} cannot be run in the sandbox: install it there \
                     (ensure_gateway_binary) or set the gateway path",
                    shared.config.gateway_path
                ),
                _ => String::new(),
            };
            return Err(Error::new(
                ErrorKind::StartFailed,
                format!(
                    "the gateway did not start (exit {}){hint}: {}",
                    out.exit_code,
                    tail(&stderr, 4000)
                ),
            ));
        }
        // `--daemon` prints this line only after the detached gateway answered its own /health
        // with the nonce, so the launch is confirmed in this one command.
        let ready: DaemonReady = stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or_else(|| {
                Error::new(
                    ErrorKind::StartFailed,
                    format!(
                        "the gateway's launch printed no readiness line {{\"port\",\"pid\",...}}: \
                         stdout {:?}, stderr {:?}",
                        tail(&stdout, 500),
                        tail(&stderr, 1000)
                    ),
                )
            })?;
        if ready.instance_nonce.as_deref() != Some(self.nonce.as_str()) {
            return Err(Error::new(
                ErrorKind::StartFailed,
                format!(
                    "the launched gateway reports nonce {:?}, not the one it was given",
                    ready.instance_nonce
                ),
            ));
        }
        let info = GatewayInfo {
            port: ready.port,
            pid: ready.pid,
            token_file: ready.token_file.unwrap_or_else(|| self.token_file.clone()),
            instance_nonce: self.nonce.clone(),
            state_dir: self.state_dir.clone(),
        };
        shared.learn_launch(&info);
        Ok(Step::Done(info))
    }
}

impl Job<()> for StopJob {
    fn advance(&mut self, shared: &Shared, out: ExecOutput) -> Result<Step<()>, Error> {
        let killed = out.exit_code == STOP_KILLED;
        if out.exit_code == 0 || killed {
            shared.forget_launch();
        }
        if out.exit_code == 0 {
            return Ok(Step::Done(()));
        }
        Err(Error::new(
            ErrorKind::CommandFailed,
            format!(
                "stopping the gateway failed (exit {}): {}{}",
                out.exit_code,
                tail(&String::from_utf8_lossy(&out.stderr), 500),
                if killed {
                    "; its upstream MCP processes may be left running"
                } else {
                    ""
                }
            ),
        ))
    }
}
