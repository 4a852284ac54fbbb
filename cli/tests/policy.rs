//! `mcpgw mcp --policy FILE --audit-log FILE`: the host's rules, enforced by the host driver on
//! the client's side of the sandbox, and a record of every call, against server-everything run
//! in a local sandbox by the real gateway.

mod common;

use std::process::{Command, Stdio};

use common::{client, initialize, mcpgw_bin};
use mcpgw_testkit::{TempDir, everything_js, gateway_bin};
use serde_json::{Value, json};

fn names(list: &Value, member: &str, key: &str) -> Vec<String> {
    list["result"][member]
        .as_array()
        .unwrap_or_else(|| panic!("no {member} in {list}"))
        .iter()
        .map(|i| i[key].as_str().unwrap().to_owned())
        .collect()
}

/// Runs the command line `argv` with no input to its end; its exit code and its stderr.
fn exit_and_stderr(argv: &[String]) -> (Option<i32>, String) {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code(), stderr)
}

fn argv(policy: &std::path::Path, audit: Option<&std::path::Path>) -> Vec<String> {
    let mut argv = vec![
        mcpgw_bin().display().to_string(),
        "mcp".into(),
        "--local".into(),
        "--name".into(),
        "ev".into(),
        "--gateway".into(),
        gateway_bin().display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
    ];
    if let Some(audit) = audit {
        argv.extend(["--audit-log".into(), audit.display().to_string()]);
    }
    argv.extend([
        "--".into(),
        "node".into(),
        everything_js().display().to_string(),
        "stdio".into(),
    ]);
    argv
}

#[test]
fn what_the_policy_refuses_is_neither_listed_nor_reached() {
    let dir = TempDir::new("policy");
    let policy = dir.path("policy.json");
    std::fs::write(
        &policy,
        json!({"servers": {
            "ev": {"tools": {"deny": ["get-env", "trigger-*"]},
                   "prompts": {"allow": ["simple-prompt"]},
                   "resources": {"deny": ["demo://resource/static/document/s"]},
                   "arguments": {"get-sum": {"a": 1}},
                   "schemas": {"echo": {"type": "object", "required": ["message"],
                       "properties": {"message": {"type": "string", "maxLength": 10}}}}},
            "other": {"tools": {"deny": ["*"]}}}})
        .to_string(),
    )
    .unwrap();
    let audit = dir.path("audit.jsonl");
    let mut c = client(&argv(&policy, Some(&audit)));
    initialize(&mut c);

    let tools = names(&c.request("tools/list", json!({})), "tools", "name");
    assert!(tools.contains(&"echo".to_owned()), "{tools:?}");
    assert!(
        !tools
            .iter()
            .any(|t| t == "get-env" || t.starts_with("trigger-")),
        "{tools:?}"
    );
    let prompts = names(&c.request("prompts/list", json!({})), "prompts", "name");
    assert_eq!(prompts, ["simple-prompt"]);
    let resources = names(&c.request("resources/list", json!({})), "resources", "uri");
    assert!(!resources.is_empty());
    assert!(
        resources
            .iter()
            .all(|u| !u.starts_with("demo://resource/static/document/s")),
        "{resources:?}"
    );

    // Refused, each with the rule named, under the request's own id; nothing reached the
    // server (get-env would have answered with the environment).
    let refused = |c: &mut mcpgw_testkit::mcp::Client, method: &str, params: Value, rule: &str| {
        let r = c.request(method, params);
        assert_eq!(r["error"]["code"], -32003, "{r}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(rule), "{message}");
        assert!(r.get("result").is_none(), "{r}");
    };
    refused(
        &mut c,
        "tools/call",
        json!({"name": "get-env", "arguments": {}}),
        r#"servers."ev".tools.deny: "get-env""#,
    );
    refused(
        &mut c,
        "tools/call",
        json!({"name": "trigger-long-running-operation", "arguments": {}}),
        r#"servers."ev".tools.deny: "trigger-*""#,
    );
    refused(
        &mut c,
        "prompts/get",
        json!({"name": "args-prompt", "arguments": {"city": "x"}}),
        r#"not in servers."ev".prompts.allow"#,
    );
    refused(
        &mut c,
        "resources/read",
        json!({"uri": "demo://resource/static/document/startup.md"}),
        r#"servers."ev".resources.deny: "demo://resource/static/document/s""#,
    );
    refused(
        &mut c,
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 2, "b": 3}}),
        r#"argument "a" must be 1"#,
    );
    refused(
        &mut c,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "longer than ten"}}),
        r#"arguments.message must be at most 10 characters long (servers."ev".schemas."echo")"#,
    );

    // What it allows works as it would straight.
    let r = c.request(
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "hi"}}),
    );
    assert_eq!(r["result"]["content"][0]["text"], "Echo: hi", "{r}");
    let r = c.request(
        "tools/call",
        json!({"name": "get-sum", "arguments": {"a": 1, "b": 3}}),
    );
    assert!(r.to_string().contains('4'), "{r}");
    let r = c.request("prompts/get", json!({"name": "simple-prompt"}));
    assert!(r["result"]["messages"].is_array(), "{r}");
    let r = c.request(
        "resources/read",
        json!({"uri": "demo://resource/static/document/features.md"}),
    );
    assert!(r["result"]["contents"].is_array(), "{r}");

    // One record per call, written before its answer reached the client; lists make none.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&audit).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: Vec<(String, String, String)> = records
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
            (s("method"), s("name"), s("outcome"))
        })
        .collect();
    let want = [
        ("tools/call", "get-env", "denied"),
        ("tools/call", "trigger-long-running-operation", "denied"),
        ("prompts/get", "args-prompt", "denied"),
        (
            "resources/read",
            "demo://resource/static/document/startup.md",
            "denied",
        ),
        ("tools/call", "get-sum", "denied"),
        ("tools/call", "echo", "denied"),
        ("tools/call", "echo", "ok"),
        ("tools/call", "get-sum", "ok"),
        ("prompts/get", "simple-prompt", "ok"),
        (
            "resources/read",
            "demo://resource/static/document/features.md",
            "ok",
        ),
    ]
    .map(|(m, n, o)| (m.to_owned(), n.to_owned(), o.to_owned()));
    assert_eq!(seen, want);
    for r in &records {
        assert_eq!(r["server"], "ev", "{r}");
        assert_eq!(r["via"], "connection", "{r}");
        assert_eq!(r["args_sha256"].as_str().unwrap().len(), 64, "{r}");
        assert!(r["duration_ms"].as_f64().unwrap() >= 0.0, "{r}");
    }
    // The arguments are not in the record, only their digest and size.
    assert!(!std::fs::read_to_string(&audit).unwrap().contains("\"hi\""));
    assert_eq!(records[6]["args_bytes"], r#"{"message":"hi"}"#.len());
    assert!(records[6]["result_bytes"].as_u64().unwrap() > 0);
    assert!(
        records[0]["reason"]
            .as_str()
            .unwrap()
            .contains("tools.deny")
    );
    // The client ends: the endpoint stops what it started, and the log holds what it held.
    let status = c.finish(std::time::Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let after = std::fs::read_to_string(&audit).unwrap().lines().count();
    assert_eq!(after, records.len());
}

#[test]
fn a_policy_file_that_is_not_one_is_refused_before_anything_runs() {
    let dir = TempDir::new("policy-bad");
    for (text, says) in [
        (
            r#"{"servers": {"ev": {"tool": {}}}}"#,
            "unknown field `tool`",
        ),
        ("[", "the policy is invalid"),
    ] {
        let policy = dir.path("p.json");
        std::fs::write(&policy, text).unwrap();
        let (code, stderr) = exit_and_stderr(&argv(&policy, None));
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains("--policy") && stderr.contains(says),
            "{stderr}"
        );
    }
    let missing = dir.path("missing.json");
    let out = Command::new(mcpgw_bin())
        .args(["mcp", "--local", "--policy"])
        .arg(&missing)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.json"), "{stderr}");
    // An audit log through a symbolic link, or one others may read, is refused.
    let policy = dir.path("ok.json");
    std::fs::write(&policy, "{}").unwrap();
    let target = dir.path("target.jsonl");
    std::fs::write(&target, "").unwrap();
    let link = dir.path("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let open = dir.path("open.jsonl");
    std::fs::write(&open, "").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o644)).unwrap();
    for (log, says) in [(&link, "symbolic links"), (&open, "mode 644")] {
        let (code, stderr) = exit_and_stderr(&argv(&policy, Some(log)));
        assert_ne!(code, Some(0), "{stderr}");
        assert!(
            stderr.contains("--audit-log") && stderr.contains(says),
            "{stderr}"
        );
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
}
