//! The session state machine fed by hand, frame by frame. (Through the real `attach` and gateway
//! it is tested end to end in `tests/session_e2e.rs`.)

use super::*;
use crate::client::{CallOptions, Config};
use crate::wire::frame::VERSION;

fn hello_line(nonce: &str, launched: bool) -> String {
    let mut out = Vec::new();
    GatewayFrame::Hello(Hello {
        v: VERSION,
        version: "0.2.0".into(),
        port: 41000,
        pid: 77,
        instance_nonce: Some(nonce.into()),
        token_file: Some("/tmp/s/token".into()),
        launched,
        max_frame_bytes: 1 << 20,
        heartbeat_ms: 0,
        retention_ms: 0,
    })
    .encode(&mut out);
    String::from_utf8(out).unwrap()
}

fn nonce_of(command: &Command) -> String {
    command
        .text
        .split("--instance-nonce '")
        .nth(1)
        .unwrap()
        .split('\'')
        .next()
        .unwrap()
        .to_owned()
}

fn written(session: &mut Session) -> Vec<serde_json::Value> {
    let out = session.take_output();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn events(session: &mut Session) -> Vec<Event> {
    std::iter::from_fn(|| session.poll_event()).collect()
}

/// A client that knows no gateway, its session opened past the hello.
fn opened() -> (Client, Session) {
    let client = Client::new(Config::default()).unwrap();
    let (mut session, command) = Session::open(&client).unwrap();
    assert!(
        command.text.contains(" attach --state-dir "),
        "{}",
        command.text
    );
    assert!(command.text.ends_with(" --launch"), "{}", command.text);
    session.feed(hello_line(&nonce_of(&command), true).as_bytes());
    assert!(matches!(events(&mut session)[..], [Event::Opened(_)]));
    (client, session)
}

#[test]
fn requests_wait_for_the_hello_and_the_client_learns_the_gateway() {
    let client = Client::new(Config::default()).unwrap();
    let (mut session, command) = Session::open(&client).unwrap();
    let mut op = client.prepare_health(&CallOptions::default());
    // The client knows no gateway yet, so the operation cannot be prepared...
    assert!(op.is_finished());
    assert!(session.submit(&mut op, false, None).is_err());
    // ...until the session's hello tells it about the one `attach --launch` started.
    session.feed(b"Welcome to the sandbox!\r\n\xff\xfe junk\n");
    session.feed(&hello_line(&nonce_of(&command), true).as_bytes()[..20]);
    assert!(session.hello().is_none());
    session.feed(&hello_line(&nonce_of(&command), true).as_bytes()[20..]);
    assert!(matches!(events(&mut session)[..], [Event::Opened(_)]));
    let info = client.gateway().unwrap();
    assert_eq!((info.port, info.pid), (41000, 77));
    assert!(command.text.contains(&info.state_dir));

    let mut list = client.prepare_list_mcps(&CallOptions::default());
    let id = session.submit(&mut list, false, None).unwrap();
    assert!(list.command().is_none() && list.is_on_session());
    let frames = written(&mut session);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["t"], "req");
    assert_eq!(frames[0]["method"], "GET");
    assert_eq!(frames[0]["path"], "/mcps?agent_id=&session_id=");
    session.feed(format!("{{\"t\":\"res\",\"id\":{id},\"status\":200,\"body\":[]}}\n").as_bytes());
    let Some(Event::Finished { id: done, answer }) = session.poll_event() else {
        panic!("no answer")
    };
    assert_eq!(done, id);
    list.deliver(answer);
    assert_eq!(list.finish().unwrap(), vec![]);
}

#[test]
fn queued_requests_are_written_once_the_hello_comes() {
    let client = Client::new(Config {
        port: 5600,
        token_file: Some("/t".into()),
        ..Config::default()
    })
    .unwrap();
    let (mut session, command) = Session::open(&client).unwrap();
    assert!(
        command
            .text
            .starts_with("exec 'mcpgw-gateway' attach --host '127.0.0.1' --port 5600"),
        "{}",
        command.text
    );
    let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "echo", r#"{"text":"hi"}"#);
    let id = session.submit(&mut op, true, None).unwrap();
    assert!(session.take_output().is_empty());
    session.feed(hello_line("any", false).as_bytes());
    let frames = written(&mut session);
    assert_eq!(frames[0]["id"], id);
    assert_eq!(frames[0]["stream"], true);
    assert_eq!(frames[0]["body"]["arguments"]["text"], "hi");
    // A gateway it did not launch is not recorded as launched.
    assert!(client.gateway().is_none());
}

#[test]
fn a_streamed_call_reports_progress_then_its_last_chunk() {
    let (client, mut session) = opened();
    let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "slow", "{}");
    let id = session.submit(&mut op, true, None).unwrap();
    let progress = |n: u32| {
        format!(
            "{{\"t\":\"chunk\",\"id\":{id},\"chunk\":{{\"content\":[],\"state\":\"running\",\"is_last\":false,\
             \"metadata\":{{\"mcp_progress\":{{\"progress\":{n},\"total\":2,\"message\":null}}}},\"id\":\"c{n}\"}}}}\n"
        )
    };
    session.feed(format!("{}{}", progress(1), progress(2)).as_bytes());
    let got: Vec<_> = events(&mut session)
        .into_iter()
        .map(|e| match e {
            Event::Progress { id: i, chunk } => {
                assert_eq!(i, id);
                let chunk: ToolChunk = serde_json::from_str(chunk.get()).unwrap();
                chunk.progress().unwrap()["progress"].as_u64().unwrap()
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, [1, 2]);
    session.feed(
        format!(
            "{{\"t\":\"chunk\",\"id\":{id},\"chunk\":{{\"content\":[{{\"type\":\"text\",\"text\":\"done\",\
             \"id\":\"b\",\"created_at\":\"t\",\"finished_at\":null}}],\"state\":\"running\",\"is_last\":true,\
             \"metadata\":{{}},\"id\":\"last\"}}}}\n{{\"t\":\"res\",\"id\":{id},\"status\":200}}\n"
        )
        .as_bytes(),
    );
    let Some(Event::Finished { answer, .. }) = session.poll_event() else {
        panic!("no answer")
    };
    op.deliver(answer);
    let chunk = op.finish().unwrap();
    assert_eq!(chunk.id, "last");
    assert!(chunk.is_last);
}

#[test]
fn a_streamed_failure_after_progress_is_the_error_it_would_have_been() {
    let (client, mut session) = opened();
    let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "slow", "{}");
    let id = session.submit(&mut op, true, None).unwrap();
    session.feed(
        format!(
            "{{\"t\":\"chunk\",\"id\":{id},\"chunk\":{{\"content\":[],\"state\":\"error\",\"is_last\":true,\
             \"metadata\":{{\"error\":{{\"status\":504,\"detail\":\"too slow\"}}}},\"id\":\"x\"}}}}\n\
             {{\"t\":\"res\",\"id\":{id},\"status\":200}}\n"
        )
        .as_bytes(),
    );
    let Some(Event::Finished { answer, .. }) = session.poll_event() else {
        panic!("no answer")
    };
    op.deliver(answer);
    let e = op.finish().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Deadline);
    assert_eq!((e.http_status(), e.detail()), (Some(504), Some("too slow")));
}

#[test]
fn errors_statuses_and_unknown_ids() {
    let (client, mut session) = opened();
    let opts = CallOptions::default();
    let mut missing = client.prepare_list_tools(&opts, "nope");
    let a = session.submit(&mut missing, false, None).unwrap();
    let mut relayed = client.prepare_list_tools(&opts, "m");
    let b = session.submit(&mut relayed, false, None).unwrap();
    session.feed(
        format!(
            "{{\"t\":\"res\",\"id\":{a},\"status\":404,\"body\":{{\"detail\":\"'nope' not found\"}}}}\n\
             {{\"t\":\"error\",\"id\":{b},\"message\":\"connection refused\"}}\n\
             {{\"t\":\"res\",\"id\":999,\"status\":200}}\n\
             {{\"t\":\"error\",\"message\":\"line 3: not a frame\"}}\n\
             not json at all\n"
        )
        .as_bytes(),
    );
    let evs = events(&mut session);
    assert_eq!(evs.len(), 5, "{evs:?}");
    for e in evs {
        match e {
            Event::Finished { id, answer } if id == a => missing.deliver(answer),
            Event::Finished { id, answer } if id == b => relayed.deliver(answer),
            Event::Notice(n) => assert!(n.contains("999") || n.contains("not a frame"), "{n}"),
            other => panic!("{other:?}"),
        }
    }
    let e = missing.finish().unwrap_err();
    assert_eq!(
        (e.kind(), e.http_status()),
        (ErrorKind::NotFound, Some(404))
    );
    let e = relayed.finish().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning);
    assert!(e.message().contains("connection refused"), "{e}");
}

#[test]
fn cancel_writes_a_cancel_frame_and_forgets_the_operation() {
    let (client, mut session) = opened();
    let mut op = client.prepare_call_tool(&CallOptions::default(), "m", "slow", "{}");
    let id = session.submit(&mut op, false, None).unwrap();
    written(&mut session);
    assert!(session.cancel(id));
    assert!(!session.cancel(id));
    op.abandon(Error::new(ErrorKind::Cancelled, "the caller gave up"));
    assert_eq!(
        written(&mut session),
        [serde_json::json!({"t": "cancel", "id": id})]
    );
    assert_eq!(session.in_flight(), 0);
    session.feed(format!("{{\"t\":\"cancelled\",\"id\":{id}}}\n").as_bytes());
    assert!(events(&mut session).is_empty());
    assert_eq!(op.finish().unwrap_err().kind(), ErrorKind::Cancelled);
}

#[test]
fn a_lost_channel_fails_what_was_written_and_returns_what_was_not() {
    let client = Client::new(Config {
        port: 5600,
        token_file: Some("/t".into()),
        ..Config::default()
    })
    .unwrap();
    let (mut session, _) = Session::open(&client).unwrap();
    let mut queued = client.prepare_list_mcps(&CallOptions::default());
    let q = session.submit(&mut queued, false, None).unwrap();
    session.feed(b"sh: 1: exec: mcpgw-gateway: not found\n");
    session.feed_eof("exit status 127");
    let evs = events(&mut session);
    assert!(matches!(evs[0], Event::Unsent { id } if id == q), "{evs:?}");
    let Event::Lost(e) = &evs[1] else {
        panic!("{evs:?}")
    };
    assert_eq!(e.kind(), ErrorKind::SessionLost);
    assert!(e.message().contains("exit status 127"), "{e}");
    assert!(e.message().contains("mcpgw-gateway: not found"), "{e}");
    // The unsent operation goes on over one-shot commands.
    queued.resume();
    assert!(queued.command().unwrap().text.contains(" request GET ") || queued.command().is_some());

    let (client, mut session) = opened();
    let mut op = client.prepare_list_mcps(&CallOptions::default());
    let id = session.submit(&mut op, false, None).unwrap();
    written(&mut session);
    session.feed_eof("");
    let evs = events(&mut session);
    let Event::Finished { id: failed, answer } = &evs[0] else {
        panic!("{evs:?}")
    };
    assert_eq!(*failed, id);
    assert_eq!(answer.as_ref().unwrap_err().kind(), ErrorKind::SessionLost);
    assert!(matches!(evs[1], Event::Lost(_)));
    let mut later = client.prepare_list_mcps(&CallOptions::default());
    assert_eq!(
        session.submit(&mut later, false, None).unwrap_err().kind(),
        ErrorKind::SessionLost
    );
}

#[test]
fn another_gateway_or_another_version_is_refused() {
    let client = Client::new(Config::default()).unwrap();
    let (mut session, _) = Session::open(&client).unwrap();
    session.feed(hello_line("someone-else", false).as_bytes());
    let Some(Event::Lost(e)) = session.poll_event() else {
        panic!("not refused")
    };
    assert_eq!(e.kind(), ErrorKind::GatewayNotRunning);

    let (mut session, command) = Session::open(&client).unwrap();
    let line = hello_line(&nonce_of(&command), true).replace("\"v\":2", "\"v\":99");
    session.feed(line.as_bytes());
    let Some(Event::Lost(e)) = session.poll_event() else {
        panic!("not refused")
    };
    assert!(e.message().contains("version 99"), "{e}");
}

#[test]
fn only_rest_operations_that_have_not_started_go_over_a_session() {
    let (client, mut session) = opened();
    let opts = CallOptions::default();
    let mut stop = client.prepare_stop_gateway(&opts);
    assert_eq!(
        session.submit(&mut stop, false, None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert!(stop.command().is_some(), "left as it was");
    let mut big = client.prepare_call_tool(
        &opts,
        "m",
        "echo",
        &serde_json::json!({"text": "x".repeat(2 << 20)}).to_string(),
    );
    let e = session.submit(&mut big, false, None).unwrap_err();
    assert!(e.message().contains("frame limit"), "{e}");
    // Refused, not failed: it can still go over one-shot commands.
    assert!(!big.is_finished());
    assert!(big.command().is_some());
}

#[test]
fn an_endless_line_loses_the_session_without_keeping_it() {
    let (_client, mut session) = opened();
    let piece = vec![b'x'; 1 << 20];
    for _ in 0..(MAX_ANSWER_LINE_BYTES >> 20) + 1 {
        session.feed(&piece);
        if session.is_lost() {
            break;
        }
    }
    assert!(session.is_lost());
    assert!(session.line.capacity() < 1 << 20);
}

#[test]
fn a_message_larger_than_the_sessions_frames_is_refused_on_the_host() {
    let (_, mut session) = opened();
    let id = session.open_connection("/mcps/ts/connection").unwrap();
    session.feed(format!("{{\"t\":\"opened\",\"id\":{id}}}\n").as_bytes());
    let _ = events(&mut session);
    let _ = session.take_output();
    // The hello announced 1 MiB frames.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"pad":"{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    let e = session.send_message(id, &big).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("frame limit of 1048576 bytes"), "{e}");
    assert!(session.take_output().is_empty(), "nothing was written");
    // A message that fits goes out.
    session
        .send_message(id, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
        .unwrap();
    assert_eq!(written(&mut session)[0]["t"], "msg");
}
