//! The blocking driver: runs an [`Operation`]'s commands through an [`Exec`] until it finishes,
//! and the blocking form of every operation on top of it.

use std::path::Path;
use std::sync::Arc;

use crate::client::{BinaryStatus, CallOptions, Client, ExecResult, GatewayInfo, Operation};
use crate::command::Command;
use crate::error::{Error, ErrorKind};
use crate::wire::{Health, McpEntry, Tool, ToolChunk};

/// Runs one `sh -c` command inside the sandbox: `docker exec`, `kubectl exec`, `nsenter`, an
/// SDK's `commands.run`, ...
pub trait Exec {
    /// Runs `command.text` with `sh -c`, passing `command.stdin` on its standard input when set
    /// (only clients configured with [`crate::Config::exec_stdin`] set it), and returns its exit
    /// status and output, or why the backend could not run it. `command.timeout` is how long the
    /// command may take.
    fn exec(&self, command: &Command) -> ExecResult;
}

impl<F> Exec for F
where
    F: Fn(&Command) -> ExecResult,
{
    fn exec(&self, command: &Command) -> ExecResult {
        self(command)
    }
}

/// Drives `op` to its end through `exec`: the blocking form of every operation.
pub fn run<T>(mut op: Operation<T>, exec: &(impl Exec + ?Sized)) -> Result<T, Error> {
    while let Some(cmd) = op.command() {
        let result = exec.exec(cmd);
        op.complete(result)?;
    }
    op.finish()
}

/// The largest file [`read_host_file`] reads (the static gateway is about 9 MiB).
pub const MAX_HOST_FILE_BYTES: u64 = 256 << 20;

/// Reads a file on the host, e.g. the gateway binary to upload: a regular file of at most
/// [`MAX_HOST_FILE_BYTES`]. It is opened without blocking (a FIFO or a device that would never
/// answer is refused, not waited on) and read no further than its size said.
pub fn read_host_file(path: &Path) -> Result<Arc<[u8]>, Error> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let shown = path.display();
    let fail = |why: String| {
        Error::new(
            ErrorKind::HostIo,
            format!("cannot read {shown} on the host: {why}"),
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(mcpgw_sys::fs::O_NONBLOCK | mcpgw_sys::fs::O_NOCTTY)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    let meta = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !meta.is_file() {
        return Err(fail("it is not a regular file".into()));
    }
    if meta.len() > MAX_HOST_FILE_BYTES {
        return Err(fail(format!(
            "it has {} bytes, more than the {MAX_HOST_FILE_BYTES} a gateway binary may have",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file that grows while it is read is cut at the size it had.
    file.take(meta.len())
        .read_to_end(&mut bytes)
        .map_err(|e| fail(e.to_string()))?;
    Ok(Arc::from(bytes))
}

/// Blocking forms of the operations, each a [`run`] over the matching `prepare_*`.
impl Client {
    /// Launches a gateway; see [`Client::prepare_start_gateway`].
    pub fn start_gateway(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
    ) -> Result<GatewayInfo, Error> {
        run(self.prepare_start_gateway(opts), exec)
    }

    /// Stops the gateway this client launched; see [`Client::prepare_stop_gateway`].
    pub fn stop_gateway(&self, exec: &impl Exec, opts: &CallOptions) -> Result<(), Error> {
        run(self.prepare_stop_gateway(opts), exec)
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
        run(self.prepare_ensure_gateway_binary(opts, binary), exec)
    }

    /// `GET /health`.
    pub fn health(&self, exec: &impl Exec, opts: &CallOptions) -> Result<Health, Error> {
        run(self.prepare_health(opts), exec)
    }

    /// `GET /mcps`.
    pub fn list_mcps(&self, exec: &impl Exec, opts: &CallOptions) -> Result<Vec<McpEntry>, Error> {
        run(self.prepare_list_mcps(opts), exec)
    }

    /// `POST /mcps`.
    pub fn add_mcp(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        spec_json: &str,
    ) -> Result<(), Error> {
        run(self.prepare_add_mcp(opts, spec_json), exec)
    }

    /// `DELETE /mcps/{name}`.
    pub fn remove_mcp(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        name: &str,
    ) -> Result<(), Error> {
        run(self.prepare_remove_mcp(opts, name), exec)
    }

    /// `GET /mcps/{mcp}/tools`.
    pub fn list_tools(
        &self,
        exec: &impl Exec,
        opts: &CallOptions,
        mcp: &str,
    ) -> Result<Vec<Tool>, Error> {
        run(self.prepare_list_tools(opts, mcp), exec)
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
        run(
            self.prepare_call_tool(opts, mcp, tool, arguments_json),
            exec,
        )
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Config;
    use crate::command::Transport;
    use crate::local::LocalShell;

    #[test]
    fn nothing_listening_is_gateway_not_running_through_real_curl() {
        // Port 1 on loopback: nothing listens there on a test machine.
        let dir = std::env::temp_dir().join(format!("mcpgw-exec-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let token = dir.join("token");
        std::fs::write(&token, "abc\n").unwrap();
        let sh = LocalShell::new();
        let client = Client::new(Config {
            port: 1,
            token_file: Some(token.to_string_lossy().into_owned()),
            transport: Some(Transport::Curl),
            ..Config::default()
        })
        .unwrap();
        let e = client.list_mcps(&sh, &CallOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");
        // A token file that cannot be read is reported as such, not as a refused token.
        let missing = Client::new(Config {
            port: 1,
            token_file: Some(dir.join("nope").to_string_lossy().into_owned()),
            transport: Some(Transport::Curl),
            ..Config::default()
        })
        .unwrap();
        let e = missing.list_mcps(&sh, &CallOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
        assert!(e.message().contains("nope"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unreadable_host_file_is_host_io() {
        let e = read_host_file(Path::new("/nonexistent/mcpgw-gateway")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::HostIo);
    }

    /// A FIFO (which would block the caller until a writer comes), a device that never ends and
    /// a directory are refused at once; a regular file is read whole.
    #[test]
    fn only_a_regular_file_of_bounded_size_is_read() {
        let dir = std::env::temp_dir().join(format!("mcpgw-hostfile-{}", crate::random::hex_id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        for (path, says) in [
            (fifo.as_path(), "not a regular file"),
            (Path::new("/dev/zero"), "not a regular file"),
            (dir.as_path(), "not a regular file"),
        ] {
            let e = read_host_file(path).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::HostIo, "{e}");
            assert!(e.message().contains(says), "{path:?}: {e}");
        }
        let file = dir.join("gateway");
        std::fs::write(&file, b"\x7fELF...").unwrap();
        assert_eq!(&*read_host_file(&file).unwrap(), b"\x7fELF...");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
