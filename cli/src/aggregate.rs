//! Every server of an `mcpServers` file behind one endpoint, their names prefixed: tool and
//! prompt `NAME` of server `fs` is `fs__NAME`, resource `URI` is `mcpgw://fs/URI` (templates
//! likewise, and the resources a result links or embeds). Each server has a virtual connection
//! of its own ([`Link`]); requests go to the server their prefix names, lists are gathered
//! from every server (all pages) and merged, the servers' own requests (sampling, elicitation,
//! roots) reach the client under ids of the endpoint's, and their answers go back. A server
//! that goes (its connection lost, its process restarting) or comes back is announced with
//! `notifications/{tools,prompts,resources}/list_changed`.
//!
//! The clients served are those of revisions with `initialize` (2025-06-18, 2025-11-25):
//! `server/discover` is answered "method not found", so a client that speaks both falls back
//! to `initialize`, as it would against a server of those revisions.

use std::collections::HashMap;

use mcpgw::wire::jsonrpc::{self, Message, code, method};
use serde_json::{Map, Value, json};

use crate::cli::Level;
use crate::cli::log;
use crate::link::{Link, Wake};
use mcpgw_runner::{ConnectionEvent, Host};

/// The separator between a server's name and a tool's or prompt's.
pub const SEPARATOR: &str = "__";
/// The scheme of a prefixed resource URI: `mcpgw://SERVER/URI`.
pub const URI_PREFIX: &str = "mcpgw://";

/// Lists gathered from every server: the method, and the member holding its items.
const LISTS: [(&str, &str); 4] = [
    (method::TOOLS_LIST, "tools"),
    (method::PROMPTS_LIST, "prompts"),
    (method::RESOURCES_LIST, "resources"),
    (method::RESOURCE_TEMPLATES_LIST, "resourceTemplates"),
];

/// The list changes a server's coming or going makes.
const LIST_CHANGES: [&str; 3] = [
    method::TOOLS_LIST_CHANGED,
    method::PROMPTS_LIST_CHANGED,
    method::RESOURCES_LIST_CHANGED,
];

/// A request of the client's sent to every server, waiting for their answers.
struct Fanout {
    /// The client's id.
    id: Value,
    method: String,
    /// The request, for the next page of a list.
    params: Value,
    /// Answers still awaited.
    waiting: usize,
    /// Per server: its items (lists) or its result, or its error.
    parts: Vec<Option<Result<Value, Value>>>,
}

/// A request of the client's sent to one server.
struct Routed {
    server: usize,
    method: String,
}

/// The servers behind one client's endpoint.
pub struct Aggregate {
    links: Vec<Link>,
    /// Whether each server's features are in the merged lists.
    present: Vec<bool>,
    /// Fan-out parts in flight: the part's id on a link to the fan-out's key.
    parts: HashMap<String, (String, usize)>,
    fanouts: HashMap<String, Fanout>,
    /// The client's requests in flight on one server, by their ids' JSON text.
    routed: HashMap<String, Routed>,
    /// The servers' requests in flight at the client: the id it got to the server and the
    /// server's own id.
    asked: HashMap<String, (usize, Value)>,
    next: u64,
    /// Whether the client finished its handshake (list changes are sent from then on).
    initialized: bool,
    level: Level,
}

/// A message read once: its envelope, and (the aggregate rewrites what it relays) its JSON
/// value; `Err` with the answer that refuses it.
fn read(text: &str) -> Result<(Message<'_>, Value), String> {
    let msg = jsonrpc::parse(text).map_err(|e| e.answer())?;
    let value = serde_json::from_str(text)
        .map_err(|e| jsonrpc::error_response(None, code::PARSE_ERROR, &e.to_string()))?;
    Ok((msg, value))
}

/// `name` of server `server`, prefixed.
pub fn prefixed_name(server: &str, name: &str) -> String {
    format!("{server}{SEPARATOR}{name}")
}

/// `uri` of server `server`, prefixed.
pub fn prefixed_uri(server: &str, uri: &str) -> String {
    format!("{URI_PREFIX}{server}/{uri}")
}

impl Aggregate {
    /// Connections to `servers` of `host`, opened.
    pub async fn open(host: &Host, servers: &[String], level: Level) -> Aggregate {
        let mut links: Vec<Link> = servers
            .iter()
            .map(|s| Link::new(host.clone(), s, level, true))
            .collect();
        for l in &mut links {
            l.open_now().await;
        }
        Aggregate {
            present: links.iter().map(Link::is_up).collect(),
            links,
            parts: HashMap::new(),
            fanouts: HashMap::new(),
            routed: HashMap::new(),
            asked: HashMap::new(),
            next: 0,
            initialized: false,
            level,
        }
    }

    /// The connections.
    pub fn links_mut(&mut self) -> &mut [Link] {
        &mut self.links
    }

    fn fresh_id(&mut self, what: &str) -> String {
        self.next += 1;
        format!("mcpgw-{what}-{}", self.next)
    }

    /// The server a prefixed tool or prompt name belongs to (the longest name that matches),
    /// and the name on that server.
    fn by_name<'a>(&self, name: &'a str) -> Option<(usize, &'a str)> {
        self.links
            .iter()
            .enumerate()
            .filter_map(|(i, l)| {
                let rest = name.strip_prefix(l.mcp())?.strip_prefix(SEPARATOR)?;
                Some((l.mcp().len(), i, rest))
            })
            .max_by_key(|(len, _, _)| *len)
            .map(|(_, i, rest)| (i, rest))
    }

    /// The server a prefixed URI belongs to, and the URI on that server. The server's name
    /// matches without regard to case: URL parsers lowercase a host.
    fn by_uri<'a>(&self, uri: &'a str) -> Option<(usize, &'a str)> {
        let rest = uri
            .get(..URI_PREFIX.len())
            .filter(|p| p.eq_ignore_ascii_case(URI_PREFIX))
            .map(|_| &uri[URI_PREFIX.len()..])?;
        let (server, original) = rest.split_once('/')?;
        let i = self
            .links
            .iter()
            .position(|l| l.mcp() == server)
            .or_else(|| {
                self.links
                    .iter()
                    .position(|l| l.mcp().eq_ignore_ascii_case(server))
            })?;
        Some((i, original))
    }

    /// A message from the client; `out` receives what goes to the client.
    pub async fn from_client(&mut self, text: &str, out: &mut Vec<String>) {
        let (kind, msg) = match read(text) {
            Ok(k) => k,
            Err(reply) => return out.push(reply),
        };
        match kind {
            Message::Request { method, .. } => {
                let id = msg["id"].clone();
                self.request(id, method, msg, out).await
            }
            Message::Notification { method, .. } => self.notification(method, msg, out).await,
            Message::Response { .. } => {
                let id = &msg["id"];
                let Some((server, original)) = self.asked.remove(&id.to_string()) else {
                    return log(
                        self.level,
                        Level::Info,
                        &format!("an answer to no request of a server's: {id}"),
                    );
                };
                let mut msg = msg.clone();
                msg["id"] = original;
                self.send_to(server, msg, out).await;
            }
        }
    }

    async fn send_to(&mut self, server: usize, msg: Value, out: &mut Vec<String>) {
        let text = msg.to_string();
        match jsonrpc::parse(&text) {
            Ok(m) => self.links[server].send(&m, &text, out).await,
            Err(e) => log(
                self.level,
                Level::Error,
                &format!(
                    "a message for {} is not valid: {}",
                    self.links[server].mcp(),
                    e.message
                ),
            ),
        }
    }

    async fn request(&mut self, id: Value, method: &str, mut msg: Value, out: &mut Vec<String>) {
        let key = id.to_string();
        if self.routed.contains_key(&key) || self.fanouts.contains_key(&key) {
            return out.push(jsonrpc::id_in_flight(&key));
        }
        let params = msg.get("params").cloned().unwrap_or(Value::Null);
        let target = match method {
            method::INITIALIZE | method::SET_LEVEL => {
                return self.fan_out(id, method, params, out).await;
            }
            m if LISTS.iter().any(|(l, _)| *l == m) => {
                if params.get("cursor").is_some_and(|c| !c.is_null()) {
                    return out.push(jsonrpc::error_response(
                        Some(&key),
                        code::INVALID_PARAMS,
                        "invalid cursor: a prefixed endpoint lists everything in one page",
                    ));
                }
                return self.fan_out(id, method, params, out).await;
            }
            method::PING => {
                return out.push(json!({"jsonrpc": "2.0", "id": id, "result": {}}).to_string());
            }
            method::DISCOVER => {
                return out.push(jsonrpc::error_response(
                    Some(&key),
                    code::METHOD_NOT_FOUND,
                    "method not found: server/discover (a prefixed endpoint speaks the \
                     revisions with initialize)",
                ));
            }
            method::TOOLS_CALL | method::PROMPTS_GET => {
                let name = params["name"].as_str().unwrap_or_default();
                self.by_name(name).map(|(i, n)| (i, "name", json!(n)))
            }
            method::RESOURCES_READ
            | method::RESOURCES_SUBSCRIBE
            | method::RESOURCES_UNSUBSCRIBE => {
                let uri = params["uri"].as_str().unwrap_or_default();
                self.by_uri(uri).map(|(i, u)| (i, "uri", json!(u)))
            }
            method::COMPLETE => {
                let r = &params["ref"];
                match r["type"].as_str() {
                    Some("ref/prompt") => self
                        .by_name(r["name"].as_str().unwrap_or_default())
                        .map(|(i, n)| (i, "name", json!(n))),
                    Some("ref/resource") => self
                        .by_uri(r["uri"].as_str().unwrap_or_default())
                        .map(|(i, u)| (i, "uri", json!(u))),
                    _ => None,
                }
            }
            other => {
                return out.push(jsonrpc::error_response(
                    Some(&key),
                    code::METHOD_NOT_FOUND,
                    &format!("method not found: {other} (through a prefixed endpoint)"),
                ));
            }
        };
        let Some((server, member, value)) = target else {
            let servers: Vec<&str> = self.links.iter().map(Link::mcp).collect();
            return out.push(jsonrpc::error_response(
                Some(&key),
                code::INVALID_PARAMS,
                &format!(
                    "{method}: no server of this endpoint has that name; names are prefixed \
                     with a server's name and {SEPARATOR:?} (resources with {URI_PREFIX}SERVER/), \
                     the servers are {servers:?}"
                ),
            ));
        };
        if method == method::COMPLETE {
            msg["params"]["ref"][member] = value;
        } else {
            msg["params"][member] = value;
        }
        self.routed.insert(
            key,
            Routed {
                server,
                method: method.to_owned(),
            },
        );
        self.send_to(server, msg, out).await;
    }

    /// Sends a request to every server that is up, under ids of its own (an `initialize` also
    /// waits for the servers that are down, which answer it when they are back).
    async fn fan_out(&mut self, id: Value, method: &str, params: Value, out: &mut Vec<String>) {
        let key = id.to_string();
        let up: Vec<usize> = (0..self.links.len())
            .filter(|i| self.links[*i].is_up())
            .collect();
        let n = self.links.len();
        self.fanouts.insert(
            key.clone(),
            Fanout {
                id,
                method: method.to_owned(),
                params: params.clone(),
                waiting: up.len(),
                parts: vec![None; n],
            },
        );
        for server in 0..n {
            if up.contains(&server) || method == method::INITIALIZE {
                self.send_part(&key, server, params.clone(), out).await;
            }
        }
        if up.is_empty() {
            let f = self.fanouts.remove(&key).expect("inserted");
            out.push(merged(&f, &[]).to_string());
        }
    }

    async fn send_part(&mut self, key: &str, server: usize, params: Value, out: &mut Vec<String>) {
        let method = self.fanouts[key].method.clone();
        let part = self.fresh_id("part");
        self.parts
            .insert(json!(part).to_string(), (key.to_owned(), server));
        let mut msg = json!({"jsonrpc": "2.0", "id": part, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send_to(server, msg, out).await;
    }

    async fn notification(&mut self, method: &str, msg: Value, out: &mut Vec<String>) {
        match method {
            method::CANCELLED => {
                let key = msg["params"]["requestId"].to_string();
                if let Some(r) = self.routed.get(&key) {
                    let server = r.server;
                    self.send_to(server, msg, out).await;
                } else if self.fanouts.remove(&key).is_some() {
                    let parts: Vec<(String, usize)> = self
                        .parts
                        .iter()
                        .filter(|(_, (k, _))| *k == key)
                        .map(|(p, (_, s))| (p.clone(), *s))
                        .collect();
                    for (part, server) in parts {
                        self.parts.remove(&part);
                        let mut cancel = msg.clone();
                        cancel["params"]["requestId"] =
                            serde_json::from_str(&part).unwrap_or(Value::Null);
                        self.send_to(server, cancel, out).await;
                    }
                }
            }
            _ => {
                if method == method::INITIALIZED {
                    self.initialized = true;
                }
                for server in 0..self.links.len() {
                    self.send_to(server, msg.clone(), out).await;
                }
            }
        }
    }

    /// Handles what [`crate::relay::Relay::wait`] returned.
    pub async fn handle(&mut self, wake: Wake, out: &mut Vec<String>) {
        let mut raw = Vec::new();
        let mut changed = false;
        let touched: Vec<usize> = match wake {
            Wake::Event(i, ev) => {
                // A connection that ends means the server went, or restarted: its lists may
                // differ even when it is back at once.
                let ended = !matches!(
                    ev,
                    Some(ConnectionEvent::Message(_) | ConnectionEvent::Opened)
                );
                changed |= ended;
                self.links[i].on_event(ev, &mut raw).await;
                self.take(i, raw, out).await;
                vec![i]
            }
            Wake::Retry => {
                let now = tokio::time::Instant::now();
                let due: Vec<usize> = (0..self.links.len())
                    .filter(|i| self.links[*i].retry_at().is_some_and(|t| t <= now))
                    .collect();
                for &i in &due {
                    let mut raw = Vec::new();
                    self.links[i].open(&mut raw).await;
                    self.take(i, raw, out).await;
                }
                due
            }
        };
        for i in touched {
            let up = self.links[i].is_up();
            if up != self.present[i] {
                self.present[i] = up;
                changed = true;
                log(
                    self.level,
                    Level::Info,
                    &format!(
                        "{}: {}",
                        self.links[i].mcp(),
                        if up { "back" } else { "gone" }
                    ),
                );
            }
        }
        if changed && self.initialized {
            for method in LIST_CHANGES {
                out.push(jsonrpc::notification(method, None));
            }
        }
    }

    /// Messages of server `server`'s for the client.
    async fn take(&mut self, server: usize, raw: Vec<String>, out: &mut Vec<String>) {
        for text in raw {
            let Ok((kind, mut msg)) = read(&text) else {
                continue;
            };
            match kind {
                Message::Response { .. } => {
                    let key = msg["id"].to_string();
                    if let Some((fanout, _)) = self.parts.remove(&key) {
                        self.part_answered(&fanout, server, msg, out).await;
                    } else if let Some(r) = self.routed.remove(&key) {
                        if let Some(result) = msg.get_mut("result") {
                            prefix_result(self.links[server].mcp(), &r.method, result);
                        }
                        out.push(msg.to_string());
                    }
                }
                Message::Request { .. } => {
                    let id = msg["id"].clone();
                    let ours = self.fresh_id("ask");
                    self.asked.insert(json!(ours).to_string(), (server, id));
                    msg["id"] = json!(ours);
                    out.push(msg.to_string());
                }
                Message::Notification { method, .. } => {
                    let name = self.links[server].mcp().to_owned();
                    let params = msg.get_mut("params");
                    match (method, params) {
                        (method::RESOURCE_UPDATED, Some(p)) => {
                            if let Some(uri) = p["uri"].as_str() {
                                p["uri"] = json!(prefixed_uri(&name, uri));
                            }
                        }
                        (method::MESSAGE, Some(p)) => {
                            let logger = match p["logger"].as_str() {
                                Some(l) => format!("{name}/{l}"),
                                None => name,
                            };
                            p["logger"] = json!(logger);
                        }
                        (method::CANCELLED, Some(p)) => {
                            // The server gave up a request of its own: the client knows it by
                            // the id it got.
                            let theirs = p["requestId"].clone();
                            let ours = self
                                .asked
                                .iter()
                                .find(|(_, (s, id))| *s == server && *id == theirs)
                                .map(|(k, _)| k.clone());
                            match ours {
                                Some(k) => {
                                    self.asked.remove(&k);
                                    p["requestId"] =
                                        serde_json::from_str(&k).unwrap_or(Value::Null);
                                }
                                None => continue,
                            }
                        }
                        _ => {}
                    }
                    out.push(msg.to_string());
                }
            }
        }
    }

    async fn part_answered(&mut self, key: &str, server: usize, msg: Value, out: &mut Vec<String>) {
        let Some(f) = self.fanouts.get_mut(key) else {
            return;
        };
        let name = self.links[server].mcp().to_owned();
        let list = LISTS.iter().find(|(m, _)| *m == f.method).map(|(_, k)| *k);
        match (msg.get("result"), list) {
            (Some(result), Some(member)) => {
                let mut items = result[member].as_array().cloned().unwrap_or_default();
                for item in &mut items {
                    prefix_item(&name, member, item);
                }
                let so_far = match f.parts[server].take() {
                    Some(Ok(Value::Array(mut before))) => {
                        before.extend(items);
                        before
                    }
                    _ => items,
                };
                f.parts[server] = Some(Ok(Value::Array(so_far)));
                if let Some(cursor) = result.get("nextCursor").filter(|c| !c.is_null()) {
                    let mut params = match &f.params {
                        Value::Object(p) => p.clone(),
                        _ => Map::new(),
                    };
                    params.insert("cursor".into(), cursor.clone());
                    return self
                        .send_part(key, server, Value::Object(params), out)
                        .await;
                }
            }
            (Some(result), None) => f.parts[server] = Some(Ok(result.clone())),
            (None, _) => f.parts[server] = Some(Err(msg["error"].clone())),
        }
        f.waiting -= 1;
        if f.waiting > 0 {
            return;
        }
        let f = self.fanouts.remove(key).expect("present");
        let names: Vec<String> = self.links.iter().map(|l| l.mcp().to_owned()).collect();
        out.push(merged(&f, &names).to_string());
    }
}

/// The answer to a fan-out, from its parts.
fn merged(f: &Fanout, names: &[String]) -> Value {
    let ok: Vec<(usize, &Value)> = f
        .parts
        .iter()
        .enumerate()
        .filter_map(|(i, p)| match p {
            Some(Ok(v)) => Some((i, v)),
            _ => None,
        })
        .collect();
    let reply = |result: Value| json!({"jsonrpc": "2.0", "id": f.id, "result": result});
    if ok.is_empty() {
        let error = f
            .parts
            .iter()
            .find_map(|p| match p {
                Some(Err(e)) if e.is_object() => Some(e.clone()),
                _ => None,
            })
            .unwrap_or_else(
                || json!({"code": code::SANDBOX_ERROR, "message": "no server answered"}),
            );
        return json!({"jsonrpc": "2.0", "id": f.id, "error": error});
    }
    if let Some((_, member)) = LISTS.iter().find(|(m, _)| *m == f.method) {
        let items: Vec<Value> = ok
            .iter()
            .flat_map(|(_, v)| v.as_array().cloned().unwrap_or_default())
            .collect();
        return reply(json!({ *member: items }));
    }
    if f.method != method::INITIALIZE {
        return reply(json!({}));
    }
    let any = |cap: &str, key: Option<&str>| {
        ok.iter().any(|(_, r)| {
            let c = &r["capabilities"][cap];
            match key {
                Some(k) => c[k] == json!(true),
                None => c.is_object(),
            }
        })
    };
    let mut caps = json!({
        "tools": {"listChanged": true},
        "prompts": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": any("resources", Some("subscribe"))},
    });
    for cap in ["logging", "completions"] {
        if any(cap, None) {
            caps[cap] = json!({});
        }
    }
    let instructions: Vec<String> = ok
        .iter()
        .filter_map(|(i, r)| {
            r["instructions"]
                .as_str()
                .map(|t| format!("## {}\n\n{t}", names[*i]))
        })
        .collect();
    let mut result = json!({
        "protocolVersion": ok[0].1["protocolVersion"],
        "capabilities": caps,
        "serverInfo": {"name": "mcpgw", "title": format!("mcpgw: {}", names.join(", ")),
                       "version": env!("CARGO_PKG_VERSION")},
    });
    if !instructions.is_empty() {
        result["instructions"] = json!(instructions.join("\n\n"));
    }
    reply(result)
}

/// Prefixes one item of a list (`member` names the list).
fn prefix_item(server: &str, member: &str, item: &mut Value) {
    let (key, uri) = match member {
        "tools" | "prompts" => ("name", false),
        "resources" => ("uri", true),
        _ => ("uriTemplate", true),
    };
    if let Some(v) = item[key].as_str() {
        item[key] = json!(if uri {
            prefixed_uri(server, v)
        } else {
            prefixed_name(server, v)
        });
    }
}

/// Prefixes the resources a result names: the contents read, the links and embedded
/// resources of a tool's result or a prompt's messages.
fn prefix_result(server: &str, method: &str, result: &mut Value) {
    let prefix_uri = |v: &mut Value| {
        if let Some(u) = v.as_str() {
            *v = json!(prefixed_uri(server, u));
        }
    };
    let prefix_block = |block: &mut Value| match block["type"].as_str() {
        Some("resource_link") => prefix_uri(&mut block["uri"]),
        Some("resource") => prefix_uri(&mut block["resource"]["uri"]),
        _ => {}
    };
    match method {
        method::RESOURCES_READ => {
            for c in result["contents"].as_array_mut().into_iter().flatten() {
                prefix_uri(&mut c["uri"]);
            }
        }
        method::TOOLS_CALL => {
            for b in result["content"].as_array_mut().into_iter().flatten() {
                prefix_block(b);
            }
        }
        method::PROMPTS_GET => {
            for m in result["messages"].as_array_mut().into_iter().flatten() {
                prefix_block(&mut m["content"]);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_name_their_resources_prefixed() {
        let mut r = json!({"content": [
            {"type": "text", "text": "x"},
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
            {"type": "resource", "resource": {"uri": "demo://b", "text": "b"}}]});
        prefix_result("fs", "tools/call", &mut r);
        assert_eq!(r["content"][1]["uri"], "mcpgw://fs/file:///a");
        assert_eq!(r["content"][2]["resource"]["uri"], "mcpgw://fs/demo://b");
        let mut t = json!({"uriTemplate": "demo://x/{id}", "name": "X"});
        prefix_item("ev", "resourceTemplates", &mut t);
        assert_eq!(t["uriTemplate"], "mcpgw://ev/demo://x/{id}");
        let mut tool = json!({"name": "read_file"});
        prefix_item("fs", "tools", &mut tool);
        assert_eq!(tool["name"], "fs__read_file");
    }
}
