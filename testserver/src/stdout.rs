//! The stdio transport's writer, with a way to put raw bytes on stdout between two messages.
//!
//! rmcp owns the stdout writer (behind its own lock inside the transport), so a
//! tool cannot write to stdout directly without risking landing in the middle
//! of a JSON-RPC line. Instead the transport writes through [`InjectingWriter`],
//! which emits queued bytes only at a line boundary, before the next message.

use std::{
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll, ready},
};

use tokio::io::AsyncWrite;

/// Queues raw bytes for the [`InjectingWriter`] it was made with.
#[derive(Clone, Default)]
pub struct Injector(Arc<Mutex<Vec<u8>>>);

impl Injector {
    /// Queues `bytes`; they reach stdout right before the next message (or at the next flush).
    pub fn inject(&self, bytes: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(bytes);
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// An [`AsyncWrite`] that writes queued injections only where a line begins.
pub struct InjectingWriter<W> {
    inner: W,
    injector: Injector,
    /// Injected bytes being written; they go out in full before anything else.
    pending: Vec<u8>,
    written: usize,
    at_line_start: bool,
}

impl<W> InjectingWriter<W> {
    /// Wraps `inner`; bytes queued on `injector` are written through it.
    pub fn new(inner: W, injector: Injector) -> Self {
        Self {
            inner,
            injector,
            pending: Vec::new(),
            written: 0,
            at_line_start: true,
        }
    }
}

impl<W: AsyncWrite + Unpin> InjectingWriter<W> {
    /// Writes out queued injections if the stream is at the start of a line.
    fn poll_injections(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_empty() && self.at_line_start {
            self.pending = self.injector.take();
            self.written = 0;
        }
        while self.written < self.pending.len() {
            let n =
                ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        if !self.pending.is_empty() {
            self.at_line_start = self.pending.last() == Some(&b'\n');
            self.pending.clear();
            self.written = 0;
        }
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for InjectingWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_injections(cx))?;
        let n = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        if n > 0 {
            this.at_line_start = buf[n - 1] == b'\n';
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_injections(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_injections(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// Accepts at most `chunk` bytes per write, to exercise partial writes.
    struct Trickle {
        out: Vec<u8>,
        chunk: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.chunk);
            self.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn injection_waits_for_a_line_boundary() {
        let injector = Injector::default();
        let mut w = InjectingWriter::new(
            Trickle {
                out: Vec::new(),
                chunk: 3,
            },
            injector.clone(),
        );
        // A message is half written when the injection is queued.
        let n = w.write(b"{\"a\":1}\n{\"b\"").await.unwrap();
        assert_eq!(n, 3);
        w.write_all(&b"{\"a\":1}\n{\"b\""[3..]).await.unwrap();
        injector.inject(b"garbage\n");
        w.write_all(b":2}\n").await.unwrap();
        w.write_all(b"{\"c\":3}\n").await.unwrap();
        assert_eq!(
            String::from_utf8(w.inner.out.clone()).unwrap(),
            "{\"a\":1}\n{\"b\":2}\ngarbage\n{\"c\":3}\n"
        );
        // A flush alone also delivers it.
        injector.inject(b"more\n");
        w.flush().await.unwrap();
        assert!(w.inner.out.ends_with(b"{\"c\":3}\nmore\n"));
    }
}
