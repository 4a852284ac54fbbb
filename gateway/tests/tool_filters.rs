//! A spec's `enable_tools` / `disable_tools` over virtual MCP connections, against the
//! project's test server: `tools/list` lacks the tools they exclude, as the REST listing does,
//! and a `tools/call` of one is answered by the gateway with JSON-RPC error -32003 under the
//! request's own id, never reaching the server; the tools they keep work as before.

use mcpgw_testkit::mcp::{Client, connect, host_meta};
use mcpgw_testkit::*;
use serde_json::{Value, json};

/// Opens the connection as a host of `version` would; what the `_meta` of its requests must
/// carry.
fn handshake(client: &mut Client, version: &str) -> Value {
    if version == "2026-07-28" {
        let meta = host_meta(version, json!({}));
        let found = client.request("server/discover", json!({"_meta": meta}));
        assert!(found["result"]["supportedVersions"].is_array(), "{found}");
        meta
    } else {
        let init = client.request(
            "initialize",
            json!({"protocolVersion": version, "capabilities": {},
                   "clientInfo": {"name": "mcpgw-test", "version": "1"}}),
        );
        assert_eq!(init["result"]["protocolVersion"], version, "{init}");
        client.notify("notifications/initialized", Value::Null);
        json!({})
    }
}

fn with_meta(mut params: Value, meta: &Value) -> Value {
    if meta.as_object().is_some_and(|m| !m.is_empty()) {
        params["_meta"] = meta.clone();
    }
    params
}

/// The answer to the request sent by hand under `id` (the host declared no capability the
/// server may ask of it, so anything else is a notification to pass over).
fn answer_to(client: &mut Client, id: &Value) -> Value {
    loop {
        let message = client
            .receive(mcpgw_testkit::mcp::LIMIT)
            .unwrap_or_else(|| panic!("no answer to request {id}"));
        if message["id"] == *id && message.get("method").is_none() {
            return message;
        }
    }
}

fn names(tools: &Value) -> Vec<String> {
    tools
        .as_array()
        .unwrap_or_else(|| panic!("not a tool list: {tools}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_the_spec_filters_out_are_neither_listed_nor_called_over_a_connection() {
    let gw = start_gateway(&[]);
    let mut spec = testserver_stdio("off");
    spec["disable_tools"] = json!(["echo", "crash"]);
    gw.add(spec, "").await.expect(200);
    let mut spec = testserver_stdio("only");
    spec["enable_tools"] = json!(["echo_json", "info"]);
    gw.add(spec, "").await.expect(200);
    let everything = {
        gw.add(testserver_stdio("all"), "").await.expect(200);
        names(&gw.get("/mcps/all/tools").await.expect(200).json())
    };
    assert!(
        everything.iter().any(|t| t == "echo") && everything.iter().any(|t| t == "crash"),
        "{everything:?}"
    );
    for (mcp, rule) in [("off", "disable_tools"), ("only", "not in enable_tools")] {
        let listed = names(
            &gw.get(&format!("/mcps/{mcp}/tools"))
                .await
                .expect(200)
                .json(),
        );
        for version in ["2025-11-25", "2026-07-28"] {
            let what = format!("{mcp} as {version}");
            tokio::task::block_in_place(|| {
                let mut client = connect(&gw, mcp);
                let meta = handshake(&mut client, version);
                // The list is the REST listing: what the filters keep, in the server's order.
                let tools = client.request("tools/list", with_meta(json!({}), &meta));
                let over_connection = names(&tools["result"]["tools"]);
                assert_eq!(over_connection, listed, "{what}: {tools}");
                assert!(
                    !over_connection.iter().any(|t| t == "echo" || t == "crash"),
                    "{what}: {over_connection:?}"
                );
                let pid = |client: &mut Client| {
                    let info = client.request(
                        "tools/call",
                        with_meta(json!({"name": "info", "arguments": {}}), &meta),
                    );
                    info["result"]["structuredContent"]["pid"]
                        .as_u64()
                        .unwrap_or_else(|| panic!("{what}: no pid in {info}"))
                };
                let serving = pid(&mut client);
                // A call of a tool filtered out is answered by the gateway, under its id.
                for (id, tool) in [(json!("no-crash"), "crash"), (json!(41), "echo")] {
                    client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": with_meta(json!({"name": tool,
                            "arguments": {"text": "ran", "code": 3}}), &meta)}));
                    let refused = answer_to(&mut client, &id);
                    assert_eq!(
                        refused,
                        json!({"jsonrpc": "2.0", "id": id, "error": {
                            "code": -32003,
                            "message": format!(
                                "tool \"{tool}\" of MCP \"{mcp}\" is disabled by its spec ({rule})"
                            ),
                        }}),
                        "{what}"
                    );
                }
                // A tool the filters keep still works, on the same connection.
                let echoed = client.request(
                    "tools/call",
                    with_meta(
                        json!({"name": "echo_json", "arguments": {"n": 2, "s": "é"}}),
                        &meta,
                    ),
                );
                assert_eq!(
                    echoed["result"]["structuredContent"],
                    json!({"n": 2, "s": "é"}),
                    "{what}: {echoed}"
                );
                // The refused `crash` never reached the server: the same process serves on.
                assert_eq!(pid(&mut client), serving, "{what}");
            });
        }
    }
    // An MCP without filters lists and calls everything over a connection.
    tokio::task::block_in_place(|| {
        let mut client = connect(&gw, "all");
        handshake(&mut client, "2025-11-25");
        let tools = client.request("tools/list", json!({}));
        assert_eq!(names(&tools["result"]["tools"]), everything, "{tools}");
        let echoed = client.request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "back"}}),
        );
        assert_eq!(echoed["result"]["content"][0]["text"], "back", "{echoed}");
    });
}
