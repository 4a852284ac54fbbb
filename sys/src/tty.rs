//! A terminal session (a PTY, e.g. Daytona's) echoes input and translates newlines unless the
//! program asks otherwise: raw mode while the session runs, the old settings back at the end.

use std::mem::MaybeUninit;

/// The terminals put in raw mode, with their settings before.
pub struct RawMode {
    saved: Vec<(libc::c_int, libc::termios)>,
}

impl RawMode {
    /// Puts stdin in raw mode when it is a terminal, and stdout when it is another one.
    pub fn enter() -> RawMode {
        let mut saved = Vec::new();
        let mut first_device = None;
        for fd in [0, 1] {
            // SAFETY: isatty, fstat, tcgetattr and tcsetattr only read and set the terminal's
            // settings through pointers to local values.
            unsafe {
                if libc::isatty(fd) != 1 {
                    continue;
                }
                let mut stat = MaybeUninit::<libc::stat>::zeroed();
                let device =
                    (libc::fstat(fd, stat.as_mut_ptr()) == 0).then(|| stat.assume_init().st_rdev);
                if device.is_some() && device == first_device {
                    continue;
                }
                first_device = first_device.or(device);
                let mut before = MaybeUninit::<libc::termios>::zeroed();
                if libc::tcgetattr(fd, before.as_mut_ptr()) != 0 {
                    continue;
                }
                let before = before.assume_init();
                let mut raw = before;
                libc::cfmakeraw(&mut raw);
                // TCSANOW: frames the host sent already stay queued.
                if libc::tcsetattr(fd, libc::TCSANOW, &raw) == 0 {
                    saved.push((fd, before));
                }
            }
        }
        RawMode { saved }
    }

    /// Whether the session runs on a terminal.
    pub fn is_active(&self) -> bool {
        !self.saved.is_empty()
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        for (fd, before) in self.saved.iter().rev() {
            // SAFETY: restores settings read from the same descriptor.
            unsafe {
                libc::tcsetattr(*fd, libc::TCSANOW, before);
            }
        }
    }
}
