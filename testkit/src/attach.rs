//! `mcpgw-gateway attach` driven the way a host drives it: frames written to its stdin, every
//! line of its stdout read as a frame as it arrives (with when), requests matched to their
//! answers by id. The channel is any command whose stdin and stdout reach an attach: the local
//! binary, or `docker exec -i CONTAINER mcpgw-gateway attach ...`.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::gateway::{Gateway, start_gateway};
use crate::process::{wait_child, wait_gone};
use crate::servers::{gateway_bin, testserver_stdio};

/// How long any single expected event may take before a test fails.
pub const LIMIT: Duration = Duration::from_secs(20);

/// One line attach wrote, when it arrived.
#[derive(Debug, Clone)]
pub struct Frame {
    /// When it arrived.
    pub at: Instant,
    /// The frame.
    pub value: Value,
}

impl Frame {
    /// Its type, `t`.
    pub fn t(&self) -> &str {
        self.value["t"].as_str().unwrap_or_default()
    }

    /// Its id, when it has one.
    pub fn id(&self) -> Option<u64> {
        self.value["id"].as_u64()
    }

    /// Whether it ends its request: `res`, `error` or `cancelled`.
    pub fn is_final(&self) -> bool {
        matches!(self.t(), "res" | "error" | "cancelled")
    }
}

/// A running channel to an `attach` with its pipes.
pub struct Attach {
    /// The channel's process (attach itself, or the `docker exec` that runs it).
    pub child: Child,
    /// Its stdin; `None` once closed.
    pub stdin: Option<ChildStdin>,
    frames: mpsc::Receiver<Frame>,
    /// Frames read while waiting for another id.
    pub stash: VecDeque<Frame>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The threads reading stdout and stderr, done at their end of file.
    drains: Vec<std::thread::JoinHandle<()>>,
    /// Its hello frame, once [`Attach::start`] has read it.
    pub hello: Value,
}

/// Collects everything a pipe carries; lines go to `lines` as they arrive.
fn drain(
    pipe: impl Read + Send + 'static,
    all: Arc<Mutex<Vec<u8>>>,
    lines: Option<mpsc::Sender<Frame>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        loop {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let at = Instant::now();
            all.lock().unwrap().extend_from_slice(&line);
            if let Some(tx) = &lines {
                let value = serde_json::from_slice(&line).unwrap_or_else(|e| {
                    panic!("attach wrote a line that is not JSON ({e}): {line:?}")
                });
                let _ = tx.send(Frame { at, value });
            }
        }
    })
}

/// The local `mcpgw-gateway attach ARGS...` command.
pub fn attach_command(args: &[&str]) -> Command {
    let mut command = Command::new(gateway_bin());
    command.arg("attach").args(args).env_remove("MCPGW_TOKEN");
    command
}

/// Starts attach without waiting for anything.
pub fn spawn_attach(args: &[&str]) -> Attach {
    spawn_channel(attach_command(args))
}

/// Starts `command` (whose stdin and stdout reach an attach) without waiting for anything.
pub fn spawn_channel(mut command: Command) -> Attach {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let drains = vec![
        drain(child.stdout.take().unwrap(), stdout.clone(), Some(tx)),
        drain(child.stderr.take().unwrap(), stderr.clone(), None),
    ];
    Attach {
        drains,
        stdin: child.stdin.take(),
        child,
        frames: rx,
        stash: VecDeque::new(),
        stdout,
        stderr,
        hello: Value::Null,
    }
}

impl Attach {
    /// Starts attach and waits for its hello.
    pub fn start(args: &[&str]) -> Attach {
        Attach::start_channel(attach_command(args))
    }

    /// Starts the channel `command` and waits for its hello.
    pub fn start_channel(command: Command) -> Attach {
        let mut a = spawn_channel(command);
        let hello = a
            .frames
            .recv_timeout(LIMIT)
            .unwrap_or_else(|e| panic!("no hello from attach ({e}); stderr: {}", a.stderr()));
        assert_eq!(hello.t(), "hello", "{:?}", hello.value);
        a.hello = hello.value;
        a
    }

    /// The channel's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the channel wrote on stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// What the channel wrote on stdout so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// Writes `text` to the channel's stdin.
    pub fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(text.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a `req` frame.
    pub fn req(&mut self, id: u64, method: &str, path: &str, body: Option<Value>, stream: bool) {
        let mut frame = json!({"t": "req", "id": id, "method": method, "path": path});
        if let Some(body) = body {
            frame["body"] = body;
        }
        if stream {
            frame["stream"] = json!(true);
        }
        self.send(&format!("{frame}\n"));
    }

    /// Starts a streamed call of the test server's `slow` tool with `args` as request `id`, and
    /// waits for its first chunk: the call runs upstream.
    #[track_caller]
    pub fn slow_call_running(&mut self, id: u64, args: Value) {
        self.req(id, "POST", "/mcps/ts/tools/slow", Some(args), true);
        assert_eq!(self.next_for(id).t(), "chunk");
    }

    /// Writes one frame.
    pub fn frame(&mut self, frame: &Value) {
        self.send(&format!("{frame}\n"));
    }

    /// Sends a streamed tool call `req` frame made resumable under `call`.
    pub fn req_resumable(&mut self, id: u64, path: &str, body: Value, call: &str) {
        self.frame(
            &json!({"t": "req", "id": id, "method": "POST", "path": path,
                           "body": body, "stream": true, "call": call}),
        );
    }

    /// Sends a `resume` frame (streamed).
    pub fn resume(&mut self, id: u64, call: &str, after: u64) {
        self.frame(&json!({"t": "resume", "id": id, "call": call, "after": after, "stream": true}));
    }

    /// Sends an `ack` frame.
    pub fn ack(&mut self, call: &str) {
        self.frame(&json!({"t": "ack", "call": call}));
    }

    /// Sends a `cancel` frame.
    pub fn cancel(&mut self, id: u64) {
        self.send(&format!("{}\n", json!({"t": "cancel", "id": id})));
    }

    /// The next frame, whatever its id (waiting at most [`LIMIT`]; not an iterator, which would
    /// have to end).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Frame {
        if let Some(f) = self.stash.pop_front() {
            return f;
        }
        self.frames.recv_timeout(LIMIT).unwrap_or_else(|e| {
            panic!("no frame within {LIMIT:?} ({e}); stderr: {}", self.stderr())
        })
    }

    /// The next frame of request `id`; others are kept for later.
    pub fn next_for(&mut self, id: u64) -> Frame {
        if let Some(at) = self.stash.iter().position(|f| f.id() == Some(id)) {
            return self.stash.remove(at).unwrap();
        }
        loop {
            let f = self.frames.recv_timeout(LIMIT).unwrap_or_else(|e| {
                panic!(
                    "no frame for {id} within {LIMIT:?} ({e}); stderr: {}",
                    self.stderr()
                )
            });
            if f.id() == Some(id) {
                return f;
            }
            self.stash.push_back(f);
        }
    }

    /// Every frame of request `id` up to its final one.
    pub fn answer(&mut self, id: u64) -> Vec<Frame> {
        let mut frames = Vec::new();
        loop {
            let f = self.next_for(id);
            let done = f.is_final();
            frames.push(f);
            if done {
                return frames;
            }
        }
    }

    /// Sends a request and returns its final frame.
    pub fn call(&mut self, id: u64, method: &str, path: &str, body: Option<Value>) -> Value {
        self.req(id, method, path, body, false);
        self.answer(id).pop().unwrap().value
    }

    /// Waits for attach to exit and for all it wrote.
    pub fn exit(&mut self) -> std::process::ExitStatus {
        let status = wait_child(&mut self.child, LIMIT);
        for drain in self.drains.drain(..) {
            drain.join().unwrap();
        }
        status
    }

    /// Every frame not taken yet, up to the end of the channel's output (call it after
    /// [`Attach::exit`] or [`Attach::finish`]).
    pub fn remaining(&mut self) -> Vec<Frame> {
        let mut rest: Vec<Frame> = self.stash.drain(..).collect();
        rest.extend(self.frames.try_iter());
        rest
    }

    /// Closes stdin and waits for attach to exit.
    pub fn finish(&mut self) -> std::process::ExitStatus {
        self.stdin = None;
        self.exit()
    }
}

impl Drop for Attach {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A gateway that an attach launched (it outlives the attach): stopped on drop.
pub struct Daemon(pub u32);

impl Drop for Daemon {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.0 as libc::pid_t, libc::SIGTERM);
        }
        wait_gone(self.0, Duration::from_secs(10));
    }
}

/// The body of a `res` frame with status 200; panics on any other frame.
pub fn ok_res(frame: &Value) -> &Value {
    assert_eq!(frame["t"], "res", "{frame}");
    assert_eq!(frame["status"], 200, "{frame}");
    &frame["body"]
}

/// The first text of the ToolChunk of a call's answer body.
pub fn chunk_text(body: &Value) -> &str {
    body["chunk"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// Waits for a file to exist; the time it took.
pub fn wait_file(path: &Path, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while !path.exists() {
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Some(started.elapsed())
}

/// A foreground gateway with the test server registered through `attach`.
pub fn gateway_and_attach(extra: &[&str]) -> (Gateway, Attach) {
    gateway_of_and_attach(&[], extra)
}

/// [`gateway_and_attach`] with the gateway started with `gateway` arguments.
pub fn gateway_of_and_attach(gateway: &[&str], extra: &[&str]) -> (Gateway, Attach) {
    let gw = start_gateway(gateway);
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token").display().to_string();
    let mut args = vec!["--port", &port, "--token-file", &token_file];
    args.extend_from_slice(extra);
    let mut a = Attach::start(&args);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    (gw, a)
}

/// `req` frames for the test server's `echo` (registered as `ts`), one a line, one for each id
/// of `ids`: each echoes `call ID`.
pub fn echo_requests(ids: std::ops::Range<u64>) -> String {
    let mut batch = String::new();
    for id in ids {
        let frame = json!({"t": "req", "id": id, "method": "POST", "path": "/mcps/ts/tools/echo",
                           "body": {"arguments": {"text": format!("call {id}")}}});
        batch.push_str(&format!("{frame}\n"));
    }
    batch
}

/// The arguments of the test server's `slow` tool.
pub fn slow_args(seconds: f64, steps: u64, marker: Option<&Path>) -> Value {
    let mut args = json!({"seconds": seconds, "steps": steps});
    if let Some(m) = marker {
        args["cancel_marker"] = json!(m);
    }
    json!({"arguments": args})
}
