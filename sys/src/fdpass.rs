//! Passing open descriptors over a unix socket (`SCM_RIGHTS`): one message of bytes with the
//! descriptors riding along. The receiver gets descriptors of its own on the same open files,
//! close-on-exec.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// At most this many descriptors go in one message.
pub const MAX_FDS: usize = 4;

/// Room for the control message of `MAX_FDS` descriptors, aligned as `cmsghdr` needs.
#[repr(C)]
union Control {
    _align: libc::cmsghdr,
    bytes: [u8; 64],
}

fn control_len(fds: usize) -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE((fds * size_of::<RawFd>()) as u32) as usize }
}

/// Sends `data` (not empty) with `fds` (at most [`MAX_FDS`]) as one message on `socket`, a
/// connected unix stream socket. The socket may be non-blocking: then `WouldBlock` means
/// nothing was sent.
pub fn send(socket: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<usize> {
    if data.is_empty() || fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a message needs bytes and at most four descriptors",
        ));
    }
    let mut control = Control { bytes: [0; 64] };
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; every field is set below or left zero (no name).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = (&raw mut control).cast();
        msg.msg_controllen = control_len(fds.len()) as _;
        // SAFETY: the control buffer holds CMSG_SPACE for `fds.len()` descriptors (at most
        // MAX_FDS, which fits in 64 bytes), so the first header and its data lie inside it.
        unsafe {
            let header = libc::CMSG_FIRSTHDR(&msg);
            (*header).cmsg_level = libc::SOL_SOCKET;
            (*header).cmsg_type = libc::SCM_RIGHTS;
            (*header).cmsg_len = libc::CMSG_LEN((fds.len() * size_of::<RawFd>()) as u32) as _;
            let data = libc::CMSG_DATA(header).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                data.add(i).write_unaligned(fd.as_raw_fd());
            }
        }
    }
    loop {
        // SAFETY: `msg` points at the iovec and control buffer above, alive for the call.
        let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Receives one message on `socket` into `buf`: how many bytes, and the descriptors that came
/// with it (close-on-exec). Descriptors beyond [`MAX_FDS`] are refused with an error (and
/// closed by the kernel). The socket may be non-blocking.
pub fn recv(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut control = Control { bytes: [0; 64] };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: plain data, set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = (&raw mut control).cast();
    msg.msg_controllen = control_len(MAX_FDS) as _;
    let n = loop {
        // SAFETY: `msg` points at `buf` and the control buffer, both alive for the call.
        let n = unsafe { libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        match usize::try_from(n) {
            Ok(n) => break n,
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed headers into the buffer;
    // CMSG_FIRSTHDR/NXTHDR stay within it, and each SCM_RIGHTS header's data holds the
    // descriptors it counts, now open in this process and owned by nobody else.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&msg);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_SOCKET && (*header).cmsg_type == libc::SCM_RIGHTS {
                let bytes = (*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                let data = libc::CMSG_DATA(header).cast::<RawFd>();
                for i in 0..bytes / size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            header = libc::CMSG_NXTHDR(&msg, header);
        }
    }
    if msg.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("more than {MAX_FDS} descriptors came with one message"),
        ));
    }
    Ok((n, fds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_pipe_end_crosses_a_socket_and_carries_bytes() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut reader, writer) = std::io::pipe().unwrap();
        assert_eq!(send(a.as_fd(), b"take it", &[writer.as_fd()]).unwrap(), 7);
        drop(writer);
        let mut buf = [0; 32];
        let (n, mut fds) = recv(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"take it");
        assert_eq!(fds.len(), 1);
        let mut passed = std::fs::File::from(fds.pop().unwrap());
        passed.write_all(b"through\n").unwrap();
        drop(passed);
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "through\n");
    }

    #[test]
    fn a_message_without_descriptors_has_none_and_too_many_are_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        send(a.as_fd(), b"x", &[]).unwrap();
        let mut buf = [0; 4];
        let (n, fds) = recv(b.as_fd(), &mut buf).unwrap();
        assert_eq!((n, fds.len()), (1, 0));
        let five = [a.as_fd(), a.as_fd(), a.as_fd(), a.as_fd(), a.as_fd()];
        let e = send(a.as_fd(), b"x", &five).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(send(a.as_fd(), b"", &[]).is_err());
    }
}
