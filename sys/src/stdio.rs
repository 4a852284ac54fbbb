//! Standard input and output on tokio's reactor. tokio's own `stdin()`/`stdout()` hand every
//! read and write to a thread of its blocking pool: two thread switches per message, which on a
//! busy machine cost more than relaying the message does. A pipe, a socket or a terminal can be
//! polled instead; a file or `/dev/null` cannot, and [`stdin`] and [`stdout`] fall back to
//! tokio's own for it.
//!
//! Polling needs `O_NONBLOCK`, which belongs to the open file, not the descriptor: a [`Pipe`]
//! that set it clears it when dropped, and one that found it set leaves it, so stdin and stdout
//! on one open file (a terminal) end as they began whichever goes first. A stderr on that open
//! file is non-blocking meanwhile too: a log line written while it is full is dropped rather
//! than blocking the session. A process killed outright leaves the file non-blocking, which
//! matters only to another process sharing it.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A standard stream of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Standard {
    /// Descriptor 0.
    Input,
    /// Descriptor 1.
    Output,
}

impl Standard {
    fn fd(self) -> RawFd {
        match self {
            Standard::Input => libc::STDIN_FILENO,
            Standard::Output => libc::STDOUT_FILENO,
        }
    }

    fn interest(self) -> Interest {
        match self {
            Standard::Input => Interest::READABLE,
            Standard::Output => Interest::WRITABLE,
        }
    }
}

/// Which kinds of file a [`Pipe`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kinds {
    /// Pipes and sockets (what a program that spawns this one gives it).
    PipesAndSockets,
    /// Whatever can be polled, terminals too (an exec channel may be a PTY).
    Pollable,
}

/// A standard stream on the reactor, non-blocking while this holds it.
pub struct Pipe {
    fd: AsyncFd<RawFd>,
    /// Whether this set `O_NONBLOCK` (and clears it when dropped).
    set_nonblocking: bool,
    /// The descriptor, when this owns it (closed after the flags are put back).
    _owned: Option<OwnedFd>,
}

impl Pipe {
    /// `stream` on the reactor when it is of `kinds` and can be made non-blocking; `None`
    /// otherwise (it is left as it was). Needs a tokio runtime with I/O enabled.
    pub fn standard(stream: Standard, kinds: Kinds) -> Option<Pipe> {
        // SAFETY: the program never closes its standard streams.
        unsafe { Pipe::new(stream.fd(), stream.interest(), kinds) }
    }

    /// `fd` (another process's standard stream, passed over a socket) on the reactor, for
    /// reading or writing as `stream` says, when it is of `kinds`; `None` otherwise (the
    /// descriptor is closed, its open file left as it was).
    pub fn adopt(fd: OwnedFd, stream: Standard, kinds: Kinds) -> Option<Pipe> {
        // SAFETY: the `Pipe` owns `fd`, which stays open until the `Pipe` is dropped.
        let mut pipe = unsafe { Pipe::new(fd.as_raw_fd(), stream.interest(), kinds) }?;
        pipe._owned = Some(fd);
        Some(pipe)
    }

    /// # Safety
    /// `fd` stays open, the same open file, for as long as the `Pipe` lives.
    unsafe fn new(fd: RawFd, interest: Interest, kinds: Kinds) -> Option<Pipe> {
        if kinds == Kinds::PipesAndSockets {
            let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
            // SAFETY: fstat writes a `stat` for any descriptor number, or fails.
            if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
                return None;
            }
            // SAFETY: fstat succeeded, so it wrote the struct.
            let kind = unsafe { st.assume_init() }.st_mode & libc::S_IFMT;
            if kind != libc::S_IFIFO && kind != libc::S_IFSOCK {
                return None;
            }
        }
        let flags = get_flags(fd)?;
        let set_nonblocking = flags & libc::O_NONBLOCK == 0;
        if set_nonblocking && !set_flags(fd, flags | libc::O_NONBLOCK) {
            return None;
        }
        // SAFETY: the caller's contract. (Registration fails for a file that cannot be polled.)
        match unsafe { AsyncFd::register_with_interest(fd, interest) } {
            Ok(fd) => Some(Pipe {
                fd,
                set_nonblocking,
                _owned: None,
            }),
            Err(_) => {
                if set_nonblocking {
                    set_flags(fd, flags);
                }
                None
            }
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        let fd = self.fd.as_raw_fd();
        if self.set_nonblocking
            && let Some(flags) = get_flags(fd)
        {
            set_flags(fd, flags & !libc::O_NONBLOCK);
        }
    }
}

/// The file status flags of `fd`.
fn get_flags(fd: RawFd) -> Option<libc::c_int> {
    // SAFETY: fcntl(F_GETFL) on a descriptor number has no memory effects.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    (flags >= 0).then_some(flags)
}

/// Sets the file status flags of `fd`; whether it could.
fn set_flags(fd: RawFd, flags: libc::c_int) -> bool {
    // SAFETY: fcntl(F_SETFL) on a descriptor number has no memory effects.
    unsafe { libc::fcntl(fd, libc::F_SETFL, flags) >= 0 }
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
            let room = unfilled.len();
            let read = ready.try_io(|fd| {
                // SAFETY: `unfilled` is writable for its length.
                syscall_result(unsafe {
                    libc::read(fd.as_raw_fd(), unfilled.as_mut_ptr().cast(), room)
                })
            });
            match read {
                Ok(Ok(n)) => {
                    // A short read emptied the pipe: skip the read that would only say so (as
                    // tokio's sockets do; a newer readiness event is not cleared by this).
                    if n > 0 && n < room {
                        ready.clear_ready();
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness was cleared; wait again.
                Err(_would_block) => {}
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
                Err(_would_block) => {}
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

/// Standard input: on the reactor when it is of `kinds`, else tokio's (a thread of the blocking
/// pool per read).
pub fn stdin(kinds: Kinds) -> Pin<Box<dyn AsyncRead + Send>> {
    match Pipe::standard(Standard::Input, kinds) {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdin()),
    }
}

/// Standard output: on the reactor when it is of `kinds`, else tokio's (a thread of the blocking
/// pool per write; flush it).
pub fn stdout(kinds: Kinds) -> Pin<Box<dyn AsyncWrite + Send>> {
    match Pipe::standard(Standard::Output, kinds) {
        Some(p) => Box::pin(p),
        None => Box::pin(tokio::io::stdout()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    const BOTH: Interest = Interest::READABLE.add(Interest::WRITABLE);

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
        let (mut reader, mut writer) = unsafe {
            (
                Pipe::new(r, BOTH, Kinds::PipesAndSockets).unwrap(),
                Pipe::new(w, BOTH, Kinds::Pollable).unwrap(),
            )
        };
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
        let mut writer = unsafe { Pipe::new(w, BOTH, Kinds::PipesAndSockets) }.unwrap();
        let err = writer.write_all(b"lost\n").await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        drop(writer);
        unsafe { libc::close(w) };
    }

    #[tokio::test]
    async fn one_open_file_held_twice_ends_as_it_began_whichever_goes_first() {
        for reader_first in [true, false] {
            let (r, w) = pipe();
            // A second descriptor of the read end's open file, as stdin and stdout of one
            // terminal are.
            let again = unsafe { libc::dup(r) };
            let first = unsafe { Pipe::new(r, Interest::READABLE, Kinds::Pollable) }.unwrap();
            let second = unsafe { Pipe::new(again, Interest::READABLE, Kinds::Pollable) }.unwrap();
            assert!(nonblocking(r));
            if reader_first {
                drop(first);
                drop(second);
            } else {
                drop(second);
                drop(first);
            }
            assert!(!nonblocking(r), "reader first: {reader_first}");
            for fd in [r, again, w] {
                unsafe { libc::close(fd) };
            }
        }
        // An open file that was non-blocking before stays so.
        let (r, w) = pipe();
        set_flags(r, get_flags(r).unwrap() | libc::O_NONBLOCK);
        drop(unsafe { Pipe::new(r, Interest::READABLE, Kinds::Pollable) }.unwrap());
        assert!(nonblocking(r));
        for fd in [r, w] {
            unsafe { libc::close(fd) };
        }
    }

    #[tokio::test]
    async fn a_file_is_left_as_it_is_whatever_the_kinds() {
        let file = std::fs::File::open("/proc/self/status").unwrap();
        for kinds in [Kinds::PipesAndSockets, Kinds::Pollable] {
            assert!(unsafe { Pipe::new(file.as_raw_fd(), BOTH, kinds) }.is_none());
        }
        assert!(!nonblocking(file.as_raw_fd()));
    }
}
