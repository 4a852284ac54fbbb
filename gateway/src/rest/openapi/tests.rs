use super::*;
use mcpgw::wire::McpState;
use mcpgw::wire::spec::{MAX_NAME_BYTES, MAX_TIMEOUT_SECS, NAME_PATTERN};
use utoipa::PartialSchema;

fn doc() -> Value {
    document(crate::rest::api::surface().into_iter().map(|r| r.doc), 1234)
}

#[test]
fn schemas_are_the_wire_types() {
    let doc = doc();
    for (name, schema) in [
        ("McpSpec", McpSpec::schema()),
        ("McpEntry", McpEntry::schema()),
        ("Tool", Tool::schema()),
        ("ToolChunk", ToolChunk::schema()),
    ] {
        let derived = serde_json::to_value(schema).unwrap();
        // The registration rules add to the derived schemas; what was derived stays.
        for (key, value) in derived.as_object().unwrap() {
            if key != "properties" {
                assert_eq!(
                    &doc["components"]["schemas"][name][key], value,
                    "{name}.{key}"
                );
            }
        }
        for (key, value) in derived["properties"].as_object().into_iter().flatten() {
            let ours = &doc["components"]["schemas"][name]["properties"][key];
            for (k, v) in value.as_object().unwrap() {
                assert_eq!(&ours[k], v, "{name}.{key}.{k}");
            }
        }
    }
}

#[test]
fn the_validators_bounds_are_stated() {
    let doc = doc();
    let schemas = &doc["components"]["schemas"];
    let name = &schemas["McpSpec"]["properties"]["name"];
    assert_eq!(name["pattern"], format!("^{NAME_PATTERN}$"));
    assert_eq!(name["maxLength"], MAX_NAME_BYTES);
    assert_eq!(name["minLength"], 1);
    for timeout in [
        &schemas["McpSpec"]["properties"]["execution_timeout"],
        &schemas["HttpConfig"]["properties"]["timeout"],
    ] {
        assert_eq!(timeout["exclusiveMinimum"], 0.0, "{timeout}");
        assert_eq!(timeout["maximum"], MAX_TIMEOUT_SECS, "{timeout}");
    }
    assert_eq!(
        schemas["StdioConfig"]["properties"]["command"]["minLength"],
        1
    );
    let states: Vec<Value> = McpState::ALL.iter().map(|s| json!(s.as_str())).collect();
    assert_eq!(schemas["McpState"]["enum"], json!(states));
    let call = &doc["paths"][route::TOOL]["post"];
    let timeout = call["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "timeout")
        .unwrap();
    assert_eq!(timeout["schema"]["maximum"], MAX_TIMEOUT_SECS);
    assert!(
        call["requestBody"]["description"]
            .as_str()
            .unwrap()
            .contains("1234 bytes")
    );
}

#[test]
fn every_route_and_its_statuses_are_documented() {
    let doc = doc();
    let statuses = |path: &str, method: &str| -> Vec<String> {
        doc["paths"][path][method]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{method} {path} undocumented"))
            .keys()
            .cloned()
            .collect()
    };
    assert_eq!(statuses(route::HEALTH, "get"), ["200"]);
    assert_eq!(
        statuses(route::MCPS, "post"),
        ["200", "400", "401", "409", "413", "500"]
    );
    assert_eq!(statuses(route::MCP, "delete"), ["200", "400", "401", "404"]);
    assert_eq!(
        statuses(route::RUNTIME_HEADERS, "put"),
        ["204", "400", "401", "404", "413", "503"]
    );
    assert_eq!(
        statuses(route::TOOLS, "get"),
        ["200", "400", "401", "404", "502", "503", "504"]
    );
    assert_eq!(
        statuses(route::TOOL, "post"),
        [
            "200", "400", "401", "403", "404", "409", "410", "413", "500", "502", "503", "504"
        ]
    );
    assert_eq!(
        statuses(route::CALL, "get"),
        [
            "200", "400", "401", "403", "404", "410", "500", "502", "504"
        ]
    );
    assert_eq!(
        statuses(route::CALL, "delete"),
        ["200", "400", "401", "404", "409", "410"]
    );
    for path in [route::METRICS, route::OPENAPI, route::MCPS] {
        assert!(statuses(path, "get").contains(&"401".to_string()));
    }
}
