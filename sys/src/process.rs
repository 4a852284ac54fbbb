//! Processes and process groups: signals, existence, reaping, the subreaper, the detaching
//! fork.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `id` as a process or group id kill(2) reads as one process or group: 0 and ids past
/// `pid_t` would reach this process's own group or every process (-1).
fn target(id: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(id).ok().filter(|&p| p > 0)
}

/// Whether `target` (a pid, or minus a group id) names a process that exists.
fn probe(target: libc::pid_t) -> bool {
    // SAFETY: kill(2) with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(target, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Sends `signal` to process `pid`; whether it was delivered.
pub fn signal(pid: u32, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) has no memory effects.
    target(pid).is_some_and(|p| unsafe { libc::kill(p, signal) } == 0)
}

/// Sends `signal` to every process of the group `pgid`.
pub fn signal_group(pgid: u32, signal: libc::c_int) {
    if let Some(p) = target(pgid) {
        // SAFETY: killpg(2) has no memory effects.
        unsafe { libc::killpg(p, signal) };
    }
}

/// SIGKILLs every process of the group `pgid`.
pub fn kill_group(pgid: u32) {
    signal_group(pgid, libc::SIGKILL);
}

/// Whether process `pid` exists (a zombie not yet reaped counts).
pub fn exists(pid: u32) -> bool {
    target(pid).is_some_and(probe)
}

/// Whether any process of the group `pgid` exists (a leader not yet reaped counts).
pub fn group_exists(pgid: u32) -> bool {
    target(pgid).is_some_and(|p| probe(-p))
}

/// Reaps the child `pid` if it has exited, without waiting.
pub fn reap(pid: u32) {
    if let Some(p) = target(pid) {
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status into a local.
        unsafe { libc::waitpid(p, &mut status, libc::WNOHANG) };
    }
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphans of its
/// descendants become its children.
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only changes this process's attributes.
    match unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The side of a [`fork_detached`] this process is on.
pub enum Forked {
    /// The parent: the read end of the pipe the child reports on.
    Parent(OwnedFd),
    /// The child, in a session of its own with stdio on `/dev/null`: the write end of the
    /// pipe to report on.
    Child(OwnedFd),
}

/// Forks into a child that starts a new session with stdio on `/dev/null`, and a pipe from the
/// child to the parent (close-on-exec on both ends). Refused once the process has a second
/// thread: the child would continue with a copy of this one only, and whatever lock another
/// thread held would stay held.
pub fn fork_detached() -> io::Result<Forked> {
    if threads()? != 1 {
        return Err(io::Error::other("the process already runs other threads"));
    }
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned here alone.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: this is the only thread (checked above; nothing here starts one meanwhile).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            drop(read_end);
            // SAFETY: plain syscalls on this process's own descriptors.
            unsafe {
                libc::setsid();
                let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                if null >= 0 {
                    libc::dup2(null, 0);
                    libc::dup2(null, 1);
                    libc::dup2(null, 2);
                    if null > 2 {
                        libc::close(null);
                    }
                }
            }
            Ok(Forked::Child(write_end))
        }
        _ => Ok(Forked::Parent(read_end)),
    }
}

/// How many threads this process runs.
fn threads() -> io::Result<usize> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| io::Error::other("/proc/self/status has no thread count"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn a_group_is_signalled_seen_and_gone() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 30 & sleep 30; wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = child.id();
        assert!(exists(pgid) && group_exists(pgid));
        kill_group(pgid);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        // The backgrounded sleep was in the group too; once it is reaped by init, the group
        // is empty. It was killed, so it is at most a zombie of someone else.
        assert!(!exists(pgid));
        assert!(!signal(pgid, 0));
    }

    #[test]
    fn a_fork_is_refused_beside_other_threads() {
        // The test harness runs tests on threads of their own.
        let refused = fork_detached().err().expect("refused");
        assert!(refused.to_string().contains("other threads"), "{refused}");
        assert!(threads().unwrap() > 1);
    }

    #[test]
    fn nothing_is_there_for_a_pid_not_in_use() {
        // pid_max is below 2^22 on Linux.
        assert!(!exists(1 << 23));
        assert!(!group_exists(1 << 23));
    }

    #[test]
    fn ids_kill_would_read_as_this_group_or_every_process_are_refused() {
        // 0 is this process's own group; u32::MAX is -1 as a pid_t, every process.
        for id in [0, u32::MAX, 1 << 31] {
            assert!(!exists(id) && !group_exists(id), "{id}");
            assert!(!signal(id, 0), "{id}");
            signal_group(id, 0);
            reap(id);
        }
        assert!(exists(std::process::id()));
    }
}
