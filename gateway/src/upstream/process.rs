//! The processes a stdio upstream starts, wherever they go.
//!
//! Each upstream is the leader of its own process group, but a descendant can leave the group
//! (`setsid`) and its parent can exit (a double fork): then only its ancestry and its environment
//! tie it to the upstream. So:
//! - the gateway is a child subreaper: orphans of its upstreams are re-parented to it, not to
//!   init, and it reaps them when they exit (also where it runs as a container's pid 1);
//! - every upstream starts with [`TAG_ENV`] set to a tag of its own, which its descendants
//!   inherit: at the end of the upstream, every process carrying the tag, or descending from
//!   the upstream, is ended along with its process group;
//! - when the gateway exits, every process descending from it is ended.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// The environment variable that tags an upstream's processes: `<gateway>-<n>`.
pub const TAG_ENV: &str = "MCPGW_UPSTREAM";

/// This gateway's part of every tag.
static INSTANCE: LazyLock<String> = LazyLock::new(|| mcpgw::random::uuid4_hex()[..12].to_string());

/// The children the runtime waits for itself (the upstreams' leaders): the reaper leaves them
/// alone. Held while spawning, so a child cannot exit unnoticed between spawn and record.
static WAITED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// A tag for a new upstream.
pub fn new_tag() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{}-{}", *INSTANCE, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Makes the gateway a child subreaper (`PR_SET_CHILD_SUBREAPER`).
pub fn become_subreaper() {
    if let Err(e) = mcpgw_sys::process::become_subreaper() {
        tracing::warn!(
            "cannot become a child subreaper ({e}): processes that escape an upstream may outlive it"
        );
    }
}

/// Spawns `cmd` and records its pid as one the runtime waits for.
pub fn spawn_waited(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    let mut waited = WAITED.lock().unwrap();
    let child = cmd.spawn()?;
    if let Some(pid) = child.id() {
        waited.get_or_insert_with(HashSet::new).insert(pid);
    }
    Ok(child)
}

/// Notes that the runtime reaped `pid`.
pub fn reaped(pid: u32) {
    if let Some(waited) = WAITED.lock().unwrap().as_mut() {
        waited.remove(&pid);
    }
}

/// A process as `/proc` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    /// Its id.
    pub pid: u32,
    /// Its parent.
    pub ppid: u32,
    /// Whether it has exited and waits to be reaped.
    pub zombie: bool,
    /// When it started (clock ticks since boot): tells it apart from a later process that
    /// reuses its pid.
    pub started: u64,
}

fn read_proc(pid: u32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... starttime(19).
    Some(Proc {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        zombie: *fields.first()? == "Z",
        started: fields.get(19)?.parse().ok()?,
    })
}

/// Every process now.
fn all() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter_map(read_proc)
        .collect()
}

/// The descendants of `root` among `procs` (not `root` itself).
fn descendants(procs: &[Proc], root: u32) -> Vec<Proc> {
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent) {
            if !found.iter().any(|f| f.pid == p.pid) {
                found.push(*p);
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// Whether `pid`'s environment holds `TAG_ENV=tag`, or any tag of this gateway when `tag` ends
/// with `-`.
fn carries(pid: u32, tag: &str) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{TAG_ENV}={tag}");
    environ.split(|&b| b == 0).any(|var| {
        if tag.ends_with('-') {
            var.starts_with(want.as_bytes())
        } else {
            var == want.as_bytes()
        }
    })
}

/// The live processes of an upstream outside its process group's reach: those carrying its tag
/// and those descending from its leader `root`.
pub fn of_upstream(tag: &str, root: u32) -> Vec<Proc> {
    let procs = all();
    let me = std::process::id();
    let mut found = descendants(&procs, root);
    for p in &procs {
        if p.pid != me && !found.iter().any(|f| f.pid == p.pid) && carries(p.pid, tag) {
            found.push(*p);
        }
    }
    found.retain(|p| !p.zombie);
    found
}

/// Sends `signal` to each process still the one recorded (same start time).
pub fn signal(procs: &[Proc], signal: mcpgw_sys::c_int) {
    for p in procs {
        if read_proc(p.pid).is_some_and(|now| now.started == p.started && !now.zombie) {
            mcpgw_sys::process::signal(p.pid, signal);
        }
    }
}

/// Whether any of `procs` is still alive (a zombie counts as gone).
pub fn any_alive(procs: &[Proc]) -> bool {
    procs
        .iter()
        .any(|p| read_proc(p.pid).is_some_and(|now| now.started == p.started && !now.zombie))
}

/// Reaps the gateway's exited children that the runtime does not wait for: orphans of the
/// upstreams re-parented to it.
pub fn reap_orphans() {
    let me = std::process::id();
    let waited = WAITED.lock().unwrap();
    for p in all() {
        if p.ppid == me && p.zombie && !waited.as_ref().is_some_and(|w| w.contains(&p.pid)) {
            // A zombie child of ours nobody else waits for.
            mcpgw_sys::process::reap(p.pid);
        }
    }
}

/// Reaps orphans whenever a child exits (and every few seconds, in case a signal was merged).
pub async fn reap_forever() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("cannot watch SIGCHLD ({e}); reaping orphans every few seconds");
            None
        }
    };
    loop {
        match &mut sigchld {
            Some(s) => {
                let _ = tokio::time::timeout(Duration::from_secs(5), s.recv()).await;
            }
            None => tokio::time::sleep(Duration::from_secs(5)).await,
        }
        reap_orphans();
    }
}

/// Kills every process that descends from the gateway or carries one of its tags, for its exit.
pub fn kill_everything() {
    let procs = all();
    let me = std::process::id();
    let mut doomed = descendants(&procs, me);
    let prefix = format!("{}-", *INSTANCE);
    for p in &procs {
        if p.pid != me && !doomed.iter().any(|d| d.pid == p.pid) && carries(p.pid, &prefix) {
            doomed.push(*p);
        }
    }
    doomed.retain(|p| !p.zombie);
    signal(&doomed, mcpgw_sys::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32) -> Proc {
        Proc {
            pid,
            ppid,
            zombie: false,
            started: 1,
        }
    }

    #[test]
    fn descendants_follow_parent_links() {
        let procs = [p(10, 1), p(11, 10), p(12, 11), p(13, 1), p(14, 12)];
        let mut found: Vec<u32> = descendants(&procs, 10).iter().map(|p| p.pid).collect();
        found.sort();
        assert_eq!(found, [11, 12, 14]);
        assert!(descendants(&procs, 13).is_empty());
    }

    #[test]
    fn this_process_is_readable_and_untagged() {
        let me = read_proc(std::process::id()).unwrap();
        assert!(!me.zombie && me.started > 0);
        assert!(!carries(std::process::id(), "nothing-1"));
        assert!(new_tag().starts_with(&format!("{}-", *INSTANCE)));
    }
}
