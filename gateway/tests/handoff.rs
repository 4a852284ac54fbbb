//! A session's channel handed to the gateway: its socket, spoken to as attach does and as a
//! stranger might, with real pipes; and a gateway of several workers, which serves them on a
//! thread of their own.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};

use mcpgw_testkit::*;
use serde_json::{Value, json};

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// The socket the gateway at `port` announces in `/health`, if any.
fn announced(port: u16) -> Option<String> {
    let health = raw_request(&format!("127.0.0.1:{port}"), HEALTH, LIMIT);
    assert_eq!(health.status, 200);
    health.header("mcpgw-attach-socket").map(String::from)
}

fn connect(name: &str) -> UnixStream {
    let stream =
        UnixStream::connect_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
            .unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    stream
}

/// Sends `offer` with `fds` and returns the gateway's first line.
fn offer(name: &str, offer: &[u8], fds: &[std::os::fd::BorrowedFd<'_>]) -> (UnixStream, Value) {
    let stream = connect(name);
    mcpgw_sys::fdpass::send(stream.as_fd(), offer, fds).unwrap();
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    (
        stream,
        serde_json::from_str(&line).unwrap_or(Value::String(line)),
    )
}

fn offer_of(authorization: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "authorization": authorization,
        "first": "{\"t\":\"hello\"}\n",
        "max_frame_bytes": 1 << 20,
        "heartbeat_ms": 0,
        "heartbeat_timeout_ms": 0,
        "max_in_flight": null,
        "max_mcp_connections": 4,
    }))
    .unwrap();
    line.push(b'\n');
    line
}

fn refusal(reply: &Value) -> &str {
    reply["refused"]
        .as_str()
        .unwrap_or_else(|| panic!("{reply}"))
}

#[test]
fn the_gateway_takes_a_session_only_whole_and_with_its_token() {
    let gw = start_gateway(&["--threads", "1"]);
    let name = announced(gw.port).expect("no socket announced");
    let bearer = format!("Bearer {}", gw.token);
    let (_in_reader, in_writer) = std::io::pipe().unwrap();
    let (out_reader, out_writer) = std::io::pipe().unwrap();

    let (_, reply) = offer(&name, b"not json\n", &[]);
    assert!(refusal(&reply).contains("not one"), "{reply}");
    let (_, reply) = offer(
        &name,
        &offer_of("Bearer wrong"),
        &[in_writer.as_fd(), out_writer.as_fd()],
    );
    assert!(refusal(&reply).contains("token"), "{reply}");
    assert!(!reply.to_string().contains(&gw.token));
    let (_, reply) = offer(&name, &offer_of(&bearer), &[out_writer.as_fd()]);
    assert!(refusal(&reply).contains("1 descriptors came"), "{reply}");
    let file = std::fs::File::open("/proc/self/status").unwrap();
    let (_, reply) = offer(
        &name,
        &offer_of(&bearer),
        &[file.as_fd(), out_writer.as_fd()],
    );
    assert!(
        refusal(&reply).contains("stdin cannot be polled"),
        "{reply}"
    );
    // A stranger who connects and says nothing holds nothing up.
    let silent = connect(&name);

    let (in_reader, mut in_writer) = std::io::pipe().unwrap();
    let (stream, reply) = offer(
        &name,
        &offer_of(&bearer),
        &[in_reader.as_fd(), out_writer.as_fd()],
    );
    assert_eq!(reply, json!({"serving": true}));
    drop((in_reader, out_writer));
    let mut frames = BufReader::new(out_reader);
    let mut line = String::new();
    frames.read_line(&mut line).unwrap();
    assert_eq!(line, "{\"t\":\"hello\"}\n");
    in_writer
        .write_all(b"{\"t\":\"req\",\"id\":1,\"method\":\"GET\",\"path\":\"/mcps\"}\n")
        .unwrap();
    line.clear();
    frames.read_line(&mut line).unwrap();
    let res: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (res["t"].as_str(), res["status"].as_u64()),
        (Some("res"), Some(200)),
        "{res}"
    );

    (&stream).write_all(b"{\"stop\":\"SIGTERM\"}\n").unwrap();
    line.clear();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let ended: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(ended, json!({"ended": "SIGTERM", "ok": true}));
    // The gateway let go of the channel: its stdout ends once nobody else holds it.
    let mut rest = String::new();
    frames.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "");
    drop(silent);
    assert_eq!(announced(gw.port), Some(name));
}

#[test]
fn a_gateway_of_several_workers_takes_sessions_on_a_thread_of_their_own() {
    // The test server is registered through the session: it lives on as long as the gateway.
    let (mut gw, mut a) = gateway_of_and_attach(&["--threads", "2"], &[]);
    assert!(announced(gw.port).is_some());
    a.send(&echo_requests(100..164));
    for id in 100..164u64 {
        let f = a.next_for(id);
        assert_eq!(
            chunk_text(ok_res(&f.value)),
            format!("call {id}"),
            "{:?}",
            f.value
        );
    }
    assert!(a.stderr().contains("handed off"), "{}", a.stderr());
    let pid = gw.child.id();
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .collect();
    assert!(
        threads.iter().any(|t| t.trim() == "mcpgw-sessions"),
        "{threads:?}"
    );
    let upstreams = processes_where(|_, ppid, _| ppid == pid);
    assert!(!upstreams.is_empty());

    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGTERM);
    }
    let status = a.exit();
    assert!(status.success(), "{status}: {}", a.stderr());
    assert!(
        a.stderr().contains("session ended: the gateway stopping"),
        "{}",
        a.stderr()
    );
    assert!(gw.child.wait().unwrap().success());
    for upstream in upstreams {
        assert!(
            wait_gone(upstream, LIMIT),
            "upstream {upstream} left running"
        );
    }
}

#[test]
fn a_gateway_that_stops_ends_its_handed_off_sessions_and_says_why() {
    let (mut gw, mut a) = gateway_and_attach(&[]);
    unsafe {
        libc::kill(gw.child.id() as libc::pid_t, libc::SIGTERM);
    }
    let status = a.exit();
    assert!(status.success(), "{status}: {}", a.stderr());
    let stderr = a.stderr();
    assert!(stderr.contains("handed off"), "{stderr}");
    assert!(
        stderr.contains("session ended: the gateway stopping"),
        "{stderr}"
    );
    assert!(gw.child.wait().unwrap().success());
}
