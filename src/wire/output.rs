//! What a request command prints and exits with, the same for curl and for the gateway's
//! built-in client (`mcpgw-gateway request`): the response body, then the trailer line
//! `mcpgw-http-status:NNN`, on stdout; curl's exit codes for the failures both can have.

use std::time::Duration;

/// The last line of every request command's stdout starts with this, followed by the three
/// digits of the HTTP status.
pub const STATUS_TRAILER: &str = "mcpgw-http-status:";

/// Exit statuses of a request command.
pub mod exit {
    /// Something else failed (curl's generic code; the built-in client's too).
    pub const OTHER: i32 = 1;
    /// Nothing listens on the port (connection refused): curl's "failed to connect".
    pub const CONNECT: i32 = 7;
    /// The time limit passed: curl's "operation timeout".
    pub const TIMEOUT: i32 = 28;
    /// The gateway closed the connection without an answer: curl's "empty reply".
    pub const EMPTY_REPLY: i32 = 52;
    /// Receiving the answer failed: curl's "failure in receiving network data".
    pub const RECV_ERROR: i32 = 56;
    /// The shell part of a curl command could not read the token file (neither curl nor the
    /// built-in client uses this code).
    pub const TOKEN_UNREADABLE: i32 = 121;
    /// The shell found the program but could not run it.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The shell did not find the program.
    pub const NOT_FOUND: i32 = 127;
}

/// The trailer line for `status`, with its leading and trailing newline.
pub fn trailer(status: u16) -> String {
    format!("\n{STATUS_TRAILER}{status:03}\n")
}

/// Splits stdout into the HTTP status of the trailer and the body before it; `None` when the
/// trailer is missing or malformed. The last trailer wins, so a body may contain the marker.
pub fn split(stdout: &[u8]) -> Option<(u16, &[u8])> {
    let marker = format!("\n{STATUS_TRAILER}");
    let marker = marker.as_bytes();
    let at = stdout.windows(marker.len()).rposition(|w| w == marker)?;
    let rest = &stdout[at + marker.len()..];
    let rest = rest.strip_suffix(b"\n").unwrap_or(rest);
    let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
    if rest.len() != 3 || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let status = std::str::from_utf8(rest).ok()?.parse().ok()?;
    Some((status, &stdout[..at]))
}

/// Seconds as a short decimal with at most millisecond precision (`30`, `1.5`), at least 1 ms:
/// how durations are written on command lines, in query strings and in messages.
pub fn seconds(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms.is_multiple_of(1000) {
        (ms / 1000).to_string()
    } else {
        let s = format!("{}.{:03}", ms / 1000, ms % 1000);
        s.trim_end_matches('0').to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_splits_body_and_status() {
        assert_eq!(split(trailer(200).as_bytes()), Some((200, &b""[..])));
        assert_eq!(
            split(b"[1]\nmcpgw-http-status:200\n"),
            Some((200, &b"[1]"[..]))
        );
        // A body that itself contains the marker: the last one wins.
        assert_eq!(
            split(b"a\nmcpgw-http-status:999\nb\nmcpgw-http-status:404"),
            Some((404, &b"a\nmcpgw-http-status:999\nb"[..]))
        );
        assert_eq!(split(b"body"), None);
        assert_eq!(split(b"\nmcpgw-http-status:20\n"), None);
        assert_eq!(split(b"\nmcpgw-http-status:200\nx"), None);
    }

    #[test]
    fn seconds_are_short_decimals() {
        assert_eq!(seconds(Duration::from_secs(30)), "30");
        assert_eq!(seconds(Duration::from_millis(1500)), "1.5");
        assert_eq!(seconds(Duration::from_millis(1234)), "1.234");
        assert_eq!(seconds(Duration::ZERO), "0.001");
    }
}
