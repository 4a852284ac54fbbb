//! Stdout: one thread owns it, so frames never interleave, and writes every burst of frames
//! that queued up while it was busy with one `write`.

use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::time::Duration;

use tokio::sync::mpsc;

/// Encoded frames waiting for stdout; beyond, request tasks wait (and the gateway with them).
const QUEUE: usize = 1024;

/// Frames up to this size are gathered into one write; larger ones are written on their own.
const GATHER_BYTES: usize = 256 * 1024;

/// Where encoded frames (each one line) go.
pub type Sender = mpsc::Sender<Vec<u8>>;

/// The stdout thread, to wait for at the end.
pub struct Writer {
    done: std::sync::mpsc::Receiver<std::io::Result<()>>,
}

impl Writer {
    /// Waits until everything sent is written, at most `limit`: a host that stopped reading
    /// must not keep the session from ending.
    pub fn finish(self, limit: Duration) -> std::io::Result<()> {
        self.done.recv_timeout(limit).unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("stdout took no more frames for {limit:?}"),
            ))
        })
    }
}

/// Starts the stdout thread with `first` to write before anything else. The thread ends once
/// every sender is gone and everything sent is written, or when stdout fails.
pub fn start(first: Vec<u8>) -> (Sender, Writer) {
    let (tx, rx) = mpsc::channel(QUEUE);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("attach-stdout".into())
        .spawn(move || {
            // SAFETY: fd 1 stays open for the life of the process; ManuallyDrop never closes it.
            let mut stdout = ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(1) });
            let result = write_frames(&mut *stdout, first, rx);
            if let Err(e) = &result {
                tracing::warn!("writing to stdout failed, ending the session: {e}");
            }
            let _ = done_tx.send(result);
        })
        .expect("spawning the stdout thread");
    (tx, Writer { done })
}

fn write_frames(
    out: &mut impl Write,
    first: Vec<u8>,
    mut rx: mpsc::Receiver<Vec<u8>>,
) -> std::io::Result<()> {
    let mut burst = first;
    loop {
        while burst.len() < GATHER_BYTES {
            match rx.try_recv() {
                Ok(frame) if frame.len() >= GATHER_BYTES => {
                    out.write_all(&burst)?;
                    burst.clear();
                    out.write_all(&frame)?;
                }
                Ok(frame) => burst.extend_from_slice(&frame),
                Err(_) => break,
            }
        }
        if !burst.is_empty() {
            out.write_all(&burst)?;
            out.flush()?;
            burst.clear();
        }
        match rx.blocking_recv() {
            Some(frame) => burst.extend_from_slice(&frame),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records each write.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for Writes {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn queued_frames_go_out_in_order_in_few_writes() {
        let (tx, rx) = mpsc::channel(QUEUE);
        for i in 0..100 {
            tx.try_send(format!("{i}\n").into_bytes()).unwrap();
        }
        tx.try_send(vec![b'x'; GATHER_BYTES]).unwrap();
        tx.try_send(b"end\n".to_vec()).unwrap();
        drop(tx);
        let mut out = Writes::default();
        write_frames(&mut out, b"hello\n".to_vec(), rx).unwrap();
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
