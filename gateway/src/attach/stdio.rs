//! Stdin and stdout on the runtime's own thread, when they can be polled (a pipe, a socket, a
//! terminal: every exec channel): no hand-off to another thread on the way of a frame, which on
//! a busy machine costs a scheduling delay each way. Files and `/dev/null` cannot be polled;
//! for them the caller falls back to a blocking thread.
//!
//! Polling needs `O_NONBLOCK`, which belongs to the open file, not the descriptor: the flags
//! are put back at the end of the session so that whoever shares the file (a shell on the same
//! terminal) finds it as it was. (A stderr that shares stdout's pipe shares it too: a log line
//! written while that pipe is full is dropped rather than blocking the session.)

use std::os::fd::{AsRawFd, RawFd};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// A standard descriptor, borrowed: never closed here.
pub struct Std(RawFd);

impl AsRawFd for Std {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Status flags to put back at the end of the session.
pub struct Restore {
    saved: Vec<(RawFd, libc::c_int)>,
}

impl Restore {
    /// Records the flags of stdin and stdout before anything changes them (both may be the
    /// same open file, e.g. a terminal).
    pub fn record() -> Restore {
        let saved = [0, 1]
            .into_iter()
            // SAFETY: F_GETFL only reads the descriptor's flags.
            .map(|fd| (fd, unsafe { libc::fcntl(fd, libc::F_GETFL) }))
            .filter(|&(_, flags)| flags >= 0)
            .collect();
        Restore { saved }
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        for &(fd, flags) in self.saved.iter().rev() {
            // SAFETY: puts back flags read from the same descriptor.
            unsafe {
                libc::fcntl(fd, libc::F_SETFL, flags);
            }
        }
    }
}

/// `fd` registered with the runtime for `interest` and made non-blocking; `None` when it cannot
/// be polled.
pub fn pollable(fd: RawFd, interest: Interest) -> Option<AsyncFd<Std>> {
    // SAFETY: stdin and stdout stay open, on the same files, for the life of the process.
    let registered = unsafe { AsyncFd::register_with_interest(Std(fd), interest) }.ok()?;
    // SAFETY: F_GETFL/F_SETFL on a standard descriptor.
    let set = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
    };
    set.then_some(registered)
}

/// Reads into `buf` once data is there; 0 at the end of input.
pub async fn read(fd: &AsyncFd<Std>, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        let mut ready = fd.readable().await?;
        // SAFETY: read(2) into a buffer of the given length.
        let done = ready.try_io(|fd| {
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match done {
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Ok(n)) => {
                // A short read emptied the pipe: skip the read that would only say so (as
                // tokio's sockets do; a newer readiness event is not cleared by this).
                if n > 0 && n < buf.len() {
                    ready.clear_ready();
                }
                return Ok(n);
            }
            Ok(result) => return result,
            Err(_would_block) => {}
        }
    }
}

/// Writes all of `buf`, waiting while the reader is behind.
pub async fn write_all(fd: &AsyncFd<Std>, mut buf: &[u8]) -> std::io::Result<()> {
    while !buf.is_empty() {
        let mut ready = fd.writable().await?;
        // SAFETY: write(2) from a buffer of the given length.
        let done = ready.try_io(|fd| {
            let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
            if n < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(n as usize)
            }
        });
        match done {
            Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(Ok(n)) => buf = &buf[n..],
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => {}
        }
    }
    Ok(())
}
