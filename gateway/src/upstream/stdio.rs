//! Stdio upstreams: the child process in its own process group, its stderr, and the JSON-RPC line
//! transport over its stdin/stdout.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpgw::wire::{EncodingErrorHandler, StdioConfig};
use serde_json::json;

use futures::future::BoxFuture;
use mcpgw::wire::jsonrpc;
use serde_json::value::RawValue;
use tokio::io::AsyncWriteExt;
use tokio::process::{ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, watch};

use super::lines::{LineReader, Next};
use super::logs::UpstreamLog;
use super::process;
use super::rpc::{Sink, Wire, queue};

/// Process groups of children not yet seen gone, so that an exit that skips the orderly close
/// still ends them.
static LIVE_GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// SIGKILLs every process group this gateway started that may still have members.
pub fn kill_all_groups() {
    for pgid in LIVE_GROUPS.lock().unwrap().drain(..) {
        mcpgw_sys::process::kill_group(pgid);
    }
}

/// How much of a child's stderr is kept for error messages.
const STDERR_TAIL_BYTES: usize = 4096;

/// A running stdio MCP server: the leader of its own process group.
pub struct ChildProcess {
    /// The child's pid, which is also its process group id.
    pub pid: u32,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<Mutex<StderrTail>>,
    /// Becomes true when the child's stderr reaches its end.
    stderr_done: watch::Receiver<bool>,
    /// Set once the group was seen empty: its id may then be reused and must not be signalled.
    gone: AtomicBool,
    /// The tag its processes carry in their environment.
    tag: String,
}

/// The last bytes a child wrote to stderr.
#[derive(Default)]
pub struct StderrTail(VecDeque<u8>);

impl StderrTail {
    fn push_line(&mut self, line: &[u8]) {
        self.0.extend(line);
        self.0.push_back(b'\n');
        let excess = self.0.len().saturating_sub(STDERR_TAIL_BYTES);
        self.0.drain(..excess);
    }

    fn text(&self) -> String {
        let bytes: Vec<u8> = self.0.iter().copied().collect();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

/// The longest stderr line kept whole; a longer one is logged cut.
const MAX_STDERR_LINE: usize = 64 * 1024;

/// Spawns the child in a new process group with piped stdio; its stderr goes to the log (at
/// the upstream's rate) and a tail buffer, its exit is watched, and what it writes to stdout
/// goes to `sink`. One message on its stdout may be at most `max_reply_bytes` long.
pub fn spawn(
    name: &str,
    config: &StdioConfig,
    max_reply_bytes: usize,
    log: Arc<UpstreamLog>,
    sink: Sink,
) -> Result<(ChildProcess, StdioWire), String> {
    let tag = process::new_tag();
    let env = match &config.env {
        Some(env) => mcpgw::wire::spec::texts(env, "mcp_config.env")?,
        None => Default::default(),
    };
    let mut cmd = Command::new(&config.command);
    cmd.args(config.args.iter().flatten())
        .envs(&env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own group, so the whole tree it starts (npx -> node, sh -> server) can be signalled
        // at once and nothing is orphaned; and a tag its descendants inherit, for those that
        // leave the group.
        .process_group(0)
        .env(process::TAG_ENV, &tag);
    if let Some(cwd) = config.cwd.as_deref().filter(|c| !c.is_empty()) {
        cmd.current_dir(cwd);
    }
    let mut child = process::spawn_waited(&mut cmd).map_err(|e| match &config.cwd {
        Some(cwd) if e.kind() == std::io::ErrorKind::NotFound => format!(
            "cannot start {:?} in {cwd:?}: {e} (is the command on PATH and the directory there?)",
            config.command
        ),
        _ => format!("cannot start {:?}: {e}", config.command),
    })?;
    let pid = child
        .id()
        .ok_or("the child exited before it could be watched")?;
    LIVE_GROUPS.lock().unwrap().push(pid);
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr_pipe = child.stderr.take().expect("stderr is piped");

    let stderr = Arc::new(Mutex::new(StderrTail::default()));
    let tail = stderr.clone();
    let (stderr_done_tx, stderr_done) = watch::channel(false);
    tokio::spawn(async move {
        let mut lines = LineReader::new(stderr_pipe, MAX_STDERR_LINE);
        loop {
            let line = match lines.next().await {
                Ok(Next::Line) => lines.line(),
                Ok(Next::Oversized(o) | Next::Junk(o)) => {
                    let mut cut = o.head;
                    cut.extend_from_slice(format!("... ({} bytes in all)", o.len).as_bytes());
                    log.stderr(pid, &cut);
                    tail.lock().unwrap().push_line(&cut);
                    continue;
                }
                Ok(Next::Eof) | Err(_) => break,
            };
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            log.stderr(pid, line);
            tail.lock().unwrap().push_line(line);
        }
        log.flush();
        let _ = stderr_done_tx.send(true);
    });

    let (exit_tx, exit) = watch::channel(None);
    let log_name = name.to_string();
    tokio::spawn(async move {
        let status = child.wait().await;
        process::reaped(pid);
        match &status {
            Ok(s) => tracing::info!(mcp = %log_name, pid, "upstream exited: {}", describe_exit(s)),
            Err(e) => tracing::warn!(mcp = %log_name, pid, "cannot wait for upstream: {e}"),
        }
        let _ = exit_tx.send(status.ok());
    });

    let transport = start_wire(
        name,
        stdin,
        stdout,
        max_reply_bytes,
        config.encoding_error_handler,
        sink,
    );
    Ok((
        ChildProcess {
            pid,
            exit,
            stderr,
            stderr_done,
            gone: AtomicBool::new(false),
            tag,
        },
        transport,
    ))
}

/// "exit status 3" or "killed by signal 9".
pub fn describe_exit(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => status.to_string(),
    }
}

impl ChildProcess {
    /// The exit status, once the child has exited and been reaped.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        *self.exit.borrow()
    }

    /// Waits up to `limit` for the child to exit.
    pub async fn wait_exit(&self, limit: Duration) -> Option<ExitStatus> {
        let mut rx = self.exit.clone();
        let waited = tokio::time::timeout(limit, rx.wait_for(Option::is_some)).await;
        waited.ok().and_then(|r| r.ok().and_then(|s| *s))
    }

    /// The tail of what the child wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().unwrap().text()
    }

    /// "exit status 3; stderr: ..." for error messages, waiting briefly for the exit to be seen.
    pub async fn death_report(&self) -> String {
        let status = self.wait_exit(Duration::from_millis(500)).await;
        // What it wrote last may still be in the pipe: let the reader reach the end (unless a
        // process it left behind holds the pipe open).
        let mut done = self.stderr_done.clone();
        let _ = tokio::time::timeout(Duration::from_millis(200), done.wait_for(|d| *d)).await;
        let mut report = match status {
            Some(s) => describe_exit(&s),
            None => "closed its stdout".to_string(),
        };
        let tail = self.stderr_tail();
        if !tail.is_empty() {
            report.push_str("; stderr: ");
            report.push_str(&tail);
        }
        report
    }

    /// Ends every process of the upstream: its process group, and those that left it (they
    /// carry its tag, or descend from it). After stdin has been closed by the caller, a grace
    /// period to exit by itself, then SIGTERM, then SIGKILL. Returns once none is left (or the
    /// last step has waited its time).
    pub async fn terminate(&self, grace: Duration) {
        self.wait_exit(grace).await;
        for (signal, wait) in [
            (mcpgw_sys::SIGTERM, Duration::from_secs(2)),
            (mcpgw_sys::SIGKILL, Duration::from_secs(2)),
        ] {
            let escaped = process::of_upstream(&self.tag, self.pid);
            let group = self.group_alive();
            if !group && escaped.is_empty() {
                return;
            }
            if group {
                mcpgw_sys::process::signal_group(self.pid, signal);
            }
            process::signal(&escaped, signal);
            let deadline = tokio::time::Instant::now() + wait;
            while (self.group_alive() || process::any_alive(&escaped))
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        if self.group_alive() || !process::of_upstream(&self.tag, self.pid).is_empty() {
            tracing::warn!(
                pgid = self.pid,
                "processes of the upstream outlived SIGKILL"
            );
        }
    }

    /// Whether any process of the group exists. The leader counts until it is reaped, so this
    /// also waits for the exit watcher.
    fn group_alive(&self) -> bool {
        if self.gone.load(Ordering::Relaxed) {
            return false;
        }
        let alive = mcpgw_sys::process::group_exists(self.pid);
        if !alive {
            self.gone.store(true, Ordering::Relaxed);
            LIVE_GROUPS.lock().unwrap().retain(|&g| g != self.pid);
        }
        alive
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        // The last line of defence: an upstream dropped without `terminate` leaves no process.
        if self.group_alive() {
            mcpgw_sys::process::kill_group(self.pid);
        }
        process::signal(
            &process::of_upstream(&self.tag, self.pid),
            mcpgw_sys::SIGKILL,
        );
    }
}

/// JSON-RPC over a child's stdin/stdout, one message a line: one task owns stdin and writes
/// what [`StdioWire`] queues, one owns stdout and hands each line to the session. Beyond
/// plain lines: the spec's `encoding_error_handler`, garbage lines logged with the MCP's name,
/// and a reply too large to hold turned into an error for its request.
pub struct StdioWire {
    lines: mpsc::Sender<Vec<u8>>,
    /// Closing it closes the child's stdin (the writer task ends).
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

/// Messages queued for stdin; beyond, senders wait (and the child with them).
const STDIN_QUEUE: usize = 256;

/// Starts the tasks that own the child's stdin and stdout; messages read go to `sink`.
fn start_wire(
    name: &str,
    stdin: ChildStdin,
    stdout: ChildStdout,
    max_reply_bytes: usize,
    encoding: EncodingErrorHandler,
    sink: Sink,
) -> StdioWire {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(STDIN_QUEUE);
    let (stop_tx, mut stop) = tokio::sync::oneshot::channel::<()>();
    let writer_sink = sink.clone();
    tokio::spawn(async move {
        let mut stdin = tokio::io::BufWriter::new(stdin);
        loop {
            let line = tokio::select! {
                line = rx.recv() => line,
                _ = &mut stop => None,
            };
            let Some(mut line) = line else { break };
            // The tasks already woken run first: the rest of a burst of requests (the frames
            // of one read of the channel) queues behind this one, and it all goes out in one
            // flush instead of one write each.
            tokio::task::yield_now().await;
            line.push(b'\n');
            let mut written = stdin.write_all(&line).await;
            while written.is_ok()
                && let Ok(mut more) = rx.try_recv()
            {
                more.push(b'\n');
                written = stdin.write_all(&more).await;
            }
            if let Err(e) = match written {
                Ok(()) => stdin.flush().await,
                Err(e) => Err(e),
            } {
                writer_sink.close(&format!("writing to its stdin failed: {e}"));
                break;
            }
        }
        // Dropping stdin is the polite way to ask a stdio server to exit.
    });
    let name: Arc<str> = name.into();
    tokio::spawn(async move {
        let mut lines = LineReader::new(stdout, max_reply_bytes).json();
        loop {
            match lines.next().await {
                Ok(Next::Line) => {
                    if let Some(text) = decode(&name, lines.line(), encoding) {
                        sink.deliver(&text, None);
                    }
                }
                Ok(Next::Junk(o)) => {
                    let shown = String::from_utf8_lossy(&o.head[..o.head.len().min(200)]);
                    tracing::warn!(mcp = %name, bytes = o.len, "ignoring a stdout line that is not JSON-RPC: {shown:?}");
                }
                Ok(Next::Oversized(o)) => {
                    let limit = lines.max();
                    let id = reply_id(&o.head, &o.tail);
                    tracing::error!(mcp = %name, bytes = o.len, "dropping a message larger than --max-reply-bytes ({limit}){}",
                        id.map_or(String::new(), |id| format!("; failing request {id}")));
                    if let Some(id) = id {
                        sink.fail(id, too_large(o.len, limit));
                    }
                }
                Ok(Next::Eof) => {
                    sink.close("closed its stdout");
                    return;
                }
                Err(e) => {
                    sink.close(&format!("reading its stdout failed: {e}"));
                    return;
                }
            }
        }
    });
    StdioWire {
        lines: tx,
        stop: Mutex::new(Some(stop_tx)),
    }
}

/// One line as text, per the spec's `encoding_error_handler`; `None` when it is to be skipped.
fn decode(name: &str, raw: &[u8], encoding: EncodingErrorHandler) -> Option<String> {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    if raw.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match std::str::from_utf8(raw) {
        Ok(t) => Some(t.to_owned()),
        Err(_) => match encoding {
            EncodingErrorHandler::Strict => {
                tracing::warn!(mcp = %name, "dropping a stdout line that is not UTF-8 (encoding_error_handler: strict)");
                None
            }
            EncodingErrorHandler::Replace => Some(String::from_utf8_lossy(raw).into_owned()),
            EncodingErrorHandler::Ignore => {
                Some(String::from_utf8_lossy(raw).replace('\u{FFFD}', ""))
            }
        },
    }
}

impl Wire for StdioWire {
    fn send(
        &self,
        message: Vec<u8>,
        _request: Option<u64>,
        _method: &str,
        _params: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        queue(&self.lines, message, "the upstream's stdin is closed")
    }

    fn shut(&self) -> BoxFuture<'static, ()> {
        if let Some(stop) = self.stop.lock().unwrap().take() {
            let _ = stop.send(());
        }
        Box::pin(async {})
    }
}

/// `error.data` key of the error that stands in for a reply larger than the limit: the reply's
/// size in bytes (the limit is under [`TOO_LARGE_LIMIT_KEY`]).
pub const TOO_LARGE_KEY: &str = "mcpgw_reply_bytes";
/// `error.data` key: the limit a reply was larger than.
pub const TOO_LARGE_LIMIT_KEY: &str = "mcpgw_max_reply_bytes";

/// The error that answers a request in place of a reply of `len` bytes, over `limit`.
pub fn too_large(len: usize, limit: usize) -> Box<RawValue> {
    jsonrpc::error_object(
        jsonrpc::code::INTERNAL_ERROR,
        &format!("the reply was {len} bytes, more than --max-reply-bytes ({limit})"),
        Some(&json!({TOO_LARGE_KEY: len, TOO_LARGE_LIMIT_KEY: limit})),
    )
}

/// The id of a JSON-RPC reply known only by the first and last bytes of its line: a member
/// `"id"` before the `"result"` or `"error"` member at the start, or the last member at the end.
fn reply_id(head: &[u8], tail: &[u8]) -> Option<u64> {
    let head = String::from_utf8_lossy(head);
    let body_at = ["\"result\"", "\"error\""]
        .iter()
        .filter_map(|k| head.find(k))
        .min()?;
    if let Some(at) = head[..body_at].find("\"id\"")
        && let Some((id, _)) = id_value(&head[at + 4..body_at])
    {
        return Some(id);
    }
    let tail = String::from_utf8_lossy(tail);
    let at = tail.rfind("\"id\"")?;
    let (id, rest) = id_value(&tail[at + 4..])?;
    (rest.trim() == "}").then_some(id)
}

/// The id value after `"id"` (`: 7`; the gateway's ids are numbers), and what follows it.
fn id_value(after_key: &str) -> Option<(u64, &str)> {
    let v = after_key.trim_start().strip_prefix(':')?.trim_start();
    let end = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let id = v[..end].parse().ok()?;
    Some((id, &v[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_reply_too_large_to_read_is_found_at_either_end() {
        let n = Some;
        assert_eq!(
            reply_id(
                br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"#,
                b"\"}]}}\n"
            ),
            n(7)
        );
        assert_eq!(
            reply_id(
                br#"{"result": {"content": [{"id": 3, "#,
                br#"xx"}]}, "id" : 12 }"#
            ),
            n(12)
        );
        assert_eq!(reply_id(br#"{"id":"a-1","error":{"#, b"}"), None);
        // Not a reply, or no id to be found: nothing to fail.
        assert_eq!(
            reply_id(br#"{"method":"notifications/message","params":"#, b"}}"),
            None
        );
        assert_eq!(
            reply_id(br#"{"result":{"text":"#, br#"","id":3},"more":1}"#),
            None
        );
        assert_eq!(reply_id(b"xxxxxxxx", b"xxxx"), None);
    }
}
