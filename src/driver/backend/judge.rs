//! Telling a backend's failure from the command's: each provider's words for a sandbox that is
//! gone, paused or unreachable, and the follow-up questions of a silent exit.

use super::*;

impl Backend {
    pub(super) fn failed(&self, exit_code: i32, state: FailureState, reason: String) -> Verdict {
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
        let run = Run {
            exit_code,
            said,
            out,
            // A silent 137 (or any 137 of a channel): killed, or the sandbox went away.
            ask: channel || (out.is_empty() && err.is_empty()),
        };
        match self {
            Backend::Docker(_) => self.docker_verdict(&run),
            Backend::Podman(_) => self.podman_verdict(&run),
            Backend::Kubectl(_) => self.kubectl_verdict(&run),
            Backend::Argv(Prefix {
                provider: Some(provider),
                ..
            }) if exit_code == EXEC_FAILED_STATUS => self.provider_verdict(*provider, err),
            Backend::Local { .. }
            | Backend::Argv(_)
            | Backend::Exec { .. }
            | Backend::E2b(_)
            | Backend::Opensandbox(_)
            | Backend::Daytona(_) => Verdict::Command,
        }
    }

    fn docker_verdict(&self, r: &Run<'_>) -> Verdict {
        let (exit_code, said, out) = (r.exit_code, r.said, r.out);
        match exit_code {
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
            137 if r.ask => Verdict::Ask(self.running_question()),
            _ => Verdict::Command,
        }
    }

    /// podman 4.3 exits 125 for its own failures (no such container), 255 when the container
    /// is not running ("container state improper"), 126 or 127 with the OCI runtime's words
    /// when it cannot start the command (a working directory missing).
    fn podman_verdict(&self, r: &Run<'_>) -> Verdict {
        let (exit_code, said, out) = (r.exit_code, r.said, r.out);
        match exit_code {
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
            137 if r.ask => Verdict::Ask(self.running_question()),
            _ => Verdict::Command,
        }
    }

    fn kubectl_verdict(&self, r: &Run<'_>) -> Verdict {
        match (r.exit_code, r.said) {
            (1, said) if KUBECTL_GONE.iter().any(|p| said.starts_with(p)) => {
                let state = if said.contains("NotFound") {
                    FailureState::Gone
                } else if said.starts_with("Error from server") {
                    FailureState::NotRunning
                } else {
                    FailureState::Unreachable
                };
                self.failed(r.exit_code, state, said.to_owned())
            }
            (137, _) if r.ask => Verdict::Ask(self.running_question()),
            _ => Verdict::Command,
        }
    }

    /// A provider adapter's exit `EXEC_FAILED_STATUS`: its line says what failed.
    fn provider_verdict(&self, provider: Provider, err: &str) -> Verdict {
        // The program's line, wherever attach's own lines are.
        let line = err
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix(EXEC_FAILED_PREFIX));
        match line {
            Some(reason) => {
                let state = provider.state_of(reason).unwrap_or(FailureState::CannotRun);
                self.failed(EXEC_FAILED_STATUS, state, reason.to_owned())
            }
            None => Verdict::Command,
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
    pub(super) fn running_question(&self) -> Vec<String> {
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

/// The stderr prefixes with which the Docker CLI (exit 1) says the sandbox is not there.
pub(super) const DOCKER_GONE: [&str; 3] = [
    "Error response from daemon:",
    "Cannot connect to the Docker daemon",
    "unable to upgrade to tcp",
];

/// The stderr prefixes with which kubectl (exit 1) says the pod cannot be reached.
pub(super) const KUBECTL_GONE: [&str; 4] = [
    "Error from server",
    "error: unable to upgrade connection",
    "Unable to connect to the server",
    "The connection to the server",
];

/// What E2B's SDKs (Python `e2b`, npm `e2b`) raise, by what it means for the sandbox, first
/// match wins. A sandbox killed under a call or stopped answers nothing (the SDK reports it
/// unreachable: `SandboxUnreachableException`, `[unknown] terminated`, `fetch failed`); E2B's
/// edge proxy reports one that is not running; a paused one leaves calls to their deadline.
pub(super) const E2B_WORDS: [(FailureState, &[&str]); 4] = [
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
pub(super) const OPENSANDBOX_WORDS: [(FailureState, &[&str]); 4] = [
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
pub(super) const DAYTONA_WORDS: [(FailureState, &[&str]); 4] = [
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

pub(super) fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("")
}

/// Whether `line` is one of kubectl's own log lines (klog: `E1201 21:18:57.215002  620
/// memcache.go:265] ...`), which it prints before saying what failed.
pub(super) fn is_klog(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 14
        && b"IWEF".contains(&b[0])
        && b[1..5].iter().all(u8::is_ascii_digit)
        && b[5] == b' '
        && b[8] == b':'
}

/// What a finished run printed, trimmed, and the line that speaks for the backend.
struct Run<'a> {
    exit_code: i32,
    /// The backend's own line.
    said: &'a str,
    out: &'a str,
    /// Whether a 137 is worth a question (the channel's, or a silent one).
    ask: bool,
}
