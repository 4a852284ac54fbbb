//! Temporary directories and files that appear.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A fresh private directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// Makes `mcpgw-test-<tag>-<unique>`.
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let unique = format!(
            "{}-{}-{nanos:08x}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(format!("mcpgw-test-{tag}-{unique}"));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A path inside.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    /// Ends every process whose command line names the directory (a gateway started with
    /// `--state-dir` or `--token-file` in it, a server it ran, their attach), also when the
    /// test failed before stopping them, then removes the directory.
    fn drop(&mut self) {
        let needle = self.0.to_string_lossy().into_owned();
        let me = std::process::id();
        let left: Vec<u32> = crate::processes_where(|_, _, _| true)
            .into_iter()
            .filter(|&pid| {
                pid != me
                    && std::fs::read(format!("/proc/{pid}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&needle))
            })
            .collect();
        for pid in &left {
            // SAFETY: kill(2) with a pid read from /proc; a pid gone meanwhile is ESRCH.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
        }
        for pid in left {
            crate::wait_gone(pid, Duration::from_secs(5));
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits up to `limit` for `path` to exist without blocking an async test's runtime; whether
/// it does.
pub async fn appears(path: &Path, limit: Duration) -> bool {
    let start = Instant::now();
    while !path.exists() {
        if start.elapsed() > limit {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// Waits up to `limit` for `path` to exist and returns its text.
pub fn wait_for_file(path: &Path, limit: Duration) -> Option<String> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Some(text);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}
