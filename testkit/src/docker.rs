//! Real Docker sandboxes (tests/docker/sandbox.sh): the test image built offline from the
//! static gateway and test server (`make static`), containers without a network, entered with
//! `docker exec`.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::servers::repo;

fn sandbox_sh() -> Command {
    let mut command = Command::new("sh");
    command.arg(repo().join("tests/docker/sandbox.sh"));
    command
}

/// Why Docker cannot be used here, if it cannot (tests print `SKIPPED: ` and this, and pass).
pub fn docker_unavailable() -> Option<String> {
    let out = sandbox_sh().arg("check").output().ok()?;
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A running container of the test image, removed on drop.
pub struct Container(pub String);

impl Container {
    /// Builds the test image unless it exists (from `make static`'s binaries) and starts one.
    pub fn start() -> Container {
        let image = sandbox_sh().arg("image").output().unwrap();
        assert!(
            image.status.success(),
            "the test image: {}",
            String::from_utf8_lossy(&image.stderr)
        );
        let image = String::from_utf8_lossy(&image.stdout).trim().to_owned();
        let id = sandbox_sh().args(["start", &image]).output().unwrap();
        assert!(
            id.status.success(),
            "{}",
            String::from_utf8_lossy(&id.stderr)
        );
        Container(String::from_utf8_lossy(&id.stdout).trim().to_owned())
    }

    /// `docker exec -i CONTAINER ARGS...`, to spawn.
    pub fn exec_i(&self, args: &[&str]) -> Command {
        let mut command = Command::new("docker");
        command.args(["exec", "-i", &self.0]).args(args);
        command
    }

    /// Runs `sh -c script` in the container and returns its output.
    pub fn sh(&self, script: &str) -> Output {
        Command::new("docker")
            .args(["exec", &self.0, "sh", "-c", script])
            .output()
            .unwrap()
    }

    /// Waits up to `limit` for the file at `path` in the container to hold `needle`, and
    /// returns its text.
    pub fn wait_for_text(&self, path: &str, needle: &str, limit: Duration) -> Option<String> {
        let started = Instant::now();
        while started.elapsed() < limit {
            let out = self.sh(&format!("cat {path} 2>/dev/null"));
            let text = String::from_utf8_lossy(&out.stdout);
            if out.status.success() && text.contains(needle) {
                return Some(text.into_owned());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    }

    /// `docker pause` or `docker unpause`.
    pub fn set_paused(&self, paused: bool) {
        let verb = if paused { "pause" } else { "unpause" };
        let status = Command::new("docker")
            .args([verb, &self.0])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "docker {verb}");
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = sandbox_sh().args(["stop", &self.0]).status();
    }
}
