//! The stdio endpoint's standard input and output. When they are pipes or sockets, as an MCP
//! client that spawns the endpoint makes them, they are made non-blocking and read and written
//! on tokio's reactor. tokio's own `stdin()`/`stdout()` hand every read and write to a thread
//! of its blocking pool: two thread switches per message, which cost the endpoint more than
//! relaying the message does. Anything else (a terminal, a file, `/dev/null`) goes through
//! tokio's own. The descriptors' flags are restored when the endpoint lets go of them (a
//! process killed outright leaves them non-blocking, which matters only to another process
//! that shares the same pipe: an MCP client gives the endpoint pipes of its own).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A descriptor of this process that is a pipe or a socket, non-blocking while this holds it.
pub struct Pipe {
    fd: AsyncFd<RawFd>,
    /// Its file status flags before.
    flags: libc::c_int,
}

impl Pipe {
    /// `fd` on the reactor, when it is a pipe or a socket that can be made non-blocking;
    /// `None` otherwise (it is left as it was). Needs a tokio runtime with I/O enabled.
    ///
    /// # Safety
    /// `fd` stays open, the same file description, for as long as the `Pipe` lives.
    unsafe fn new(fd: RawFd) -> Option<Pipe> {
        // SAFETY: fstat writes a `stat` for any descriptor number, or fails.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return None;
        }
        let kind = st.st_mode & libc::S_IFMT;
        if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
            return None;
        }
        // SAFETY: fcntl on a descriptor number; failures are reported by -1.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return None;
        }
        // SAFETY: the caller's contract.
        match unsafe { AsyncFd::register(fd) } {
            Ok(fd) => Some(Pipe { fd, flags }),
            Err(_) => {
                // SAFETY: as above.
                unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
                None
            }
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: fcntl on the descriptor this held; a failure leaves it non-blocking.
        unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_SETFL, self.flags) };
    }
}

/// The result of a read(2) or write(2).
fn syscall_result(n: isize) -> io::Result<usize> {
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

impl AsyncRead for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            let read = ready.try_io(|fd| {
                // SAFETY: `unfilled` is writable for its length.
                syscall_result(unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), unfilled.len())
                })
            });
            match read {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness was cleared; wait again.
                Err(_) => {}
            }
        }
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.fd.poll_write_ready(cx))?;
            let wrote = ready.try_io(|fd| {
                // SAFETY: `data` is readable for its length.
                syscall_result(unsafe {
                    libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len())
                })
            });
            match wrote {
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(result) => return Poll::Ready(result),
                Err(_) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Standard input: on the reactor when it is a pipe or a socket, else tokio's.
pub fn stdin() -> Pin<Box<dyn AsyncRead + Send>> {
    // SAFETY: nothing in the process closes its standard input.
    match unsafe { Pipe::new(libc::STDIN_FILENO) } {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// Standard output: on the reactor when it is a pipe or a socket, else tokio's.
pub fn stdout() -> Pin<Box<dyn AsyncWrite + Send>> {
    // SAFETY: nothing in the process closes its standard output.
    match unsafe { Pipe::new(libc::STDOUT_FILENO) } {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    fn pipe() -> (RawFd, RawFd) {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        (fds[0], fds[1])
    }

    fn nonblocking(fd: RawFd) -> bool {
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        flags & libc::O_NONBLOCK != 0
    }

    #[tokio::test]
    async fn lines_cross_a_pipe_whole_and_its_flags_are_restored() {
        let (r, w) = pipe();
        let (mut reader, mut writer) = unsafe { (Pipe::new(r).unwrap(), Pipe::new(w).unwrap()) };
        assert!(nonblocking(r) && nonblocking(w));
        // More than a pipe holds (64 KiB): the writer waits for the reader.
        let line = "x".repeat(100_000);
        let sent = line.clone();
        let write = tokio::spawn(async move {
            for _ in 0..3 {
                writer.write_all(sent.as_bytes()).await.unwrap();
                writer.write_all(b"\n").await.unwrap();
            }
            drop(writer);
            assert!(!nonblocking(w));
            unsafe { libc::close(w) };
        });
        let mut lines = BufReader::new(&mut reader).lines();
        for _ in 0..3 {
            assert_eq!(lines.next_line().await.unwrap().as_deref(), Some(&line[..]));
        }
        // The writer's end closed: end of input.
        assert_eq!(lines.next_line().await.unwrap(), None);
        write.await.unwrap();
        drop(reader);
        assert!(!nonblocking(r));
        unsafe { libc::close(r) };
    }

    #[tokio::test]
    async fn a_write_to_a_pipe_nobody_reads_fails() {
        let (r, w) = pipe();
        unsafe { libc::close(r) };
        let mut writer = unsafe { Pipe::new(w) }.unwrap();
        let err = writer.write_all(b"lost\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        drop(writer);
        unsafe { libc::close(w) };
    }

    #[tokio::test]
    async fn a_file_is_left_as_it_is() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        assert!(unsafe { Pipe::new(file.as_raw_fd()) }.is_none());
        assert!(!nonblocking(file.as_raw_fd()));
    }
}
