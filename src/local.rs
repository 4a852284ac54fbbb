//! [`LocalShell`]: a ready-made [`Exec`] for a sandbox that is a local directory (or no sandbox
//! at all). The library's only I/O, and only when a host picks it.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::client::{ExecOutput, ExecResult};
use crate::exec::Exec;

/// Runs each command with `sh -c` (or another shell, e.g. `busybox sh -c`) on this machine, with
/// its standard input when the command carries one. A command that overruns its timeout is
/// killed with everything it started, and reported as failed to run.
#[derive(Debug, Clone)]
pub struct LocalShell {
    shell: Vec<String>,
    dir: Option<PathBuf>,
}

impl Default for LocalShell {
    fn default() -> Self {
        LocalShell::new()
    }
}

impl LocalShell {
    /// `sh -c COMMAND` in the current directory.
    pub fn new() -> Self {
        LocalShell {
            shell: vec!["sh".into(), "-c".into()],
            dir: None,
        }
    }

    /// Another shell, given as the argv before the command (e.g. `["busybox", "sh", "-c"]`).
    pub fn with_shell(shell: &[&str]) -> Self {
        LocalShell {
            shell: shell.iter().map(|s| s.to_string()).collect(),
            dir: None,
        }
    }

    /// Runs the commands in `dir`.
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }
}

impl Exec for LocalShell {
    fn exec(&self, command: &crate::command::Command) -> ExecResult {
        let (program, args) = self.shell.split_first().ok_or("no shell given")?;
        let mut cmd = Command::new(program);
        cmd.args(args)
            .arg(&command.text)
            .stdin(if command.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so that a timeout ends everything the command started.
            .process_group(0);
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if let (Some(bytes), Some(mut stdin)) = (command.stdin.clone(), child.stdin.take()) {
            // A command that stops reading early closes the pipe: that is its business.
            std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            });
        }
        // Like `docker exec`, the command is done when its output streams close; each stream is
        // drained on a thread that reports its end, so completion is seen at once.
        let (tx, rx) = std::sync::mpsc::channel();
        let pipes: [Box<dyn Read + Send>; 2] = [
            Box::new(child.stdout.take().expect("stdout is piped")),
            Box::new(child.stderr.take().expect("stderr is piped")),
        ];
        for (i, mut pipe) in pipes.into_iter().enumerate() {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                let _ = tx.send((i, buf));
            });
        }
        let deadline = Instant::now() + command.timeout;
        let mut output = [Vec::new(), Vec::new()];
        let mut open = 2;
        while open > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok((i, buf)) = rx.recv_timeout(left) else {
                // The child is not reaped yet, so its group id cannot have been reused.
                mcpgw_sys::process::kill_group(child.id());
                let _ = child.wait();
                return Err(format!(
                    "the command did not finish within {:?} and was killed",
                    command.timeout
                ));
            };
            output[i] = buf;
            open -= 1;
        }
        let status = child.wait().map_err(|e| e.to_string())?;
        let [stdout, stderr] = output;
        Ok(ExecOutput {
            exit_code: status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            stdout,
            stderr,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::command::Command as Cmd;

    #[test]
    fn runs_commands_with_status_output_stdin_and_directory() {
        let dir = std::env::temp_dir();
        let sh = LocalShell::new().in_dir(&dir);
        let out = sh
            .exec(&Cmd::new(
                "printf 'a\\0b'; echo err >&2; pwd; exit 3",
                Duration::from_secs(5),
            ))
            .unwrap();
        assert_eq!(out.exit_code, 3);
        let canonical = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            out.stdout,
            format!("a\0b{}\n", canonical.display()).into_bytes()
        );
        assert_eq!(out.stderr, b"err\n");
        let big: Arc<[u8]> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
        let out = sh
            .exec(&Cmd::new("wc -c", Duration::from_secs(5)).with_stdin(big))
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1000000");
        let out = LocalShell::with_shell(&["sh", "-c"])
            .exec(&Cmd::new("kill -9 $$", Duration::from_secs(5)))
            .unwrap();
        assert_eq!(out.exit_code, 137);
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_what_it_started() {
        let t = Instant::now();
        let marker = std::env::temp_dir().join(format!("mcpgw-ls-{}", crate::random::uuid4_hex()));
        let pidfile = marker.with_extension("pid");
        let err = LocalShell::new()
            .exec(&Cmd::new(
                format!("sleep 30 & echo $! > {}; sleep 30", pidfile.display()),
                Duration::from_millis(300),
            ))
            .unwrap_err();
        assert!(err.contains("did not finish"), "{err}");
        // The background sleep went with it: its pid no longer runs (SIGKILL is delivered
        // asynchronously, so this waits for it to take effect).
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let gone = || {
            let status =
                std::fs::read_to_string(format!("/proc/{}/status", pid.trim())).unwrap_or_default();
            status.is_empty() || status.contains("State:\tZ")
        };
        let waiting = Instant::now();
        while !gone() {
            assert!(
                waiting.elapsed() < Duration::from_secs(3),
                "the background process survived"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = std::fs::remove_file(&pidfile);
        assert!(t.elapsed() < Duration::from_secs(5));
        assert!(
            LocalShell::with_shell(&["/no/such/shell"])
                .exec(&Cmd::new("true", Duration::from_secs(1)))
                .is_err()
        );
    }
}
