//! Real container sandboxes for the tests: the busybox-only test image of
//! `tests/docker/sandbox.sh` (the static gateway and test server inside, nothing pulled), run
//! by Docker or by podman, with no network. Removed on drop.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::servers::repo;

/// The container engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// `docker`.
    Docker,
    /// `podman` (on the vfs storage `.ci/run` configures).
    Podman,
}

impl Engine {
    /// The CLI.
    pub fn program(self) -> &'static str {
        match self {
            Engine::Docker => "docker",
            Engine::Podman => "podman",
        }
    }
}

fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why `engine` cannot run the test containers here, if it cannot.
pub fn unavailable(engine: Engine) -> Option<String> {
    let script = repo().join("tests/docker/sandbox.sh");
    if let Err(e) = run(Command::new(&script).arg("check")) {
        return Some(format!("no docker daemon to build the test image: {e}"));
    }
    if engine == Engine::Podman
        && let Err(e) =
            run(Command::new("podman").args(["info", "--format", "{{.Store.GraphDriverName}}"]))
    {
        return Some(format!("podman cannot run here: {e}"));
    }
    None
}

/// The test image's name in `engine` (built once per test binary; podman gets Docker's).
pub fn image(engine: Engine) -> &'static str {
    static DOCKER: OnceLock<String> = OnceLock::new();
    static PODMAN: OnceLock<String> = OnceLock::new();
    let docker = DOCKER.get_or_init(|| {
        let script = repo().join("tests/docker/sandbox.sh");
        run(Command::new(&script).arg("image")).unwrap_or_else(|e| panic!("{e}"))
    });
    match engine {
        Engine::Docker => docker,
        Engine::Podman => PODMAN.get_or_init(|| {
            let name = format!("localhost/{docker}");
            if run(Command::new("podman").args(["image", "exists", &name])).is_err() {
                let tar =
                    std::env::temp_dir().join(format!("mcpgw-image-{}.tar", std::process::id()));
                run(Command::new("docker")
                    .arg("save")
                    .arg(docker)
                    .arg("-o")
                    .arg(&tar))
                .unwrap_or_else(|e| panic!("{e}"));
                let loaded = run(Command::new("podman").arg("load").arg("-i").arg(&tar));
                let _ = std::fs::remove_file(&tar);
                loaded.unwrap_or_else(|e| panic!("{e}"));
            }
            name
        }),
    }
}

/// The test image with this machine's node and the npm MCP servers of `tests/servers` inside
/// (`/usr/local/bin/node`, `/opt/mcp-servers/node_modules`), for Docker; built once per test
/// binary.
pub fn node_image() -> &'static str {
    static NODE: OnceLock<String> = OnceLock::new();
    NODE.get_or_init(|| {
        let script = repo().join("tests/docker/sandbox.sh");
        run(Command::new(&script).args(["image", "--node"])).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// server-everything's entry point inside [`node_image`]'s containers.
pub const EVERYTHING_IN_IMAGE: &str =
    "/opt/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// A running container of the test image; removed (forcefully) on drop.
#[derive(Debug)]
pub struct Container {
    /// The engine.
    pub engine: Engine,
    /// Its id.
    pub id: String,
}

impl Container {
    /// Starts a container of the test image with docker's init as PID 1, no network.
    pub fn start(engine: Engine) -> Container {
        Container::start_image(engine, image(engine))
    }

    /// Starts a container of `image` (one of this module's) the way [`Container::start`] does.
    pub fn start_image(engine: Engine, image: &str) -> Container {
        let mut cmd = Command::new(engine.program());
        cmd.args(["run", "-d", "--network", "none", "--label", "mcpgw-test=1"]);
        match engine {
            Engine::Docker => {
                cmd.arg("--init");
            }
            Engine::Podman => {
                // podman's own init (catatonit) is not installed; docker's tini is.
                if Path::new("/usr/bin/docker-init").exists() {
                    cmd.args(["--init", "--init-path", "/usr/bin/docker-init"]);
                }
                cmd.args([
                    "--ulimit",
                    "nofile=20000:20000",
                    "--ulimit",
                    "nproc=20000:20000",
                ]);
            }
        }
        cmd.args([image, "sleep", "86400"]);
        let id = run(&mut cmd).unwrap_or_else(|e| panic!("{e}"));
        Container { engine, id }
    }

    /// Kills the container (it stays, stopped).
    pub fn kill(&self) {
        let _ = run(Command::new(self.engine.program()).args(["kill", &self.id]));
    }

    /// `ENGINE exec -i CONTAINER ARGS...`, to spawn.
    pub fn exec_i(&self, args: &[&str]) -> Command {
        let mut command = Command::new(self.engine.program());
        command.args(["exec", "-i", &self.id]).args(args);
        command
    }

    /// Runs `sh -c script` in the container and returns its output.
    pub fn sh(&self, script: &str) -> std::process::Output {
        Command::new(self.engine.program())
            .args(["exec", &self.id, "sh", "-c", script])
            .stdin(Stdio::null())
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

    /// Pauses (freezes every process of) the container, or unpauses it.
    pub fn set_paused(&self, paused: bool) {
        let verb = if paused { "pause" } else { "unpause" };
        run(Command::new(self.engine.program()).args([verb, &self.id]))
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// Removes it.
    pub fn remove(&self) {
        let _ = run(Command::new(self.engine.program()).args(["rm", "-f", &self.id]));
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        self.remove();
    }
}
