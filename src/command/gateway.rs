//! Launching, stopping and attaching to the gateway.

use std::fmt::Write as _;
use std::time::Duration;

use crate::error::Error;
use crate::quote::quote;
use crate::wire::output::seconds;

/// Exit status of [`stop`] when the gateway had to be killed.
pub const STOP_KILLED: i32 = 3;

/// Where a launched gateway keeps its files: the per-launch state directory, and inside it the
/// token file, the log and the ready file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch<'a> {
    /// The gateway binary.
    pub gateway_path: &'a str,
    /// The loopback address to listen on.
    pub host: &'a str,
    /// The port, 0 for a free one.
    pub port: u16,
    /// The state directory, made (0700) before the launch.
    pub state_dir: &'a str,
    /// The token file the gateway mints.
    pub token_file: &'a str,
    /// The instance nonce.
    pub nonce: &'a str,
}

impl Launch<'_> {
    fn log_file(&self) -> String {
        format!("{}/gateway.log", self.state_dir)
    }
}

/// `mcpgw-gateway --daemon`: prints one ready line once the gateway answers its own `/health`
/// with the nonce, or exits non-zero with the reason.
pub fn launch(l: &Launch<'_>) -> Result<String, Error> {
    Ok(format!(
        "umask 077; mkdir -p {dir} && exec {gw} --daemon --host {host} --port {port} \
         --token-file {token} --instance-nonce {nonce} --log-file {log}",
        dir = quote(l.state_dir)?,
        gw = quote(l.gateway_path)?,
        host = quote(l.host)?,
        port = l.port,
        token = quote(l.token_file)?,
        nonce = quote(l.nonce)?,
        log = quote(&l.log_file())?,
    ))
}

/// `mcpgw-gateway attach`, the session channel's process: relays frames on its stdin/stdout to
/// the gateway. With `launch`, it starts the gateway first when none answers with the nonce.
pub fn attach(l: &Launch<'_>, launch: bool) -> Result<String, Error> {
    let mut text = String::new();
    if launch {
        let _ = write!(text, "umask 077; mkdir -p {} && ", quote(l.state_dir)?);
    }
    let _ = write!(
        text,
        "exec {gw} attach --state-dir {dir} --host {host} --token-file {token} \
         --instance-nonce {nonce}",
        gw = quote(l.gateway_path)?,
        dir = quote(l.state_dir)?,
        host = quote(l.host)?,
        token = quote(l.token_file)?,
        nonce = quote(l.nonce)?,
    );
    if l.port != 0 {
        let _ = write!(text, " --port {}", l.port);
    }
    if launch {
        text.push_str(" --launch");
    }
    Ok(text)
}

/// How `attach` is asked to behave, beyond which gateway it reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachOptions {
    /// `--heartbeat`: how often attach pings when idle (`None`: its default).
    pub heartbeat: Option<Duration>,
    /// `--heartbeat-timeout`: how long attach waits for the host before it ends the session.
    pub heartbeat_timeout: Option<Duration>,
}

/// The options of `attach` beyond the gateway it reaches, as words to append to its command.
pub fn attach_options(options: &AttachOptions) -> String {
    let mut text = String::new();
    if let Some(h) = options.heartbeat {
        let _ = write!(text, " --heartbeat {}", seconds(h));
    }
    if let Some(t) = options.heartbeat_timeout {
        let _ = write!(text, " --heartbeat-timeout {}", seconds(t));
    }
    text
}

/// Attaching to a gateway this client did not launch: by port and token file only.
pub fn attach_running(
    gateway_path: &str,
    host: &str,
    port: u16,
    token_file: &str,
    nonce: Option<&str>,
) -> Result<String, Error> {
    let mut text = format!(
        "exec {} attach --host {} --port {port} --token-file {}",
        quote(gateway_path)?,
        quote(host)?,
        quote(token_file)?
    );
    if let Some(n) = nonce {
        let _ = write!(text, " --instance-nonce {}", quote(n)?);
    }
    Ok(text)
}

/// Stops the gateway `pid`: SIGTERM only to the process whose command line carries `nonce`, a
/// wait for it to exit, SIGKILL after `timeout` (exit [`STOP_KILLED`]), then the state
/// directory is removed. Succeeds when it already exited.
pub fn stop(
    pid: u32,
    nonce: &str,
    timeout: Duration,
    state_dir: Option<&str>,
) -> Result<String, Error> {
    let tenths = timeout.as_millis().div_ceil(100).max(1);
    // A zombie counts as gone: pid 1 of many containers never reaps orphans.
    let mut text = format!(
        "p={pid}; gone() {{ [ ! -e /proc/$p ] || grep -q '^State:[[:space:]]*Z' /proc/$p/status 2>/dev/null; }}; \
         if ! gone && tr '\\0' '\\n' < /proc/$p/cmdline 2>/dev/null | grep -qxF -- {nonce}; then \
         kill -TERM $p 2>/dev/null; i=0; \
         while ! gone; do i=$((i+1)); if [ $i -gt {tenths} ]; then kill -KILL $p 2>/dev/null; \
         echo 'mcpgw: the gateway (pid {pid}) did not exit within {secs} s of SIGTERM and was killed' >&2; r={STOP_KILLED}; break; fi; \
         sleep 0.1; done; fi",
        nonce = quote(nonce)?,
        secs = seconds(timeout),
    );
    if let Some(dir) = state_dir {
        let _ = write!(text, "; rm -rf {}", quote(dir)?);
    }
    text.push_str("; exit ${r:-0}");
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch_of<'a>(port: u16) -> Launch<'a> {
        Launch {
            gateway_path: "/opt/gw",
            host: "127.0.0.1",
            port,
            state_dir: "/tmp/mcpgw-ab",
            token_file: "/tmp/mcpgw-ab/token",
            nonce: "n1",
        }
    }

    #[test]
    fn launch_and_attach_texts() {
        assert_eq!(
            launch(&launch_of(0)).unwrap(),
            "umask 077; mkdir -p '/tmp/mcpgw-ab' && exec '/opt/gw' --daemon --host '127.0.0.1' \
             --port 0 --token-file '/tmp/mcpgw-ab/token' --instance-nonce 'n1' \
             --log-file '/tmp/mcpgw-ab/gateway.log'"
        );
        assert_eq!(
            attach(&launch_of(0), true).unwrap(),
            "umask 077; mkdir -p '/tmp/mcpgw-ab' && exec '/opt/gw' attach --state-dir \
             '/tmp/mcpgw-ab' --host '127.0.0.1' --token-file '/tmp/mcpgw-ab/token' \
             --instance-nonce 'n1' --launch"
        );
        assert!(
            attach(&launch_of(41000), false)
                .unwrap()
                .ends_with("--instance-nonce 'n1' --port 41000")
        );
        assert_eq!(
            attach_running("gw", "::1", 5600, "/t", None).unwrap(),
            "exec 'gw' attach --host '::1' --port 5600 --token-file '/t'"
        );
    }

    #[test]
    fn stop_checks_the_nonce_and_removes_the_state_dir() {
        let text = stop(77, "n1", Duration::from_secs(2), Some("/tmp/mcpgw-ab")).unwrap();
        assert!(text.starts_with("p=77;"));
        assert!(text.contains("grep -qxF -- 'n1'"));
        assert!(text.contains("if [ $i -gt 20 ]"));
        assert!(text.ends_with("; rm -rf '/tmp/mcpgw-ab'; exit ${r:-0}"));
    }
}
