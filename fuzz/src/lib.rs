//! The bodies of the fuzz targets, shared by the `cargo fuzz` binaries (`make fuzz`) and the
//! corpus replay that `make test` runs (`tests/corpus.rs`). Each takes arbitrary bytes and checks
//! what must hold for any input: nothing panics, and the property of the target.
//!
//! - `response`: what a sandbox command prints, decoded by every operation;
//! - `chunk`: a ToolChunk from JSON, its accessors and its round trip;
//! - `quote`: the quoting property, through a real `sh`: what the shell reads back is the input;
//! - `frame`: the session channel's frames, parsed and re-encoded;
//! - `stream`: the bytes of a session channel (chunk frames of streamed calls included) fed to a
//!   session carrying calls;
//! - `spec`: an MCP spec through the validator the gateway and the library share;
//! - `request`: the gateway's request decoding: a registration body, a call body, runtime
//!   headers and a query string;
//! - `jsonrpc`: a host's JSON-RPC message on a virtual MCP connection, as the gateway reads it
//!   (alone, and inside a `msg` frame): classified, answered when it is not a message, and
//!   relayed under another id with its params, result or error byte for byte.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mcpgw::session::{Event, Session};
use mcpgw::wire::frame::{GatewayFrame, HostFrame};
use mcpgw::wire::{McpSpec, ToolChunk};
use mcpgw::{CallOptions, Client, Config, ExecOutput, Operation, Output, Transport};

/// A target's body.
pub type Target = fn(&[u8]);

/// Every target by name.
pub const TARGETS: &[(&str, Target)] = &[
    ("response", response),
    ("chunk", chunk),
    ("quote", quote),
    ("frame", frame),
    ("stream", stream),
    ("spec", spec),
    ("request", request),
    ("jsonrpc", jsonrpc),
];

fn attached() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        Client::new(Config {
            port: 5600,
            token_file: Some("/run/mcpgw/token".into()),
            transport: Some(Transport::BuiltIn),
            max_command_bytes: mcpgw::client::MIN_MAX_COMMAND_BYTES,
            ..Config::default()
        })
        .expect("a valid configuration")
    })
}

fn ops(client: &Client, which: u8) -> Operation<Output> {
    let o = CallOptions::default();
    match which % 8 {
        0 => client.prepare_health(&o).erase(),
        1 => client.prepare_list_mcps(&o).erase(),
        2 => client
            .prepare_add_mcp(
                &o,
                r#"{"name":"m","mcp_config":{"type":"stdio_mcp","command":"x"}}"#,
            )
            .erase(),
        3 => client.prepare_remove_mcp(&o, "m").erase(),
        4 => client.prepare_list_tools(&o, "m").erase(),
        5 => client.prepare_call_tool(&o, "m", "t", r#"{"a":1}"#).erase(),
        6 => client
            .prepare_set_runtime_headers(&o, "m", r#"{"X-Key":"v"}"#)
            .erase(),
        _ => client
            .prepare_ensure_gateway_binary(&o, Arc::from(&b"\x7fELF binary"[..]))
            .erase(),
    }
}

/// Splits `data` at the first `sep` byte.
fn split(data: &[u8], sep: u8) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == sep) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// `data`: an op selector, an exit status, then stdout and stderr separated by 0xff, several
/// rounds separated by 0xfe. Every pending command takes its round; the op ends with a result
/// or an error that says something, never a panic.
pub fn response(data: &[u8]) {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let mut op = ops(attached(), which);
    let mut rounds = rest.split(|&b| b == 0xfe);
    while op.command().is_some() {
        let Some(round) = rounds.next() else { break };
        let (code, output) = round.split_first().map_or((0, round), |(c, r)| (*c, r));
        let (stdout, stderr) = split(output, 0xff);
        let out = ExecOutput {
            exit_code: i32::from(code) - 1,
            stdout: stdout.to_vec(),
            stderr: stderr.to_vec(),
        };
        op.complete(Ok(out))
            .expect("a pending command takes its output");
    }
    if let Some(Err(e)) = op.outcome() {
        assert!(!e.message().is_empty());
    }
}

/// A ToolChunk from JSON: its accessors answer, its data decodes or says why, and it
/// re-serializes to an equal chunk.
pub fn chunk(data: &[u8]) {
    let Ok(chunk) = serde_json::from_slice::<ToolChunk>(data) else {
        return;
    };
    let _ = chunk.progress();
    let _ = chunk.stream_failure();
    for block in &chunk.content {
        if let mcpgw::wire::Block::Data(d) = block {
            let _ = d.source.media_type();
            if let Some(Err(e)) = d.source.decode() {
                assert!(e.contains("base64"));
            }
        }
    }
    let text = serde_json::to_string(&chunk).expect("a chunk serializes");
    let again: ToolChunk = serde_json::from_str(&text).expect("what it wrote parses");
    assert_eq!(again, chunk);
}

/// The quoting property: `printf '%s' QUOTED` in a real `sh` prints the input, whatever it
/// holds; text with NUL (which no argv can carry) is refused.
pub fn quote(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(quoted) = mcpgw::quote::quote(&text) else {
        assert!(text.contains('\0'));
        return;
    };
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' {quoted}"))
        .output()
        .expect("sh runs");
    assert!(out.status.success());
    assert_eq!(out.stdout, text.as_bytes(), "{quoted}");
}

/// Frames: what parses re-encodes to one line that parses to the same encoding.
pub fn frame(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(f) = HostFrame::parse(text) {
        let mut once = Vec::new();
        f.encode(&mut once);
        assert_eq!(once.iter().filter(|&&b| b == b'\n').count(), 1);
        let again = HostFrame::parse(std::str::from_utf8(&once).unwrap()).expect("re-parses");
        let mut twice = Vec::new();
        again.encode(&mut twice);
        assert_eq!(once, twice);
    }
    if let Ok(f) = GatewayFrame::parse(text) {
        let mut once = Vec::new();
        f.encode(&mut once);
        assert_eq!(once.iter().filter(|&&b| b == b'\n').count(), 1);
        let again = GatewayFrame::parse(std::str::from_utf8(&once).unwrap()).expect("re-parses");
        let mut twice = Vec::new();
        again.encode(&mut twice);
        assert_eq!(once, twice);
    }
}

/// A session carrying a streamed call and a listing takes any bytes from its channel (in two
/// pieces, then its end): it reports only the operations it carries, each finished once, and
/// ends lost.
pub fn stream(data: &[u8]) {
    let client = attached();
    let (mut session, _) = Session::open(client).expect("a session");
    let o = CallOptions {
        timeout: Some(Duration::from_secs(5)),
        ..CallOptions::default()
    };
    let mut call = client.prepare_call_tool(&o, "m", "slow", "{}");
    let mut list = client.prepare_list_tools(&o, "m");
    let ids = [
        session
            .submit(&mut call, true, Some(mcpgw::wire::frame::CallId::random()))
            .expect("submits"),
        session.submit(&mut list, false, None).expect("submits"),
    ];
    let cut = data.first().map_or(0, |&b| usize::from(b).min(data.len()));
    session.feed(&data[..cut]);
    session.feed(&data[cut..]);
    session.feed_eof("the fuzz input ended");
    let mut finished = Vec::new();
    while let Some(event) = session.poll_event() {
        match event {
            Event::Progress { id, chunk } => {
                assert_eq!(id, ids[0]);
                let chunk: mcpgw::wire::ToolChunk =
                    serde_json::from_str(chunk.get()).expect("a progress chunk is a ToolChunk");
                assert!(!chunk.is_last);
            }
            Event::Detached { id, .. } => {
                assert!(id == ids[0] && !finished.contains(&id));
                finished.push(id);
            }
            Event::Finished { id, answer } => {
                assert!(ids.contains(&id) && !finished.contains(&id));
                finished.push(id);
                if id == ids[0] {
                    call.deliver(answer);
                } else {
                    list.deliver(answer);
                }
            }
            Event::Unsent { id } => {
                assert!(ids.contains(&id) && !finished.contains(&id));
                finished.push(id);
            }
            Event::Opened(_)
            | Event::Notice(_)
            | Event::Lost(_)
            | Event::ConnectionOpened { .. }
            | Event::ConnectionMessage { .. }
            | Event::ConnectionClosed { .. } => {}
        }
    }
    assert!(session.is_lost());
    assert_eq!(finished.len(), 2);
}

/// An MCP spec: the validator answers; what it accepts re-serializes to an equal spec, and
/// names and timeouts within the limits the wire contract states.
pub fn spec(data: &[u8]) {
    let Ok(spec) = serde_json::from_slice::<McpSpec>(data) else {
        return;
    };
    let headers = std::collections::BTreeMap::from([("X-Key".to_string(), "v".to_string())]);
    let _ = spec.check_runtime_headers(&headers);
    let _ = spec.lists_tool("t");
    if spec.validate().is_ok() {
        assert!(mcpgw::wire::is_valid_name(&spec.name));
        if let Some(t) = spec.execution_timeout {
            assert!(t > 0.0 && t <= mcpgw::wire::spec::MAX_TIMEOUT_SECS);
        }
        let _ = spec.execution_timeout();
        let text = serde_json::to_string(&spec).expect("a spec serializes");
        let again: McpSpec = serde_json::from_str(&text).expect("what it wrote parses");
        assert_eq!(again, spec);
    }
}

/// The gateway's request decoding: the first byte picks a registration body, a call body,
/// runtime headers or a query string. A decoded registration passes the validator; every
/// refusal says what is wrong.
pub fn request(data: &[u8]) {
    use mcpgw::wire::request;
    let Some((&which, body)) = data.split_first() else {
        return;
    };
    match which % 4 {
        0 => match request::registration(body) {
            Ok(r) => {
                assert!(r.spec.validate().is_ok());
                assert!(!r.spec.extra.contains_key("runtime_headers"));
            }
            Err(e) => assert!(!e.is_empty()),
        },
        1 => {
            if let Err(e) = request::call_body(body) {
                assert!(!e.is_empty());
            }
        }
        2 => {
            if let Err(e) = request::runtime_headers(body) {
                assert!(!e.is_empty());
            }
        }
        _ => {
            if let Ok(q) = request::query(&String::from_utf8_lossy(body))
                && let Ok(Some(t)) = q.timeout()
            {
                assert!(t.as_secs_f64() <= mcpgw::wire::spec::MAX_TIMEOUT_SECS);
            }
        }
    }
}

/// A host's JSON-RPC message (or a `msg` frame carrying it): what the gateway relays keeps its
/// bytes under the new id; what it refuses gets an error response that reads back with the id
/// it could read.
pub fn jsonrpc(data: &[u8]) {
    use mcpgw::wire::jsonrpc::{self, Message};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let message_of_frame;
    let text = match HostFrame::parse(text) {
        Ok(HostFrame::Message { msg, .. }) => {
            message_of_frame = msg.get().to_string();
            &message_of_frame
        }
        _ => text,
    };
    let reread = |bytes: Vec<u8>| String::from_utf8(bytes).expect("JSON text is UTF-8");
    match jsonrpc::parse(text) {
        Ok(Message::Request { method, params, .. }) => {
            let again = reread(jsonrpc::request("\"g-1\"", method, params.map(|p| p.get())));
            let Ok(Message::Request {
                id,
                method: m,
                params: p,
            }) = jsonrpc::parse(&again)
            else {
                panic!("a relayed request does not read back: {again}")
            };
            assert_eq!((id.get(), m), ("\"g-1\"", method));
            assert_eq!(p.map(|p| p.get()), params.map(|p| p.get()));
        }
        Ok(Message::Notification { method, params }) => {
            let again = reread(jsonrpc::notification(method, params.map(|p| p.get())));
            let Ok(Message::Notification {
                method: m,
                params: p,
            }) = jsonrpc::parse(&again)
            else {
                panic!("a relayed notification does not read back: {again}")
            };
            assert_eq!(m, method);
            assert_eq!(p.map(|p| p.get()), params.map(|p| p.get()));
        }
        Ok(Message::Response { outcome, .. }) => {
            let body = outcome.map(|r| r.get()).map_err(|e| e.get());
            let again = reread(jsonrpc::response(Some("7"), body));
            let Ok(Message::Response { id, outcome: o }) = jsonrpc::parse(&again) else {
                panic!("a relayed response does not read back: {again}")
            };
            assert_eq!(id.get(), "7");
            assert_eq!(o.map(|r| r.get()).map_err(|e| e.get()), body);
        }
        Err(invalid) => {
            let answer = reread(jsonrpc::error_response(
                invalid.id.map(|i| i.get()),
                invalid.code,
                &invalid.message,
            ));
            let value: serde_json::Value =
                serde_json::from_str(&answer).expect("an answer is JSON");
            assert_eq!(value["error"]["code"], invalid.code);
            match invalid.id {
                Some(id) => assert_eq!(
                    value["id"].to_string(),
                    serde_json::from_str::<serde_json::Value>(id.get())
                        .unwrap()
                        .to_string()
                ),
                None => assert!(value["id"].is_null()),
            }
        }
    }
}
