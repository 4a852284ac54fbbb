use super::*;
use serde_json::json;

#[test]
fn spec_fills_agentscope_defaults_and_keeps_unknown_fields() {
    let spec: McpSpec = serde_json::from_value(json!({
        "name": "fs",
        "mcp_config": {"type": "stdio_mcp", "command": "npx", "future_knob": 1},
        "owner": "team-a"
    }))
    .unwrap();
    spec.validate().unwrap();
    let echoed = serde_json::to_value(&spec).unwrap();
    assert_eq!(
        echoed,
        json!({
            "name": "fs", "is_stateful": true,
            "mcp_config": {"type": "stdio_mcp", "command": "npx", "args": null, "env": null,
                           "cwd": null, "encoding_error_handler": "strict", "future_knob": 1},
            "enable_tools": null, "disable_tools": null, "execution_timeout": null,
            "stream_progress": false, "owner": "team-a"
        })
    );
}

#[test]
fn http_spec_defaults_timeout_and_detects_sse() {
    let spec: McpSpec = serde_json::from_value(json!({
        "name": "h", "is_stateful": false,
        "mcp_config": {"type": "http_mcp", "url": "http://127.0.0.1:9/sse?key=1"}
    }))
    .unwrap();
    let McpConfig::Http(http) = &spec.mcp_config else {
        panic!("not http")
    };
    assert_eq!(http.timeout, Some(30.0));
    assert!(http.is_legacy_sse());
    for (url, sse) in [
        ("http://h/mcp", false),
        ("http://h/messages/", true),
        ("http://h/sse/x", false),
        ("https://h:1/a/sse#f", true),
        ("http://h", false),
    ] {
        let c = HttpConfig {
            url: url.into(),
            headers: None,
            timeout: None,
            extra: JsonObject::new(),
        };
        assert_eq!(c.is_legacy_sse(), sse, "{url}");
    }
}

#[test]
fn validation_names_the_problem() {
    let base = json!({"name": "ok", "mcp_config": {"type": "stdio_mcp", "command": "x"}});
    let check = |patch: serde_json::Value| {
        let mut v = base.clone();
        for (k, val) in patch.as_object().unwrap() {
            v[k] = val.clone();
        }
        serde_json::from_value::<McpSpec>(v).unwrap().validate()
    };
    assert_eq!(check(json!({"name": ""})).unwrap_err(), "name required");
    assert!(
        check(json!({"name": "a b"}))
            .unwrap_err()
            .contains("must match")
    );
    assert!(
        check(json!({"name": "n".repeat(MAX_NAME_BYTES + 1)}))
            .unwrap_err()
            .contains("at most 128 bytes")
    );
    check(json!({"name": "n".repeat(MAX_NAME_BYTES)})).unwrap();
    assert!(
        check(json!({"is_stateful": false}))
            .unwrap_err()
            .contains("stateful")
    );
    assert!(
        check(json!({"enable_tools": ["a"], "disable_tools": ["a"]}))
            .unwrap_err()
            .contains("\"a\"")
    );
    for bad in [json!(-1), json!(0), json!(1e20), json!(86_400.5)] {
        assert!(
            check(json!({ "execution_timeout": bad }))
                .unwrap_err()
                .contains("execution_timeout"),
            "{bad}"
        );
    }
    check(json!({"execution_timeout": 86_400})).unwrap();
    assert!(
        check(json!({"mcp_config": {"type": "http_mcp", "url": "ftp://x"}}))
            .unwrap_err()
            .contains("url")
    );
    assert!(
        check(json!({"mcp_config": {"type": "http_mcp", "url": "http://x", "timeout": 1e300}}))
            .unwrap_err()
            .contains("mcp_config.timeout")
    );
    assert!(
        check(
            json!({"mcp_config": {"type": "http_mcp", "url": "http://x", "headers": {"Host": "y"}}})
        )
        .unwrap_err()
        .contains("owned by the HTTP layer")
    );
}

#[test]
fn runtime_headers_need_streamable_http() {
    let spec = |url: &str| -> McpSpec {
        serde_json::from_value(json!({"name": "h", "mcp_config": {"type": "http_mcp", "url": url}}))
            .unwrap()
    };
    let headers = BTreeMap::from([("X-Key".to_string(), "v".to_string())]);
    spec("http://h/mcp")
        .check_runtime_headers(&headers)
        .unwrap();
    assert_eq!(
        spec("http://h/sse")
            .check_runtime_headers(&headers)
            .unwrap_err(),
        RUNTIME_HEADERS_NEED_HTTP
    );
    let bad = BTreeMap::from([("Content-Length".to_string(), "1".to_string())]);
    assert!(spec("http://h/mcp").check_runtime_headers(&bad).is_err());
}

#[test]
fn tool_filters() {
    let mut spec: McpSpec = serde_json::from_value(
        json!({"name": "n", "mcp_config": {"type": "stdio_mcp", "command": "x"}}),
    )
    .unwrap();
    assert!(spec.lists_tool("a"));
    assert!(!spec.filters_tools());
    assert_eq!(spec.tool_refusal("a"), None);
    spec.enable_tools = Some(vec!["a".into(), "b".into()]);
    spec.disable_tools = Some(vec!["b".into()]);
    assert!(spec.filters_tools());
    assert!(spec.lists_tool("a"));
    assert!(!spec.lists_tool("b"));
    assert!(!spec.lists_tool("c"));
    assert_eq!(spec.tool_excluded_by("a"), None);
    assert_eq!(spec.tool_excluded_by("b"), Some("disable_tools"));
    assert_eq!(spec.tool_excluded_by("c"), Some("not in enable_tools"));
    assert_eq!(
        spec.tool_refusal("b").as_deref(),
        Some(r#"tool "b" of MCP "n" is disabled by its spec (disable_tools)"#)
    );
    assert_eq!(
        spec.tool_refusal("c").as_deref(),
        Some(r#"tool "c" of MCP "n" is disabled by its spec (not in enable_tools)"#)
    );
    // Either filter alone.
    spec.enable_tools = None;
    assert!(spec.filters_tools());
    assert_eq!(spec.tool_excluded_by("c"), None);
    assert_eq!(spec.tool_excluded_by("b"), Some("disable_tools"));
    spec.enable_tools = Some(vec![]);
    spec.disable_tools = None;
    assert_eq!(spec.tool_excluded_by("a"), Some("not in enable_tools"));
}
