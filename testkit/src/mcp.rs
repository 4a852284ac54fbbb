//! An MCP client for tests, at the JSON-RPC level, over two kinds of pipe: straight to a stdio
//! server's process (the reference), or through a session channel (`mcpgw-gateway attach`
//! started by any command: a local process, `nsenter`, `docker exec -i`) as a virtual MCP
//! connection. The same script sent over both gives answers to compare.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::{Gateway, attach_command};

/// How long any single expected message may take.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Lines of a child's stdout, as JSON values, on a thread.
fn json_lines(stdout: impl std::io::Read + Send + 'static) -> mpsc::Receiver<Value> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(v) => {
                    if tx.send(v).is_err() {
                        return;
                    }
                }
                Err(e) => eprintln!("not JSON ({e}): {line}"),
            }
        }
    });
    rx
}

/// A session channel: `attach`'s frames over a child's stdin and stdout.
pub struct Channel {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<Value>,
    /// Frames read while waiting for others.
    stash: VecDeque<Value>,
    /// The hello frame.
    pub hello: Value,
}

impl Channel {
    /// Runs `command` (which runs `mcpgw-gateway attach ...` somewhere) and waits for the hello.
    pub fn start(mut command: Command) -> Channel {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let frames = json_lines(child.stdout.take().unwrap());
        let stdin = child.stdin.take();
        let mut channel = Channel {
            child,
            stdin,
            frames,
            stash: VecDeque::new(),
            hello: Value::Null,
        };
        loop {
            let frame = channel.next(LIMIT).expect("a hello frame");
            if frame["t"] == "hello" {
                channel.hello = frame;
                return channel;
            }
        }
    }

    /// Writes one frame.
    pub fn send(&mut self, frame: &Value) {
        let mut line = serde_json::to_vec(frame).unwrap();
        line.push(b'\n');
        self.stdin.as_mut().unwrap().write_all(&line).unwrap();
        self.stdin.as_mut().unwrap().flush().unwrap();
    }

    /// Writes raw bytes (for hostile input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stdin.as_mut().unwrap().write_all(bytes).unwrap();
    }

    fn next(&mut self, limit: Duration) -> Option<Value> {
        self.stash
            .pop_front()
            .or_else(|| self.frames.recv_timeout(limit).ok())
    }

    /// The next frame for `id` (others are kept for later), within [`LIMIT`].
    pub fn next_for(&mut self, id: u64) -> Value {
        if let Some(at) = self.stash.iter().position(|f| f["id"] == id) {
            return self.stash.remove(at).unwrap();
        }
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self
                .frames
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no frame for id {id} within {LIMIT:?}"));
            if frame["id"] == id {
                return frame;
            }
            self.stash.push_back(frame);
        }
    }

    /// The next frame, whatever its id, within [`LIMIT`].
    pub fn next_for_any(&mut self) -> Value {
        self.next(LIMIT).expect("a frame")
    }

    /// Opens a virtual MCP connection to `mcp` (default scope) under `id`; its `opened` or
    /// final frame.
    pub fn open(&mut self, id: u64, mcp: &str) -> Value {
        self.send(&json!({"t": "open", "id": id,
            "path": format!("/mcps/{mcp}/connection?agent_id=&session_id=")}));
        self.next_for(id)
    }

    /// Ends input and waits for attach to exit.
    pub fn finish(mut self) -> std::process::ExitStatus {
        self.stdin.take();
        crate::wait_child(&mut self.child, LIMIT)
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where an MCP client's messages go and come from.
pub enum Pipe {
    /// A stdio server's own stdin and stdout.
    Direct {
        /// The server.
        child: Child,
        /// Its stdin (`None` once closed).
        stdin: Option<ChildStdin>,
        /// Its stdout, line by line.
        lines: mpsc::Receiver<Value>,
    },
    /// A virtual connection of a channel.
    Connection {
        /// The channel.
        channel: Channel,
        /// The connection's frame id.
        id: u64,
    },
}

impl Drop for Pipe {
    fn drop(&mut self) {
        if let Pipe::Direct { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A local `mcpgw-gateway attach` to `gw`, as a session channel.
pub fn attach_channel(gw: &Gateway) -> Channel {
    let token_file = gw.dir.path("state/token").display().to_string();
    Channel::start(attach_command(&[
        "--port",
        &gw.port.to_string(),
        "--token-file",
        &token_file,
    ]))
}

/// A virtual MCP connection of `channel` to `mcp`, under id 1: opened, not yet initialized.
pub fn open_connection(mut channel: Channel, mcp: &str) -> Client {
    let opened = channel.open(1, mcp);
    assert_eq!(opened["t"], "opened", "{opened}");
    Client::over(Pipe::Connection { channel, id: 1 })
}

/// A virtual MCP connection to `gw`'s `mcp` through a local attach: opened, not yet initialized.
pub fn connect(gw: &Gateway, mcp: &str) -> Client {
    open_connection(attach_channel(gw), mcp)
}

/// The `_meta` of the requests of a host of revision `version` (2026-07-28 on) that declares
/// `capabilities`.
pub fn host_meta(version: &str, capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgw-test", "version": "1"},
    })
}

/// The names in a JSON array of tools (`tools/list`'s `tools`, `GET /mcps/{name}/tools`'s answer).
pub fn tool_names(tools: &Value) -> Vec<&str> {
    strings_at(tools, "name")
}

/// The string member `key` of each object of the JSON array `list`, in order.
pub fn strings_at<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|item| {
            item[key]
                .as_str()
                .unwrap_or_else(|| panic!("no string {key} in {item}"))
        })
        .collect()
}

/// How the client answers its server's requests.
pub fn answer(method: &str, params: &Value) -> Value {
    match method {
        "sampling/createMessage" => json!({
            "role": "assistant", "model": "test-model", "stopReason": "endTurn",
            "content": {"type": "text", "text": format!("sampled: {}",
                params["messages"][0]["content"]["text"].as_str().unwrap_or_default())},
        }),
        "elicitation/create" if params["mode"] == "url" => json!({"action": "accept"}),
        "elicitation/create" => json!({"action": "accept", "content": {
            "name": "Ada", "color": "red", "email": "ada@example.com", "age": 36,
            "check": true, "firstLine": "x", "integer": 3, "number": 2.5,
            "untitledSingleSelectEnum": "option1", "untitledMultipleSelectEnum": ["option1"],
            "titledSingleSelectEnum": "value1", "titledMultipleSelectEnum": ["value1"],
            "legacyTitledEnum": "opt1"}}),
        "roots/list" => json!({"roots": [{"uri": "file:///work", "name": "work"}]}),
        "ping" => json!({}),
        other => panic!("the test client was asked {other}"),
    }
}

/// A JSON-RPC MCP client over a [`Pipe`].
pub struct Client {
    /// Where its messages go.
    pub pipe: Pipe,
    next_id: u64,
    /// Notifications received, in order.
    pub notifications: Vec<Value>,
    /// Requests of the server's it answered, in order.
    pub asked: Vec<Value>,
}

impl Client {
    /// Straight to the stdio server `command`.
    pub fn direct(command: Command) -> Client {
        Client::direct_with_stderr(command, Stdio::null())
    }

    /// Straight to the stdio server `command`, whose stderr goes to `stderr`.
    pub fn direct_with_stderr(mut command: Command, stderr: impl Into<Stdio>) -> Client {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let lines = json_lines(child.stdout.take().unwrap());
        let stdin = child.stdin.take().unwrap();
        Client::over(Pipe::Direct {
            child,
            stdin: Some(stdin),
            lines,
        })
    }

    /// Writes raw bytes to a stdio server (for hostile input).
    pub fn send_raw(&mut self, bytes: &[u8]) {
        match &mut self.pipe {
            Pipe::Direct { stdin, .. } => {
                let stdin = stdin.as_mut().expect("input not closed");
                stdin.write_all(bytes).unwrap();
                stdin.flush().unwrap();
            }
            Pipe::Connection { channel, .. } => channel.send_raw(bytes),
        }
    }

    /// Closes a stdio server's input, as a client that ends does, and waits for it to exit.
    pub fn finish(&mut self, limit: Duration) -> std::process::ExitStatus {
        let Pipe::Direct { child, stdin, .. } = &mut self.pipe else {
            panic!("finish is for a stdio server")
        };
        stdin.take();
        crate::wait_child(child, limit)
    }

    /// Over `pipe`.
    pub fn over(pipe: Pipe) -> Client {
        Client {
            pipe,
            next_id: 0,
            notifications: Vec::new(),
            asked: Vec::new(),
        }
    }

    /// Sends one message.
    pub fn send(&mut self, message: &Value) {
        match &mut self.pipe {
            Pipe::Direct { stdin, .. } => {
                let mut line = serde_json::to_vec(message).unwrap();
                line.push(b'\n');
                let stdin = stdin.as_mut().expect("input not closed");
                stdin.write_all(&line).unwrap();
                stdin.flush().unwrap();
            }
            Pipe::Connection { channel, id } => {
                let id = *id;
                channel.send(&json!({"t": "msg", "id": id, "msg": message}));
            }
        }
    }

    /// The next message from the server; panics when the connection ended.
    pub fn receive(&mut self, limit: Duration) -> Option<Value> {
        match &mut self.pipe {
            Pipe::Direct { lines, .. } => lines.recv_timeout(limit).ok(),
            Pipe::Connection { channel, id } => {
                let id = *id;
                let deadline = Instant::now() + limit;
                if let Some(at) = channel.stash.iter().position(|f| f["id"] == id) {
                    let frame = channel.stash.remove(at).unwrap();
                    return Some(unwrap_msg(frame));
                }
                loop {
                    let left = deadline.checked_duration_since(Instant::now())?;
                    let frame = channel.frames.recv_timeout(left).ok()?;
                    if frame["id"] == id {
                        return Some(unwrap_msg(frame));
                    }
                    channel.stash.push_back(frame);
                }
            }
        }
    }

    /// Handles one message of the server's that is not an answer to `id`: answers a request,
    /// keeps a notification.
    fn other(&mut self, message: Value) {
        if message.get("method").is_some() && message.get("id").is_some() {
            let method = message["method"].as_str().unwrap().to_string();
            let result = answer(&method, &message["params"]);
            self.asked.push(message.clone());
            self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": result}));
        } else {
            self.notifications.push(message);
        }
    }

    /// Sends a request and returns its answer (the whole response), answering what the server
    /// asks meanwhile.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.send(&message);
        self.wait_for(id)
    }

    /// Waits for the answer to request `id`.
    pub fn wait_for(&mut self, id: u64) -> Value {
        self.answer_to(&json!(id))
    }

    /// Waits for the answer whose id is `id` (`null` for an answer to what could not be
    /// read), keeping what the server announces meanwhile and answering what it asks.
    pub fn answer_to(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .receive(left)
                .unwrap_or_else(|| panic!("no answer to request {id} within {LIMIT:?}"));
            if message["id"] == *id && message.get("method").is_none() {
                return message;
            }
            self.other(message);
        }
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            message["params"] = params;
        }
        self.send(&message);
    }

    /// Waits until a notification `method` arrived (answering requests meanwhile); it, or
    /// `None` after `limit`.
    pub fn notification(&mut self, method: &str, limit: Duration) -> Option<Value> {
        if let Some(at) = self
            .notifications
            .iter()
            .position(|n| n["method"] == method)
        {
            return Some(self.notifications.remove(at));
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.receive(left)?;
            if message["method"] == method && message.get("id").is_none() {
                return Some(message);
            }
            self.other(message);
        }
    }

    /// Waits until the server asked `method` (answering it and what else it asks); whether
    /// it did within `limit`.
    pub fn asked_for(&mut self, method: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.asked.iter().any(|m| m["method"] == method) {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            let Some(message) = self.receive(left) else {
                return false;
            };
            self.other(message);
        }
        true
    }

    /// The next id a request gets.
    pub fn peek_id(&self) -> u64 {
        self.next_id + 1
    }

    /// Takes an id for a request sent by hand.
    pub fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

fn unwrap_msg(frame: Value) -> Value {
    match frame["t"].as_str() {
        Some("msg") => frame["msg"].clone(),
        _ => panic!("the connection ended: {frame}"),
    }
}

/// `value` without what differs between two runs of the same exchange: ids, and the values
/// of members named like times.
pub fn normalized(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "id" && *k != "jsonrpc")
                .map(|(k, v)| {
                    let timey = ["timestamp", "time", "createdAt", "lastUpdatedAt", "date"]
                        .iter()
                        .any(|t| k.eq_ignore_ascii_case(t));
                    let v = match (k.as_str(), v) {
                        _ if timey => json!("<time>"),
                        // A blob's bytes may hold a time too.
                        ("blob", Value::String(b)) => {
                            use base64::Engine as _;
                            match base64::engine::general_purpose::STANDARD.decode(b) {
                                Ok(bytes) => json!(format!(
                                    "<base64 of {}>",
                                    mask_times(&String::from_utf8_lossy(&bytes))
                                )),
                                Err(_) => v.clone(),
                            }
                        }
                        _ => normalized(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        Value::String(text) => Value::String(mask_times(text)),
        other => other.clone(),
    }
}

/// `text` with clock times (`9:05:58`, `21:05:58.123`, with ` AM`/` PM`) as `<time>`.
fn mask_times(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let digits = |at: usize| b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
    while i < b.len() {
        let h = digits(i);
        let is_time = (1..=2).contains(&h)
            && (i == 0 || !b[i - 1].is_ascii_digit())
            && b.get(i + h) == Some(&b':')
            && digits(i + h + 1) == 2
            && b.get(i + h + 3) == Some(&b':')
            && digits(i + h + 4) == 2;
        if is_time {
            let mut end = i + h + 6;
            if b.get(end) == Some(&b'.') {
                end += 1 + digits(end + 1);
            }
            for suffix in [" AM", " PM"] {
                if text[end..].starts_with(suffix) {
                    end += suffix.len();
                }
            }
            out.push_str("<time>");
            i = end;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
