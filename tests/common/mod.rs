//! What the end-to-end tests share: the workspace's binaries, a Linux-namespace sandbox made by
//! tests/sandbox.sh, and exec backends (nsenter into it, or a local shell).
#![allow(dead_code)] // Each test file uses a different part.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use mcpgw::ExecOutput;

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `mcpgw-gateway` and `mcpgw-testserver`, built from the current sources (once per test binary;
/// a no-op when they are fresh).
pub fn binaries() -> &'static (PathBuf, PathBuf) {
    static BINS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BINS.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "mcpgw-gateway", "-p", "mcpgw-testserver"])
            .current_dir(root())
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "building the gateway and the test server failed"
        );
        // The test executable lives in <target>/debug/deps.
        let exe = std::env::current_exe().unwrap();
        let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let gateway = dir.join("mcpgw-gateway");
        let testserver = dir.join("mcpgw-testserver");
        assert!(
            gateway.exists() && testserver.exists(),
            "no binaries in {}",
            dir.display()
        );
        (gateway, testserver)
    })
}

/// Why no sandbox can be made here, if it cannot.
pub fn sandbox_unavailable() -> Option<String> {
    let out = Command::new(root().join("tests/sandbox.sh"))
        .arg("check")
        .output()
        .expect("sh runs");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Skips the calling test (with a message saying why) where namespaces are unavailable.
#[macro_export]
macro_rules! require_sandbox {
    () => {
        if let Some(why) = common::sandbox_unavailable() {
            eprintln!("SKIPPED: this test needs a Linux-namespace sandbox: {why}");
            return;
        }
    };
}

/// A running sandbox; stopped and removed on drop.
pub struct Sandbox {
    dir: PathBuf,
    /// The host pid of the sandbox's init.
    pub pid: u32,
}

impl Sandbox {
    /// A sandbox sharing the host's files (so curl and the workspace's binaries are there) but
    /// with its own network, PID and mount namespaces and a private /tmp.
    pub fn full() -> Sandbox {
        Sandbox::start(&[])
    }

    /// A sandbox whose root holds only busybox and the shared libraries `binary` needs.
    pub fn minimal(binary: &Path) -> Sandbox {
        Sandbox::start(&["--minimal", "--libs-for", binary.to_str().unwrap()])
    }

    fn start(args: &[&str]) -> Sandbox {
        let dir = std::env::temp_dir().join(format!(
            "mcpgw-e2e-{}-{}",
            std::process::id(),
            &mcpgw::random::uuid4_hex()[..8]
        ));
        let out = Command::new(root().join("tests/sandbox.sh"))
            .arg("start")
            .arg(&dir)
            .args(args)
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "sandbox.sh start failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let pid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        Sandbox { dir, pid }
    }

    /// The sandbox's root directory on the host (minimal sandboxes only).
    pub fn root_dir(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// An exec backend into this sandbox.
    pub fn exec(&self) -> Nsenter {
        Nsenter {
            pid: self.pid,
            commands: Mutex::new(Vec::new()),
        }
    }

    /// Runs `command` inside, for the test's own setup and checks.
    pub fn sh(&self, command: &str) -> ExecOutput {
        nsenter(
            self.pid,
            &mcpgw::Command::new(command, Duration::from_secs(60)),
        )
        .expect("nsenter runs")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = Command::new(root().join("tests/sandbox.sh"))
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// Runs `command` with `/bin/sh -c` inside the sandbox whose init is `pid`, with its stdin.
pub fn nsenter(pid: u32, command: &mcpgw::Command) -> Result<ExecOutput, String> {
    use std::io::Write;
    // Like a container runtime, refuse to run in a sandbox that is gone.
    if !Path::new(&format!("/proc/{pid}/ns/net")).exists() {
        return Err(format!("the sandbox (pid {pid}) is gone"));
    }
    let secs = command.timeout.as_secs().clamp(1, 24 * 3600);
    let mut child = Command::new("timeout")
        .args(["-s", "KILL", &secs.to_string()])
        .args([
            "nsenter",
            "-t",
            &pid.to_string(),
            "-n",
            "-p",
            "-m",
            "-r",
            "-w",
        ])
        .args(["--", "/bin/sh", "-c", &command.text])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run nsenter: {e}"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let bytes = command.stdin.clone();
    let writer = std::thread::spawn(move || {
        if let Some(bytes) = bytes {
            let _ = stdin.write_all(&bytes);
        }
    });
    let out = child
        .wait_with_output()
        .map_err(|e| format!("nsenter: {e}"))?;
    let _ = writer.join();
    Ok(ExecOutput {
        exit_code: out.status.code().unwrap_or(-1),
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// The exec backend of a sandbox; remembers every command the library asked for.
pub struct Nsenter {
    pid: u32,
    /// Every command run so far.
    pub commands: Mutex<Vec<String>>,
}

impl mcpgw::Exec for Nsenter {
    fn exec(&self, command: &mcpgw::Command) -> Result<ExecOutput, String> {
        self.commands.lock().unwrap().push(command.text.clone());
        nsenter(self.pid, command)
    }
}

/// Scans every process's command line on the host (which sees the sandbox's processes too) for
/// `needle` until stopped; returns (scans, hits).
pub struct CmdlineScanner {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<(u64, Vec<String>)>>,
}

impl CmdlineScanner {
    /// Starts scanning for `needle`.
    pub fn start(needle: String) -> CmdlineScanner {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut scans = 0;
            let mut hits = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                for entry in std::fs::read_dir("/proc").unwrap().flatten() {
                    if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
                        && cmdline
                            .windows(needle.len())
                            .any(|w| w == needle.as_bytes())
                    {
                        hits.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
                    }
                }
                scans += 1;
            }
            (scans, hits)
        });
        CmdlineScanner {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns (scans, command lines that held the needle).
    pub fn finish(mut self) -> (u64, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}
