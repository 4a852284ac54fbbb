//! Making sure the sandbox holds the gateway binary.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::operation::{ExecOutput, Job, Operation, State, Step};
use super::output::BinaryStatus;
use super::request::EXEC_GRACE;
use super::{CallOptions, Client, Shared};
use crate::command::{Command, install, staging};
use crate::error::{Error, ErrorKind, tail};
use crate::random;

#[derive(Debug)]
struct EnsureJob {
    binary: Arc<[u8]>,
    sha256: String,
    path: String,
    part: String,
    offset: usize,
    phase: Phase,
    timeout: Duration,
    max_command: usize,
    stdin: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Check,
    Upload,
    Install,
}

impl Client {
    /// Prepares making sure the sandbox holds `binary` (the gateway's bytes, read on the host) at
    /// the configured absolute gateway path: compares SHA-256, and when it differs or the file is
    /// missing uploads it to a temporary file (in one command on stdin when the exec passes
    /// stdin, else in base64 pieces), verifies its SHA-256 there, marks it executable and renames
    /// it into place. Needs `sha256sum` (and, without stdin, `base64`) in the sandbox.
    pub fn prepare_ensure_gateway_binary(
        &self,
        opts: &CallOptions,
        binary: Arc<[u8]>,
    ) -> Operation<BinaryStatus> {
        let timeout = self.timeout(opts);
        let start = (|| {
            let c = &self.shared.config;
            let path = c.gateway_path.clone();
            if !path.starts_with('/') {
                return Err(Error::invalid_argument(format!(
                    "the gateway path {path:?} must be absolute to install the binary there"
                )));
            }
            if binary.is_empty() {
                return Err(Error::invalid_argument("the gateway binary is empty"));
            }
            let job = EnsureJob {
                sha256: random::hex(&Sha256::digest(&binary)),
                part: format!("{path}.part-{}", &random::uuid4_hex()[..12]),
                binary,
                path,
                offset: 0,
                phase: Phase::Check,
                timeout,
                max_command: c.max_command_bytes,
                stdin: c.exec_stdin,
            };
            let command = Command::new(install::check(&job.path)?, timeout + EXEC_GRACE);
            Ok((
                State::Job(Box::new(job) as Box<dyn Job<BinaryStatus>>),
                command,
            ))
        })();
        Operation::new(self.shared.clone(), "ensure_gateway_binary", start)
    }
}

impl EnsureJob {
    fn command(&self, text: String) -> Command {
        Command::new(text, self.timeout + EXEC_GRACE)
    }

    fn status(&self, uploaded: bool) -> BinaryStatus {
        BinaryStatus {
            uploaded,
            sha256: self.sha256.clone(),
            path: self.path.clone(),
        }
    }

    fn upload_piece(&mut self) -> Result<Command, Error> {
        let first = self.offset == 0;
        let mut text = if first {
            install::first_piece_prefix(&self.path)?
        } else {
            String::new()
        };
        let n = staging::binary_piece_len(
            self.max_command,
            text.len() + staging::stage_binary_overhead(&self.part),
        );
        let end = (self.offset + n).min(self.binary.len());
        text.push_str(&staging::stage_binary_command(
            &self.part,
            &self.binary[self.offset..end],
            first,
        )?);
        self.offset = end;
        Ok(self.command(text))
    }
}

impl Job<BinaryStatus> for EnsureJob {
    fn advance(&mut self, _: &Shared, out: ExecOutput) -> Result<Step<BinaryStatus>, Error> {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let fail = |what: &str| {
            Error::new(
                ErrorKind::CommandFailed,
                format!(
                    "{what} (exit {}): {}; the sandbox needs sha256sum and base64 \
                     (coreutils or busybox) and a writable directory for {}",
                    out.exit_code,
                    tail(&stderr, 500),
                    self.path
                ),
            )
        };
        match self.phase {
            Phase::Check => {
                if out.exit_code != 0 {
                    return Err(fail("checking the gateway binary in the sandbox failed"));
                }
                if install::parse_check(&out.stdout) == Some(self.sha256.as_str()) {
                    return Ok(Step::Done(self.status(false)));
                }
                if self.stdin {
                    self.phase = Phase::Install;
                    let text = install::upload_stdin(&self.part, &self.path, &self.sha256)?;
                    return Ok(Step::Exec(
                        self.command(text).with_stdin(self.binary.clone()),
                    ));
                }
                self.phase = Phase::Upload;
                self.upload_piece().map(Step::Exec)
            }
            Phase::Upload => {
                if out.exit_code != 0 {
                    return Err(fail("uploading the gateway binary failed"));
                }
                if self.offset < self.binary.len() {
                    return self.upload_piece().map(Step::Exec);
                }
                self.phase = Phase::Install;
                let text = install::verify_and_install(&self.part, &self.path, &self.sha256)?;
                Ok(Step::Exec(self.command(text)))
            }
            Phase::Install => {
                if out.exit_code != 0 {
                    return Err(fail("installing the uploaded gateway binary failed"));
                }
                Ok(Step::Done(self.status(true)))
            }
        }
    }
}
