//! `mcpgw mcp --secret-env`: a secret of the host reaches the server inside the sandbox, and
//! nothing that comes back shows it, against server-everything (whose `get-env` prints its whole
//! environment) run in a local sandbox by the real gateway.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{initialize, mcpgw_bin};
use mcpgw_testkit::mcp::Client;
use mcpgw_testkit::{TempDir, everything_js, gateway_bin, static_gateway_bin};
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
    let mut c = Client::direct_with_stderr(endpoint(&value, &dir, &["--audit-arguments"]), stderr);
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

    // A traced call: its record carries the trace id of its traceparent.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "traced"},
               "_meta": {"traceparent": format!("00-{trace}-00f067aa0ba902b7-01")}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "Echo: traced", "{r}");

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
    let records: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 7, "one record per call: {audit}");
    // --audit-arguments: the arguments themselves, the secret shown by its name.
    assert_eq!(
        records[1]["arguments"],
        json!({"message": format!("key [secret:{NAME}] end")}),
        "{audit}"
    );
    assert_eq!(records[6]["trace_id"], trace, "{audit}");
    assert!(records[1].get("trace_id").is_none(), "{audit}");
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

/// Through `--exec-prefix` a wrapper copies every byte the host writes to a command in the
/// sandbox (the session channel's frames included) and every byte it reads back: the secret is
/// in exactly one line the host wrote, the registration's frame; what the sandbox sent back held
/// it (get-env printed it) and the client got its name instead.
#[test]
fn the_secret_crosses_into_the_sandbox_in_one_frame() {
    let value = format!("sk-frames-{}", mcpgw::random::uuid4_hex());
    let dir = TempDir::new("secrets-frames");
    let (input, output) = (dir.path("in"), dir.path("out"));
    let wrapper = dir.path("tee.sh");
    // The session channel's input is copied on its way in; a one-shot command keeps the
    // host's pipe as its stdin (the driver watches it to kill the command), so only its output
    // is copied.
    std::fs::write(
        &wrapper,
        r#"case "$*" in
*" attach "*) tee -a "$MCPGW_T_IN" | "$@" | tee -a "$MCPGW_T_OUT"; exit "${PIPESTATUS[1]}" ;;
*) printf '%s\n' "$*" >> "$MCPGW_T_IN"; "$@" | tee -a "$MCPGW_T_OUT"; exit "${PIPESTATUS[0]}" ;;
esac
"#,
    )
    .unwrap();
    let mut cmd = Command::new(mcpgw_bin());
    cmd.args([
        "mcp",
        "--exec-prefix",
        &format!("bash {}", wrapper.display()),
    ])
    // The static gateway, installed from itself: what is hashed and compared is 9 MiB, not the
    // debug build's 140.
    .args(["--name", "ev", "--gateway"])
    .arg(static_gateway_bin())
    .arg("--gateway-binary")
    .arg(static_gateway_bin())
    .args(["--secret-env", &format!("API_KEY={NAME}")])
    .arg("--")
    .arg("node")
    .arg(everything_js())
    .arg("stdio")
    .env(NAME, &value)
    .env("MCPGW_T_IN", &input)
    .env("MCPGW_T_OUT", &output);
    let mut c = Client::direct(cmd);
    initialize(&mut c);
    let env = c.request("tools/call", json!({"name": "get-env", "arguments": {}}));
    assert!(
        env.to_string().contains(&format!("[secret:{NAME}]")),
        "{env}"
    );
    assert!(!env.to_string().contains(&value), "{env}");
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "nothing secret"}}),
    );
    assert_eq!(
        r["result"]["content"][0]["text"], "Echo: nothing secret",
        "{r}"
    );
    assert!(c.finish(Duration::from_secs(30)).success());
    let sent = std::fs::read(&input).unwrap();
    let read = std::fs::read(&output).unwrap();
    let frames: Vec<&[u8]> = sent
        .split(|&b| b == b'\n')
        .filter(|l| holds(l, &value))
        .collect();
    assert_eq!(frames.len(), 1, "the value is in one line the host wrote");
    let frame: serde_json::Value = serde_json::from_slice(frames[0]).unwrap();
    assert_eq!(frame["t"], "req", "{}", frame["path"]);
    assert_eq!(frame["method"], "POST");
    assert!(
        frame["path"].as_str().unwrap().starts_with("/mcps"),
        "{}",
        frame["path"]
    );
    assert!(
        holds(&read, &value),
        "get-env's answer, as the sandbox sent it, holds the value"
    );
}
