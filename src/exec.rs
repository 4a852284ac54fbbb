//! The blocking driver: runs an [`Operation`]'s commands through an [`Exec`] until it finishes.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::client::{
    BinaryStatus, CallOptions, Client, ExecOutput, GatewayInfo, HealthInfo, Operation, Output,
};
use crate::error::{Error, ErrorKind};
use crate::wire::{McpSpec, Tool, ToolChunk};

/// Runs one `sh -c` command inside the sandbox: `docker exec`, `kubectl exec`, `nsenter`, an
/// SDK's `commands.run`, ...
pub trait Exec {
    /// Runs `command` with `sh -c` and returns its exit status and output, or why the backend
    /// could not run it. `timeout` is how long the command may take.
    fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, String>;
}

impl<F> Exec for F
where
    F: Fn(&str, Duration) -> Result<ExecOutput, String>,
{
    fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, String> {
        self(command, timeout)
    }
}

/// A ready-made [`Exec`] for a sandbox that is a local directory (or no sandbox at all): runs
/// each command with `sh -c` (or another shell, e.g. `busybox sh`) on this machine. A command that
/// overruns its timeout is killed and reported as failed to run. The library's only I/O, and
/// only when a host picks it.
#[derive(Debug, Clone)]
pub struct LocalShell {
    shell: Vec<String>,
    dir: Option<std::path::PathBuf>,
}

impl Default for LocalShell {
    fn default() -> Self {
        LocalShell::new()
    }
}

impl LocalShell {
    /// `sh -c COMMAND` in the current directory.
    pub fn new() -> Self {
        LocalShell {
            shell: vec!["sh".into(), "-c".into()],
            dir: None,
        }
    }

    /// Another shell, given as the argv before the command (e.g. `["busybox", "sh", "-c"]`).
    pub fn with_shell(shell: &[&str]) -> Self {
        LocalShell {
            shell: shell.iter().map(|s| s.to_string()).collect(),
            dir: None,
        }
    }

    /// Runs the commands in `dir`.
    pub fn in_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }
}

impl Exec for LocalShell {
    fn exec(&self, command: &str, timeout: Duration) -> Result<ExecOutput, String> {
        use std::io::Read;
        use std::os::unix::process::{CommandExt, ExitStatusExt};
        use std::process::{Command, Stdio};
        let (program, args) = self.shell.split_first().ok_or("no shell given")?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so that a timeout ends everything the command started.
            .process_group(0);
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        // Like `docker exec`, the command is done when its output streams close; each stream is
        // drained on a thread that reports its end, so completion is seen at once.
        let (tx, rx) = std::sync::mpsc::channel();
        let pipes: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().expect("stdout is piped")),
            Box::new(child.stderr.take().expect("stderr is piped")),
        ];
        for (i, mut pipe) in pipes.into_iter().enumerate() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                let _ = tx.send((i, buf));
            });
        }
        let deadline = std::time::Instant::now() + timeout;
        let mut output = [Vec::new(), Vec::new()];
        let mut open = 2;
        while open > 0 {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let Ok((i, buf)) = rx.recv_timeout(left) else {
                // SAFETY: signals the process group led by our own child, not yet reaped.
                unsafe { libc::killpg(child.id() as libc::pid_t, libc::SIGKILL) };
                let _ = child.wait();
                return Err(format!(
                    "the command did not finish within {timeout:?} and was killed"
                ));
            };
            output[i] = buf;
            open -= 1;
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        let [stdout, stderr] = output;
        Ok(ExecOutput {
            exit_code: status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            stdout,
            stderr,
        })
    }
}

/// Drives `op` to its end through `exec`: the blocking form of every operation.
pub fn run(mut op: Operation, exec: &(impl Exec + ?Sized)) -> Result<Output, Error> {
    while let Some(cmd) = op.command() {
        let result = exec.exec(&cmd.text, cmd.timeout);
        op.complete(result)?;
    }
    op.finish()
}

/// Reads a file on the host, e.g. the gateway binary to upload.
pub fn read_host_file(path: &Path) -> Result<Arc<[u8]>, Error> {
    std::fs::read(path).map(Arc::from).map_err(|e| {
        Error::new(
            ErrorKind::HostIo,
            format!("cannot read {} on the host: {e}", path.display()),
        )
    })
}

fn unexpected(output: Output) -> Error {
    Error::protocol(format!("unexpected result {output:?}"))
}

/// Blocking forms of the operations, each a [`run`] over the matching `prepare_*`.
impl Client {
    /// Launches a gateway; see [`Client::prepare_start_gateway`].
    pub fn start_gateway(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
    ) -> Result<GatewayInfo, Error> {
        match run(self.prepare_start_gateway(opts), exec)? {
            Output::Started(i) => Ok(i),
            o => Err(unexpected(o)),
        }
    }

    /// Stops the gateway this client launched; see [`Client::prepare_stop_gateway`].
    pub fn stop_gateway(&self, exec: &impl Exec, opts: &CallOptions) -> Result<(), Error> {
        run(self.prepare_stop_gateway(opts), exec).map(drop)
    }

    /// Installs the gateway binary read from `host_path`; see
    /// [`Client::prepare_ensure_gateway_binary`].
    pub fn ensure_gateway_binary(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        host_path: &Path,
    ) -> Result<BinaryStatus, Error> {
        let binary = read_host_file(host_path)?;
        match run(self.prepare_ensure_gateway_binary(opts, binary), exec)? {
            Output::Binary(b) => Ok(b),
            o => Err(unexpected(o)),
        }
    }

    /// `GET /health`.
    pub fn health(&self, exec: &impl Exec, opts: &CallOptions) -> Result<HealthInfo, Error> {
        match run(self.prepare_health(opts), exec)? {
            Output::Health(h) => Ok(h),
            o => Err(unexpected(o)),
        }
    }

    /// `GET /mcps`.
    pub fn list_mcps(&self, exec: &impl Exec, opts: &CallOptions) -> Result<Vec<McpSpec>, Error> {
        match run(self.prepare_list_mcps(opts), exec)? {
            Output::Mcps(m) => Ok(m),
            o => Err(unexpected(o)),
        }
    }

    /// `POST /mcps`.
    pub fn add_mcp(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        spec_json: &str,
    ) -> Result<(), Error> {
        run(self.prepare_add_mcp(opts, spec_json), exec).map(drop)
    }

    /// `DELETE /mcps/{name}`.
    pub fn remove_mcp(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        name: &str,
    ) -> Result<(), Error> {
        run(self.prepare_remove_mcp(opts, name), exec).map(drop)
    }

    /// `GET /mcps/{mcp}/tools`.
    pub fn list_tools(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        mcp: &str,
    ) -> Result<Vec<Tool>, Error> {
        match run(self.prepare_list_tools(opts, mcp), exec)? {
            Output::Tools(t) => Ok(t),
            o => Err(unexpected(o)),
        }
    }

    /// `POST /mcps/{mcp}/tools/{tool}`.
    pub fn call_tool(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        mcp: &str,
        tool: &str,
        arguments_json: &str,
    ) -> Result<ToolChunk, Error> {
        match run(
            self.prepare_call_tool(opts, mcp, tool, arguments_json),
            exec,
        )? {
            Output::Chunk(c) => Ok(c),
            o => Err(unexpected(o)),
        }
    }

    /// `PUT /mcps/{mcp}/runtime-headers`.
    pub fn set_runtime_headers(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        mcp: &str,
        headers_json: &str,
    ) -> Result<(), Error> {
        run(
            self.prepare_set_runtime_headers(opts, mcp, headers_json),
            exec,
        )
        .map(drop)
    }
}

#[cfg(test)]
mod local_shell_tests {
    use super::*;

    #[test]
    fn runs_commands_with_status_output_and_directory() {
        let dir = std::env::temp_dir();
        let sh = LocalShell::new().in_dir(&dir);
        let out = sh
            .exec(
                "printf 'a\\0b'; echo err >&2; pwd; exit 3",
                Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(out.exit_code, 3);
        let canonical = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            out.stdout,
            format!("a\0b{}\n", canonical.display()).into_bytes()
        );
        assert_eq!(out.stderr, b"err\n");
        let out = LocalShell::with_shell(&["sh", "-c"])
            .exec("kill -9 $$", Duration::from_secs(5))
            .unwrap();
        assert_eq!(out.exit_code, 137);
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_and_reported() {
        let t = std::time::Instant::now();
        let marker = std::env::temp_dir().join(format!("mcpgw-ls-{}", crate::random::uuid4_hex()));
        let err = LocalShell::new()
            .exec(
                &format!("(sleep 1; touch {}) & sleep 30", marker.display()),
                Duration::from_millis(200),
            )
            .unwrap_err();
        assert!(err.contains("did not finish"), "{err}");
        // Everything the command started went with it.
        std::thread::sleep(Duration::from_millis(1300));
        assert!(!marker.exists());
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(
            LocalShell::with_shell(&["/no/such/shell"])
                .exec("true", Duration::from_secs(1))
                .is_err()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Config;
    use crate::command::Transport;

    /// A local `sh -c`, the simplest real sandbox.
    fn local_sh(command: &str, _timeout: Duration) -> Result<ExecOutput, String> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .output()
            .map_err(|e| e.to_string())?;
        Ok(ExecOutput {
            exit_code: out.status.code().unwrap_or(-1),
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }

    #[test]
    fn nothing_listening_is_gateway_not_running_through_real_curl() {
        // Port 1 on loopback: nothing listens there on a test machine.
        let dir = std::env::temp_dir().join(format!("mcpgw-exec-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, "abc\n").unwrap();
        let client = Client::new(Config {
            port: 1,
            token_file: Some(token.to_string_lossy().into_owned()),
            transport: Some(Transport::Curl),
            ..Config::default()
        })
        .unwrap();
        let e = client
            .list_mcps(&local_sh, &CallOptions::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");
        // A token file that cannot be read is reported as such, not as a refused token.
        let missing = Client::new(Config {
            port: 1,
            token_file: Some(dir.join("nope").to_string_lossy().into_owned()),
            transport: Some(Transport::Curl),
            ..Config::default()
        })
        .unwrap();
        let e = missing
            .list_mcps(&local_sh, &CallOptions::default())
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        assert!(e.message().contains("nope"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_host_file_is_host_io() {
        let e = read_host_file(Path::new("/nonexistent/mcpgw-gateway")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::HostIo);
    }
}
