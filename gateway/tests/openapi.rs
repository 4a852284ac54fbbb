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
        // The value is accepted: the registration is not refused (400). With a time limit this
        // small, connecting or listing the tools may outlast it on a busy machine: that is the
        // limit at work, not a refusal of the value (speed is measured by `make bench`).
        let r = gw.add(s, "").await;
        assert_ne!(r.status, 400, "timeout {t}: {}", r.text());
        if r.status != 200 {
            assert!(
                r.status == 500
                    && ["within", "took longer than"]
                        .iter()
                        .any(|w| r.detail().contains(w)),
                "timeout {t}: {} {}",
                r.status,
                r.text()
            );
            continue;
        }
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

/// The rules the finding named (each was a schema-valid request the gateway refused), as the
/// document now states them: each request here is one the document refuses too.
#[tokio::test]
async fn the_document_refuses_what_the_gateway_refuses() {
    let gw = start_gateway(&[]);
    let doc = gw.openapi().await.clone();
    let schemas = &doc["components"]["schemas"];
    let headers = &schemas["Headers"];
    let name_pattern = headers["propertyNames"]["pattern"].as_str().unwrap();
    assert_eq!(name_pattern, mcpgw::wire::spec::HEADER_NAME_PATTERN);
    let reserved = headers["propertyNames"]["not"]["pattern"].as_str().unwrap();
    for name in ["Host", "content-LENGTH", "Mcp-Session-Id", "Accept"] {
        assert!(
            reserved.contains(&format!(
                "[{}{}]",
                name.chars().next().unwrap().to_ascii_uppercase(),
                name.chars().next().unwrap().to_ascii_lowercase()
            )),
            "{reserved}"
        );
    }
    assert_eq!(
        schemas["McpSpec"]["then"]["properties"]["is_stateful"]["const"],
        true
    );
    let body =
        &doc["paths"]["/mcps"]["post"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        body["then"]["properties"]["mcp_config"]["properties"]["type"]["const"],
        "http_mcp"
    );
    // And the gateway refuses each with 400, as before.
    let server = testserver_http();
    gw.add(http_spec("h", &server.url), "").await.expect(200);
    for headers in [
        json!({"": "v"}),
        json!({"x y": "v"}),
        json!({"é": "v"}),
        json!({"X-Ok": "\u{1}"}),
        json!({"Host": "h"}),
        json!({"Content-Length": "1"}),
        json!({"mcp-session-id": "s"}),
    ] {
        let r = gw
            .send(
                "PUT",
                "/mcps/h/runtime-headers",
                Some(serde_json::to_vec(&json!({ "headers": headers })).unwrap()),
            )
            .await;
        assert_eq!(r.status, 400, "{headers}: {}", r.text());
    }
    let mut stateless = testserver_stdio("s");
    stateless["is_stateful"] = json!(false);
    gw.add(stateless, "").await.expect(400);
    let mut with_headers = testserver_stdio("s");
    with_headers["runtime_headers"] = json!({"X-Key": "v"});
    gw.add(with_headers, "").await.expect(400);
}

/// Fills a generated request's path parameters: an MCP that exists (`t` over stdio, `h` over
/// streamable HTTP, both in the default scope) where the route acts on one, else a name that
/// is registered nowhere; and whether it names an existing MCP.
fn target(route: &str) -> (String, bool) {
    if route == "/mcps/{name}" {
        return ("/mcps/nowhere".into(), false);
    }
    let mcp = if route.ends_with("/runtime-headers") {
        "h"
    } else {
        "t"
    };
    let path = route
        .replace("{name}", mcp)
        .replace("{tool}", "echo")
        .replace("{prompt}", "p")
        // A well-formed call id no call has: 404, never 400.
        .replace("{id}", "0123456789abcdef0123456789abcdef");
    let existing = path != route;
    (path, existing)
}

/// Requests generated from the document (hypothesis-jsonschema, in the virtualenv) are never
/// refused as invalid: whatever the document allows, the gateway accepts (it may still fail to
/// reach an upstream the request names, or not find an MCP).
#[tokio::test]
async fn requests_generated_from_the_document_are_never_refused_as_invalid() {
    // Generated stdio specs name random commands: with an empty PATH none of them runs.
    let empty = TempDir::new("no-path");
    let gw = start_gateway_with_env(
        &["--connect-timeout", "3"],
        &[("PATH", empty.0.as_os_str())],
    );
    gw.add(testserver_stdio("t"), "").await.expect(200);
    let server = testserver_http();
    gw.add(http_spec("h", &server.url), "").await.expect(200);
    let doc_file = gw.dir.path("openapi.json");
    std::fs::write(&doc_file, serde_json::to_vec(gw.openapi().await).unwrap()).unwrap();
    // Generating requests from the document.
    let out = succeeded(
        std::process::Command::new(venv_bin("python"))
            .arg(repo().join("gateway/tests/schema/examples.py"))
            .arg(&doc_file)
            .arg("40"),
    );
    let examples: Vec<Value> = out
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    assert!(examples.len() >= 200, "{} requests", examples.len());
    let mut ops = std::collections::BTreeMap::<String, usize>::new();
    let requests = examples.iter().map(|e| {
        let (path, existing) = target(e["route"].as_str().unwrap());
        let mut query: Vec<String> = Vec::new();
        for (k, v) in e["query"].as_object().unwrap() {
            // An MCP that exists lives in the default scope.
            if existing && k != "timeout" {
                continue;
            }
            let v = v.as_str().map_or(v.to_string(), str::to_owned);
            query.push(format!("{k}={}", mcpgw::wire::rest::percent_encode(&v)));
        }
        let url = match query.is_empty() {
            true => path,
            false => format!("{path}?{}", query.join("&")),
        };
        let body = (!e["body"].is_null()).then(|| serde_json::to_vec(&e["body"]).unwrap());
        *ops.entry(e["op"].as_str().unwrap().to_string())
            .or_default() += 1;
        let gw = &gw;
        async move {
            let r = gw.send(e["method"].as_str().unwrap(), &url, body).await;
            (e, url, r)
        }
    });
    use futures::StreamExt;
    let answered: Vec<_> = futures::stream::iter(requests)
        .buffer_unordered(16)
        .collect()
        .await;
    let refused: Vec<String> = answered
        .iter()
        .filter(|(_, _, r)| r.status == 400)
        .map(|(e, url, r)| format!("{} {url} {}: {}", e["method"], e["body"], r.text()))
        .collect();
    assert!(
        refused.is_empty(),
        "{} of {} schema-valid requests refused:\n{}",
        refused.len(),
        answered.len(),
        refused.join("\n")
    );
    eprintln!("schema-valid requests accepted: {ops:?}");
    // The gateway is fine after all of it.
    gw.call("t", "echo", json!({"text": "still"}))
        .await
        .expect(200);
}
