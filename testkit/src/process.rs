//! Processes: children killed on drop, captured output, liveness, process groups, memory.

use std::io::Read;
use std::process::{Child, Command, Output};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs `command` to its end; fails the test, with the command and its stderr, unless it exits 0.
pub fn succeeded(command: &mut Command) -> Output {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} does not run: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `command` as [`succeeded`] does; its standard output, trimmed.
pub fn stdout_of(command: &mut Command) -> String {
    String::from_utf8_lossy(&succeeded(command).stdout)
        .trim()
        .to_owned()
}

/// A child process killed (and reaped) on drop.
pub struct Guarded(pub Child);

impl Drop for Guarded {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Everything a pipe carries, collected by a thread of its own.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<String>>);

impl Captured {
    /// Starts collecting `pipe` (e.g. a child's stderr).
    pub fn start(mut pipe: impl Read + Send + 'static) -> Captured {
        let captured = Captured::default();
        let sink = captured.0.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        captured
    }

    /// What arrived so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Waits up to `limit` until the text contains `needle` (the reader thread may lag behind
    /// the process), and returns it; panics with what arrived otherwise.
    pub fn wait_for(&self, needle: &str, limit: Duration) -> String {
        let start = Instant::now();
        loop {
            let text = self.text();
            if text.contains(needle) {
                return text;
            }
            assert!(
                start.elapsed() < limit,
                "no {needle:?} within {limit:?} in:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Waits for a child to exit, panicking past `limit`.
pub fn wait_child(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < limit,
            "process {} did not exit within {limit:?}",
            child.id()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The fields of `/proc/PID/stat` after the command name: state, ppid, pgrp, ...
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// Whether a process exists (zombies count as gone).
pub fn process_alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|f| f.first().is_some_and(|state| state != "Z"))
}

/// Waits up to `limit` for a process to be gone.
pub fn wait_gone(pid: u32, limit: Duration) -> bool {
    let start = Instant::now();
    while process_alive(pid) {
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Every process (zombies included) with `pick(state, ppid, pgrp)` true.
pub fn processes_where(pick: impl Fn(&str, u32, u32) -> bool) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Some(f) = stat_fields(pid) else { continue };
        let num = |i: usize| f.get(i).and_then(|v| v.parse().ok()).unwrap_or(0);
        if pick(&f[0], num(1), num(2)) {
            out.push(pid);
        }
    }
    out
}

/// The processes of a process group.
pub fn processes_in_group(pgid: u32) -> Vec<u32> {
    processes_where(|_, _, pgrp| pgrp == pgid)
}

/// The resident memory of a process in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The peak resident memory of a process in KiB (`VmHWM` of `/proc/PID/status`).
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {pid}"))
}

/// Samples a process's resident memory every few milliseconds until dropped.
pub struct RssSampler {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl RssSampler {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            peak.max(rss_kib(pid))
        });
        RssSampler {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns the peak, in KiB.
    pub fn peak(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}
