//! The MCP clients of `tests/clients`, official SDKs nobody here wrote, each running the same
//! script against `@modelcontextprotocol/server-everything` (`tests/clients/everything.json`)
//! and printing what it got as one JSON object: two runs, one straight to the server and one
//! through the host endpoint, are compared.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::mcp::normalized;
use crate::process::wait_child;
use crate::servers::{repo, venv_bin};

/// How long one run of a client's script may take.
pub const RUN_LIMIT: Duration = Duration::from_secs(180);

/// An official MCP SDK's client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// `@modelcontextprotocol/sdk` (npm).
    TypeScript,
    /// `mcp` (PyPI), its `ClientSession`.
    Python,
    /// `github.com/modelcontextprotocol/go-sdk`.
    Go,
}

/// `tests/clients`.
pub fn clients_dir() -> PathBuf {
    repo().join("tests/clients")
}

/// `tests/clients/node_modules`, checked.
pub fn node_modules() -> PathBuf {
    let dir = clients_dir().join("node_modules");
    assert!(
        dir.join(".package-lock.json").exists(),
        "{} is missing: run `make deps` (make test does)",
        dir.display()
    );
    dir
}

/// The Go client, built once per test binary into the target directory.
fn go_client() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo().join("target"));
            let out = target.join("clients/everything-go");
            let status = Command::new("go")
                .args(["build", "-o"])
                .arg(&out)
                .arg(".")
                .current_dir(clients_dir().join("go"))
                .status()
                .expect("go build of tests/clients/go");
            assert!(status.success(), "go build of tests/clients/go failed");
            out
        })
        .clone()
}

impl Sdk {
    /// Every SDK.
    pub const ALL: [Sdk; 3] = [Sdk::TypeScript, Sdk::Python, Sdk::Go];

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Sdk::TypeScript => "typescript",
            Sdk::Python => "python",
            Sdk::Go => "go",
        }
    }

    /// The command that runs its script; the transport's arguments follow (`stdio COMMAND
    /// ARG...` or `http URL [TOKEN_FILE]`).
    pub fn command(self) -> Command {
        match self {
            Sdk::TypeScript => {
                node_modules();
                let mut c = Command::new("node");
                c.arg(clients_dir().join("ts/everything.mjs"));
                c
            }
            Sdk::Python => {
                let mut c = Command::new(venv_bin("python"));
                c.arg("-W")
                    .arg("ignore")
                    .arg(clients_dir().join("python/everything.py"));
                c
            }
            Sdk::Go => Command::new(go_client()),
        }
    }

    /// Runs its script with the transport `args`; what it printed, as JSON.
    pub fn run<I, S>(self, args: I) -> Value
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = self.command();
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
        let status = wait_child(&mut child, RUN_LIMIT);
        let text = reader.join().unwrap();
        assert!(
            status.success(),
            "the {} client failed ({status}): {cmd:?}",
            self.name()
        );
        serde_json::from_str(text.trim())
            .unwrap_or_else(|e| panic!("the {} client printed no JSON ({e}): {text}", self.name()))
    }
}

/// Asserts that two runs of a script got the same answers, but for ids and times, naming
/// each step that differs.
pub fn assert_same_answers(sdk: Sdk, got: &Value, want: &Value) {
    let differ = differences(got, want).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        differ.is_empty(),
        "the {} client's answers differ from a direct connection's:\n{}",
        sdk.name(),
        differ.join("\n")
    );
}

/// The steps of two runs of a script (objects of step to answer) whose answers differ but for
/// ids and times (`normalized`), each with both answers: first those of `want` in its order,
/// then the steps only `got` has. An error when either is not an object. The binding tests
/// compare their SDK's runs with it too (the `mcpgw-same-answers` binary), so that one rule
/// set judges every client.
pub fn differences(got: &Value, want: &Value) -> Result<Vec<String>, String> {
    let (Some(got), Some(want)) = (got.as_object(), want.as_object()) else {
        let object = |v: &Value| {
            if v.is_object() {
                "an object"
            } else {
                "not an object"
            }
        };
        return Err(format!(
            "two runs are compared as JSON objects of step to answer: got is {}, want {}",
            object(got),
            object(want)
        ));
    };
    let mut differ = Vec::new();
    for (step, w) in want {
        match got.get(step) {
            None => differ.push(format!("{step}: missing")),
            Some(g) if normalized(g) != normalized(w) => {
                differ.push(format!("{step}:\n  got  {g}\n  want {w}"))
            }
            Some(_) => {}
        }
    }
    for step in got.keys().filter(|k| !want.contains_key(*k)) {
        differ.push(format!("{step}: not in the direct run"));
    }
    Ok(differ)
}
