//! A client of one gateway in one sandbox, and its operations as sans-IO state machines.
//!
//! - [`config`]: how the client reaches its gateway, and per-call options;
//! - [`operation`]: the [`Operation`] state machine shared by every operation;
//! - `api`: the REST operations (health, MCPs, tools, calls, runtime headers);
//! - `launch` and `install`: starting and stopping the gateway, installing its binary;
//! - `request` and [`response`]: how a REST request travels and how its answer is decoded;
//! - [`output`]: results, typed and type-erased.

mod api;
pub mod config;
mod install;
mod launch;
pub mod operation;
pub mod output;
pub(crate) mod request;
pub mod response;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use config::{CallOptions, Config, DEFAULT_MAX_COMMAND_BYTES, MIN_MAX_COMMAND_BYTES};
pub use operation::{ExecOutput, ExecResult, Operation};
pub use output::{BinaryStatus, GatewayInfo, Output};
pub use request::SessionRequest;

use crate::command::Transport;
use crate::error::{Error, ErrorKind};
use request::Route;

/// What the client knows about its gateway, learned from launches, sessions and probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Known {
    port: Option<u16>,
    token_file: Option<String>,
    state_dir: Option<String>,
    pid: Option<u32>,
    instance_nonce: Option<String>,
    transport: Option<Transport>,
}

/// The configuration and the learned state, shared by a client, its clones and its operations.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    known: Mutex<Known>,
}

impl Shared {
    fn known(&self) -> MutexGuard<'_, Known> {
        // A panic while holding the lock cannot leave `Known` half-written in a harmful way.
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// What the client knew before any launch: the configured gateway.
    fn configured(config: &Config) -> Known {
        Known {
            port: (config.port != 0).then_some(config.port),
            token_file: config.token_file.clone(),
            instance_nonce: config.instance_nonce.clone(),
            transport: config.transport,
            ..Known::default()
        }
    }

    pub(crate) fn learn_transport(&self, transport: Transport) {
        self.known().transport.get_or_insert(transport);
    }

    /// Records a gateway this client (or its session) launched.
    pub(crate) fn learn_launch(&self, info: &GatewayInfo) {
        let mut k = self.known();
        k.port = Some(info.port);
        k.pid = Some(info.pid);
        k.token_file = Some(info.token_file.clone());
        k.state_dir = Some(info.state_dir.clone());
        k.instance_nonce = Some(info.instance_nonce.clone());
        // The binary just ran there, so its built-in client is there too, and it starts faster
        // than curl: in auto mode it is the transport from now on.
        k.transport.get_or_insert(Transport::BuiltIn);
    }

    /// Forgets a stopped gateway: back to what was configured.
    pub(crate) fn forget_launch(&self) {
        let transport = self.known().transport;
        let mut k = self.known();
        *k = Self::configured(&self.config);
        k.transport = k.transport.or(transport);
    }

    pub(crate) fn known_nonce(&self) -> Option<String> {
        self.known().instance_nonce.clone()
    }

    /// Where REST requests go now, or why there is nowhere.
    pub(crate) fn route(&self) -> Result<Route, Error> {
        let k = self.known().clone();
        let c = &self.config;
        let Some(port) = k.port else {
            return Err(Error::new(
                ErrorKind::GatewayNotRunning,
                "no gateway is known to this client: call start_gateway, or configure the port \
                 and token file of a running one",
            ));
        };
        Ok(Route {
            host: c.host.clone(),
            port,
            token_file: k.token_file.clone().unwrap_or_default(),
            gateway_path: c.gateway_path.clone(),
            staging_dir: c
                .staging_dir
                .clone()
                .or(k.state_dir.clone())
                .unwrap_or_else(|| "/tmp".into()),
            max_command: c.max_command_bytes,
            exec_stdin: c.exec_stdin,
            transport: k.transport,
        })
    }
}

/// A client of one gateway in one sandbox.
///
/// Cheap to clone (clones share what was learned); `Send + Sync`: operations may be prepared and
/// driven from several threads at once.
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl Client {
    /// A client with `config`; checks the configuration, runs nothing.
    pub fn new(config: Config) -> Result<Client, Error> {
        config.validate()?;
        Ok(Client {
            shared: Arc::new(Shared {
                known: Mutex::new(Shared::configured(&config)),
                config,
            }),
        })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// The gateway's port, once known.
    pub fn port(&self) -> Option<u16> {
        self.shared.known().port
    }

    /// The transport in use, once known.
    pub fn transport(&self) -> Option<Transport> {
        self.shared.known().transport
    }

    /// The gateway this client launched and has not stopped.
    pub fn gateway(&self) -> Option<GatewayInfo> {
        let k = self.shared.known();
        Some(GatewayInfo {
            port: k.port?,
            pid: k.pid?,
            token_file: k.token_file.clone()?,
            instance_nonce: k.instance_nonce.clone()?,
            state_dir: k.state_dir.clone()?,
        })
    }

    /// An operation that failed before its first command (e.g. an argument that is not UTF-8).
    pub fn failed_operation<T>(&self, name: &'static str, error: Error) -> Operation<T> {
        Operation::new(self.shared.clone(), name, Err(error))
    }

    /// The time limit of a call with `opts`.
    pub(crate) fn timeout(&self, opts: &CallOptions) -> Duration {
        opts.timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(self.shared.config.timeout)
    }
}

#[cfg(test)]
mod tests;
