//! Sandbox backends, defined once: how a command and a channel enter the sandbox (the argv of a
//! local shell, `docker exec`, `podman exec`, `kubectl exec`, or any argv prefix), and how to
//! tell a failure of the backend (the sandbox is gone, not running, unreachable) from the
//! command's own exit status, with the follow-up question ("is the container still running?")
//! that a silent exit 137 needs.
//!
//! The [`Backend::Exec`] backend is the host's own exec function (an E2B or Daytona SDK's
//! `commands.run`, say): the driver hands it the `sh -c` text and leaves the classification to it
//! (it reports a backend failure as a failed run).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::quote::quote;

/// How commands and channels reach the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Backend {
    /// `sh -c` on this machine (the machine is the sandbox: tests, development).
    Local {
        /// The working directory; the host process's when `None`.
        #[serde(default)]
        cwd: Option<String>,
    },
    /// `docker exec` into a running container.
    Docker(Container),
    /// `podman exec` into a running container.
    Podman(Container),
    /// `kubectl exec` into a running pod.
    Kubectl(Pod),
    /// Any argv prefix that runs its remaining arguments inside the sandbox (`nsenter -t PID -m
    /// -n -p`, `bwrap ...`, `ssh host`).
    Argv(Prefix),
    /// The host's own exec function and channel opener: the driver asks it to run `sh -c` text.
    Exec {
        /// Whether the exec function passes a command's standard input.
        #[serde(default)]
        passes_stdin: bool,
    },
    /// An E2B sandbox, through the binding's adapter of E2B's SDK (`commands.run`, a background
    /// command with stdin for the channel).
    E2b(Sdk),
    /// An OpenSandbox sandbox, through the binding's adapter of its SDK (`commands.run`, execd's
    /// pipe session for the channel).
    Opensandbox(Sdk),
    /// A Daytona sandbox, through the binding's adapter of its SDK (`process.exec`, a session
    /// command with input for the channel).
    Daytona(Sdk),
}

/// A sandbox reached through a provider's SDK: the binding's adapter runs the `sh -c` text the
/// driver gives (stdin passed, uploaded with the SDK's file API), and reports what the SDK
/// raised as `Class: message` text, which [`Backend::judge_failed`] reads by the provider's
/// words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sdk {
    /// The sandbox's id, for messages.
    pub sandbox: String,
}

/// A container of Docker or podman.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Container {
    /// Its name or id.
    pub container: String,
    /// Options of `exec` (between `exec` and the container), e.g. `["--user", "agent"]`.
    #[serde(default)]
    pub exec_options: Vec<String>,
    /// Options of the CLI itself (before `exec`), e.g. `["--host", "ssh://box"]`.
    #[serde(default)]
    pub options: Vec<String>,
    /// The CLI; `docker` or `podman` by default.
    #[serde(default)]
    pub program: Option<String>,
}

/// A Kubernetes pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pod {
    /// The pod (`name`, or `pod/name`).
    pub pod: String,
    /// Its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The container in the pod.
    #[serde(default)]
    pub container: Option<String>,
    /// Options of kubectl itself, e.g. `["--context", "prod", "--kubeconfig", "/k"]`.
    #[serde(default)]
    pub options: Vec<String>,
    /// The CLI; `kubectl` by default.
    #[serde(default)]
    pub program: Option<String>,
}

/// An argv prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prefix {
    /// The argv before `sh -c TEXT`.
    pub prefix: Vec<String>,
    /// The program joins its arguments into one line for a remote shell (as `ssh` does): the
    /// `sh -c TEXT` words are then quoted once more.
    #[serde(default)]
    pub joins_arguments: bool,
    /// Arguments added after the prefix for the session channel (a program that runs a
    /// long-lived command otherwise than a one-shot one, as `mcpgw_client exec --channel`).
    #[serde(default)]
    pub channel_args: Vec<String>,
    /// The provider whose SDK the program drives (`e2b`, `opensandbox`, `daytona`): a run it
    /// ends with [`EXEC_FAILED_STATUS`] and a last stderr line `mcpgw-exec: Class: message`
    /// is read by that provider's words, as [`Backend::judge_failed`] reads a binding's.
    #[serde(default)]
    pub provider: Option<Provider>,
}

/// A provider of sandboxes whose SDK's failures the driver knows by their words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// E2B.
    E2b,
    /// OpenSandbox.
    Opensandbox,
    /// Daytona.
    Daytona,
}

/// The exit status with which a program of an argv prefix that drives a provider's SDK says the
/// SDK could not run the command (its last stderr line then starts with [`EXEC_FAILED_PREFIX`]).
pub const EXEC_FAILED_STATUS: i32 = 255;

/// How that program's last stderr line starts.
pub const EXEC_FAILED_PREFIX: &str = "mcpgw-exec: ";

/// What runs a command or a channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// Run exactly this argv on the host (never through a host shell).
    Argv(Vec<String>),
    /// Ask the host's exec function (or channel opener) to run this `sh -c` text in the sandbox.
    Shell(String),
}

/// Whether a command's standard input carries bytes, stays open and empty, or is closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// These bytes, then end of input.
    Bytes(std::sync::Arc<[u8]>),
    /// A pipe the host keeps open (and writes nothing to) until the process exits: its end
    /// tells the sandbox that the host gave up, so the command is killed there too.
    Hold,
}

/// Why a run was the backend's failure rather than the command's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureState {
    /// The container or pod does not exist, or it was killed or removed during the command.
    Gone,
    /// It exists but is not running (stopped, paused).
    NotRunning,
    /// The daemon or API server cannot be reached.
    Unreachable,
    /// The backend could not start the command (no `sh` in the image, a refused option).
    CannotRun,
}

/// A failure of the backend, for messages and for the bindings' one backend-error type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendFailure {
    /// `docker`, `podman`, `kubectl`, or the prefix's program.
    pub backend: String,
    /// The container or pod.
    pub target: String,
    /// The backend client's exit status.
    pub exit_code: i32,
    /// What kind of failure.
    pub state: FailureState,
    /// What the backend said, or what was found out.
    pub reason: String,
}

impl std::fmt::Display for BackendFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} exec in {} failed (exit {}): {}",
            self.backend, self.target, self.exit_code, self.reason
        )
    }
}

/// What a finished run says about the backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The command ran; its exit status is its own.
    Command,
    /// The backend failed.
    Failed(BackendFailure),
    /// An exit status both a command and a dying sandbox give (137 with no output): run this
    /// question, then [`Backend::judge_answer`].
    Ask(Vec<String>),
}

/// Runs `sh -c "$1"` in a session of its own while watching stdin: when stdin ends before the
/// command does (the host killed the exec client, whose stdin it holds open), the whole session
/// is killed, so a command cancelled on the host ends in the sandbox too (its request connection
/// closes, and the gateway cancels the call upstream). The watcher has a session of its own as
/// well, so that it outlives the host killing the process group it started in (an argv prefix
/// such as `nsenter` keeps the sandbox's processes in the host's group). Without `setsid` it runs
/// the command as is. (An asynchronous list reads /dev/null unless told otherwise: the watcher
/// gets stdin as fd 3.) `kill -KILL -PGID` without `--`: dash refuses `--`.
pub const WATCHED: &str = "command -v setsid >/dev/null 2>&1 || exec sh -c \"$1\" </dev/null; \
     exec 3<&0; \
     setsid sh -c \"$1\" </dev/null 3<&- & p=$!; \
     setsid sh -c 'cat >/dev/null; kill -KILL -\"$0\"' \"$p\" <&3 >/dev/null 2>&1 & w=$!; \
     exec 3<&-; wait \"$p\"; s=$?; kill -KILL -\"$w\" 2>/dev/null; exit \"$s\"";

/// The stderr prefixes with which the Docker CLI (exit 1) says the sandbox is not there.
const DOCKER_GONE: [&str; 3] = [
    "Error response from daemon:",
    "Cannot connect to the Docker daemon",
    "unable to upgrade to tcp",
];

/// The stderr prefixes with which kubectl (exit 1) says the pod cannot be reached.
const KUBECTL_GONE: [&str; 4] = [
    "Error from server",
    "error: unable to upgrade connection",
    "Unable to connect to the server",
    "The connection to the server",
];

/// What E2B's SDKs (Python `e2b`, npm `e2b`) raise, by what it means for the sandbox, first
/// match wins. A sandbox killed under a call or stopped answers nothing (the SDK reports it
/// unreachable: `SandboxUnreachableException`, `[unknown] terminated`, `fetch failed`); E2B's
/// edge proxy reports one that is not running; a paused one leaves calls to their deadline.
const E2B_WORDS: [(FailureState, &[&str]); 4] = [
    (
        FailureState::Gone,
        &[
            "SandboxNotFound",
            "NotFoundError: sandbox",
            "sandbox not found",
        ],
    ),
    (
        FailureState::NotRunning,
        &["SandboxNotRunning", "is not running", "paused"],
    ),
    (
        FailureState::CannotRun,
        &[
            "AuthenticationException",
            "AuthenticationError",
            "[unauthenticated]",
            "InvalidArgumentException",
            "InvalidArgumentError",
            "[invalid_argument]",
        ],
    ),
    (
        FailureState::Unreachable,
        &[
            "SandboxUnreachable",
            "could not be reached",
            "[unknown] terminated",
            "fetch failed",
            "ECONNREFUSED",
            "Connection refused",
            "TimeoutException",
            "[deadline_exceeded]",
        ],
    ),
];

/// What OpenSandbox's SDKs (Python `opensandbox`, npm `@alibaba-group/opensandbox`) and its
/// server raise, by what it means for the sandbox, first match wins.
const OPENSANDBOX_WORDS: [(FailureState, &[&str]); 4] = [
    (
        FailureState::Gone,
        &[
            "SANDBOX_NOT_FOUND",
            "CONTAINER_EXITED",
            "state=Failed",
            "state: Failed",
        ],
    ),
    (
        FailureState::NotRunning,
        &["CONTAINER_PAUSED", "state=Paused", "state: Paused"],
    ),
    (
        FailureState::CannotRun,
        &[
            "INVALID_API_KEY",
            "MISSING_API_KEY",
            "HTTP 401",
            "invalid or missing header X-EXECD-ACCESS-TOKEN",
            "START_FAILED",
        ],
    ),
    (
        FailureState::Unreachable,
        &[
            "SandboxConnectionException",
            "SandboxReadyTimeoutException",
            "All connection attempts failed",
            "incomplete chunked read",
            "TypeError: terminated",
            "fetch failed",
            "ECONNREFUSED",
            "ConnectionClosed",
            "socket hang up",
        ],
    ),
];

/// What Daytona's SDKs (Python `daytona`, npm `@daytonaio/sdk`) raise, by what it means for the
/// sandbox, first match wins.
const DAYTONA_WORDS: [(FailureState, &[&str]); 4] = [
    (
        FailureState::Gone,
        &[
            "DaytonaNotFoundError",
            "sandbox not found",
            "session not found",
        ],
    ),
    (
        FailureState::NotRunning,
        &["is not started", "is stopped", "is archived"],
    ),
    (
        FailureState::CannotRun,
        &["DaytonaAuthenticationError", "DaytonaAuthorizationError"],
    ),
    (
        FailureState::Unreachable,
        &[
            "DaytonaConnectionError",
            "DaytonaConnectionTimeoutError",
            "WebSocketNetworkError",
            "Failed to get session command logs",
            "ECONNREFUSED",
            "fetch failed",
            "Connection refused",
            "socket hang up",
        ],
    ),
];

impl Provider {
    /// What `reason` (what the provider's SDK raised: `Class: message`) says of the sandbox,
    /// when it says something.
    pub fn state_of(self, reason: &str) -> Option<FailureState> {
        let words: &[(FailureState, &[&str])] = match self {
            Provider::E2b => &E2B_WORDS,
            Provider::Opensandbox => &OPENSANDBOX_WORDS,
            Provider::Daytona => &DAYTONA_WORDS,
        };
        words
            .iter()
            .find(|(_, said)| said.iter().any(|w| reason.contains(w)))
            .map(|(state, _)| *state)
    }
}

fn check_name(what: &str, name: &str, extra: &[u8]) -> Result<(), Error> {
    if name.is_empty() {
        return Err(Error::invalid_argument(format!(
            "the {what} must not be empty"
        )));
    }
    if name.starts_with('-') {
        return Err(Error::invalid_argument(format!(
            "the {what} {name:?} starts with '-': it would be read as an option"
        )));
    }
    if let Some(bad) = name
        .bytes()
        .find(|b| !(b.is_ascii_alphanumeric() || b"._-".contains(b) || extra.contains(b)))
    {
        return Err(Error::invalid_argument(format!(
            "the {what} {name:?} holds {:?}, which no {what} name has",
            bad as char
        )));
    }
    Ok(())
}

fn check_args(what: &str, args: &[String]) -> Result<(), Error> {
    if let Some(a) = args.iter().find(|a| a.contains('\0')) {
        return Err(Error::invalid_argument(format!(
            "an entry of {what} holds a NUL byte: {a:?}"
        )));
    }
    Ok(())
}

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("")
}

/// Whether `line` is one of kubectl's own log lines (klog: `E1201 21:18:57.215002  620
/// memcache.go:265] ...`), which it prints before saying what failed.
fn is_klog(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 14
        && b"IWEF".contains(&b[0])
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[8] == b':'
}

impl Backend {
    /// Checks every value; the message names the one that is unusable.
    pub fn validate(&self) -> Result<(), Error> {
        match self {
            Backend::Local { cwd } => {
                if let Some(cwd) = cwd {
                    check_args("the working directory", std::slice::from_ref(cwd))?;
                }
            }
            Backend::Docker(c) | Backend::Podman(c) => {
                check_name("container", &c.container, b"")?;
                check_args("the exec options", &c.exec_options)?;
                check_args("the CLI options", &c.options)?;
            }
            Backend::Kubectl(p) => {
                check_name("pod", &p.pod, b"/")?;
                if let Some(ns) = &p.namespace {
                    check_name("namespace", ns, b"")?;
                }
                if let Some(c) = &p.container {
                    check_name("container", c, b"")?;
                }
                check_args("the kubectl options", &p.options)?;
            }
            Backend::Argv(p) => {
                if p.prefix.is_empty() || p.prefix[0].is_empty() {
                    return Err(Error::invalid_argument(
                        "the argv prefix must name a program",
                    ));
                }
                check_args("the argv prefix", &p.prefix)?;
                check_args("the channel's arguments", &p.channel_args)?;
            }
            Backend::Exec { .. } => {}
            Backend::E2b(sdk) | Backend::Opensandbox(sdk) | Backend::Daytona(sdk) => {
                if sdk.sandbox.is_empty() {
                    return Err(Error::invalid_argument("the sandbox id must not be empty"));
                }
                check_args("the sandbox id", std::slice::from_ref(&sdk.sandbox))?;
            }
        }
        Ok(())
    }

    /// The backend's name, for messages.
    pub fn name(&self) -> &str {
        match self {
            Backend::Local { .. } => "sh",
            Backend::Docker(c) => c.program.as_deref().unwrap_or("docker"),
            Backend::Podman(c) => c.program.as_deref().unwrap_or("podman"),
            Backend::Kubectl(p) => p.program.as_deref().unwrap_or("kubectl"),
            Backend::Argv(p) => &p.prefix[0],
            Backend::Exec { .. } => "exec",
            Backend::E2b(_) => "e2b",
            Backend::Opensandbox(_) => "opensandbox",
            Backend::Daytona(_) => "daytona",
        }
    }

    /// The container or pod, for messages.
    pub fn target(&self) -> &str {
        match self {
            Backend::Docker(c) | Backend::Podman(c) => &c.container,
            Backend::Kubectl(p) => &p.pod,
            Backend::E2b(sdk) | Backend::Opensandbox(sdk) | Backend::Daytona(sdk) => &sdk.sandbox,
            Backend::Local { .. } | Backend::Argv(_) | Backend::Exec { .. } => "the sandbox",
        }
    }

    /// Whether the binding runs commands and channels through its own functions (the exec
    /// function, or a provider SDK's adapter): the driver hands it `sh -c` text, not an argv.
    pub fn runs_through_binding(&self) -> bool {
        matches!(
            self,
            Backend::Exec { .. } | Backend::E2b(_) | Backend::Opensandbox(_) | Backend::Daytona(_)
        )
    }

    /// Whether commands may carry standard input.
    pub fn passes_stdin(&self) -> bool {
        match self {
            Backend::Exec { passes_stdin } => *passes_stdin,
            _ => true,
        }
    }

    /// Whether a process started in the sandbox outlives the host's client process, so that a
    /// command without stdin should run under [`WATCHED`] to be cancellable.
    fn detaches(&self) -> bool {
        // A program driving a provider's SDK reads a one-shot command's stdin to its end before
        // it runs the command: it gets /dev/null or the bytes, never a pipe held open.
        let sdk_program = matches!(self, Backend::Argv(p) if p.provider.is_some());
        !matches!(self, Backend::Local { .. }) && !self.runs_through_binding() && !sdk_program
    }

    /// The local working directory of the host's process, for [`Backend::Local`].
    pub fn cwd(&self) -> Option<&str> {
        match self {
            Backend::Local { cwd } => cwd.as_deref(),
            _ => None,
        }
    }

    /// The argv that runs `words` (already `sh -c TEXT ...`) in the sandbox, `interactive` when
    /// stdin is passed.
    fn enter(&self, interactive: bool, words: Vec<String>) -> Vec<String> {
        let mut argv = Vec::new();
        match self {
            Backend::Local { .. }
            | Backend::Exec { .. }
            | Backend::E2b(_)
            | Backend::Opensandbox(_)
            | Backend::Daytona(_) => {}
            Backend::Docker(c) | Backend::Podman(c) => {
                argv.push(self.name().to_owned());
                argv.extend(c.options.iter().cloned());
                argv.push("exec".into());
                if interactive {
                    argv.push("-i".into());
                }
                argv.extend(c.exec_options.iter().cloned());
                argv.push(c.container.clone());
            }
            Backend::Kubectl(p) => {
                argv.push(self.name().to_owned());
                argv.extend(p.options.iter().cloned());
                argv.push("exec".into());
                if interactive {
                    argv.push("-i".into());
                }
                if let Some(ns) = &p.namespace {
                    argv.extend(["--namespace".into(), ns.clone()]);
                }
                if let Some(c) = &p.container {
                    argv.extend(["--container".into(), c.clone()]);
                }
                argv.push(p.pod.clone());
                // Ends kubectl's own options: nothing of the command is read as one.
                argv.push("--".into());
            }
            Backend::Argv(p) => {
                argv.extend(p.prefix.iter().cloned());
                if p.joins_arguments {
                    let line = words
                        .iter()
                        .map(|w| quote(w).expect("checked for NUL"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    argv.push(line);
                    return argv;
                }
            }
        }
        argv.extend(words);
        argv
    }

    /// How to run the one-shot command `text`, and its standard input: a command without input
    /// on a backend whose sandbox process outlives the client runs under [`WATCHED`] with stdin
    /// held open, so killing the client ends it in the sandbox too.
    pub fn command(&self, text: &str, stdin: Option<std::sync::Arc<[u8]>>) -> (Program, Stdin) {
        if self.runs_through_binding() {
            let stdin = stdin.map_or(Stdin::Null, Stdin::Bytes);
            return (Program::Shell(text.to_owned()), stdin);
        }
        let sh = || vec!["sh".to_owned(), "-c".to_owned()];
        match stdin {
            Some(bytes) => {
                let mut words = sh();
                words.push(text.to_owned());
                (Program::Argv(self.enter(true, words)), Stdin::Bytes(bytes))
            }
            None if self.detaches() => {
                let mut words = sh();
                words.extend([WATCHED.to_owned(), "sh".to_owned(), text.to_owned()]);
                (Program::Argv(self.enter(true, words)), Stdin::Hold)
            }
            None => {
                let mut words = sh();
                words.push(text.to_owned());
                (Program::Argv(self.enter(false, words)), Stdin::Null)
            }
        }
    }

    /// How to open a channel running `text`, with stdin and stdout piped.
    pub fn channel(&self, text: &str) -> Program {
        if self.runs_through_binding() {
            return Program::Shell(text.to_owned());
        }
        let mut argv = self.enter(true, vec!["sh".into(), "-c".into(), text.into()]);
        if let Backend::Argv(p) = self
            && !p.channel_args.is_empty()
        {
            let at = p.prefix.len();
            argv.splice(at..at, p.channel_args.iter().cloned());
        }
        Program::Argv(argv)
    }

    fn failed(&self, exit_code: i32, state: FailureState, reason: String) -> Verdict {
        Verdict::Failed(BackendFailure {
            backend: self.name().to_owned(),
            target: self.target().to_owned(),
            exit_code,
            state,
            reason,
        })
    }

    /// What a finished run (`channel`: a session channel, whose stderr is attach's, not the
    /// backend's alone) says about the backend.
    pub fn judge(&self, exit_code: i32, stdout: &[u8], stderr: &[u8], channel: bool) -> Verdict {
        let err = String::from_utf8_lossy(stderr);
        let out = String::from_utf8_lossy(stdout);
        let (err, out) = (err.trim(), out.trim());
        // A channel's stderr holds attach's lines too: the backend's own line is its last.
        let said = if channel {
            err.lines().last().unwrap_or("").trim()
        } else if let Backend::Kubectl(_) = self {
            // What kubectl says comes after its own log lines.
            err.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !is_klog(l))
                .unwrap_or("")
        } else {
            first_line(err)
        };
        let silent = out.is_empty() && err.is_empty();
        match self {
            Backend::Docker(_) => match exit_code {
                1 if DOCKER_GONE.iter().any(|p| said.starts_with(p)) => {
                    let state = if said.contains("is not running") || said.contains("is paused") {
                        FailureState::NotRunning
                    } else if said.starts_with("Cannot connect") {
                        FailureState::Unreachable
                    } else {
                        FailureState::Gone
                    };
                    self.failed(exit_code, state, said.to_owned())
                }
                125 => self.failed(
                    exit_code,
                    FailureState::CannotRun,
                    format!("docker could not run the command: {said}"),
                ),
                126 if out.starts_with("OCI runtime exec failed") => self.failed(
                    exit_code,
                    FailureState::CannotRun,
                    format!("the container cannot start sh: {}", first_line(out)),
                ),
                137 if channel || silent => Verdict::Ask(self.running_question()),
                _ => Verdict::Command,
            },
            // podman 4.3 exits 125 for its own failures (no such container), 255 when the
            // container is not running ("container state improper"), 126 or 127 with the OCI
            // runtime's words when it cannot start the command (a working directory missing).
            Backend::Podman(_) => match exit_code {
                125 | 255 if said.starts_with("Error:") => {
                    let state = if said.contains("no such container") {
                        Some(FailureState::Gone)
                    } else if said.contains("state improper") || said.contains("not running") {
                        Some(FailureState::NotRunning)
                    } else if said.contains("connect") {
                        Some(FailureState::Unreachable)
                    } else if exit_code == 125 {
                        Some(FailureState::CannotRun)
                    } else {
                        None
                    };
                    match state {
                        Some(state) => self.failed(exit_code, state, said.to_owned()),
                        None => Verdict::Command,
                    }
                }
                126 | 127 if said.contains("OCI runtime") || out.contains("OCI runtime") => self
                    .failed(
                        exit_code,
                        FailureState::CannotRun,
                        format!("the container cannot start sh: {said}"),
                    ),
                137 if channel || silent => Verdict::Ask(self.running_question()),
                _ => Verdict::Command,
            },
            Backend::Kubectl(_) => match (exit_code, said) {
                (1, said) if KUBECTL_GONE.iter().any(|p| said.starts_with(p)) => {
                    let state = if said.contains("NotFound") {
                        FailureState::Gone
                    } else if said.starts_with("Error from server") {
                        FailureState::NotRunning
                    } else {
                        FailureState::Unreachable
                    };
                    self.failed(exit_code, state, said.to_owned())
                }
                (137, _) if channel || silent => Verdict::Ask(self.running_question()),
                _ => Verdict::Command,
            },
            Backend::Argv(Prefix {
                provider: Some(provider),
                ..
            }) if exit_code == EXEC_FAILED_STATUS => {
                // The program's line, wherever attach's own lines are.
                let line = err
                    .lines()
                    .rev()
                    .find_map(|l| l.trim().strip_prefix(EXEC_FAILED_PREFIX));
                match line {
                    Some(reason) => {
                        let state = provider.state_of(reason).unwrap_or(FailureState::CannotRun);
                        self.failed(exit_code, state, reason.to_owned())
                    }
                    None => Verdict::Command,
                }
            }
            Backend::Local { .. }
            | Backend::Argv(_)
            | Backend::Exec { .. }
            | Backend::E2b(_)
            | Backend::Opensandbox(_)
            | Backend::Daytona(_) => Verdict::Command,
        }
    }

    /// What a run that could not be done says about the backend: `reason` is what the exec
    /// function or a provider SDK's adapter raised (`Class: message`). A provider's words for a
    /// sandbox that is gone, stopped or paused, unreachable, or refusing the caller make it the
    /// backend's failure; anything else stays a failed exec.
    pub fn judge_failed(&self, reason: &str) -> Option<BackendFailure> {
        let state = match self {
            Backend::E2b(_) => Provider::E2b.state_of(reason)?,
            Backend::Opensandbox(_) => Provider::Opensandbox.state_of(reason)?,
            Backend::Daytona(_) => Provider::Daytona.state_of(reason)?,
            _ => return None,
        };
        Some(BackendFailure {
            backend: self.name().to_owned(),
            target: self.target().to_owned(),
            exit_code: -1,
            state,
            reason: first_line(reason).to_owned(),
        })
    }

    /// The argv that asks whether the container or pod still runs: it prints `true` (Docker,
    /// podman) or `Running` (kubectl) when it does.
    fn running_question(&self) -> Vec<String> {
        match self {
            Backend::Docker(c) | Backend::Podman(c) => {
                let mut argv = vec![self.name().to_owned()];
                argv.extend(c.options.iter().cloned());
                argv.extend([
                    "inspect".into(),
                    "--format".into(),
                    "{{.State.Running}}".into(),
                    c.container.clone(),
                ]);
                argv
            }
            Backend::Kubectl(p) => {
                let mut argv = vec![self.name().to_owned()];
                argv.extend(p.options.iter().cloned());
                argv.extend(["get".into(), "pod".into()]);
                if let Some(ns) = &p.namespace {
                    argv.extend(["--namespace".into(), ns.clone()]);
                }
                argv.extend([
                    p.pod.trim_start_matches("pod/").to_owned(),
                    "--output".into(),
                    "jsonpath={.status.phase}".into(),
                ]);
                argv
            }
            _ => Vec::new(),
        }
    }

    /// Judges the answer to [`Verdict::Ask`]: `Some(failure)` when the sandbox is gone or
    /// stopped, `None` when it still runs (then the exit 137 was the command's, or the sandbox
    /// is being killed and has not stopped yet: the driver asks again for a while).
    pub fn judge_answer(
        &self,
        exit_code: i32,
        answer_exit: i32,
        answer: &[u8],
    ) -> Option<BackendFailure> {
        let text = String::from_utf8_lossy(answer);
        let running = answer_exit == 0 && matches!(text.trim(), "true" | "Running");
        if running {
            return None;
        }
        let (state, what) = match self {
            Backend::Kubectl(_) => (FailureState::Gone, "pod"),
            _ => (FailureState::Gone, "container"),
        };
        Some(BackendFailure {
            backend: self.name().to_owned(),
            target: self.target().to_owned(),
            exit_code,
            state,
            reason: format!("the {what} was killed or removed during the command"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docker(name: &str) -> Backend {
        Backend::Docker(Container {
            container: name.into(),
            exec_options: vec!["--user".into(), "agent".into()],
            options: vec![],
            program: None,
        })
    }

    fn kubectl(pod: &str) -> Backend {
        Backend::Kubectl(Pod {
            pod: pod.into(),
            namespace: Some("agents".into()),
            container: Some("work".into()),
            options: vec!["--context".into(), "prod".into()],
            program: None,
        })
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        for (backend, says) in [
            (docker(""), "must not be empty"),
            (docker("-rm"), "starts with '-'"),
            (docker("box;rm -rf"), "holds ';'"),
            (kubectl("pod$(x)"), "holds '$'"),
            (kubectl("pod name"), "holds ' '"),
            (
                Backend::Argv(Prefix {
                    prefix: vec![],
                    joins_arguments: false,
                    ..Default::default()
                }),
                "must name a program",
            ),
        ] {
            let e = backend.validate().unwrap_err();
            assert!(e.message().contains(says), "{backend:?}: {e}");
        }
        docker("box_1.a-b").validate().unwrap();
        kubectl("pod/web-0").validate().unwrap();
    }

    #[test]
    fn argv_per_backend() {
        let (p, stdin) = docker("box").command("echo hi", None);
        let Program::Argv(argv) = p else { panic!() };
        assert_eq!(
            &argv[..6],
            ["docker", "exec", "-i", "--user", "agent", "box"]
        );
        assert_eq!(&argv[6..8], ["sh", "-c"]);
        assert_eq!(argv[8], WATCHED);
        assert_eq!(&argv[9..], ["sh", "echo hi"]);
        assert_eq!(stdin, Stdin::Hold);

        let (p, stdin) = kubectl("web-0").command("true", Some(b"x".to_vec().into()));
        assert_eq!(
            p,
            Program::Argv(
                [
                    "kubectl",
                    "--context",
                    "prod",
                    "exec",
                    "-i",
                    "--namespace",
                    "agents",
                    "--container",
                    "work",
                    "web-0",
                    "--",
                    "sh",
                    "-c",
                    "true"
                ]
                .map(String::from)
                .to_vec()
            )
        );
        assert!(matches!(stdin, Stdin::Bytes(_)));

        let local = Backend::Local { cwd: None };
        assert_eq!(
            local.command("true", None),
            (
                Program::Argv(vec!["sh".into(), "-c".into(), "true".into()]),
                Stdin::Null
            )
        );
        let ssh = Backend::Argv(Prefix {
            prefix: vec!["ssh".into(), "box".into()],
            joins_arguments: true,
            ..Default::default()
        });
        assert_eq!(
            ssh.channel("echo 'a b'"),
            Program::Argv(vec![
                "ssh".into(),
                "box".into(),
                r"'sh' '-c' 'echo '\''a b'\'''".into()
            ])
        );
        let exec = Backend::Exec {
            passes_stdin: false,
        };
        assert_eq!(exec.command("true", None).0, Program::Shell("true".into()));
    }

    /// The command's pid, once it wrote it to `file`.
    fn pid_in(file: &std::path::Path) -> i32 {
        for _ in 0..500 {
            if let Ok(text) = std::fs::read_to_string(file)
                && let Ok(pid) = text.trim().parse()
            {
                return pid;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the command never wrote its pid to {}", file.display());
    }

    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    #[test]
    fn a_watched_command_ends_when_the_host_kills_its_process_group_and_its_stdin_closes() {
        use std::os::unix::process::CommandExt;
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("mcpgw-watched-kill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pid");
        let text = format!("echo $$ > {}; exec sleep 30", file.display());
        // As a binding runs it: its own process group, stdin a pipe held open.
        let mut child = Command::new("sh")
            .args(["-c", WATCHED, "sh", &text])
            .stdin(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = pid_in(&file);
        assert!(alive(pid));
        // Both the command and the watcher are in sessions of their own (a KILL in the few
        // microseconds before the watcher's setsid would take the watcher along: the window
        // the wrapper cannot close without a handshake).
        let group = i32::try_from(child.id()).unwrap();
        let own_sessions = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .filter(|p| {
                    let stat =
                        std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
                    let fields: Vec<&str> = stat
                        .rsplit(')')
                        .next()
                        .unwrap_or("")
                        .split_whitespace()
                        .collect();
                    fields.get(1) == Some(&group.to_string().as_str())
                        && fields.get(3) == Some(&p.to_string().as_str())
                })
                .count()
        };
        for _ in 0..500 {
            if own_sessions() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // What a binding does for KILL: the group, then the held stdin once the process exited.
        Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .status()
            .unwrap();
        child.wait().unwrap();
        drop(child.stdin.take());
        let mut gone = false;
        for _ in 0..500 {
            if !alive(pid) {
                gone = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(gone, "the command (pid {pid}) outlived the cancel");
    }

    #[test]
    fn docker_failures_are_told_from_the_commands_own() {
        let d = docker("box");
        let gone = d.judge(
            1,
            b"",
            b"Error response from daemon: No such container: box",
            false,
        );
        let Verdict::Failed(f) = gone else {
            panic!("{gone:?}")
        };
        assert_eq!(f.state, FailureState::Gone);
        let stopped = d.judge(
            1,
            b"",
            b"Error response from daemon: container abc is not running",
            false,
        );
        assert!(matches!(
            stopped,
            Verdict::Failed(BackendFailure {
                state: FailureState::NotRunning,
                ..
            })
        ));
        assert!(matches!(
            d.judge(
                1,
                b"",
                b"Cannot connect to the Docker daemon at unix:///var/run/docker.sock",
                false
            ),
            Verdict::Failed(BackendFailure {
                state: FailureState::Unreachable,
                ..
            })
        ));
        assert!(matches!(
            d.judge(
                126,
                b"OCI runtime exec failed: exec: \"sh\": not found",
                b"",
                false
            ),
            Verdict::Failed(BackendFailure {
                state: FailureState::CannotRun,
                ..
            })
        ));
        // The command's own failures.
        assert_eq!(
            d.judge(1, b"", b"curl: (7) refused", false),
            Verdict::Command
        );
        assert_eq!(d.judge(7, b"", b"", false), Verdict::Command);
        assert_eq!(d.judge(137, b"partial", b"", false), Verdict::Command);
        // A silent 137 needs the question; on a channel, any 137 does.
        let Verdict::Ask(q) = d.judge(137, b"", b"", false) else {
            panic!()
        };
        assert_eq!(
            q,
            ["docker", "inspect", "--format", "{{.State.Running}}", "box"]
        );
        assert!(matches!(
            d.judge(137, b"", b"INFO relaying", true),
            Verdict::Ask(_)
        ));
        assert_eq!(d.judge_answer(137, 0, b"true\n"), None);
        assert!(d.judge_answer(137, 0, b"false\n").is_some());
        assert!(d.judge_answer(137, 1, b"").is_some());
        // On a channel attach's log lines come first: the backend's own is the last line.
        assert!(matches!(
            d.judge(1, b"", b"2026-12-01T00:00:00Z INFO relaying\nError response from daemon: No such container: box", true),
            Verdict::Failed(_)
        ));
    }

    /// The wrapper through a real `sh`: the command's exit status is passed on, and the end of
    /// stdin kills the command (the host gave up on it).
    #[test]
    fn watched_commands_end_with_their_stdin() {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("mcpgw-watched-stdin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("ran-to-the-end");
        let run = |command: &str, stdin: Stdio| {
            Command::new("sh")
                .args(["-c", WATCHED, "sh", command])
                .stdin(stdin)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        // Its stdin held open to its end, as the host does.
        let mut child = run("echo hi; exit 7", Stdio::piped());
        let held = child.stdin.take();
        let out = child.wait_with_output().unwrap();
        drop(held);
        assert_eq!(
            (out.status.code(), &out.stdout[..]),
            (Some(7), &b"hi\n"[..])
        );

        let command = format!("echo started; sleep 5; touch '{}'", marker.display());
        let mut child = run(&command, Stdio::piped());
        let mut stdin = child.stdin.take().unwrap();
        let mut started = [0u8; 8];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut started).unwrap();
        stdin.flush().unwrap();
        drop(stdin);
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(137),
            "the watched command was not killed"
        );
        assert!(!marker.exists(), "the command ran to its end");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn podman_and_kubectl_failures() {
        let p = Backend::Podman(Container {
            container: "box".into(),
            exec_options: vec![],
            options: vec!["--storage-driver".into(), "vfs".into()],
            program: None,
        });
        assert!(matches!(
            p.judge(
                125,
                b"",
                b"Error: no container with name or ID \"box\" found: no such container",
                false
            ),
            Verdict::Failed(BackendFailure {
                state: FailureState::Gone,
                ..
            })
        ));
        assert!(matches!(
            p.judge(255, b"", b"Error: can only create exec sessions on running containers: container state improper", false),
            Verdict::Failed(BackendFailure { state: FailureState::NotRunning, .. })
        ));
        // What podman 4.3.1 says for a stopped container and a working directory missing.
        let stopped =
            b"Error: can only create exec sessions on running containers: container state improper";
        let no_cwd = b"Error: runc: exec failed: unable to start container process: chdir to cwd \
            (\"/nonexistent\") set in config.json failed: no such file or directory: OCI runtime \
            attempted to invoke a command that was not found";
        for (code, said, state) in [
            (255, &stopped[..], FailureState::NotRunning),
            (127, &no_cwd[..], FailureState::CannotRun),
        ] {
            let Verdict::Failed(f) = p.judge(code, b"", said, false) else {
                panic!("{code}: not the backend's failure")
            };
            assert_eq!(f.state, state);
        }
        // The command's own 255 and 127 stay its own.
        assert_eq!(
            p.judge(255, b"", b"ssh: connect refused", false),
            Verdict::Command
        );
        assert_eq!(
            p.judge(127, b"", b"sh: mcpgw-gateway: not found", false),
            Verdict::Command
        );
        let Verdict::Ask(q) = p.judge(137, b"", b"", false) else {
            panic!()
        };
        assert_eq!(&q[..4], ["podman", "--storage-driver", "vfs", "inspect"]);
        let k = kubectl("web-0");
        assert!(matches!(
            k.judge(
                1,
                b"",
                b"Error from server (NotFound): pods \"web-0\" not found",
                false
            ),
            Verdict::Failed(BackendFailure {
                state: FailureState::Gone,
                ..
            })
        ));
        assert!(matches!(
            k.judge(
                1,
                b"",
                b"The connection to the server localhost:8080 was refused",
                false
            ),
            Verdict::Failed(BackendFailure {
                state: FailureState::Unreachable,
                ..
            })
        ));
        assert_eq!(
            k.judge(1, b"", b"error: something of the command", false),
            Verdict::Command
        );
        // kubectl logs its retries (klog lines) before it says what failed.
        let refused = b"E1201 21:19:28.393334    1682 memcache.go:265] \"Unhandled Error\" err=\"couldn't get current server API group list\"\nE1201 21:19:28.398334    1682 memcache.go:265] again\nThe connection to the server 127.0.0.1:1 was refused - did you specify the right host or port?";
        assert!(matches!(
            k.judge(1, b"", refused, false),
            Verdict::Failed(BackendFailure {
                state: FailureState::Unreachable,
                ..
            })
        ));
        let Verdict::Ask(q) = k.judge(137, b"", b"", false) else {
            panic!()
        };
        assert!(q.contains(&"jsonpath={.status.phase}".to_string()), "{q:?}");
        assert_eq!(k.judge_answer(137, 0, b"Running"), None);
    }
}
