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
pub use crate::error::{BackendFailure, FailureState};
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
}

mod judge;
#[cfg(test)]
mod tests;
