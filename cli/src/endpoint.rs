//! `mcpgw mcp` over stdio: an MCP server on the host for a server inside a sandbox. The
//! sandbox gets its gateway (installed when needed, launched through the session channel), the
//! server is registered there, and one virtual MCP connection ([`crate::link`]) carries every
//! message of the client, both ways, unchanged; when the client ends, everything the endpoint
//! started in the sandbox ends.

use std::task::Poll;

use mcpgw::wire::jsonrpc;
use mcpgw::wire::lines::{self, Line, Splitter};

use crate::cli::{Level, McpArgs, log};
use crate::link::{request_id, sandbox_error};
use crate::relay::Relay;
use crate::sandbox::Sandbox;

/// Resolves when the process is asked to end (SIGTERM, SIGINT, SIGHUP).
pub async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut kinds = Vec::new();
    for kind in [
        SignalKind::terminate(),
        SignalKind::interrupt(),
        SignalKind::hangup(),
    ] {
        if let Ok(s) = signal(kind) {
            kinds.push(s);
        }
    }
    std::future::poll_fn(|cx| {
        for s in kinds.iter_mut() {
            if s.poll_recv(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
    .await
}

/// Messages for the client gathered into one write at most, when several are there at once.
const GATHER_MESSAGES: usize = 64;

/// The largest message a client may send (a request body over HTTP, a line over stdio).
pub const MAX_MESSAGE_BYTES: usize = 64 << 20;

/// One line of a client's as text, or the JSON-RPC error that refuses it: a line that is not
/// UTF-8 (-32700) or longer than `max` bytes (-32600), with its id when that can be read.
pub fn message_of(line: Line, max: usize) -> Result<String, String> {
    // The id as written, when it is JSON (it is spliced into the answer as it is).
    let id_in = |head: &[u8]| {
        lines::top_level_id(head)
            .filter(|id| serde_json::from_str::<serde_json::Value>(id).is_ok())
            .map(str::to_owned)
    };
    match line {
        Line::Whole(bytes) => String::from_utf8(bytes).map_err(|e| {
            jsonrpc::error_response(
                id_in(e.as_bytes()).as_deref(),
                jsonrpc::code::PARSE_ERROR,
                "the message is not UTF-8",
            )
        }),
        Line::TooLong { head } => Err(jsonrpc::error_response(
            id_in(&head).as_deref(),
            jsonrpc::code::INVALID_REQUEST,
            &format!("the message is longer than {max} bytes: skipped"),
        )),
    }
}

/// The answers to `lines` (messages of a client that arrived while the sandbox was being set
/// up) when it could not be: an error naming the cause for each request.
pub fn refuse_all(lines: &[String], why: &str, out: &mut Vec<String>) {
    for line in lines {
        if let Some(id) = jsonrpc::parse(line).ok().as_ref().and_then(request_id) {
            out.push(sandbox_error(&id, why));
        }
    }
}

/// Serves the sandbox's server (or servers, prefixed) over stdio until the client ends or the
/// process is asked to; returns the exit status. Messages that arrive while the sandbox is set
/// up wait for it.
pub async fn serve_stdio(args: McpArgs) -> i32 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let level = args.log_level;
    let mut stdin = mcpgw_sys::stdio::stdin(mcpgw_sys::stdio::Kinds::PipesAndSockets);
    let mut splitter = Splitter::new(MAX_MESSAGE_BYTES);
    let mut buf = vec![0u8; 64 * 1024];
    let mut ended = false;
    let mut stdout = mcpgw_sys::stdio::stdout(mcpgw_sys::stdio::Kinds::PipesAndSockets);
    let setup = Sandbox::set_up(&args);
    tokio::pin!(setup);
    let stop = terminated();
    tokio::pin!(stop);
    let mut sandbox: Option<Sandbox> = None;
    let mut relay: Option<Relay> = None;
    let mut waiting: Vec<String> = Vec::new();
    let mut failed: Option<String> = None;
    let mut out: Vec<String> = Vec::new();
    let mut status = 0;
    loop {
        tokio::select! {
            read = stdin.read(&mut buf), if !ended => {
                let n = read.unwrap_or_else(|e| {
                    log(level, Level::Debug, &format!("reading stdin: {e}"));
                    0
                });
                ended = n == 0;
                let mut read = Vec::new();
                for line in splitter.lines(&buf[..n]) {
                    match message_of(line, MAX_MESSAGE_BYTES) {
                        Ok(line) if line.trim().is_empty() => {}
                        Ok(line) => read.push(line),
                        Err(refusal) => {
                            log(level, Level::Warn, &format!("refused: {refusal}"));
                            out.push(refusal);
                        }
                    }
                }
                match (relay.as_mut(), &failed) {
                    (Some(r), _) => r.from_client_all(&read, &mut out).await,
                    (None, Some(why)) => refuse_all(&read, why, &mut out),
                    (None, None) => waiting.append(&mut read),
                }
            },
            ready = &mut setup, if sandbox.is_none() && failed.is_none() => match ready {
                Ok(sb) => {
                    let mut r = Relay::open(&sb, args.prefixed, level).await;
                    r.from_client_all(&waiting, &mut out).await;
                    waiting.clear();
                    sandbox = Some(sb);
                    relay = Some(r);
                }
                Err(e) => {
                    let why = e.message().to_owned();
                    log(level, Level::Error, &why);
                    refuse_all(&waiting, &why, &mut out);
                    waiting.clear();
                    failed = Some(why);
                    status = 1;
                }
            },
            wake = async { relay.as_mut().expect("guarded").wait().await }, if relay.is_some() => {
                let r = relay.as_mut().expect("guarded");
                r.handle(wake, &mut out).await;
                // What else is already there goes to the client in the same write.
                while out.len() < GATHER_MESSAGES {
                    let Some(wake) = r.ready() else { break };
                    r.handle(wake, &mut out).await;
                }
            }
            () = &mut stop => break,
        }
        let mut text = String::new();
        for msg in out.drain(..) {
            text.push_str(&msg);
            text.push('\n');
        }
        if !text.is_empty() && stdout.write_all(text.as_bytes()).await.is_err() {
            break;
        }
        let _ = stdout.flush().await;
        if ended {
            break;
        }
    }
    if let Some(r) = relay.as_mut() {
        r.close();
    }
    if let Some(sb) = &sandbox {
        sb.tear_down().await;
    }
    status
}
