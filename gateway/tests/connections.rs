//! Client connections cannot hold the gateway: partial or missing request heads and idle
//! keep-alive connections are closed after their timeouts, a body declared too large is refused
//! at once, and a flood of idle connections under a low open-file limit does not lock out
//! `/health`, calls or registrations.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt as _;
use std::time::{Duration, Instant};

use serde_json::json;

use mcpgw_testkit::*;

/// Reads until the peer closes; returns what arrived and how long that took.
fn until_closed(stream: &mut TcpStream, limit: Duration) -> (Vec<u8>, Duration) {
    let started = Instant::now();
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return (got, started.elapsed()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (got, started.elapsed());
            }
            Err(e) => panic!(
                "still open after {:?} ({e}); got {:?}",
                started.elapsed(),
                String::from_utf8_lossy(&got)
            ),
        }
    }
}

#[test]
fn silent_partial_and_idle_connections_are_closed() {
    let gw = start_gateway(&["--header-timeout", "1", "--idle-timeout", "2"]);
    // Nothing at all.
    let mut silent = TcpStream::connect(gw.authority()).unwrap();
    // Half a request head.
    let mut partial = TcpStream::connect(gw.authority()).unwrap();
    partial
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let opened = Instant::now();
    for stream in [&mut silent, &mut partial] {
        until_closed(stream, Duration::from_secs(5));
        let took = opened.elapsed();
        assert!(
            took >= Duration::from_millis(800) && took < Duration::from_secs(3),
            "{took:?}"
        );
    }
    // A head dribbled one byte at a time is bounded by the same timeout.
    let mut slow = TcpStream::connect(gw.authority()).unwrap();
    let started = Instant::now();
    let closed = loop {
        if slow.write_all(b"X").is_err() || started.elapsed() > Duration::from_secs(5) {
            break started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(closed < Duration::from_secs(3), "{closed:?}");
    // A keep-alive connection that answered a request, then idles.
    let mut idle = TcpStream::connect(gw.authority()).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let (got, took) = until_closed(&mut idle, Duration::from_secs(6));
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    assert!(
        took >= Duration::from_millis(1800) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[test]
fn a_body_declared_too_large_is_refused_at_once() {
    let gw = start_gateway(&["--max-body-bytes", "1000"]);
    let mut stream = TcpStream::connect(gw.authority()).unwrap();
    write!(
        stream,
        "POST /mcps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n",
        gw.token
    )
    .unwrap();
    let started = Instant::now();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).expect("an answer before the body");
        assert!(n > 0, "closed without an answer");
        head.extend_from_slice(&buf[..n]);
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let text = String::from_utf8_lossy(&head);
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
}

#[tokio::test]
async fn idle_connections_beyond_the_open_file_limit_do_not_lock_anyone_out() {
    // 1024 descriptors, soft and hard; long timeouts, so only the cap and eviction can help.
    let gw = start_gateway_with(
        &["--header-timeout", "300", "--idle-timeout", "300"],
        |cmd| {
            // SAFETY: setrlimit between fork and exec.
            unsafe {
                cmd.pre_exec(|| {
                    let limit = libc::rlimit {
                        rlim_cur: 1024,
                        rlim_max: 1024,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        },
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", gw.pid())).unwrap();
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max open files") && l.contains("1024")),
        "{limits}"
    );
    let authority = gw.authority();
    let idle: Vec<TcpStream> = tokio::task::spawn_blocking(move || {
        (0..1100)
            .map(|_| TcpStream::connect(&authority).unwrap())
            .collect()
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let health = tokio::time::timeout(
        Duration::from_secs(5),
        gw.send_with("GET", "/health", None, None, &[]),
    )
    .await
    .expect("/health answered")
    .expect(200);
    assert_eq!(health.text(), "ok");
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    gw.call("ts", "echo", json!({"text": "through"}))
        .await
        .expect(200);
    eprintln!(
        "with 1100 idle connections: health, registration and a call in {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    drop(idle);
}

#[test]
fn eviction_spares_a_connection_whose_request_has_begun() {
    let gw = start_gateway(&[
        "--max-connections",
        "2",
        "--header-timeout",
        "30",
        "--idle-timeout",
        "30",
    ]);
    // The oldest connection has sent half a request head.
    let mut begun = TcpStream::connect(gw.authority()).unwrap();
    begun.write_all(b"GET /health HTTP/1.1\r\n").unwrap();
    // A younger one was answered and now idles.
    let mut idle = TcpStream::connect(gw.authority()).unwrap();
    idle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let n = idle.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // A third connection needs room: the idle one goes, the begun request stays.
    let third = raw_request(
        &gw.authority(),
        b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        Duration::from_secs(5),
    );
    assert_eq!(third.status, 200);
    let (rest, _) = until_closed(&mut idle, Duration::from_secs(5));
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    begun
        .write_all(b"Host: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let (answer, _) = until_closed(&mut begun, Duration::from_secs(5));
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "the request under way was closed: {:?}",
        String::from_utf8_lossy(&answer)
    );
}
