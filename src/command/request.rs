//! Gateway requests as `sh -c` command text, for curl and for the gateway's built-in client.
//!
//! Both forms print the response body followed by the trailer `\nmcpgw-http-status:NNN\n` on
//! stdout ([`crate::wire::output`]). Neither puts the token into any argv: curl reads the
//! `Authorization` header from its stdin (or, when the body comes on stdin, from a here-document
//! on descriptor 3), written there by the shell's `read` and `printf` builtins from the 0600
//! token file, and the built-in client reads the token file itself. The command text carries only
//! the file's path.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Method, Transport};
use crate::error::Error;
use crate::quote::{quote, quoted_len};
use crate::wire::output::{STATUS_TRAILER, exit, seconds};

/// Where the gateway is, as seen from inside the sandbox.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The loopback address the gateway listens on.
    pub host: &'a str,
    /// Its port.
    pub port: u16,
    /// The token file, read by every authenticated request.
    pub token_file: &'a str,
    /// The gateway binary, for the built-in client.
    pub gateway_path: &'a str,
}

/// Where a request's JSON body comes from.
#[derive(Debug, Clone, Copy)]
pub enum Body<'a> {
    /// No body.
    None,
    /// In the command text itself.
    Inline(&'a str),
    /// A file already staged in the sandbox; the command removes it once the request is done.
    Staged(&'a str),
    /// On the command's standard input (for exec backends that pass it).
    Stdin,
}

/// One gateway request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// Path and query, already percent-encoded, e.g. `/mcps?agent_id=&session_id=`.
    pub path_and_query: &'a str,
    /// Whether to send the token (every endpoint but `/health`).
    pub authenticated: bool,
    /// The body.
    pub body: Body<'a>,
    /// How long the request may take, connect to last byte.
    pub max_time: Duration,
}

/// The `sh -c` text of `request` through `transport`.
pub fn request_command(
    transport: Transport,
    target: &Target<'_>,
    request: &Request<'_>,
) -> Result<String, Error> {
    let mut cmd = String::with_capacity(
        512 + match request.body {
            Body::Inline(b) => quoted_len(b),
            _ => 0,
        },
    );
    let max_time = seconds(request.max_time);
    match transport {
        Transport::Curl => curl_command(&mut cmd, target, request, &max_time)?,
        Transport::BuiltIn => built_in_command(&mut cmd, target, request, &max_time)?,
    }
    if let Body::Staged(path) = request.body {
        let _ = write!(cmd, "; s=$?; rm -f {}; exit $s", quote(path)?);
    }
    Ok(cmd)
}

/// The request through curl: the token read by the shell and handed over on a descriptor, never
/// in an argv.
fn curl_command(
    cmd: &mut String,
    target: &Target<'_>,
    request: &Request<'_>,
    max_time: &str,
) -> Result<(), Error> {
    let url = format!(
        "http://{}:{}{}",
        url_host(target.host),
        target.port,
        request.path_and_query
    );
    // The header goes on stdin, unless the body does: then on descriptor 3.
    let header_fd = if matches!(request.body, Body::Stdin) {
        "/dev/fd/3"
    } else {
        "-"
    };
    if request.authenticated {
        read_token(cmd, target.token_file)?;
        if header_fd == "-" {
            cmd.push_str("; printf 'Authorization: Bearer %s\\n' \"$t\" | ");
        } else {
            cmd.push_str("; ");
        }
    }
    // -q first: no ~/.curlrc may change the output; --noproxy: a proxy variable in the
    // sandbox must not send loopback requests elsewhere; -g: no URL globbing.
    let _ = write!(
        cmd,
        "curl -q -sS -g --noproxy '*' --max-time {max_time} -X {}",
        request.method.as_str()
    );
    if request.authenticated {
        let _ = write!(cmd, " -H @{header_fd}");
    }
    match request.body {
        Body::None => {}
        Body::Inline(body) => {
            let _ = write!(
                cmd,
                " -H 'Content-Type: application/json' --data-raw {}",
                quote(body)?
            );
        }
        Body::Staged(path) => {
            let _ = write!(
                cmd,
                " -H 'Content-Type: application/json' --data-binary @{}",
                quote(path)?
            );
        }
        Body::Stdin => {
            cmd.push_str(" -H 'Content-Type: application/json' --data-binary @-");
        }
    }
    let _ = write!(
        cmd,
        " -w '\\n{STATUS_TRAILER}%{{http_code}}\\n' {}",
        quote(&url)?
    );
    if request.authenticated && header_fd != "-" {
        // A here-document is not an argv: the token stays out of every process list.
        cmd.push_str(" 3<<MCPGW_EOF\nAuthorization: Bearer $t\nMCPGW_EOF\n");
    }
    Ok(())
}

/// The request through the gateway binary's built-in client (`mcpgw-gateway request`).
fn built_in_command(
    cmd: &mut String,
    target: &Target<'_>,
    request: &Request<'_>,
    max_time: &str,
) -> Result<(), Error> {
    let _ = write!(
        cmd,
        "{} request {} {} --host {} --port {} --max-time {max_time}",
        quote(target.gateway_path)?,
        request.method.as_str(),
        quote(request.path_and_query)?,
        quote(target.host)?,
        target.port,
    );
    if request.authenticated {
        let _ = write!(cmd, " --token-file {}", quote(target.token_file)?);
    }
    match request.body {
        Body::None => {}
        Body::Inline(body) => {
            let _ = write!(cmd, " --data {}", quote(body)?);
        }
        Body::Staged(path) => {
            let _ = write!(cmd, " --body-file {}", quote(path)?);
        }
        Body::Stdin => cmd.push_str(" --body-file -"),
    }
    Ok(())
}

/// Reads the token file into the shell variable `t` using only shell builtins (`read`), so the
/// token appears in no process's argv; exits with [`exit::TOKEN_UNREADABLE`] when the file
/// cannot be read.
fn read_token(cmd: &mut String, token_file: &str) -> Result<(), Error> {
    let complaint = format!("mcpgw: cannot read the gateway token file {token_file}");
    // `read` fails on a last line without a newline but still fills the variable.
    let _ = write!(
        cmd,
        "t=; {{ IFS= read -r t || [ -n \"$t\" ]; }} 2>/dev/null < {file} || \
         {{ printf '%s\\n' {complaint} >&2; exit {code}; }}",
        file = quote(token_file)?,
        complaint = quote(&complaint)?,
        code = exit::TOKEN_UNREADABLE,
    );
    Ok(())
}

/// `host` as it goes into a URL: an IPv6 literal gets brackets.
fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

/// The command that tells whether the sandbox has curl: prints `curl` or `none`.
pub fn probe() -> &'static str {
    "if command -v curl >/dev/null 2>&1; then echo curl; else echo none; fi"
}

/// Reads the answer of [`probe_command`].
pub fn parse_probe(stdout: &[u8]) -> Option<Transport> {
    match String::from_utf8_lossy(stdout).trim() {
        "curl" => Some(Transport::Curl),
        "none" => Some(Transport::BuiltIn),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target<'static> {
        Target {
            host: "127.0.0.1",
            port: 5600,
            token_file: "/tmp/mcpgw-x/token",
            gateway_path: "/opt/mcpgw gateway",
        }
    }

    #[test]
    fn curl_command_reads_the_token_from_the_file() {
        let cmd = request_command(
            Transport::Curl,
            &target(),
            &Request {
                method: Method::Post,
                path_and_query: "/mcps?agent_id=a&session_id=",
                authenticated: true,
                body: Body::Inline(r#"{"name":"it's"}"#),
                max_time: Duration::from_secs(30),
            },
        )
        .unwrap();
        assert_eq!(
            cmd,
            "t=; { IFS= read -r t || [ -n \"$t\" ]; } 2>/dev/null < '/tmp/mcpgw-x/token' || \
             { printf '%s\\n' 'mcpgw: cannot read the gateway token file /tmp/mcpgw-x/token' >&2; exit 121; }; \
             printf 'Authorization: Bearer %s\\n' \"$t\" | \
             curl -q -sS -g --noproxy '*' --max-time 30 -X POST -H @- \
             -H 'Content-Type: application/json' --data-raw '{\"name\":\"it'\\''s\"}' \
             -w '\\nmcpgw-http-status:%{http_code}\\n' 'http://127.0.0.1:5600/mcps?agent_id=a&session_id='"
        );
    }

    #[test]
    fn health_sends_no_token() {
        for transport in [Transport::Curl, Transport::BuiltIn] {
            let cmd = request_command(
                transport,
                &target(),
                &Request {
                    method: Method::Get,
                    path_and_query: "/health",
                    authenticated: false,
                    body: Body::None,
                    max_time: Duration::from_millis(2500),
                },
            )
            .unwrap();
            assert!(!cmd.contains("token"), "{cmd}");
            assert!(cmd.contains("--max-time 2.5"), "{cmd}");
        }
    }

    #[test]
    fn builtin_command_with_a_staged_body_removes_it() {
        let cmd = request_command(
            Transport::BuiltIn,
            &target(),
            &Request {
                method: Method::Put,
                path_and_query: "/mcps/x/runtime-headers?agent_id=&session_id=",
                authenticated: true,
                body: Body::Staged("/tmp/mcpgw-body-1"),
                max_time: Duration::from_secs(5),
            },
        )
        .unwrap();
        assert_eq!(
            cmd,
            "'/opt/mcpgw gateway' request PUT '/mcps/x/runtime-headers?agent_id=&session_id=' \
             --host '127.0.0.1' --port 5600 --max-time 5 --token-file '/tmp/mcpgw-x/token' \
             --body-file '/tmp/mcpgw-body-1'; s=$?; rm -f '/tmp/mcpgw-body-1'; exit $s"
        );
    }

    #[test]
    fn ipv6_hosts_get_brackets() {
        assert_eq!(url_host("::1"), "[::1]");
        assert_eq!(url_host("127.0.0.1"), "127.0.0.1");
    }

    #[test]
    fn probe_answers() {
        assert_eq!(parse_probe(b"curl\n"), Some(Transport::Curl));
        assert_eq!(parse_probe(b"none\n"), Some(Transport::BuiltIn));
        assert_eq!(parse_probe(b"sh: oops"), None);
    }
}
