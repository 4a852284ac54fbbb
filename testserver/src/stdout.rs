//! The stdio transport's two ends, around rmcp's: lines in with bounded memory, and a way to
//! put raw bytes on stdout between two messages.
//!
//! - In: [`Bounded`] cuts stdin into lines of at most [`MAX_LINE_BYTES`]; a longer line is
//!   skipped as it arrives and answered with a JSON-RPC error naming its id (rmcp alone would
//!   drop it silently, and its client would wait for an answer until its deadline).
//! - Out: rmcp writes its messages into a pipe of ours and one task copies them to stdout,
//!   putting bytes queued on an [`Injector`] (a tool's garbage line, a refusal) where a line
//!   begins, as soon as it does: a tool cannot write to stdout directly without risking landing
//!   in the middle of a JSON-RPC line.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use mcpgw::wire::jsonrpc;
use mcpgw::wire::lines::{Line, Splitter, top_level_id};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The longest line taken: the gateway's largest request body (64 MiB) with room to spare.
pub const MAX_LINE_BYTES: usize = 128 << 20;

/// Queues raw bytes for stdout, written where the next line begins.
#[derive(Clone)]
pub struct Injector(mpsc::UnboundedSender<Vec<u8>>);

impl Injector {
    /// Queues `bytes`.
    pub fn inject(&self, bytes: &[u8]) {
        let _ = self.0.send(bytes.to_vec());
    }
}

/// Starts copying what rmcp writes to the returned pipe onto `stdout`, with injections between
/// its lines. The task ends once rmcp closed the pipe and everything was written.
pub fn relay<W>(mut stdout: W) -> (DuplexStream, Injector, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_end, mut ours) = tokio::io::duplex(64 * 1024);
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let task = tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        let mut queued: VecDeque<Vec<u8>> = VecDeque::new();
        let (mut at_line_start, mut open, mut injectors) = (true, true, true);
        while open || (at_line_start && !queued.is_empty()) {
            if at_line_start && !queued.is_empty() {
                for bytes in queued.drain(..) {
                    if stdout.write_all(&bytes).await.is_err() {
                        return;
                    }
                    at_line_start = bytes.last() == Some(&b'\n');
                }
                let _ = stdout.flush().await;
                continue;
            }
            tokio::select! {
                // Injections first: a tool injects before its answer is written.
                biased;
                bytes = rx.recv(), if injectors => match bytes {
                    Some(bytes) => queued.push_back(bytes),
                    None => injectors = false,
                },
                n = ours.read(&mut buf), if open => match n {
                    Ok(n) if n > 0 => {
                        let mut rest = &buf[..n];
                        while !rest.is_empty() {
                            if at_line_start {
                                for bytes in queued.drain(..) {
                                    if stdout.write_all(&bytes).await.is_err() {
                                        return;
                                    }
                                }
                            }
                            // With injections waiting, up to the end of the line only.
                            let cut = match queued.is_empty() {
                                true => rest.len(),
                                false => rest.iter().position(|&b| b == b'\n').map_or(rest.len(), |i| i + 1),
                            };
                            if stdout.write_all(&rest[..cut]).await.is_err() {
                                return;
                            }
                            at_line_start = rest[cut - 1] == b'\n';
                            rest = &rest[cut..];
                        }
                        if at_line_start {
                            let _ = stdout.flush().await;
                        }
                    }
                    _ => open = false,
                },
            }
        }
        let _ = stdout.flush().await;
    });
    (rmcp_end, Injector(tx), task)
}

/// Stdin cut into lines of at most [`MAX_LINE_BYTES`] for rmcp; a longer one is answered with
/// an error through the [`Injector`] instead.
pub struct Bounded<R> {
    inner: R,
    lines: Splitter,
    injector: Injector,
    /// Whole lines (with their `\n`) not yet read by rmcp, from `at`.
    out: Vec<u8>,
    at: usize,
    scratch: Vec<u8>,
    ended: bool,
}

impl<R> Bounded<R> {
    /// Lines of `inner`; refusals go to `injector`.
    pub fn new(inner: R, injector: Injector) -> Self {
        Bounded {
            inner,
            lines: Splitter::new(MAX_LINE_BYTES),
            injector,
            out: Vec::new(),
            at: 0,
            scratch: vec![0; 64 * 1024],
            ended: false,
        }
    }

    fn take(&mut self, data: &[u8]) {
        for line in self.lines.lines(data) {
            match line {
                Line::Whole(line) => {
                    self.out.extend_from_slice(&line);
                    self.out.push(b'\n');
                }
                Line::TooLong { head } => {
                    let mut refusal = jsonrpc::error_response(
                        top_level_id(&head),
                        jsonrpc::code::INVALID_REQUEST,
                        &format!("the message is longer than {MAX_LINE_BYTES} bytes: skipped"),
                    );
                    refusal.push('\n');
                    self.injector.inject(refusal.as_bytes());
                }
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.at < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.at);
                buf.put_slice(&this.out[this.at..this.at + n]);
                this.at += n;
                if this.at == this.out.len() {
                    this.out.clear();
                    this.at = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.ended {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            let n = read.filled().len();
            if n == 0 {
                this.ended = true;
                this.take(&[]);
            } else {
                let data = std::mem::take(&mut this.scratch);
                this.take(&data[..n]);
                this.scratch = data;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn injections_wait_for_a_line_boundary_and_long_lines_are_answered() {
        let (stdout, mut seen) = tokio::io::duplex(1 << 20);
        let (mut rmcp, injector, task) = relay(stdout);
        rmcp.write_all(b"{\"a\":1}\n{\"b\"").await.unwrap();
        rmcp.flush().await.unwrap();
        // Once that reached stdout, a message is half written.
        let mut head = vec![0u8; 12];
        seen.read_exact(&mut head).await.unwrap();
        injector.inject(b"garbage\n");
        tokio::task::yield_now().await;
        rmcp.write_all(b":2}\n{\"c\":3}\n").await.unwrap();
        // A line longer than the limit is refused by its id; the next one passes.
        let mut input = br#"{"jsonrpc":"2.0","id":"x","method":"ping","params":{"p":""#.to_vec();
        input.resize(input.len() + MAX_LINE_BYTES, b'a');
        input.extend_from_slice(b"\"}}\n{\"ok\":1}\n");
        let mut bounded = Bounded::new(&input[..], injector.clone());
        let mut passed = Vec::new();
        bounded.read_to_end(&mut passed).await.unwrap();
        assert_eq!(passed, b"{\"ok\":1}\n");
        drop((rmcp, injector, bounded));
        task.await.unwrap();
        let mut out = String::from_utf8(head).unwrap();
        seen.read_to_string(&mut out).await.unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(&lines[..3], ["{\"a\":1}", "{\"b\":2}", "garbage"], "{out}");
        assert!(lines.contains(&"{\"c\":3}"), "{out}");
        let refusal = lines
            .iter()
            .find(|l| l.contains("longer than"))
            .expect("a refusal");
        assert!(refusal.contains("\"id\":\"x\""), "{refusal}");
    }
}
