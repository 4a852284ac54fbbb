//! Stdout: one writer owns it, so frames never interleave, and writes every burst of frames
//! that queued up while it was busy with one `write`. It writes on the runtime's thread when
//! stdout can be polled (a pipe, a socket, a terminal: every exec channel), else through
//! tokio's blocking pool (a file, `/dev/null`).

use std::pin::Pin;
use std::time::Duration;

use mcpgw_sys::stdio::{self, Kinds};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::liveness::Moment;

/// Encoded frames waiting for stdout; beyond, request tasks wait (and the gateway with them).
const QUEUE: usize = 1024;

/// Frames up to this size are gathered into one write; larger ones are written on their own.
const GATHER_BYTES: usize = 256 * 1024;

/// Where encoded frames (each one line) go. An empty one ends the output: whatever was sent
/// before it is written, nothing after.
pub type Sender = mpsc::Sender<Vec<u8>>;

/// The writer, to wait for at the end.
pub struct Writer(tokio::task::JoinHandle<std::io::Result<()>>);

impl Writer {
    /// Ends the output and waits until everything sent before is written, at most `limit`: a
    /// host that stopped reading must not keep the session from ending.
    pub async fn finish(self, out: &Sender, limit: Duration) -> std::io::Result<()> {
        let timed_out = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("stdout took no more frames for {limit:?}"),
            )
        };
        let deadline = tokio::time::Instant::now() + limit;
        // Given up on, the writer stops: it holds stdout.
        let writer = self.0.abort_handle();
        if tokio::time::timeout_at(deadline, out.send(Vec::new()))
            .await
            .is_err()
        {
            writer.abort();
            return Err(timed_out());
        }
        match tokio::time::timeout_at(deadline, self.0).await {
            Ok(Ok(result)) => result,
            Ok(Err(e)) => Err(std::io::Error::other(e)),
            Err(_) => {
                writer.abort();
                Err(timed_out())
            }
        }
    }
}

/// This process's stdout, on the reactor when it can be polled.
pub fn stdout() -> Pin<Box<dyn AsyncWrite + Send>> {
    stdio::stdout(Kinds::Pollable)
}

/// Starts the writer to `stdout` (call it inside the runtime) with `first` to write before
/// anything else; it touches `written` after each write. It ends at the empty frame, or when
/// stdout fails.
pub fn start(
    mut stdout: Pin<Box<dyn AsyncWrite + Send>>,
    first: Vec<u8>,
    written: Moment,
) -> (Sender, Writer) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let writer = Writer(tokio::spawn(async move {
        let result = write_frames(&mut stdout, first, rx, &written).await;
        report(&result);
        result
    }));
    (tx, writer)
}

fn report(result: &std::io::Result<()>) {
    if let Err(e) = result {
        tracing::warn!("writing to stdout failed, ending the session: {e}");
    }
}

/// What follows a gathered burst.
enum Next {
    /// Nothing yet: wait for the next frame.
    Wait,
    /// A frame too large to gather, to write on its own.
    Large(Vec<u8>),
    /// The end of the output.
    End,
}

/// Adds the frames already queued to `burst`, up to [`GATHER_BYTES`].
fn gather(burst: &mut Vec<u8>, rx: &mut mpsc::Receiver<Vec<u8>>) -> Next {
    while burst.len() < GATHER_BYTES {
        match rx.try_recv() {
            Ok(frame) if frame.is_empty() => return Next::End,
            Ok(frame) if frame.len() >= GATHER_BYTES => return Next::Large(frame),
            Ok(frame) => burst.extend_from_slice(&frame),
            Err(_) => break,
        }
    }
    Next::Wait
}

async fn write_frames(
    out: &mut (impl AsyncWrite + Unpin + ?Sized),
    first: Vec<u8>,
    mut rx: mpsc::Receiver<Vec<u8>>,
    written: &Moment,
) -> std::io::Result<()> {
    let mut burst = first;
    loop {
        let next = gather(&mut burst, &mut rx);
        out.write_all(&burst).await?;
        burst.clear();
        match next {
            Next::End => return out.flush().await,
            Next::Large(frame) => out.write_all(&frame).await?,
            Next::Wait => {}
        }
        out.flush().await?;
        written.touch();
        match rx.recv().await {
            Some(frame) if !frame.is_empty() => burst = frame,
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// Records each write.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl AsyncWrite for Writes {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            self.0.push(buf.to_vec());
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn queued_frames_go_out_in_order_in_few_writes_up_to_the_end() {
        let (tx, rx) = mpsc::channel(QUEUE);
        for i in 0..100 {
            tx.try_send(format!("{i}\n").into_bytes()).unwrap();
        }
        tx.try_send(vec![b'x'; GATHER_BYTES]).unwrap();
        tx.try_send(b"end\n".to_vec()).unwrap();
        tx.try_send(Vec::new()).unwrap();
        tx.try_send(b"after the end\n".to_vec()).unwrap();
        let mut out = Writes::default();
        write_frames(&mut out, b"hello\n".to_vec(), rx, &Moment::now())
            .await
            .unwrap();
        let all: Vec<u8> = out.0.concat();
        let mut want = b"hello\n".to_vec();
        for i in 0..100 {
            want.extend_from_slice(format!("{i}\n").as_bytes());
        }
        want.extend_from_slice(&[b'x'; GATHER_BYTES]);
        want.extend_from_slice(b"end\n");
        assert_eq!(all, want);
        assert!(out.0.len() <= 3, "{} writes", out.0.len());
    }
}
