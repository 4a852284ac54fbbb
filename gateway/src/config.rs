//! `--config FILE`: MCP servers to preload, in the ecosystem's usual `mcpServers` shape
//! (`{"mcpServers": {NAME: {command, args, env, cwd} | {url, headers}}}`).

use std::path::Path;

use mcpgw::wire::McpSpec;
use serde_json::{Value, json};

/// The specs a config file declares. A file without `mcpServers` (an older launch line may
/// pass one) declares none; an entry with `"disabled": true` is skipped.
pub fn load(path: &Path) -> Result<Vec<McpSpec>, String> {
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read config {shown}: {e}"))?;
    let root: Value =
        serde_json::from_str(&text).map_err(|e| format!("config {shown} is not JSON: {e}"))?;
    let Some(servers) = root.get("mcpServers") else {
        tracing::warn!("config {shown} has no mcpServers; nothing to preload");
        return Ok(Vec::new());
    };
    let servers = servers
        .as_object()
        .ok_or_else(|| format!("config {shown}: mcpServers must be an object"))?;
    let mut specs = Vec::new();
    for (name, entry) in servers {
        if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        let spec = spec_from_entry(name, entry)
            .map_err(|e| format!("config {shown}: mcpServers.{name}: {e}"))?;
        specs.push(spec);
    }
    Ok(specs)
}

fn spec_from_entry(name: &str, entry: &Value) -> Result<McpSpec, String> {
    let field = |k: &str| entry.get(k).cloned().unwrap_or(Value::Null);
    let mcp_config = if entry.get("command").is_some() {
        json!({"type": "stdio_mcp", "command": field("command"), "args": field("args"),
               "env": field("env"), "cwd": field("cwd")})
    } else if entry.get("url").is_some() {
        let mut c = json!({"type": "http_mcp", "url": field("url"), "headers": field("headers")});
        if let Some(t) = entry.get("timeout") {
            c["timeout"] = t.clone();
        }
        c
    } else {
        return Err("needs either command (stdio) or url (HTTP)".into());
    };
    let spec: McpSpec = serde_json::from_value(json!({
        "name": name, "is_stateful": true, "mcp_config": mcp_config
    }))
    .map_err(|e| e.to_string())?;
    spec.validate()?;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcpgw::wire::McpConfig;

    #[test]
    fn reads_stdio_and_http_entries() {
        let dir = std::env::temp_dir().join(format!("mcpgw-cfg-{}", mcpgw::random::uuid4_hex()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}},
                "web": {"url": "http://127.0.0.1:1/mcp", "headers": {"X-K": "v"}},
                "off": {"command": "nope", "disabled": true}
            }}"#,
        )
        .unwrap();
        let specs = load(&file).unwrap();
        assert_eq!(specs.len(), 2);
        assert!(matches!(&specs[0].mcp_config, McpConfig::Stdio(s) if s.command == "npx"));
        assert!(matches!(&specs[1].mcp_config, McpConfig::Http(h) if h.url.ends_with("/mcp")));
        std::fs::write(&file, r#"{"mcpServers": {"bad name": {"command": "x"}}}"#).unwrap();
        assert!(load(&file).unwrap_err().contains("bad name"));
        std::fs::write(&file, r#"{"mcpServers": {"x": {}}}"#).unwrap();
        assert!(load(&file).unwrap_err().contains("command"));
        std::fs::write(&file, r#"{"other": 1}"#).unwrap();
        assert!(load(&file).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
