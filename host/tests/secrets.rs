//! `mcpgw mcp --secret-env`: a secret of the host reaches the server inside the sandbox, and
//! nothing that comes back shows it, against server-everything (whose `get-env` prints its whole
//! environment) run in a local sandbox by the real gateway.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{initialize, mcpgw_bin};
use mcpgw_testkit::mcp::Client;
use mcpgw_testkit::{TempDir, everything_js, gateway_bin};
use serde_json::json;

const NAME: &str = "MCPGW_TEST_SECRET_KEY";

fn endpoint(value: &str, dir: &TempDir, extra: &[&str]) -> Command {
    let mut cmd = Command::new(mcpgw_bin());
    cmd.args(["mcp", "--local", "--name", "ev", "--gateway"])
        .arg(gateway_bin())
        .args(["--secret-env", &format!("API_KEY={NAME}")])
        .arg("--audit-log")
        .arg(dir.path("audit.jsonl"))
        .args(extra)
        .arg("--")
        .arg("node")
        .arg(everything_js())
        .arg("stdio")
        .env(NAME, value);
    cmd
}

/// Every process's command line on this machine (the local sandbox's included).
fn command_lines() -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            Some((e.file_name().to_string_lossy().into_owned(), cmdline))
        })
        .collect()
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_secret_reaches_the_server_and_comes_back_as_its_name() {
    let value = format!("sk/test+{}", mcpgw::random::uuid4_hex());
    let dir = TempDir::new("secrets");
    let stderr = std::fs::File::create(dir.path("stderr")).unwrap();
    let mut c = Client::direct_with_stderr(endpoint(&value, &dir, &[]), stderr);
    initialize(&mut c);

    // server-everything's get-env prints its environment: the value was delivered (it is
    // replaced, so it was there), and no answer shows it.
    let env = c.request("tools/call", json!({"name": "get-env", "arguments": {}}));
    let text = env.to_string();
    assert!(!text.contains(&value), "{text}");
    assert!(
        text.contains(&format!(r#"\"API_KEY\": \"[secret:{NAME}]\""#))
            || text.contains(&format!(r#"\"API_KEY\":\"[secret:{NAME}]\""#)),
        "get-env shows API_KEY as its secret's name: {text}"
    );
    // Echoed back in a tool's result, URL-encoded or in base64, it is replaced too.
    for (shown, what) in [
        (value.clone(), "as it is"),
        (
            value.replace('/', "%2F").replace('+', "%2B"),
            "percent-encoded",
        ),
    ] {
        let r = c.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": format!("key {shown} end")}}),
        );
        assert_eq!(
            r["result"]["content"][0]["text"],
            format!("Echo: key [secret:{NAME}] end"),
            "{what}: {r}"
        );
    }
    use base64::Engine as _;
    for prefix in ["", "k", "ke"] {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{prefix}{value}!"));
        let r = c.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": encoded}}),
        );
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            text.contains(&format!("[secret:{NAME}]")),
            "base64 after {prefix:?}: {r}"
        );
        let middle = &encoded[8..encoded.len() - 8];
        assert!(!text.contains(middle), "base64 after {prefix:?}: {r}");
    }

    // While the server runs, no command line on this machine (host and sandbox) holds it.
    for (pid, cmdline) in command_lines() {
        assert!(
            !holds(&cmdline, &value),
            "pid {pid}'s argv holds the secret"
        );
    }
    let status = c.finish(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    for file in ["stderr", "audit.jsonl"] {
        let text = std::fs::read_to_string(dir.path(file)).unwrap();
        assert!(!text.contains(&value), "{file}: {text}");
    }
    let audit = std::fs::read_to_string(dir.path("audit.jsonl")).unwrap();
    assert_eq!(audit.lines().count(), 6, "one record per call: {audit}");
}

#[test]
fn a_secret_the_host_lacks_is_named_before_anything_starts() {
    let dir = TempDir::new("secrets-missing");
    let mut cmd = endpoint("", &dir, &[]);
    cmd.env_remove(NAME);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(NAME) && stderr.contains("not set on the host"),
        "{stderr}"
    );
    let short = endpoint("short", &dir, &[]).output().unwrap();
    assert_eq!(short.status.code(), Some(2), "{short:?}");
    assert!(
        String::from_utf8_lossy(&short.stderr).contains("shorter than 8 bytes"),
        "{short:?}"
    );
}
