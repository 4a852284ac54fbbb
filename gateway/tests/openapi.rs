//! The gateway against its own `/openapi.json`: requests generated from the document's bounds,
//! at and just past each bound, are accepted when the document allows them and refused with a
//! documented 4xx when it does not. (Every answer of every test is also checked to be listed
//! for its endpoint: testkit's `Gateway` does that on each request.)

use serde_json::{Value, json};

use mcpgw_testkit::*;

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Names at the bounds of the document's `McpSpec.name`: every allowed character class at the
/// shortest and longest lengths, then what it refuses.
fn names(schema: &Value) -> (Vec<String>, Vec<String>) {
    let max = schema["maxLength"].as_u64().unwrap() as usize;
    let min = schema["minLength"].as_u64().unwrap() as usize;
    assert_eq!(schema["pattern"], "^[A-Za-z0-9_-]+$");
    let alphabet = "abcXYZ019_-";
    let long: String = alphabet.chars().cycle().take(max).collect();
    let ok = vec!["a".repeat(min), "_".into(), "-".into(), "Z9".into(), long];
    let bad = vec![
        String::new(),
        "n".repeat(max + 1),
        "n".repeat(70_000),
        "a b".into(),
        "a/b".into(),
        "é".into(),
        "a.b".into(),
    ];
    (ok, bad)
}

/// Seconds at the bounds of a timeout schema: allowed and refused.
fn seconds(schema: &Value) -> (Vec<f64>, Vec<Value>) {
    let max = number(&schema["maximum"]);
    let above = number(&schema["exclusiveMinimum"]);
    let ok = vec![max, 1.5, above + 0.001];
    let bad = vec![
        json!(above),
        json!(-1),
        json!(max + 0.5),
        json!(1e20),
        json!(1e300),
    ];
    (ok, bad)
}

/// A call the document allows: answered, or stopped by its (tiny) deadline, never refused.
fn accepted(r: Reply) {
    assert!(
        r.status == 200 || r.status == 504,
        "{}: {}",
        r.status,
        r.text()
    );
}

#[tokio::test]
async fn requests_at_the_documents_bounds_are_accepted_or_refused_as_documented() {
    let gw = start_gateway(&[]);
    let doc = gw.openapi().await.clone();
    let schemas = &doc["components"]["schemas"];
    let spec = &schemas["McpSpec"]["properties"];

    // Names.
    let (ok, bad) = names(&spec["name"]);
    for name in &ok {
        gw.add(testserver_stdio(name), "").await.expect(200);
        let tools = gw.get(&format!("/mcps/{name}/tools")).await.expect(200);
        assert!(!tools.json().as_array().unwrap().is_empty());
        gw.call(name, "echo", json!({"text": "x"}))
            .await
            .expect(200);
        gw.delete(&format!("/mcps/{name}")).await.expect(200);
    }
    for name in &bad {
        let mut s = testserver_stdio("x");
        s["name"] = json!(name);
        let r = gw.add(s, "").await;
        assert_eq!(r.status, 400, "name {name:?}: {}", r.text());
    }

    // execution_timeout.
    let (ok, bad) = seconds(&spec["execution_timeout"]);
    for t in ok {
        let mut s = testserver_stdio("t");
        s["execution_timeout"] = json!(t);
        gw.add(s, "").await.expect(200);
        accepted(gw.call("t", "echo", json!({"text": "x"})).await);
        gw.delete("/mcps/t").await.expect(200);
    }
    for t in bad {
        let mut s = testserver_stdio("t");
        s["execution_timeout"] = t.clone();
        let r = gw.add(s, "").await;
        assert_eq!(r.status, 400, "execution_timeout {t}: {}", r.text());
        assert!(r.detail().contains("execution_timeout"), "{}", r.detail());
    }

    // A call's ?timeout=.
    gw.add(testserver_stdio("q"), "").await.expect(200);
    let call = doc["paths"]["/mcps/{name}/tools/{tool}"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "timeout")
        .unwrap()["schema"]
        .clone();
    let (ok, bad) = seconds(&call);
    for t in ok {
        accepted(
            gw.post(
                &format!("/mcps/q/tools/echo?timeout={t}"),
                json!({"arguments": {"text": "x"}}),
            )
            .await,
        );
    }
    for t in bad
        .iter()
        .chain(&[json!("abc"), json!("nan"), json!("inf")])
    {
        let t = t.as_str().map_or(t.to_string(), str::to_owned);
        let r = gw
            .post(&format!("/mcps/q/tools/echo?timeout={t}"), json!({}))
            .await;
        assert_eq!(r.status, 400, "timeout {t}: {}", r.text());
    }

    // An HTTP MCP's timeout.
    let server = testserver_http();
    let http = &schemas["HttpConfig"]["properties"];
    let (ok, bad) = seconds(&http["timeout"]);
    for t in ok {
        let mut s = http_spec("h", &server.url);
        s["mcp_config"]["timeout"] = json!(t);
        // A tiny timeout bounds the setup too: it may not connect in time.
        let r = gw.add(s, "").await;
        if r.status == 500 && r.detail().contains("within") {
            continue;
        }
        r.expect(200);
        accepted(gw.call("h", "echo", json!({"text": "x"})).await);
        gw.delete("/mcps/h").await.expect(200);
    }
    for t in bad {
        let mut s = http_spec("h", &server.url);
        s["mcp_config"]["timeout"] = t.clone();
        let r = gw.add(s, "").await;
        assert_eq!(r.status, 400, "timeout {t}: {}", r.text());
    }
    let mut s = http_spec("h", &server.url);
    s["mcp_config"]["url"] = json!("ftp://127.0.0.1/mcp");
    gw.add(s, "").await.expect(400);

    // A stdio command.
    let command = &schemas["StdioConfig"]["properties"]["command"];
    assert_eq!(command["minLength"], 1);
    for bad in ["", "   ", "a\u{0}b"] {
        let mut s = testserver_stdio("c");
        s["mcp_config"]["command"] = json!(bad);
        let r = gw.add(s, "").await;
        assert_eq!(r.status, 400, "command {bad:?}: {}", r.text());
    }

    // The gateway is fine after all of it.
    gw.call("q", "echo", json!({"text": "still"}))
        .await
        .expect(200);
}
