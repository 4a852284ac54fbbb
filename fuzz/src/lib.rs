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
//!   relayed under another id with its params, result or error byte for byte;
//! - `host`: the host driver's inputs (configuration, operations, channel bytes, exits, time,
//!   connection messages) as a binding or a C caller gives them;
//! - `endpoint`: what a client sends `mcpgw mcp` (stdin bytes, an HTTP request's body and
//!   headers), through the endpoint's own checks.

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
    ("host", host),
    ("endpoint", endpoint),
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
    match jsonrpc::parse(text) {
        Ok(Message::Request { method, params, .. }) => {
            let again = jsonrpc::request("\"g-1\"", method, params.map(|p| p.get()));
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
            let again = jsonrpc::notification(method, params.map(|p| p.get()));
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
            let again = jsonrpc::response(Some("7"), body);
            let Ok(Message::Response { id, outcome: o }) = jsonrpc::parse(&again) else {
                panic!("a relayed response does not read back: {again}")
            };
            assert_eq!(id.get(), "7");
            assert_eq!(o.map(|r| r.get()).map_err(|e| e.get()), body);
        }
        Err(invalid) => {
            let answer = invalid.answer();
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

/// The host driver from outside, as a binding or a C caller drives it: a configuration and
/// operations as JSON, then a script of what the host reports (channel bytes, stderr, exits,
/// time) and what it asks (connections, messages, cancels), in NUL-separated steps. Whatever
/// they are, nothing panics, every operation accepted gets exactly one DONE, every connection
/// opened exactly one CONNECTION_CLOSED, and once every process has ended and time has run
/// out, nothing is left in flight.
pub fn host(data: &[u8]) {
    use mcpgw::driver::{Action, Exit, Host, HostConfig};
    use std::collections::{BTreeMap, VecDeque};
    use std::time::Instant;

    let mut steps = data.split(|&b| b == 0);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let config = steps
        .next()
        .and_then(|c| HostConfig::from_json(&text(c)).ok())
        .unwrap_or_else(|| {
            HostConfig::from_json(
                r#"{"backend":{"kind":"local"},"port":41000,"token_file":"/t","transport":"built_in"}"#,
            )
            .expect("a valid configuration")
        });
    let Ok(mut host) = Host::new(config) else {
        return;
    };
    let mut now = Instant::now();
    let mut ops: BTreeMap<u64, usize> = BTreeMap::new();
    let mut conns: BTreeMap<u64, usize> = BTreeMap::new();
    let mut running: VecDeque<u64> = VecDeque::new();
    let mut channel: Option<u64> = None;
    let collect = |host: &mut Host,
                   ops: &mut BTreeMap<u64, usize>,
                   conns: &mut BTreeMap<u64, usize>,
                   running: &mut VecDeque<u64>,
                   channel: &mut Option<u64>| {
        while let Some(action) = host.poll_action() {
            match action {
                Action::Run { proc, .. } => running.push_back(proc),
                Action::Open { proc, .. } => *channel = Some(proc),
                Action::Kill { proc } => running.push_front(proc),
                Action::Done { op, .. } => {
                    let n = ops.get_mut(&op).expect("a DONE for an operation submitted");
                    *n += 1;
                    assert_eq!(*n, 1, "operation {op} finished twice");
                }
                Action::ConnectionClosed { conn, .. } => {
                    let n = conns
                        .get_mut(&conn)
                        .expect("a close for a connection opened");
                    *n += 1;
                    assert_eq!(*n, 1, "connection {conn} closed twice");
                }
                Action::ConnectionOpened { conn } | Action::ConnectionMessage { conn, .. } => {
                    assert!(
                        conns.contains_key(&conn),
                        "connection {conn} was never opened"
                    );
                }
                Action::Progress { op, .. } => {
                    assert!(ops.contains_key(&op), "progress of an unknown operation")
                }
                Action::Write { .. }
                | Action::CloseInput { .. }
                | Action::Notice(_)
                | Action::Audit(_) => {}
            }
        }
    };
    for step in steps {
        let (what, rest) = step.split_first().unwrap_or((&b'd', &[]));
        match what {
            b's' => {
                if let Ok(id) = host.submit_json(&text(rest), now) {
                    ops.insert(id, 0);
                }
            }
            b'o' => {
                // A step "o" then anything asks for an upstream session of its own.
                if let Ok(id) = host.open_connection("m", "", "", !rest.is_empty(), now) {
                    conns.insert(id, 0);
                }
            }
            b'm' => {
                if let Some(&conn) = conns.keys().next_back() {
                    let _ = host.send(conn, &text(rest), now);
                }
            }
            b'k' => {
                if let Some(&conn) = conns.keys().next() {
                    host.close_connection(conn, now);
                }
            }
            b'c' => {
                if let Some(&op) = ops.keys().next_back() {
                    host.cancel(op, now);
                }
            }
            b'e' => {
                if let Some(proc) = channel {
                    host.on_stderr(proc, rest, now);
                }
            }
            b'x' => {
                if let Some(proc) = running.pop_front() {
                    let (code, stdout) = rest.split_first().unwrap_or((&0, &[]));
                    let exit = Exit::Exited {
                        code: i32::from(*code),
                        stdout: stdout.to_vec(),
                        stderr: Vec::new(),
                    };
                    host.on_exit(proc, exit, now);
                }
            }
            b'f' => {
                if let Some(proc) = running.pop_front() {
                    host.on_exit(proc, Exit::Failed(text(rest)), now);
                }
            }
            b't' => {
                now += Duration::from_millis(u64::from(rest.first().copied().unwrap_or(1)) * 100);
                host.on_timeout(now);
            }
            _ => {
                if let Some(proc) = channel {
                    host.on_data(proc, rest, now);
                }
            }
        }
        collect(&mut host, &mut ops, &mut conns, &mut running, &mut channel);
    }
    // Everything ends: the channel, every process; then time runs out.
    for _ in 0..1000 {
        if let Some(proc) = channel.take() {
            host.on_eof(proc, now);
            host.on_exit(proc, Exit::code(137), now);
        } else if let Some(proc) = running.pop_front() {
            host.on_exit(proc, Exit::code(137), now);
        } else if host.in_flight() > 0 {
            now += Duration::from_secs(3600);
            host.on_timeout(now);
        } else {
            break;
        }
        collect(&mut host, &mut ops, &mut conns, &mut running, &mut channel);
    }
    assert_eq!(host.in_flight(), 0, "left in flight: {}", host.state_json());
    assert!(
        ops.values().all(|&n| n == 1),
        "an operation never finished: {ops:?}"
    );
    assert!(
        conns.values().all(|&n| n == 1),
        "a connection never closed: {conns:?}"
    );
}

/// What a client sends `mcpgw mcp`, up to the first NUL as stdin bytes (in pieces, against a
/// small line limit) and after it as an HTTP POST (`Name: value` header lines, an empty line,
/// the body): every stdin line is either a message the endpoint relays or exactly one JSON-RPC
/// error for its client, and every body is either one valid message or a JSON-RPC error that
/// names no other request's id; the 2026-07-28 header check answers without panicking.
pub fn endpoint(data: &[u8]) {
    use mcpgw::wire::jsonrpc;
    use mcpgw::wire::lines::Splitter;
    use mcpgw_cli::endpoint::message_of;
    use mcpgw_cli::http::{header_mismatch, read_message};

    let is_error = |text: &str| {
        let v: serde_json::Value = serde_json::from_str(text).expect("a refusal is JSON");
        assert!(v["error"]["code"].is_i64(), "{text}");
        assert_eq!(v["jsonrpc"], "2.0");
    };
    let (stdin, http) = split(data, 0);
    const MAX: usize = 256;
    let mut lines = Splitter::new(MAX);
    let cut = stdin
        .first()
        .map_or(0, |&b| usize::from(b).min(stdin.len()));
    let mut seen = Vec::new();
    for piece in [&stdin[..cut], &stdin[cut..], &[][..]] {
        seen.extend(lines.lines(piece));
    }
    for line in seen {
        match message_of(line, MAX) {
            Ok(text) if text.trim().is_empty() => {}
            Ok(text) => {
                if let Err(invalid) = jsonrpc::parse(&text) {
                    is_error(&invalid.answer());
                }
            }
            Err(refusal) => is_error(&refusal),
        }
    }
    let (head, body) = match http.windows(2).position(|w| w == b"\n\n") {
        Some(at) => (&http[..at], &http[at + 2..]),
        None => (&[][..], http),
    };
    let request = http_request(head);
    match read_message(body) {
        Ok((text, msg)) => {
            let whole: serde_json::Value = serde_json::from_str(text).expect("a message is JSON");
            if let jsonrpc::Message::Request { method, .. }
            | jsonrpc::Message::Notification { method, .. } = msg
            {
                let _ = header_mismatch(&request, method, &whole);
            }
        }
        Err(refusal) => is_error(&refusal),
    }
}

/// A request whose headers are the `Name: value` lines of `head` (lines that are not a valid
/// header are left out).
fn http_request(head: &[u8]) -> http::Request<()> {
    let mut request = http::Request::new(());
    for line in head.split(|&b| b == b'\n') {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(name),
            http::header::HeaderValue::from_bytes(value),
        ) {
            request.headers_mut().append(name, value);
        }
    }
    request
}
