//! The process's user, its file-mode mask and open-file limit, and file locks.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// This process's real user.
pub fn uid() -> u32 {
    // SAFETY: getuid(2) has no failure and touches no memory.
    unsafe { libc::getuid() }
}

/// This process's effective user.
pub fn euid() -> u32 {
    // SAFETY: geteuid(2) has no failure and touches no memory.
    unsafe { libc::geteuid() }
}

/// Runs `f` with the file-mode creation mask set to `mask`, then puts the old one back. (The
/// mask is the process's: call this before other threads create files.)
pub fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
    // SAFETY: umask(2) only swaps the process's mask.
    let old = unsafe { libc::umask(mask as libc::mode_t) };
    let out = f();
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    out
}

/// Raises the soft open-file limit to the hard one (as Go programs do). Returns the soft limit
/// now in force (1024 when it cannot be read).
pub fn raise_fd_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 1024;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
    }
    limit.rlim_cur
}

/// Takes an exclusive `flock(2)` on `file`, waiting for it; it is held until the file closes.
pub fn lock_exclusive(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor `file` owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether descriptor `fd` of this process is a terminal.
pub fn is_terminal(fd: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    unsafe { libc::isatty(fd) == 1 }
}

/// Open flags for [`std::os::unix::fs::OpenOptionsExt::custom_flags`].
pub use libc::{O_CLOEXEC, O_NOCTTY, O_NOFOLLOW, O_NONBLOCK};

/// Error numbers of a full descriptor table (the process's, the system's).
pub use libc::{EMFILE, ENFILE};

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("mcpgw-sys-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    #[test]
    fn the_mask_applies_inside_and_is_put_back() {
        let dir = scratch("umask");
        drop(with_umask(0o177, || File::create(dir.join("a")).unwrap()));
        drop(with_umask(0o000, || File::create(dir.join("b")).unwrap()));
        let mode = |n: &str| std::fs::metadata(dir.join(n)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("a"), 0o600);
        assert_eq!(mode("b"), 0o666);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lock_excludes_another_open_file_until_it_closes() {
        let dir = scratch("lock");
        let path = dir.join("lock");
        let first = File::create(&path).unwrap();
        lock_exclusive(&first).unwrap();
        let second = File::open(&path).unwrap();
        // SAFETY: flock on a descriptor `second` owns.
        let busy = unsafe { libc::flock(second.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(busy, -1);
        drop(first);
        lock_exclusive(&second).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_user_and_the_limit_are_this_process_s() {
        assert_eq!(euid(), std::fs::metadata("/proc/self").unwrap().uid());
        let soft = raise_fd_limit();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let now: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(now[3], soft.to_string(), "{line}");
        assert!(!is_terminal(-1));
    }
}
