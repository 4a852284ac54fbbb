//! The driver's decisions as scripted scenarios: the test plays the processes (a one-shot
//! command's exit, the channel's frames, its end) and checks what the driver asks for next.
//! (Through real processes, `attach` and sandboxes it is tested by each binding and by the
//! host crate's end-to-end tests.)

use serde_json::{Value, json};

use super::*;
use crate::wire::frame::{self, GatewayFrame};
use crate::wire::output::trailer;

fn docker() -> Backend {
    Backend::Docker(Container {
        container: "box".into(),
        exec_options: vec![],
        options: vec![],
        program: None,
    })
}

/// A running gateway the host may call (port and token file known, built-in client).
fn config(backend: Backend) -> HostConfig {
    let mut c = HostConfig::new(backend);
    c.port = 41000;
    c.token_file = Some("/tmp/s/token".into());
    c.transport = Some(TransportName::BuiltIn);
    c
}

struct Sim {
    host: Host,
    now: Instant,
    /// Actions taken out but not yet looked at.
    seen: VecDeque<Action>,
}

impl Sim {
    fn new(config: HostConfig) -> Sim {
        Sim {
            host: Host::new(config).unwrap(),
            now: Instant::now(),
            seen: VecDeque::new(),
        }
    }

    fn submit(&mut self, op: Value) -> Id {
        self.host.submit_json(&op.to_string(), self.now).unwrap()
    }

    fn pull(&mut self) {
        while let Some(a) = self.host.poll_action() {
            self.seen.push_back(a);
        }
    }

    /// The next action, skipping notices.
    fn next(&mut self) -> Action {
        self.pull();
        loop {
            match self.seen.pop_front() {
                Some(Action::Notice(_)) => continue,
                Some(a) => return a,
                None => panic!(
                    "no action; the driver waits until {:?}",
                    self.host.timeout()
                ),
            }
        }
    }

    fn none_left(&mut self) {
        self.pull();
        let left: Vec<_> = self
            .seen
            .drain(..)
            .filter(|a| !matches!(a, Action::Notice(_)))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    fn notices(&mut self) -> Vec<String> {
        self.pull();
        let mut out = Vec::new();
        self.seen.retain(|a| match a {
            Action::Notice(n) => {
                out.push(n.clone());
                false
            }
            _ => true,
        });
        out
    }

    fn run(&mut self) -> (ProcId, Program, Stdin, Duration) {
        match self.next() {
            Action::Run {
                proc,
                program,
                stdin,
                timeout,
            } => (proc, program, stdin, timeout),
            other => panic!("not a run: {other:?}"),
        }
    }

    fn exit(&mut self, proc: ProcId, code: i32, stdout: &[u8], stderr: &[u8]) {
        self.host.on_exit(
            proc,
            Exit::Exited {
                code,
                stdout: stdout.to_vec(),
                stderr: stderr.to_vec(),
            },
            self.now,
        );
    }

    fn done(&mut self) -> (Id, Result<Output, Error>) {
        match self.next() {
            Action::Done { op, result } => (op, result),
            other => panic!("not done: {other:?}"),
        }
    }

    fn open(&mut self) -> ProcId {
        match self.next() {
            Action::Open { proc, .. } => proc,
            other => panic!("not an open: {other:?}"),
        }
    }

    /// The frames of the next write.
    fn written(&mut self) -> Vec<Value> {
        match self.next() {
            Action::Write { bytes, .. } => String::from_utf8(bytes)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            other => panic!("not a write: {other:?}"),
        }
    }

    fn feed(&mut self, proc: ProcId, frame: Value) {
        let mut line = frame.to_string();
        line.push('\n');
        self.host.on_data(proc, line.as_bytes(), self.now);
    }

    fn hello(&mut self, proc: ProcId, heartbeat_ms: u64, retention_ms: u64) {
        self.send_hello(
            proc,
            Hello {
                heartbeat_ms,
                retention_ms,
                ..sim_hello()
            },
        );
    }

    /// Feeds the channel this hello, as attach writes it.
    fn send_hello(&mut self, proc: ProcId, hello: Hello) {
        let mut out = Vec::new();
        GatewayFrame::Hello(hello).encode(&mut out);
        self.host.on_data(proc, &out, self.now);
    }

    /// Lets `d` pass, waking the driver at each of its timers on the way.
    fn wait(&mut self, d: Duration) {
        let end = self.now + d;
        while let Some(t) = self.host.timeout() {
            if t > end {
                break;
            }
            self.now = self.now.max(t);
            self.host.on_timeout(self.now);
        }
        self.now = end;
        self.host.on_timeout(self.now);
    }

    /// An open session: returns the channel's process.
    fn session(&mut self, heartbeat_ms: u64, retention_ms: u64) -> ProcId {
        let open = self.submit(json!({"op": "open_session"}));
        let ch = self.open();
        self.hello(ch, heartbeat_ms, retention_ms);
        let (id, result) = self.done();
        assert_eq!(id, open);
        assert!(matches!(result, Ok(Output::Session(_))), "{result:?}");
        ch
    }

    fn end_channel(&mut self, ch: ProcId, code: i32, stderr: &[u8]) {
        self.host.on_stderr(ch, stderr, self.now);
        self.host.on_eof(ch, self.now);
        self.host.on_exit(ch, Exit::code(code), self.now);
    }
}

/// The hello of the running gateway [`config`] names.
fn sim_hello() -> Hello {
    Hello {
        v: frame::VERSION,
        version: "0.3.0".into(),
        port: 41000,
        pid: 77,
        instance_nonce: None,
        token_file: Some("/tmp/s/token".into()),
        launched: false,
        max_frame_bytes: 1 << 20,
        heartbeat_ms: 0,
        retention_ms: 0,
    }
}

fn ok_body(body: &str) -> Vec<u8> {
    format!("{body}{}", trailer(200)).into_bytes()
}

fn chunk(text: &str, last: bool) -> Value {
    json!({"content": [{"type": "text", "text": text, "id": "b", "created_at": "t", "finished_at": null}],
           "state": "running", "is_last": last, "metadata": {}, "id": "c"})
}

fn call_tool() -> Value {
    json!({"op": "call_tool", "mcp": "ts", "tool": "slow", "arguments": {}, "stream": true})
}

#[test]
fn one_shot_commands_go_through_the_backend_with_the_cancel_wrapper() {
    let mut sim = Sim::new(config(docker()));
    let id = sim.submit(json!({"op": "list_mcps"}));
    let (proc, program, stdin, _) = sim.run();
    let Program::Argv(argv) = program else {
        panic!()
    };
    assert_eq!(&argv[..4], ["docker", "exec", "-i", "box"]);
    assert_eq!(argv[6], backend::WATCHED);
    assert_eq!(stdin, Stdin::Hold);
    sim.exit(proc, 0, &ok_body("[]"), b"");
    let (done, result) = sim.done();
    assert_eq!(done, id);
    assert_eq!(result.unwrap(), Output::Mcps(vec![]));
    sim.none_left();
}

#[test]
fn docker_failures_are_the_backends_not_the_commands() {
    let mut sim = Sim::new(config(docker()));
    // No such container.
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(
        proc,
        1,
        b"",
        b"Error response from daemon: No such container: box\n",
    );
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    assert_eq!(e.backend().unwrap().state, FailureState::Gone);
    assert!(e.message().contains("No such container"), "{e}");
    // sh cannot start in the image.
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(
        proc,
        126,
        b"OCI runtime exec failed: exec: \"sh\": executable file not found",
        b"",
    );
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.backend().unwrap().state, FailureState::CannotRun, "{e}");
    // The command's own failure: curl's connection refused is the gateway not running.
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(proc, 7, b"", b"mcpgw-gateway request: refused");
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");
    assert!(e.backend().is_none());
}

#[test]
fn a_silent_137_asks_whether_the_container_still_runs() {
    // Gone: the question says so at once.
    let mut sim = Sim::new(config(docker()));
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(proc, 137, b"", b"");
    let (q, program, ..) = sim.run();
    assert_eq!(
        program,
        Program::Argv(
            ["docker", "inspect", "--format", "{{.State.Running}}", "box"]
                .map(String::from)
                .to_vec()
        )
    );
    sim.exit(q, 1, b"", b"Error: No such object: box");
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed);
    assert!(e.message().contains("killed or removed"), "{e}");

    // Alive: asked again for a second (the daemon may not have marked it stopped yet), then
    // the 137 is the command's own.
    let mut sim = Sim::new(config(docker()));
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(proc, 137, b"", b"");
    let mut asked = 0;
    loop {
        sim.pull();
        match sim.seen.pop_front() {
            Some(Action::Run { proc, .. }) => {
                asked += 1;
                sim.exit(proc, 0, b"true\n", b"");
            }
            Some(Action::Done { result, .. }) => {
                let e = result.unwrap_err();
                assert_eq!(e.kind(), ErrorKind::CommandFailed, "{e}");
                assert!(e.message().contains("137"), "{e}");
                break;
            }
            Some(other) => panic!("{other:?}"),
            None => sim.wait(Duration::from_millis(50)),
        }
    }
    assert!((30..=90).contains(&asked), "asked {asked} times");
}

#[test]
fn kubectl_connection_errors_and_podman_failures() {
    let k = Backend::Kubectl(Pod {
        pod: "web-0".into(),
        namespace: None,
        container: None,
        options: vec![],
        program: None,
    });
    let mut sim = Sim::new(config(k));
    sim.submit(json!({"op": "health"}));
    let (proc, program, ..) = sim.run();
    let Program::Argv(argv) = program else {
        panic!()
    };
    assert_eq!(&argv[..5], ["kubectl", "exec", "-i", "web-0", "--"]);
    sim.exit(
        proc,
        1,
        b"",
        b"Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout",
    );
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.backend().unwrap().state, FailureState::Unreachable, "{e}");

    let p = Backend::Podman(Container {
        container: "box".into(),
        exec_options: vec![],
        options: vec![],
        program: None,
    });
    let mut sim = Sim::new(config(p));
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(
        proc,
        255,
        b"",
        b"Error: can only create exec sessions on running containers: container state improper",
    );
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.backend().unwrap().state, FailureState::NotRunning, "{e}");
}

#[test]
fn a_cancel_or_a_deadline_kills_the_running_command() {
    let mut sim = Sim::new(config(docker()));
    let id = sim.submit(json!({"op": "list_mcps"}));
    let (proc, ..) = sim.run();
    assert!(sim.host.cancel(id, sim.now));
    match sim.next() {
        Action::Kill { proc: p } => assert_eq!(p, proc),
        other => panic!("{other:?}"),
    }
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    // Its exit, when it comes, changes nothing.
    sim.exit(proc, 137, b"", b"");
    sim.none_left();

    sim.submit(json!({"op": "list_mcps", "timeout_ms": 1000}));
    let (proc, _, _, timeout) = sim.run();
    sim.wait(timeout);
    assert!(matches!(sim.next(), Action::Kill { proc: p } if p == proc));
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadline, "{e}");
}

#[test]
fn a_streamed_call_over_a_session_reports_progress_then_its_result_and_acks_it() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let id = sim.submit(call_tool());
    let frames = sim.written();
    assert_eq!(frames[0]["t"], "req");
    assert_eq!(frames[0]["stream"], true);
    let call = frames[0]["call"].as_str().unwrap().to_owned();
    assert_eq!(call.len(), 32);
    let sid = frames[0]["id"].as_u64().unwrap();
    sim.feed(
        ch,
        json!({"t": "chunk", "id": sid, "seq": 1, "chunk": chunk("1/2", false)}),
    );
    match sim.next() {
        Action::Progress { op, chunk } => {
            assert_eq!(op, id);
            assert!(chunk.get().contains("1/2"));
        }
        other => panic!("{other:?}"),
    }
    sim.feed(
        ch,
        json!({"t": "chunk", "id": sid, "seq": 2, "chunk": chunk("done", true)}),
    );
    sim.feed(ch, json!({"t": "res", "id": sid, "status": 200}));
    let (done, result) = sim.done();
    assert_eq!(done, id);
    let Output::Chunk(c) = result.unwrap() else {
        panic!()
    };
    assert!(c.is_last);
    // The acknowledgement waits for something else to write, at most ACK_DELAY.
    sim.none_left();
    assert_eq!(sim.host.timeout(), Some(sim.now + ACK_DELAY));
    sim.wait(ACK_DELAY);
    assert_eq!(sim.written(), [json!({"t": "ack", "call": call})]);
    sim.none_left();
    assert_eq!(sim.host.timeout(), None);
}

#[test]
fn acknowledgements_go_with_the_next_frame_written() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let mut acked = None;
    for _ in 0..3 {
        sim.submit(call_tool());
        // The request first, then the acknowledgement of the call answered before it, in one
        // write.
        let frames = sim.written();
        assert_eq!(frames[0]["t"], "req");
        match acked.take() {
            Some(call) => assert_eq!(frames[1..], [json!({"t": "ack", "call": call})]),
            None => assert_eq!(frames.len(), 1, "{frames:?}"),
        }
        let sid = frames[0]["id"].as_u64().unwrap();
        sim.feed(
            ch,
            json!({"t": "chunk", "id": sid, "seq": 1, "chunk": chunk("done", true)}),
        );
        sim.feed(ch, json!({"t": "res", "id": sid, "status": 200}));
        assert!(sim.done().1.is_ok());
        sim.none_left();
        acked = Some(frames[0]["call"].clone());
        // Within ACK_DELAY nothing is written of it alone.
        sim.wait(ACK_DELAY / 2);
        sim.none_left();
    }
    sim.wait(ACK_DELAY / 2);
    assert_eq!(sim.written(), [json!({"t": "ack", "call": acked.unwrap()})]);
    sim.none_left();
}

#[test]
fn closing_the_session_writes_the_waiting_acknowledgements_first() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    sim.submit(call_tool());
    let frames = sim.written();
    let (sid, call) = (frames[0]["id"].as_u64().unwrap(), frames[0]["call"].clone());
    sim.feed(
        ch,
        json!({"t": "chunk", "id": sid, "seq": 1, "chunk": chunk("done", true)}),
    );
    sim.feed(ch, json!({"t": "res", "id": sid, "status": 200}));
    assert!(sim.done().1.is_ok());
    sim.submit(json!({"op": "close_session"}));
    assert_eq!(sim.written(), [json!({"t": "ack", "call": call})]);
    assert!(matches!(sim.next(), Action::CloseInput { proc } if proc == ch));
}

#[test]
fn a_call_survives_its_channel_dying_and_resumes_exactly_once() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let id = sim.submit(call_tool());
    let frames = sim.written();
    let (sid, call) = (frames[0]["id"].as_u64().unwrap(), frames[0]["call"].clone());
    sim.feed(
        ch,
        json!({"t": "chunk", "id": sid, "seq": 1, "chunk": chunk("1", false)}),
    );
    assert!(matches!(sim.next(), Action::Progress { .. }));
    // The docker exec dies (its process killed on the host): the container still runs.
    sim.end_channel(ch, 137, b"");
    let (q, ..) = sim.run();
    sim.exit(q, 0, b"true\n", b"");
    // A new channel, at once (the last one had opened), and the call resumed on it.
    let ch2 = sim.open();
    assert_ne!(ch2, ch);
    sim.hello(ch2, 0, 600_000);
    let frames = sim.written();
    assert_eq!(frames[0]["t"], "resume");
    assert_eq!(frames[0]["call"], call);
    assert_eq!(frames[0]["after"], 1);
    let rid = frames[0]["id"].as_u64().unwrap();
    // The gateway replays from where the host was; a chunk it already has is not repeated.
    sim.feed(
        ch2,
        json!({"t": "chunk", "id": rid, "seq": 1, "chunk": chunk("1", false)}),
    );
    sim.feed(
        ch2,
        json!({"t": "chunk", "id": rid, "seq": 2, "chunk": chunk("2", false)}),
    );
    match sim.next() {
        Action::Progress { chunk, .. } => assert!(chunk.get().contains("\"2\"")),
        other => panic!("{other:?}"),
    }
    sim.feed(
        ch2,
        json!({"t": "chunk", "id": rid, "seq": 3, "chunk": chunk("end", true)}),
    );
    sim.feed(ch2, json!({"t": "res", "id": rid, "status": 200}));
    let (done, result) = sim.done();
    assert_eq!(done, id);
    assert!(result.is_ok(), "{result:?}");
    sim.wait(ACK_DELAY);
    assert_eq!(sim.written(), [json!({"t": "ack", "call": call})]);
    sim.none_left();
}

#[test]
fn a_resume_the_gateway_no_longer_keeps_fails_with_its_reason() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 1000);
    sim.submit(call_tool());
    sim.written();
    sim.end_channel(ch, 0, b"");
    let ch2 = sim.open();
    sim.hello(ch2, 0, 1000);
    let rid = sim.written()[0]["id"].as_u64().unwrap();
    sim.feed(
        ch2,
        json!({"t": "res", "id": rid, "status": 410, "body": {"detail": "call abc expired after 1 s"}}),
    );
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
    assert!(e.message().contains("expired"), "{e}");
}

#[test]
fn a_call_its_channel_never_delivered_is_sent_again_under_its_id_and_runs_once() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let id = sim.submit(call_tool());
    let call = sim.written()[0]["call"].clone();
    // The channel dies before attach relayed the request: the gateway never saw the call.
    sim.end_channel(ch, 0, b"");
    let ch2 = sim.open();
    sim.hello(ch2, 0, 600_000);
    let resume = sim.written();
    assert_eq!(resume[0]["t"], "resume");
    let rid = resume[0]["id"].as_u64().unwrap();
    sim.feed(
        ch2,
        json!({"t": "res", "id": rid, "status": 404, "body": {"detail": "no call is known here"}}),
    );
    // Sent again, under the same call id (the gateway runs an id at most once).
    let again = sim.written();
    assert_eq!(again[0]["t"], "req", "{again:?}");
    assert_eq!(again[0]["call"], call);
    let aid = again[0]["id"].as_u64().unwrap();
    // The first request reached the gateway after all: the second is refused, and the call is
    // resumed from its start.
    sim.feed(
        ch2,
        json!({"t": "res", "id": aid, "status": 409, "body": {"detail": "a call with this id ran here already"}}),
    );
    let resume2 = sim.written();
    assert_eq!(resume2[0]["t"], "resume", "{resume2:?}");
    assert_eq!(resume2[0]["call"], call);
    assert_eq!(resume2[0]["after"], 0);
    let r2 = resume2[0]["id"].as_u64().unwrap();
    sim.feed(
        ch2,
        json!({"t": "chunk", "id": r2, "seq": 1, "chunk": chunk("end", true)}),
    );
    sim.feed(ch2, json!({"t": "res", "id": r2, "status": 200}));
    let (done, result) = sim.done();
    assert_eq!(done, id);
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn without_retention_a_call_in_flight_is_lost_and_a_get_is_sent_again() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 0);
    let call = sim.submit(call_tool());
    let list = sim.submit(json!({"op": "list_tools", "mcp": "ts"}));
    let add = sim.submit(json!({"op": "add_mcp", "spec": {"name": "x", "mcp_config": {"type": "stdio_mcp", "command": "x"}}}));
    for _ in 0..3 {
        sim.written();
    }
    sim.end_channel(ch, 0, b"");
    let mut failed = Vec::new();
    sim.pull();
    let mut rest = VecDeque::new();
    for a in sim.seen.drain(..) {
        match a {
            Action::Done { op, result } => failed.push((op, result.unwrap_err().kind())),
            other => rest.push_back(other),
        }
    }
    sim.seen = rest;
    failed.sort_by_key(|f| f.0);
    assert_eq!(
        failed,
        [
            (call, ErrorKind::SessionLost),
            (add, ErrorKind::SessionLost)
        ]
    );
    let ch2 = sim.open();
    sim.hello(ch2, 0, 0);
    let frames = sim.written();
    assert_eq!(frames[0]["method"], "GET");
    let sid = frames[0]["id"].as_u64().unwrap();
    sim.feed(
        ch2,
        json!({"t": "res", "id": sid, "status": 200, "body": []}),
    );
    let (done, result) = sim.done();
    assert_eq!(done, list);
    assert_eq!(result.unwrap(), Output::Tools(vec![]));
}

#[test]
fn requests_never_written_go_one_shot_and_a_refused_body_too() {
    let mut sim = Sim::new(config(docker()));
    sim.submit(json!({"op": "open_session"}));
    let ch = sim.open();
    let id = sim.submit(json!({"op": "list_mcps"}));
    // The channel dies before its hello: the request was never written.
    sim.end_channel(
        ch,
        1,
        b"Error response from daemon: container box is not running\n",
    );
    let mut saw_run = None;
    let mut open_failed = None;
    sim.pull();
    for a in sim.seen.drain(..).collect::<Vec<_>>() {
        match a {
            Action::Run { proc, .. } => saw_run = Some(proc),
            Action::Done { result, .. } => open_failed = Some(result.unwrap_err()),
            Action::Kill { .. } | Action::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    let e = open_failed.expect("the open failed");
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    assert_eq!(e.backend().unwrap().state, FailureState::NotRunning);
    // A backend that says the sandbox is not running is not asked again.
    assert_eq!(sim.host.session_state(), SessionState::Off);
    let proc = saw_run.expect("the request went one-shot");
    sim.exit(proc, 0, &ok_body("[]"), b"");
    assert_eq!(sim.done(), (id, Ok(Output::Mcps(vec![]))));

    // A body larger than the channel's frames goes one-shot (staged or on stdin).
    let mut sim = Sim::new(config(docker()));
    sim.session(0, 0);
    let big = "x".repeat(2 << 20);
    sim.submit(json!({"op": "call_tool", "mcp": "ts", "tool": "echo", "arguments": {"text": big}}));
    let (_, _, stdin, _) = sim.run();
    assert!(matches!(stdin, Stdin::Bytes(b) if b.len() > 2 << 20));
}

#[test]
fn a_hello_that_never_comes_gives_up_on_the_session() {
    let mut sim = Sim::new(config(docker()));
    let open = sim.submit(json!({"op": "open_session"}));
    let ch = sim.open();
    sim.host.on_data(ch, b"Welcome to the sandbox!\n", sim.now);
    sim.wait(Duration::from_millis(sim.host.config().open_timeout_ms));
    let mut killed = false;
    let mut result = None;
    sim.pull();
    for a in sim.seen.drain(..) {
        match a {
            Action::Kill { proc } if proc == ch => killed = true,
            Action::Done { op, result: r } if op == open => result = Some(r),
            Action::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(killed);
    let e = result.unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadline, "{e}");
    assert_eq!(sim.host.session_state(), SessionState::Off);
    // Later operations go one-shot.
    sim.submit(json!({"op": "health"}));
    sim.run();
}

#[test]
fn stderr_keeps_the_backends_words_apart_from_attachs_log() {
    let mut sim = Sim::new(config(docker()));
    sim.submit(json!({"op": "open_session"}));
    let ch = sim.open();
    sim.host.on_stderr(
        ch,
        b"2026-12-01T10:00:00.000001Z  INFO relaying to the gateway at 127.0.0.1:41000\n",
        sim.now,
    );
    sim.end_channel(
        ch,
        127,
        b"sh: 1: exec: /usr/local/bin/mcpgw-gateway: not found\n",
    );
    sim.pull();
    let e = sim
        .seen
        .drain(..)
        .find_map(|a| match a {
            Action::Done { result, .. } => Some(result.unwrap_err()),
            _ => None,
        })
        .unwrap();
    // The client knew a running gateway: attaching to it is not a launch.
    assert_eq!(e.kind(), ErrorKind::CommandFailed, "{e}");
    let m = e.message();
    assert!(m.contains("docker exited 127: sh: 1: exec"), "{m}");
    assert!(
        m.contains("attach's last log line: 2026-12-01T10:00:00.000001Z  INFO relaying"),
        "{m}"
    );
    assert!(m.contains("is the gateway binary at"), "{m}");
}

#[test]
fn a_silent_channel_is_declared_lost_and_its_calls_resume_on_a_new_one() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(1000, 600_000);
    let id = sim.submit(call_tool());
    sim.written();
    // Idle writes are pings.
    sim.wait(Duration::from_millis(1000));
    assert_eq!(sim.written(), [json!({"t": "ping"})]);
    // Nothing comes back for three intervals: lost, the frozen exec killed, a new one opened.
    sim.wait(Duration::from_millis(2100));
    let mut killed = false;
    let mut opened = None;
    sim.pull();
    for a in sim.seen.drain(..) {
        match a {
            Action::Kill { proc } if proc == ch => killed = true,
            Action::Open { proc, .. } => opened = Some(proc),
            Action::Write { bytes, .. } => assert_eq!(bytes, b"{\"t\":\"ping\"}\n"),
            Action::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert!(killed);
    let ch2 = opened.expect("opened again");
    sim.hello(ch2, 1000, 600_000);
    let frames = sim.written();
    assert_eq!(frames[0]["t"], "resume");
    let rid = frames[0]["id"].as_u64().unwrap();
    sim.feed(
        ch2,
        json!({"t": "chunk", "id": rid, "seq": 1, "chunk": chunk("end", true)}),
    );
    sim.feed(ch2, json!({"t": "res", "id": rid, "status": 200}));
    assert_eq!(sim.done().0, id);
    sim.wait(ACK_DELAY);
    assert_eq!(sim.written()[0]["t"], "ack");
}

#[test]
fn a_channel_killed_with_its_container_is_not_opened_again() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let id = sim.submit(call_tool());
    sim.written();
    sim.end_channel(ch, 137, b"");
    let (q, ..) = sim.run();
    sim.exit(q, 0, b"false\n", b"");
    let (done, result) = sim.done();
    assert_eq!(done, id);
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
    assert!(e.message().contains("killed or removed"), "{e}");
    assert_eq!(sim.host.session_state(), SessionState::Off);
    // The next call goes one-shot, and finds the sandbox gone.
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.exit(
        proc,
        1,
        b"",
        b"Error response from daemon: No such container: box",
    );
    assert_eq!(sim.done().1.unwrap_err().kind(), ErrorKind::ExecFailed);
}

#[test]
fn reopening_backs_off_and_gives_up_after_its_attempts() {
    let mut c = config(docker());
    c.reopen_attempts = 2;
    let mut sim = Sim::new(c);
    let ch = sim.session(0, 600_000);
    let id = sim.submit(call_tool());
    sim.written();
    sim.end_channel(ch, 0, b"");
    // Each new channel dies before its hello.
    for attempt in 0..3 {
        let ch = loop {
            sim.pull();
            if let Some(at) = sim
                .seen
                .iter()
                .position(|a| matches!(a, Action::Open { .. }))
            {
                let Action::Open { proc, .. } = sim.seen.remove(at).unwrap() else {
                    unreachable!()
                };
                break proc;
            }
            sim.wait(Duration::from_millis(100));
        };
        sim.end_channel(ch, 1, format!("boom {attempt}\n").as_bytes());
    }
    let (done, result) = sim.done();
    assert_eq!(done, id);
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::SessionLost, "{e}");
    assert!(e.message().contains("could not be opened again"), "{e}");
    assert!(e.message().contains("boom 2"), "{e}");
    assert_eq!(sim.host.session_state(), SessionState::Off);
}

#[test]
fn closing_the_session_cancels_its_calls_and_closes_the_channel() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 600_000);
    let call = sim.submit(call_tool());
    let sid = sim.written()[0]["id"].as_u64().unwrap();
    let close = sim.submit(json!({"op": "close_session"}));
    assert_eq!(sim.written(), [json!({"t": "cancel", "id": sid})]);
    let mut seen = Vec::new();
    sim.pull();
    for a in sim.seen.drain(..) {
        match a {
            Action::Done { op, result } => seen.push((op, result.is_ok())),
            Action::CloseInput { proc } => assert_eq!(proc, ch),
            Action::Notice(_) => {}
            other => panic!("{other:?}"),
        }
    }
    seen.sort();
    assert_eq!(seen, [(call, false), (close, true)]);
    // The channel that does not exit after its input closed is killed after the grace.
    sim.wait(Duration::from_millis(sim.host.config().close_grace_ms));
    assert!(matches!(sim.next(), Action::Kill { proc } if proc == ch));
    sim.host.on_exit(ch, Exit::code(137), sim.now);
    sim.none_left();
    assert_eq!(sim.host.in_flight(), 0);
}

#[test]
fn stopping_the_gateway_ends_its_session_first() {
    let mut sim = Sim::new(config(docker()));
    let ch = sim.session(0, 0);
    let stop = sim.submit(json!({"op": "stop_gateway"}));
    assert!(matches!(sim.next(), Action::CloseInput { proc } if proc == ch));
    assert_eq!(sim.host.session_state(), SessionState::Off);
    // The stop itself is one-shot (this host launched no gateway: it is done at once).
    let (id, _) = sim.done();
    assert_eq!(id, stop);
    sim.host.on_exit(ch, Exit::code(0), sim.now);
    sim.none_left();
    assert_eq!(sim.host.in_flight(), 0);
}

#[test]
fn connections_carry_messages_both_ways_and_close_with_the_channel() {
    let mut sim = Sim::new(config(docker()));
    assert_eq!(
        sim.host
            .open_connection("ts", "", "", false, sim.now)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidState
    );
    let ch = sim.session(0, 0);
    let conn = sim
        .host
        .open_connection("ts", "a", "s", false, sim.now)
        .unwrap();
    let frames = sim.written();
    assert_eq!(frames[0]["t"], "open");
    assert_eq!(
        frames[0]["path"],
        "/mcps/ts/connection?agent_id=a&session_id=s"
    );
    let cid = frames[0]["id"].as_u64().unwrap();
    // Not open yet.
    assert!(sim.host.send(conn, "{}", sim.now).is_err());
    sim.feed(ch, json!({"t": "opened", "id": cid}));
    assert!(matches!(sim.next(), Action::ConnectionOpened { conn: c } if c == conn));
    sim.host
        .send(conn, r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, sim.now)
        .unwrap();
    let frames = sim.written();
    assert_eq!(frames[0]["msg"]["method"], "ping");
    assert_eq!(
        sim.host.send(conn, "[1]", sim.now).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    sim.feed(
        ch,
        json!({"t": "msg", "id": cid, "msg": {"jsonrpc": "2.0", "id": 1, "result": {}}}),
    );
    match sim.next() {
        Action::ConnectionMessage { conn: c, msg } => {
            assert_eq!(c, conn);
            assert_eq!(msg.get(), r#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
        }
        other => panic!("{other:?}"),
    }
    sim.end_channel(ch, 0, b"");
    sim.pull();
    let closed = sim.seen.iter().find_map(|a| match a {
        Action::ConnectionClosed {
            conn: c,
            reason,
            kind,
            ..
        } if *c == conn => Some((reason.clone(), *kind)),
        _ => None,
    });
    let (reason, kind) = closed.unwrap();
    assert!(reason.unwrap().contains("ended"));
    // The channel's loss is the end's kind, as every binding reports it.
    assert_eq!(kind, Some(ErrorKind::SessionLost));
    let _ = sim.notices();
}

#[test]
fn the_exec_backend_gets_shell_text_and_its_failures_as_is() {
    let mut sim = Sim::new(config(Backend::Exec {
        passes_stdin: false,
    }));
    sim.submit(json!({"op": "health"}));
    let (proc, program, stdin, _) = sim.run();
    assert!(
        matches!(program, Program::Shell(ref t) if t.contains(" request GET '/health'")),
        "{program:?}"
    );
    assert_eq!(stdin, Stdin::Null);
    sim.host
        .on_exit(proc, Exit::Failed("sandbox 42 not found".into()), sim.now);
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed);
    assert!(e.message().contains("sandbox 42 not found"), "{e}");
}

#[test]
fn an_operation_that_cannot_be_prepared_is_done_at_once() {
    let mut sim = Sim::new(HostConfig::new(docker()));
    // No gateway is known.
    let id = sim.submit(json!({"op": "list_mcps"}));
    let (done, result) = sim.done();
    assert_eq!(done, id);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::GatewayNotRunning);
    let id = sim.submit(json!({"op": "call_tool", "mcp": "bad name", "tool": "t"}));
    assert_eq!(sim.done().0, id);
    assert!(sim.host.submit_json("{\"op\":\"brew\"}", sim.now).is_err());
    sim.none_left();
}

/// The channel of a launching session, and the instance nonce its command mints.
fn launching_channel(sim: &mut Sim) -> (ProcId, String) {
    let Action::Open { proc, program } = sim.next() else {
        panic!("not an open")
    };
    let Program::Argv(argv) = program else {
        panic!("{program:?}")
    };
    let text = argv.last().unwrap();
    assert!(text.contains(" --launch"), "{text}");
    let at = text.find("--instance-nonce ").unwrap() + "--instance-nonce ".len();
    let nonce: String = text[at..]
        .trim_start_matches('\'')
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    (proc, nonce)
}

#[test]
fn operations_submitted_while_a_launching_channel_opens_wait_for_its_hello() {
    // No gateway known: the channel launches one, and REST operations wait to learn it.
    let mut sim = Sim::new(HostConfig::new(docker()));
    let open = sim.submit(json!({"op": "open_session"}));
    let (ch, nonce) = launching_channel(&mut sim);
    sim.submit(json!({"op": "health"}));
    sim.submit(call_tool());
    sim.none_left();
    sim.send_hello(
        ch,
        Hello {
            instance_nonce: Some(nonce),
            launched: true,
            ..sim_hello()
        },
    );
    let (id, result) = sim.done();
    assert_eq!(id, open);
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(sim.host.client().port(), Some(41000));
    let mut written = sim.written();
    written.extend(sim.written());
    assert_eq!(written.len(), 2, "{written:?}");
    assert!(written[0]["path"].as_str().unwrap().starts_with("/health"));
    assert_eq!(written[1]["method"], "POST");

    // A launch that fails: what waited goes one-shot, where no gateway is known.
    let mut sim = Sim::new(HostConfig::new(docker()));
    sim.submit(json!({"op": "open_session"}));
    let (ch, _) = launching_channel(&mut sim);
    let health = sim.submit(json!({"op": "health"}));
    sim.end_channel(ch, 127, b"sh: mcpgw-gateway: not found");
    sim.pull();
    let result = sim
        .seen
        .drain(..)
        .find_map(|a| match a {
            Action::Done { op, result } if op == health => Some(result),
            _ => None,
        })
        .expect("health is done");
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning, "{e}");
}

/// What each provider SDK raised here against its real daemon (E2B's envd, OpenSandbox's execd
/// and server, Daytona's toolbox daemon), in the Python and the Node SDK's words: the sandbox's
/// state it means, or a failed exec.
#[test]
fn provider_sdks_failures_are_read_by_their_words() {
    let sdk = || Sdk {
        sandbox: "sbx-1".into(),
    };
    let cases: &[(Backend, &str, Option<FailureState>)] = &[
        (
            Backend::E2b(sdk()),
            "SandboxUnreachableException: Error reading content: unexpected EOF during chunk size \
             line: The sandbox could not be reached and its health probe failed too",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::E2b(sdk()),
            "SandboxError: 2: [unknown] terminated",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::E2b(sdk()),
            "TypeError: fetch failed",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::E2b(sdk()),
            "SandboxNotRunningException: The sandbox is not running",
            Some(FailureState::NotRunning),
        ),
        (
            Backend::E2b(sdk()),
            "AuthenticationException: unauthorized access, please provide a valid access token",
            Some(FailureState::CannotRun),
        ),
        (
            Backend::E2b(sdk()),
            "InvalidArgumentError: [invalid_argument] cwd '/nope' does not exist",
            Some(FailureState::CannotRun),
        ),
        (Backend::E2b(sdk()), "RuntimeError: boom", None),
        (
            Backend::Opensandbox(sdk()),
            "SandboxApiException: Sandbox 5b49 not found. (DOCKER::SANDBOX_NOT_FOUND)",
            Some(FailureState::Gone),
        ),
        (
            Backend::Opensandbox(sdk()),
            "SandboxConnectionException: Network connectivity error: peer closed connection \
             without sending complete message body (incomplete chunked read)",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::Opensandbox(sdk()),
            "TypeError: terminated",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::Opensandbox(sdk()),
            "SandboxApiException: Authentication credentials are invalid. (INVALID_API_KEY)",
            Some(FailureState::CannotRun),
        ),
        (
            Backend::Daytona(sdk()),
            "DaytonaNotFoundError: Failed to get session command: not found: session not found",
            Some(FailureState::Gone),
        ),
        (
            Backend::Daytona(sdk()),
            "DaytonaError: Failed to get session command logs: ",
            Some(FailureState::Unreachable),
        ),
        (
            Backend::Daytona(sdk()),
            "DaytonaError: something else",
            None,
        ),
        // The exec backend's function is judged by its owner.
        (
            Backend::Exec { passes_stdin: true },
            "SandboxUnreachableException: could not be reached",
            None,
        ),
    ];
    for (backend, reason, want) in cases {
        let got = backend.judge_failed(reason);
        assert_eq!(
            got.as_ref().map(|f| f.state),
            *want,
            "{backend:?}: {reason}"
        );
        if let Some(f) = got {
            assert_eq!(
                (f.backend.as_str(), f.target.as_str()),
                (backend.name(), "sbx-1")
            );
        }
    }
}

#[test]
fn a_provider_sandbox_gets_shell_text_with_stdin_and_its_sdks_failures_read() {
    let mut sim = Sim::new(config(Backend::E2b(Sdk {
        sandbox: "sbx-1".into(),
    })));
    assert!(sim.host.config().backend.passes_stdin());
    sim.submit(json!({"op": "health"}));
    let (proc, program, stdin, _) = sim.run();
    assert!(matches!(program, Program::Shell(_)), "{program:?}");
    assert_eq!(stdin, Stdin::Null);
    let reason = "SandboxUnreachableException: The sandbox could not be reached";
    sim.host.on_exit(proc, Exit::Failed(reason.into()), sim.now);
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    assert_eq!(
        e.backend().map(|f| f.state),
        Some(FailureState::Unreachable),
        "{e}"
    );
    assert!(
        e.message().contains("e2b") && e.message().contains("sbx-1"),
        "{e}"
    );
    // A failure the rules do not know stays a failed exec, naming the SDK.
    sim.submit(json!({"op": "health"}));
    let (proc, ..) = sim.run();
    sim.host
        .on_exit(proc, Exit::Failed("ValueError: odd".into()), sim.now);
    let e = sim.done().1.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ExecFailed, "{e}");
    assert!(e.backend().is_none(), "{e}");
    assert!(e.message().contains("the e2b SDK"), "{e}");
}

/// An argv prefix whose program drives a provider's SDK (`python -m mcpgw_client exec`): its
/// channel gets the channel's arguments, and its own failure line is read by the provider's
/// words; any other exit is the command's.
#[test]
fn a_provider_driving_program_says_its_sdks_failures_in_one_line() {
    let backend = Backend::Argv(Prefix {
        prefix: vec![
            "python3".into(),
            "-m".into(),
            "mcpgw_client".into(),
            "exec".into(),
        ],
        channel_args: vec!["--channel".into()],
        provider: Some(Provider::E2b),
        ..Default::default()
    });
    backend.validate().unwrap();
    let Program::Argv(argv) = backend.channel("exec attach") else {
        panic!()
    };
    assert_eq!(
        argv,
        [
            "python3",
            "-m",
            "mcpgw_client",
            "exec",
            "--channel",
            "sh",
            "-c",
            "exec attach"
        ]
    );
    // Its one-shot commands read /dev/null, not a pipe held open under a watcher.
    let (Program::Argv(argv), stdin) = backend.command("true", None) else {
        panic!()
    };
    assert_eq!(stdin, Stdin::Null);
    assert_eq!(argv[4..], ["sh", "-c", "true"]);
    let said =
        b"INFO attach's own line\nmcpgw-exec: SandboxUnreachableException: could not be reached\n";
    let Verdict::Failed(f) = backend.judge(EXEC_FAILED_STATUS, b"", said, true) else {
        panic!("not the backend's failure")
    };
    assert_eq!(f.state, FailureState::Unreachable);
    assert!(f.reason.starts_with("SandboxUnreachableException"), "{f:?}");
    let Verdict::Failed(f) = backend.judge(
        EXEC_FAILED_STATUS,
        b"",
        b"mcpgw-exec: ValueError: odd",
        false,
    ) else {
        panic!()
    };
    assert_eq!(f.state, FailureState::CannotRun);
    assert_eq!(
        backend.judge(EXEC_FAILED_STATUS, b"", b"no line of ours", false),
        Verdict::Command
    );
    assert_eq!(
        backend.judge(1, b"", b"mcpgw-exec: SandboxUnreachableException", false),
        Verdict::Command
    );
}

#[test]
fn the_policy_refuses_a_call_before_any_command_and_filters_the_tool_list() {
    let mut c = config(docker());
    c.policy = crate::policy::Policy::from_json(
        r#"{"servers": {"ts": {"tools": {"deny": ["cr*"]}}},
            "scopes": {"alice": {"servers": {"*": {"tools": {"deny": ["echo"]}}}}}}"#,
    )
    .unwrap();
    let mut sim = Sim::new(c);
    let id = sim.submit(json!({"op": "call_tool", "mcp": "ts", "tool": "crash"}));
    let (done, result) = sim.done();
    assert_eq!(done, id);
    let e = result.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PolicyDenied);
    assert!(
        e.message().contains(r#"servers."ts".tools.deny: "cr*""#),
        "{e}"
    );
    sim.none_left();
    // Alice's scope has a rule of its own; another scope's call runs.
    sim.submit(json!({"op": "call_tool", "mcp": "ts", "tool": "echo", "agent_id": "alice"}));
    assert_eq!(sim.done().1.unwrap_err().kind(), ErrorKind::PolicyDenied);
    sim.submit(json!({"op": "call_tool", "mcp": "ts", "tool": "echo", "agent_id": "bob"}));
    let (proc, ..) = sim.run();
    sim.exit(
        proc,
        0,
        &ok_body(&json!({"chunk": chunk("hi", true)}).to_string()),
        b"",
    );
    assert!(sim.done().1.is_ok());
    sim.submit(json!({"op": "list_tools", "mcp": "ts"}));
    let (proc, ..) = sim.run();
    let tools = json!([{"name": "crash", "inputSchema": {"type": "object"}},
                       {"name": "echo", "inputSchema": {"type": "object"}}]);
    sim.exit(proc, 0, &ok_body(&tools.to_string()), b"");
    let Output::Tools(tools) = sim.done().1.unwrap() else {
        panic!("not a tool list")
    };
    assert_eq!(
        tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        ["echo"]
    );
    sim.none_left();
}

#[test]
fn a_prepared_operation_is_refused_rather_than_let_past_the_policy_and_audit() {
    let mut c = config(docker());
    c.audit = true;
    let mut host = Host::new(c).unwrap();
    let op = host
        .client()
        .prepare_call_tool(&Default::default(), "m", "t", "{}")
        .erase();
    let now = Instant::now();
    let id = host.submit_operation(op, false, now);
    match host.poll_action() {
        Some(Action::Done { op, result: Err(e) }) => {
            assert_eq!(op, id);
            assert_eq!(e.kind(), ErrorKind::InvalidArgument);
            assert!(e.message().contains("bypass the host's policy"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(host.poll_action().is_none(), "nothing runs");
}
