//! The comparison of two runs of an SDK client's script (`clients::differences`, and the
//! `mcpgw-same-answers` binary the binding tests run): ids, times and clock times in text and
//! blobs are ignored, and nothing else.

use std::process::Command;

use base64::Engine as _;
use mcpgw_testkit::TempDir;
use mcpgw_testkit::clients::differences;
use mcpgw_testkit::mcp::normalized;
use serde_json::{Value, json};

fn blob(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn want() -> Value {
    json!({
        "call": {"id": 1, "jsonrpc": "2.0", "result": {
            "text": "at 9:05:58 PM, then 21:05:58.123", "createdAt": "2026-01-01",
            "blob": blob("at 10:00:00"), "n": 1, "list": ["a", 2]}},
        "same": "x",
    })
}

fn got() -> Value {
    json!({
        "call": {"id": 7, "result": {
            "text": "at 11:15:00 AM, then 01:00:00.9", "createdAt": "2027-02-02",
            "blob": blob("at 3:59:59"), "n": 1, "list": ["a", 2]}},
        "same": "x",
    })
}

#[test]
fn runs_that_differ_in_ids_and_times_only_are_the_same() {
    assert_eq!(differences(&got(), &want()), Ok(vec![]));
    // createdAt and CreatedAt are different members.
    let mut renamed = got();
    let result = renamed["call"]["result"].as_object_mut().unwrap();
    let at = result.remove("createdAt").unwrap();
    result.insert("CreatedAt".into(), at);
    let d = differences(&renamed, &want()).unwrap();
    assert!(d.len() == 1 && d[0].starts_with("call:"), "{d:?}");
}

#[test]
fn every_other_change_is_a_difference() {
    let changes: [(&str, Value); 5] = [
        ("n", json!(2)),
        ("text", json!("at 9:05:58 PM, then 21:05")),
        ("blob", json!(blob("at 10:00:01 x"))),
        ("list", json!([2, "a"])),
        ("extra", Value::Null),
    ];
    for (key, value) in changes {
        let mut changed = got();
        changed["call"]["result"][key] = value;
        let d = differences(&changed, &want()).unwrap();
        assert_eq!(d.len(), 1, "a change of {key}: {d:?}");
    }
    let d = differences(&json!({"call": want()["call"]}), &want()).unwrap();
    assert_eq!(d, ["same: missing"]);
    let extra = json!({"call": want()["call"], "same": "x", "new": 1});
    assert_eq!(
        differences(&extra, &want()).unwrap(),
        ["new: not in the direct run"]
    );
    assert!(differences(&json!([]), &want()).is_err());
}

#[test]
fn clock_times_are_masked_where_they_stand_alone() {
    for (text, masked) in [
        ("9:05:58", "<time>"),
        ("x 21:05:58.123 PM y", "x <time> y"),
        ("123:45:67", "123:45:67"),
        ("1:2:3", "1:2:3"),
        ("12:34:567", "12:34:567"),
        ("été 1:00:00", "été <time>"),
        ("10:00", "10:00"),
    ] {
        assert_eq!(normalized(&json!(text)), json!(masked), "{text}");
    }
    let got = normalized(&json!({"id": 3, "jsonrpc": "2.0", "createdAt": "x",
        "blob": blob("created at 12:02:36 AM"), "raw": {"blob": "not base64!"}}));
    assert_eq!(
        got,
        json!({"createdAt": "<time>", "blob": "<base64 of created at <time>>",
               "raw": {"blob": "not base64!"}})
    );
}

fn compare(got: &str, want: &str) -> (Option<i32>, String, String) {
    let dir = TempDir::new("same-answers");
    let (g, w) = (dir.path("got.json"), dir.path("want.json"));
    std::fs::write(&g, got).unwrap();
    std::fs::write(&w, want).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcpgw-same-answers"))
        .args(["go".as_ref(), g.as_os_str(), w.as_os_str()])
        .output()
        .unwrap();
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (out.status.code(), text(out.stdout), text(out.stderr))
}

#[test]
fn the_binary_says_same_differ_or_bad_input_by_its_exit_code() {
    let (got, want) = (got().to_string(), want().to_string());
    assert_eq!(
        compare(&got, &want),
        (Some(0), String::new(), String::new())
    );
    let (code, out, _) = compare(r#"{"same": "y"}"#, &want);
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("the go client's answers differ from a direct connection's:\n")
            && out.contains("call: missing")
            && out.contains("same:\n  got  \"y\"\n  want \"x\""),
        "{out}"
    );
    let (code, _, err) = compare("{", &want);
    assert!(
        code == Some(2) && err.contains("got.json: not JSON"),
        "{err}"
    );
    let (code, _, err) = compare("[1]", &want);
    assert!(
        code == Some(2) && err.contains("got is not an object, want an object"),
        "{err}"
    );
    let none = Command::new(env!("CARGO_BIN_EXE_mcpgw-same-answers"))
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
}
