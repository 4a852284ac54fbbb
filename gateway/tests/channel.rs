//! The session channel's reliability, against real processes (the gateway, `attach`, the
//! project's test server): bursts within the documented limits, one final frame per id,
//! heartbeats, and calls that outlive their channel.

use std::collections::HashMap;

use mcpgw_testkit::container::{self, Container, Engine};
use mcpgw_testkit::*;
use serde_json::json;

/// A burst far past the in-flight bound, with the gateway allowing few connections: every
/// request gets its own answer and none fails, and the gateway never has to close a connection
/// attach is about to use.
#[test]
fn a_burst_within_the_limits_completes_without_an_error() {
    let gw = start_gateway(&["--log-level", "debug"]);
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token").display().to_string();
    let mut a = Attach::start(&["--port", &port, "--token-file", &token_file]);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    const CALLS: u64 = 5000;
    let mut batch = String::new();
    // Two in three are answered at once, the others after 50 to 90 ms.
    let health = |id: u64| !id.is_multiple_of(3);
    for id in 100..100 + CALLS {
        let frame = if health(id) {
            json!({"t": "req", "id": id, "method": "GET", "path": "/health"})
        } else {
            json!({"t": "req", "id": id, "method": "POST", "path": "/mcps/ts/tools/slow",
                   "body": slow_args(0.05 + (id % 5) as f64 * 0.01, 0, None)})
        };
        batch.push_str(&format!("{frame}\n"));
    }
    a.send(&batch);
    let mut answered = HashMap::new();
    let mut failed = Vec::new();
    while answered.len() < CALLS as usize {
        let f = a.next();
        let id = f
            .id()
            .unwrap_or_else(|| panic!("a frame without an id: {:?}", f.value));
        if f.t() != "res" || f.value["status"] != 200 {
            failed.push(f.value.clone());
        } else if health(id) {
            assert_eq!(f.value["text"], "ok", "{:?}", f.value);
        } else {
            assert_eq!(chunk_text(&f.value["body"]), "done after 0 steps");
        }
        assert!(answered.insert(id, ()).is_none(), "{id} answered twice");
    }
    assert!(
        failed.is_empty(),
        "{} of {CALLS} failed, e.g. {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(a.finish().success(), "{}", a.stderr());
    let log = std::fs::read_to_string(gw.dir.path("gateway.log")).unwrap();
    assert!(
        !log.contains("closing the longest-idle connection"),
        "the gateway had to evict: {log}"
    );
}

/// Every invalid frame gets exactly one `error`, with its id unless that id belongs to a
/// request in flight, which goes on to its own one final frame; an error quotes little of what
/// it refuses.
#[test]
fn one_error_per_invalid_frame_and_one_final_frame_per_id() {
    let (_gw, mut a) = gateway_and_attach(&[]);
    a.slow_call_running(7, slow_args(1.0, 4, None));
    let long_path = format!("/{}", "a".repeat(1 << 20));
    let reusing = [
        r#"{"t":"req","id":7,"method":"BREW","path":"/health"}"#.to_string(),
        r#"{"t":"bogus","id":7}"#.to_string(),
        r#"{"t":"req","id":7,"method":"GET","path":"/a#b"}"#.to_string(),
        r#"{"t":"req","id":7,"method":"GET","path":"/health","stream":"yes"}"#.to_string(),
        r#"{"t":"req","id":7,"method":"GET","path":"/health"}"#.to_string(),
    ];
    for line in &reusing {
        a.send(&format!("{line}\n"));
        let f = loop {
            let f = a.next();
            if f.id() != Some(7) || f.t() != "chunk" {
                break f;
            }
            a.stash.push_back(f);
        };
        assert_eq!(f.t(), "error", "{line}: {:?}", f.value);
        assert_eq!(f.id(), None, "{line}: {:?}", f.value);
        let message = f.value["message"].as_str().unwrap();
        assert!(message.contains("7"), "{line}: {message}");
        assert!(message.contains("in flight"), "{line}: {message}");
    }
    // Ids not in flight: each error carries its id, short whatever the line held.
    let fresh = [
        (
            r#"{"t":"req","id":8,"method":"GET","path":"/health","stream":"yes"}"#.to_string(),
            8,
        ),
        (
            format!(r#"{{"t":"req","id":9,"method":"GET","path":"{long_path}#"}}"#),
            9,
        ),
        (
            format!(r#"{{"t":"req","id":10,"method":"GET","path":"{long_path} x"}}"#),
            10,
        ),
        (
            format!(r#"{{"t":"bogus{}","id":11}}"#, "b".repeat(1 << 20)),
            11,
        ),
    ];
    for (line, id) in &fresh {
        a.send(&format!("{line}\n"));
        let f = a.next_for(*id);
        assert_eq!(f.t(), "error", "{:?}", f.value);
        let message = f.value["message"].as_str().unwrap();
        assert!(message.len() < 600, "{} bytes: {message}", message.len());
    }
    // 7 ends once, with its own answer.
    let frames = a.answer(7);
    assert_eq!(frames.last().unwrap().value["status"], 200, "{frames:?}");
    assert!(a.finish().success());
    let rest = a.remaining();
    assert!(rest.is_empty(), "frames after the end: {rest:?}");
}

/// A line just past the default frame limit (64 MiB and 64 KiB) is refused having held at
/// most the limit, not twice it.
#[test]
fn an_oversized_line_is_held_at_most_once_before_it_is_skipped() {
    let (_gw, mut a) = gateway_and_attach(&[]);
    let limit = a.hello["max_frame_bytes"].as_u64().unwrap();
    let before = peak_rss_kib(a.pid());
    let mut stdin = a.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        stdin
            .write_all(br#"{"t":"req","id":7,"method":"POST","path":"/mcps/ts/tools/echo","body":{"arguments":{"text":""#)
            .unwrap();
        let piece = vec![b'a'; 1 << 20];
        for _ in 0..=(limit >> 20) {
            stdin.write_all(&piece).unwrap();
        }
        stdin.write_all(b"\"}}}\n").unwrap();
        stdin
    });
    let f = a.next();
    assert_eq!((f.t(), f.id()), ("error", Some(7)), "{:?}", f.value);
    a.stdin = Some(writer.join().unwrap());
    assert_eq!(
        a.call(8, "GET", "/health", None)["text"],
        "ok",
        "the session goes on"
    );
    let peak = peak_rss_kib(a.pid());
    println!(
        "a line of {} MiB refused: attach's peak RSS {before} KiB before it, {peak} KiB after (limit {} KiB)",
        (limit >> 20) + 1,
        limit >> 10
    );
    assert!(
        peak < before + (limit >> 10) + 16 * 1024,
        "attach's peak RSS grew from {before} to {peak} KiB"
    );
    assert!(a.finish().success());
}

/// attach pings a quiet host; a host that pinged and then fell silent ends the session as an
/// end of input would (the call in flight is cancelled upstream), with exit status 1.
#[test]
fn heartbeats_keep_a_quiet_channel_and_end_a_silent_one() {
    let (_gw, mut a) = gateway_and_attach(&["--heartbeat", "0.1", "--heartbeat-timeout", "0.5"]);
    assert_eq!(a.hello["heartbeat_ms"], 100);
    // Ten pings take twice the timeout: a host that never pinged is not cut off for silence.
    for _ in 0..10 {
        assert_eq!(a.next().value, json!({"t": "ping"}));
    }
    assert_eq!(a.call(2, "GET", "/health", None)["text"], "ok");
    let dir = TempDir::new("heartbeat");
    let marker = dir.path("cancelled");
    a.slow_call_running(3, slow_args(100.0, 10_000, Some(&marker)));
    a.send("{\"t\":\"ping\"}\n");
    let status = a.exit();
    assert_eq!(status.code(), Some(1), "{}", a.stderr());
    assert!(a.stderr().contains("--heartbeat-timeout"), "{}", a.stderr());
    assert!(
        wait_file(&marker, LIMIT).is_some(),
        "the call was not cancelled upstream"
    );
    let finals: Vec<_> = a.remaining().into_iter().filter(Frame::is_final).collect();
    assert_eq!(finals.len(), 1, "{finals:?}");
    assert_eq!(finals[0].value, json!({"t": "cancelled", "id": 3}));
}

/// A fresh call id.
fn call_id() -> String {
    mcpgw::wire::frame::CallId::random().to_string()
}

/// The `seq` of each chunk frame, checking that they count up by one.
fn seqs(frames: &[Frame]) -> Vec<u64> {
    let seqs: Vec<u64> = frames
        .iter()
        .filter(|f| f.t() == "chunk")
        .map(|f| {
            f.value["seq"]
                .as_u64()
                .unwrap_or_else(|| panic!("no seq: {:?}", f.value))
        })
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seqs do not count up: {seqs:?}"
    );
    seqs
}

/// Attach's arguments for the gateway `gw`, plus `extra`.
fn attach_to(gw: &Gateway, extra: &[&str]) -> Attach {
    let port = gw.port.to_string();
    let token_file = gw.dir.path("state/token").display().to_string();
    let mut args = vec!["--port", port.as_str(), "--token-file", token_file.as_str()];
    args.extend_from_slice(extra);
    Attach::start(&args)
}

/// Frames of `id` up to its final one, and whatever else arrived meanwhile, until `a` exits.
fn until_killed(a: &mut Attach, id: u64, enough: usize) -> Vec<Frame> {
    let mut got = Vec::new();
    while got.len() < enough {
        got.push(a.next_for(id));
    }
    a.child.kill().unwrap();
    a.exit();
    got.extend(a.remaining().into_iter().filter(|f| f.id() == Some(id)));
    got
}

/// A call whose channel's process is killed mid-call runs on; a new channel resumes it after
/// the chunks the host has, gets each later chunk and the result exactly once, and can
/// acknowledge it, after which the gateway no longer keeps it.
#[test]
fn a_call_outlives_its_killed_channel_and_is_resumed_exactly_once() {
    let gw = start_gateway(&[]);
    let mut first = attach_to(&gw, &[]);
    assert_eq!(first.hello["retention_ms"], 600_000);
    let r = first.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    let call = call_id();
    first.req_resumable(2, "/mcps/ts/tools/slow", slow_args(10.0, 20, None), &call);
    let before = until_killed(&mut first, 2, 3);
    assert!(before.iter().all(|f| f.t() == "chunk"), "{before:?}");
    let had = *seqs(&before).last().unwrap();
    assert_eq!(seqs(&before)[0], 1);

    let mut second = attach_to(&gw, &[]);
    second.resume(5, &call, had);
    let after = second.answer(5);
    let (last, chunks) = after.split_last().unwrap();
    assert_eq!(last.value, json!({"t": "res", "id": 5, "status": 200}));
    let resumed = seqs(chunks);
    assert_eq!(resumed[0], had + 1, "{resumed:?}");
    assert_eq!(
        *resumed.last().unwrap(),
        21,
        "20 progress chunks and the result"
    );
    let result = &chunks.last().unwrap().value["chunk"];
    assert_eq!(result["is_last"], true);
    assert_eq!(result["content"][0]["text"], "done after 20 steps");
    assert!(
        chunks[..chunks.len() - 1]
            .iter()
            .all(|f| f.value["chunk"]["is_last"] == false)
    );

    // Resuming again with everything in hand gives nothing more; acknowledged, it is forgotten.
    second.resume(6, &call, 21);
    assert_eq!(
        second
            .answer(6)
            .iter()
            .map(|f| f.value.clone())
            .collect::<Vec<_>>(),
        [json!({"t": "res", "id": 6, "status": 200})]
    );
    second.ack(&call);
    // The acknowledgement has no answer: ask until it has landed.
    let started = std::time::Instant::now();
    let gone = loop {
        second.resume(7, &call, 21);
        let f = second.answer(7).pop().unwrap();
        if f.value["status"] != 200 {
            break f;
        }
        assert!(started.elapsed() < LIMIT, "the call is still kept");
    };
    assert_eq!(gone.value["status"], 410, "{:?}", gone.value);
    assert!(
        gone.value["body"]["detail"]
            .as_str()
            .unwrap()
            .contains("acknowledged"),
        "{:?}",
        gone.value
    );
    // The id is never used again.
    second.req_resumable(
        8,
        "/mcps/ts/tools/echo",
        json!({"arguments": {"text": "x"}}),
        &call,
    );
    assert_eq!(second.answer(8).pop().unwrap().value["status"], 409);
    assert!(second.finish().success(), "{}", second.stderr());
}

/// The end of input leaves a resumable call running with no frame for it (a call that is not
/// resumable is cancelled as before); a resumed call can be cancelled, and the upstream is told.
#[test]
fn a_resumed_call_can_be_cancelled_and_the_upstream_sees_it() {
    let (gw, mut first) = gateway_and_attach(&[]);
    let dir = TempDir::new("resume-cancel");
    let marker = dir.path("cancelled");
    let call = call_id();
    first.req_resumable(
        2,
        "/mcps/ts/tools/slow",
        slow_args(100.0, 1000, Some(&marker)),
        &call,
    );
    assert_eq!(first.next_for(2).t(), "chunk");
    assert!(first.finish().success(), "{}", first.stderr());
    let rest: Vec<_> = first
        .remaining()
        .into_iter()
        .filter(|f| f.id() == Some(2))
        .collect();
    assert!(rest.iter().all(|f| f.t() == "chunk"), "{rest:?}");
    assert!(
        !marker.exists(),
        "the end of input cancelled a resumable call"
    );

    let mut second = attach_to(&gw, &[]);
    second.resume(3, &call, 0);
    let resumed = second.next_for(3);
    assert_eq!(resumed.t(), "chunk");
    assert_eq!(resumed.value["seq"], 1, "after 0: from the first chunk on");
    second.cancel(3);
    assert!(
        wait_file(&marker, LIMIT).is_some(),
        "the upstream was not told"
    );
    let frames = second.answer(3);
    assert_eq!(
        frames.last().unwrap().value,
        json!({"t": "cancelled", "id": 3})
    );
    second.resume(4, &call, 0);
    let gone = second.answer(4).pop().unwrap();
    assert_eq!(gone.value["status"], 410, "{:?}", gone.value);
    assert!(
        gone.value["body"]["detail"]
            .as_str()
            .unwrap()
            .contains("cancelled"),
        "{:?}",
        gone.value
    );
    assert!(second.finish().success());
}

/// A finished call is forgotten once its retention passed; a running call nobody resumed
/// within it is cancelled. Both then answer 410 saying why; an unknown call answers 404.
#[test]
fn calls_past_their_retention_answer_with_a_clear_error() {
    let gw = start_gateway(&["--call-retention", "1"]);
    let mut a = attach_to(&gw, &[]);
    assert_eq!(a.hello["retention_ms"], 1000);
    let r = a.call(1, "POST", "/mcps", Some(testserver_stdio("ts")));
    assert_eq!(ok_res(&r)["ok"], true);
    let dir = TempDir::new("retention");
    let marker = dir.path("cancelled");
    let (done, running) = (call_id(), call_id());
    a.req_resumable(
        2,
        "/mcps/ts/tools/echo",
        json!({"arguments": {"text": "x"}}),
        &done,
    );
    assert_eq!(a.answer(2).pop().unwrap().value["status"], 200);
    a.req_resumable(
        3,
        "/mcps/ts/tools/slow",
        slow_args(100.0, 1000, Some(&marker)),
        &running,
    );
    assert_eq!(a.next_for(3).t(), "chunk");
    assert!(a.finish().success());

    // Nobody resumes the running call: its retention cancels it upstream.
    assert!(
        wait_file(&marker, LIMIT).is_some(),
        "the abandoned call still runs"
    );
    let mut b = attach_to(&gw, &[]);
    for (id, call, why) in [
        (4, &done, "ended more than 1s ago"),
        (5, &running, "nobody followed it"),
    ] {
        b.resume(id, call, 0);
        let f = b.answer(id).pop().unwrap();
        assert_eq!(f.value["status"], 410, "{:?}", f.value);
        let detail = f.value["body"]["detail"].as_str().unwrap();
        assert!(
            detail.contains(why) && detail.contains("--call-retention"),
            "{detail}"
        );
    }
    b.resume(6, &call_id(), 0);
    let f = b.answer(6).pop().unwrap();
    assert_eq!(f.value["status"], 404, "{:?}", f.value);
    assert!(b.finish().success());
}

/// A resumable call's first progress line over plain HTTP; the response (dropping it leaves the
/// call running) and its `mcpgw-seq`.
async fn first_line(
    gw: &Gateway,
    method: reqwest::Method,
    path: &str,
    call: Option<&str>,
    body: Option<serde_json::Value>,
) -> (reqwest::Response, u64, serde_json::Value) {
    let mut request = gw
        .http
        .request(method, gw.url(path))
        .header("authorization", format!("Bearer {}", gw.token))
        .header("accept", "application/x-ndjson");
    if let Some(call) = call {
        request = request.header("mcpgw-call-id", call);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let mut response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let seq = response.headers()["mcpgw-seq"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut line = Vec::new();
    while !line.contains(&b'\n') {
        line.extend_from_slice(&response.chunk().await.unwrap().expect("a line"));
    }
    let end = line.iter().position(|&b| b == b'\n').unwrap();
    (response, seq, serde_json::from_slice(&line[..end]).unwrap())
}

/// The first line of `GET /calls/{call}?after=K`, as [`first_line`].
async fn resumed_line(
    gw: &Gateway,
    call: &str,
    after: u64,
) -> (reqwest::Response, u64, serde_json::Value) {
    let path = format!("/calls/{call}?after={after}");
    first_line(gw, reqwest::Method::GET, &path, None, None).await
}

/// `POST /mcps/ts/tools/echo` with `text`, sent under the caller's `mcpgw-call-id` `call`.
async fn echo_as_call(gw: &Gateway, text: &str, call: &str) -> Reply {
    let auth = format!("Bearer {}", gw.token);
    let body = serde_json::to_vec(&json!({"arguments": {"text": text}})).unwrap();
    let headers = [("mcpgw-call-id", call)];
    gw.send_with(
        "POST",
        "/mcps/ts/tools/echo",
        Some(body),
        Some(&auth),
        &headers,
    )
    .await
}

/// The REST side of resumable calls: the same answer again from `GET /calls/{id}`, ids never
/// reused, acknowledging and cancelling, and the memory bound (finished calls forgotten first,
/// then the oldest progress dropped, then new calls refused).
#[tokio::test]
async fn resumable_calls_over_plain_http_within_their_memory() {
    let gw = start_gateway(&["--call-retention-bytes", "4096"]);
    let health = gw.http.get(gw.url("/health")).send().await.unwrap();
    assert_eq!(health.headers()["mcpgw-call-retention-ms"], "600000");
    assert_eq!(health.headers()["mcpgw-max-connections"], "1024");
    assert_eq!(health.headers()["mcpgw-idle-timeout-ms"], "60000");
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let auth = format!("Bearer {}", gw.token);
    let done = call_id();
    let first = echo_as_call(&gw, "again", &done).await.expect(200);
    let again = gw.get(&format!("/calls/{done}")).await.expect(200);
    assert_eq!(first.json(), again.json());
    assert_eq!(chunk_text(&again.json()), "again");
    let taken = echo_as_call(&gw, "again", &done).await.expect(409);
    assert!(
        taken.detail().contains("never run twice"),
        "{}",
        taken.detail()
    );
    echo_as_call(&gw, "again", "XYZ").await.expect(400);
    gw.get("/calls/nothex").await.expect(400);
    gw.get(&format!("/calls/{}", call_id())).await.expect(404);
    // A cancel that overtook its call: the call, arriving after, never runs.
    let overtaken = call_id();
    gw.delete(&format!("/calls/{overtaken}")).await.expect(404);
    echo_as_call(&gw, "late", &overtaken).await.expect(409);

    // A running call whose caller went away: an acknowledgement leaves it running; a resume
    // gets the chunks after those it asks to skip.
    let dir = TempDir::new("rest-calls");
    let marker = dir.path("cancelled");
    let running = call_id();
    let (caller, seq, chunk) = first_line(
        &gw,
        reqwest::Method::POST,
        "/mcps/ts/tools/slow",
        Some(&running),
        Some(slow_args(100.0, 1000, Some(&marker))),
    )
    .await;
    assert_eq!((seq, chunk["is_last"].clone()), (1, json!(false)));
    drop(caller);
    let acked = gw
        .delete(&format!("/calls/{running}?ack=true"))
        .await
        .expect(409);
    assert!(
        acked.detail().contains("still running"),
        "{}",
        acked.detail()
    );
    let (resumed, seq, _) = resumed_line(&gw, &running, 2).await;
    assert_eq!(seq, 3);
    drop(resumed);

    // Running calls fill the 4 KiB: the finished call is forgotten first, then progress goes
    // (the oldest of the call that holds the most), then a new call is refused.
    let mut others = Vec::new();
    let refused = loop {
        let call = call_id();
        let response = gw
            .http
            .post(gw.url("/mcps/ts/tools/slow"))
            .header("authorization", &auth)
            .header("accept", "application/x-ndjson")
            .header("mcpgw-call-id", &call)
            .json(&slow_args(100.0, 1000, None))
            .send()
            .await
            .unwrap();
        if response.status() != 200 {
            break response;
        }
        others.push(call);
        assert!(others.len() < 16, "the budget admits every call");
    };
    assert_eq!(refused.status(), 503);
    let detail = refused.text().await.unwrap();
    assert!(detail.contains("--call-retention-bytes"), "{detail}");
    assert_eq!(
        others.len(),
        7,
        "4096 bytes hold eight calls of 512 bytes each"
    );
    let evicted = gw.get(&format!("/calls/{done}")).await.expect(410);
    assert!(
        evicted.detail().contains("make room"),
        "{}",
        evicted.detail()
    );
    let (resumed, seq, _) = resumed_line(&gw, &running, 0).await;
    assert!(
        seq > 3,
        "the oldest progress was kept: the first line is number {seq}"
    );
    drop(resumed);

    // Cancelled: the upstream is told, and the call answers 410 from then on.
    gw.delete(&format!("/calls/{running}")).await.expect(200);
    assert!(appears(&marker, LIMIT).await, "the upstream was not told");
    let gone = gw.get(&format!("/calls/{running}")).await.expect(410);
    assert!(gone.detail().contains("cancelled"), "{}", gone.detail());
    for call in others {
        gw.delete(&format!("/calls/{call}")).await.expect(200);
    }
}

/// A container of the test image, or `None` (having said why) when Docker is not there.
fn container_or_skip() -> Option<Container> {
    match container::unavailable(Engine::Docker) {
        Some(why) => {
            eprintln!("SKIPPED: {why}");
            None
        }
        None => Some(Container::start(Engine::Docker)),
    }
}

/// A session channel into `container`: `docker exec -i ... attach`, launching the gateway the
/// first time.
fn docker_channel(container: &Container, extra: &[&str]) -> Attach {
    let mut args = vec![
        "mcpgw-gateway",
        "attach",
        "--state-dir",
        "/tmp/mcpgw",
        "--launch",
    ];
    args.extend_from_slice(extra);
    Attach::start_channel(container.exec_i(&args))
}

fn register_in_docker(a: &mut Attach) {
    let spec = json!({"name": "ts", "mcp_config": {"type": "stdio_mcp",
                      "command": "/usr/local/bin/mcpgw-testserver", "args": ["stdio"]}});
    let r = a.call(1, "POST", "/mcps", Some(spec));
    assert_eq!(ok_res(&r)["ok"], true);
}

/// Every chunk number of one call seen over its channels, in order, and its result chunk.
fn all_once(seen: &[Frame], steps: u64) {
    let mut numbers: Vec<u64> = seen
        .iter()
        .filter(|f| f.t() == "chunk")
        .map(|f| f.value["seq"].as_u64().unwrap())
        .collect();
    numbers.sort();
    assert_eq!(
        numbers,
        (1..=steps + 1).collect::<Vec<_>>(),
        "every chunk exactly once"
    );
    let results: Vec<_> = seen
        .iter()
        .filter(|f| f.value["chunk"]["is_last"] == true)
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(
        results[0].value["chunk"]["content"][0]["text"],
        format!("done after {steps} steps")
    );
    assert_eq!(
        seen.iter().filter(|f| f.t() == "res").count(),
        1,
        "one final answer"
    );
}

/// Through a real `docker exec -i`: the host's exec process is killed mid-call; a new exec
/// resumes the call and gets every chunk and the result exactly once.
#[test]
fn docker_a_call_survives_its_exec_being_killed() {
    let Some(container) = container_or_skip() else {
        return;
    };
    let mut first = docker_channel(&container, &[]);
    register_in_docker(&mut first);
    let call = call_id();
    first.req_resumable(2, "/mcps/ts/tools/slow", slow_args(20.0, 20, None), &call);
    let mut seen = until_killed(&mut first, 2, 3);
    let had = *seqs(&seen).last().unwrap();

    let mut second = docker_channel(&container, &[]);
    assert_eq!(second.hello["launched"], false);
    assert_eq!(second.hello["pid"], first.hello["pid"]);
    second.resume(3, &call, had);
    let resumed = second.answer(3);
    assert_eq!(seqs(&resumed)[0], had + 1);
    seen.extend(resumed);
    all_once(&seen, 20);
    second.ack(&call);
    assert!(second.finish().success(), "{}", second.stderr());
}

/// Through a real `docker exec -i` frozen by SIGSTOP (no end of file reaches the sandbox):
/// attach's heartbeat timeout ends its session, the call runs on, a new exec resumes it and
/// cancels it, and the upstream sees the cancel.
#[test]
fn docker_a_frozen_exec_is_noticed_and_its_call_resumed_and_cancelled() {
    let Some(container) = container_or_skip() else {
        return;
    };
    let mut first = docker_channel(
        &container,
        &[
            "--heartbeat",
            "0.5",
            "--heartbeat-timeout",
            "2",
            "--log-file",
            "/tmp/first.log",
        ],
    );
    register_in_docker(&mut first);
    let call = call_id();
    let marker = "/tmp/cancelled";
    first.req_resumable(
        2,
        "/mcps/ts/tools/slow",
        json!({"arguments": {"seconds": 60, "steps": 120, "cancel_marker": marker}}),
        &call,
    );
    let mut seen = vec![first.next_for(2)];
    assert_eq!(seen[0].t(), "chunk");
    // The ping arms attach's timeout; the answer after it shows that it went through.
    first.frame(&json!({"t": "ping"}));
    assert_eq!(first.call(9, "GET", "/health", None)["status"], 200);
    unsafe {
        libc::kill(first.pid() as libc::pid_t, libc::SIGSTOP);
    }
    let log = container
        .wait_for_text("/tmp/first.log", "nothing arrived from the host", LIMIT)
        .expect("attach did not notice the frozen channel");
    assert!(log.contains("--heartbeat-timeout"), "{log}");
    seen.extend(first.remaining().into_iter().filter(|f| f.id() == Some(2)));
    let had = *seqs(&seen).last().unwrap();

    let mut second = docker_channel(&container, &[]);
    second.resume(3, &call, had);
    let resumed = second.next_for(3);
    assert_eq!(resumed.value["seq"], had + 1, "{:?}", resumed.value);
    second.cancel(3);
    assert_eq!(
        container
            .wait_for_text(marker, "cancelled", LIMIT)
            .as_deref(),
        Some("cancelled"),
        "the upstream was not told"
    );
    assert_eq!(
        second.answer(3).last().unwrap().value,
        json!({"t": "cancelled", "id": 3})
    );
    assert!(second.finish().success(), "{}", second.stderr());
    unsafe {
        libc::kill(first.pid() as libc::pid_t, libc::SIGKILL);
        libc::kill(first.pid() as libc::pid_t, libc::SIGCONT);
    }
    first.exit();
}

/// `docker pause` freezes the whole sandbox mid-call; once unpaused, the same channel carries
/// every chunk and the result exactly once.
#[test]
fn docker_a_call_survives_a_paused_container() {
    let Some(container) = container_or_skip() else {
        return;
    };
    let mut a = docker_channel(&container, &[]);
    register_in_docker(&mut a);
    let call = call_id();
    a.req_resumable(2, "/mcps/ts/tools/slow", slow_args(8.0, 16, None), &call);
    let mut seen = vec![a.next_for(2), a.next_for(2)];
    container.set_paused(true);
    // The outage itself: three seconds of a sandbox that does nothing at all.
    std::thread::sleep(std::time::Duration::from_secs(3));
    container.set_paused(false);
    seen.extend(a.answer(2));
    seqs(&seen);
    all_once(&seen, 16);
    a.ack(&call);
    assert!(a.finish().success(), "{}", a.stderr());
}

/// A resumable call that is acknowledged gives its memory back at once (nothing holds its
/// outcome until its retention would have ended).
#[tokio::test]
async fn an_acknowledged_call_gives_its_memory_back() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let auth = format!("Bearer {}", gw.token);
    let big = serde_json::to_vec(&json!({"arguments": {"bytes": 4 << 20}})).unwrap();
    let call = |id: String| {
        let (gw, auth, big) = (&gw, &auth, big.clone());
        async move {
            let r = gw
                .send_with(
                    "POST",
                    "/mcps/ts/tools/big",
                    Some(big),
                    Some(auth),
                    &[("mcpgw-call-id", &id)],
                )
                .await
                .expect(200);
            assert_eq!(chunk_text(&r.json()).len(), 4 << 20);
            gw.delete(&format!("/calls/{id}?ack=true"))
                .await
                .expect(200);
        }
    };
    call(call_id()).await;
    let before = rss_kib(gw.pid());
    for _ in 0..4 {
        call(call_id()).await;
    }
    let after = rss_kib(gw.pid());
    println!("the gateway's RSS: {before} KiB after one 4 MiB call, {after} KiB after four more");
    assert!(
        after < before + 8 * 1024,
        "acknowledged outcomes are still held: {before} -> {after} KiB"
    );
}

/// attach holds an acknowledgement while a request is in flight, so that forgetting an answered
/// call never holds up a request in the gateway, and passes it on once none is.
#[tokio::test]
async fn an_acknowledgement_waits_for_the_requests_in_flight() {
    let (gw, mut a) = gateway_and_attach(&[]);
    let call = call_id();
    a.req_resumable(
        1,
        "/mcps/ts/tools/echo",
        json!({"arguments": {"text": "x"}}),
        &call,
    );
    assert_eq!(a.answer(1).pop().unwrap().value["status"], 200);
    a.slow_call_running(2, slow_args(1.0, 4, None));
    a.ack(&call);
    // Answered after the acknowledgement: attach has read it, and call 2 still runs.
    assert_eq!(a.call(3, "GET", "/health", None)["status"], 200);
    gw.get(&format!("/calls/{call}")).await.expect(200);
    let last = a.answer(2).pop().unwrap();
    assert_eq!(last.value["status"], 200, "{:?}", last.value);
    let started = std::time::Instant::now();
    let gone = loop {
        let r = gw.get(&format!("/calls/{call}")).await;
        if r.status != 200 {
            break r;
        }
        assert!(started.elapsed() < LIMIT, "the call is still kept");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(gone.status, 410, "{}", gone.text());
    assert!(gone.detail().contains("acknowledged"), "{}", gone.detail());
    assert!(a.finish().success(), "{}", a.stderr());
}

/// `POST /calls/ack` forgets every finished call of its list in one request; a running call
/// goes on, one not kept is passed over, and a bad id or too many ids are refused whole.
#[tokio::test]
async fn many_calls_are_acknowledged_in_one_request() {
    let gw = start_gateway(&[]);
    gw.add(testserver_stdio("ts"), "").await.expect(200);
    let finished = [call_id(), call_id()];
    for call in &finished {
        echo_as_call(&gw, "x", call).await.expect(200);
    }
    let dir = TempDir::new("ack-calls");
    let running = call_id();
    let (caller, ..) = first_line(
        &gw,
        reqwest::Method::POST,
        "/mcps/ts/tools/slow",
        Some(&running),
        Some(slow_args(100.0, 1000, Some(&dir.path("cancelled")))),
    )
    .await;
    drop(caller);
    let ack = |calls: Vec<String>| {
        let gw = &gw;
        async move {
            let reply = gw.post("/calls/ack", json!({ "calls": calls })).await;
            gw.assert_documented("POST", "/calls/ack", &reply).await;
            reply
        }
    };

    // Refused whole: nothing is forgotten.
    let bad = ack(vec![finished[0].clone(), "nothex".into()])
        .await
        .expect(400);
    assert!(bad.detail().contains("nothex"), "{}", bad.detail());
    let too_many = ack(vec![call_id(); 1025]).await.expect(400);
    assert!(too_many.detail().contains("1024"), "{}", too_many.detail());
    gw.get(&format!("/calls/{}", finished[0])).await.expect(200);

    let all = vec![
        finished[0].clone(),
        finished[1].clone(),
        running.clone(),
        call_id(),
    ];
    ack(all).await.expect(200);
    for call in &finished {
        let gone = gw.get(&format!("/calls/{call}")).await.expect(410);
        assert!(gone.detail().contains("acknowledged"), "{}", gone.detail());
    }
    // The running call goes on: a resume still gets its progress.
    let (_resumed, seq, chunk) = resumed_line(&gw, &running, 0).await;
    assert_eq!((seq, chunk["is_last"].clone()), (1, json!(false)));
    gw.delete(&format!("/calls/{running}")).await.expect(200);
}
