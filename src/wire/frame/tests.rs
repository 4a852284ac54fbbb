use super::*;

fn line(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    f(&mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn host_frames_round_trip_on_one_line() {
    let body: &RawValue =
        serde_json::from_str("{\"arguments\":\n  {\"text\": \"a\\nb\"}\n}").unwrap();
    let req = HostFrame::Request(Request {
        id: 7,
        method: "POST".into(),
        path: "/mcps/m/tools/t?agent_id=&session_id=".into(),
        body: Some(body),
        stream: true,
        call: None,
    });
    let text = line(|o| req.encode(o));
    assert_eq!(text.matches('\n').count(), 1);
    assert!(text.ends_with('\n'));
    let HostFrame::Request(back) = HostFrame::parse(&text).unwrap() else {
        panic!("not a request")
    };
    assert_eq!((back.id, &*back.method, back.stream), (7, "POST", true));
    let args: serde_json::Value = serde_json::from_str(back.body.unwrap().get()).unwrap();
    assert_eq!(args["arguments"]["text"], "a\nb");
    let cancel = line(|o| HostFrame::Cancel { id: 9 }.encode(o));
    assert_eq!(cancel, "{\"t\":\"cancel\",\"id\":9}\n");
    assert!(matches!(
        HostFrame::parse(&cancel).unwrap(),
        HostFrame::Cancel { id: 9 }
    ));
}

#[test]
fn bad_host_frames_are_named() {
    for (text, id, says) in [
        ("garbage", None, "not a frame"),
        ("{\"id\":1}", Some(1), "not a frame"),
        ("{\"t\":\"req\",\"id\":3}", Some(3), "needs a \"method\""),
        (
            "{\"t\":\"req\",\"id\":3,\"method\":\"PATCH\",\"path\":\"/x\"}",
            Some(3),
            "method",
        ),
        (
            "{\"t\":\"req\",\"id\":3,\"method\":\"GET\",\"path\":\"/x y\"}",
            Some(3),
            "path",
        ),
        ("{\"t\":\"cancel\"}", None, "needs an \"id\""),
        ("{\"t\":\"boom\",\"id\":4}", Some(4), "unknown frame type"),
    ] {
        let e = HostFrame::parse(text).unwrap_err();
        assert_eq!(e.id, id, "{text}");
        assert!(e.message.contains(says), "{text}: {e}");
    }
}

#[test]
fn gateway_frames_round_trip() {
    let hello = GatewayFrame::Hello(Hello {
        v: VERSION,
        version: "0.2.0".into(),
        port: 41000,
        pid: 77,
        instance_nonce: Some("n".into()),
        token_file: Some("/t".into()),
        launched: true,
        max_frame_bytes: 1 << 20,
        heartbeat_ms: 5000,
        retention_ms: 600_000,
    });
    let text = line(|o| hello.encode(o));
    assert!(text.starts_with("{\"t\":\"hello\",\"v\":2,"), "{text}");
    let GatewayFrame::Hello(back) = GatewayFrame::parse(&text).unwrap() else {
        panic!("not a hello")
    };
    assert_eq!(back.port, 41000);
    assert_eq!(line(|o| GatewayFrame::Hello(back).encode(o)), text);

    let chunk: &RawValue = serde_json::from_str("{\"is_last\":false}").unwrap();
    for frame in [
        GatewayFrame::Chunk {
            id: 1,
            chunk,
            seq: None,
        },
        GatewayFrame::Chunk {
            id: 1,
            chunk,
            seq: Some(3),
        },
        GatewayFrame::Response {
            id: 1,
            status: 200,
            body: body_of(b"[{\"a\":1}]"),
        },
        GatewayFrame::Response {
            id: 2,
            status: 401,
            body: body_of(b"invalid gateway token"),
        },
        GatewayFrame::Response {
            id: 3,
            status: 204,
            body: body_of(b""),
        },
        GatewayFrame::Cancelled { id: 4 },
        GatewayFrame::Error {
            id: None,
            message: "line 3: not a frame".into(),
        },
    ] {
        let text = line(|o| frame.encode(o));
        assert_eq!(text.matches('\n').count(), 1, "{text}");
        let back = GatewayFrame::parse(&text).unwrap();
        assert_eq!(line(|o| back.encode(o)), text);
    }
    // As documented: the status before the body.
    let res = GatewayFrame::Response {
        id: 7,
        status: 200,
        body: body_of(b"{\"a\":1}"),
    };
    assert_eq!(
        line(|o| res.encode(o)),
        "{\"t\":\"res\",\"id\":7,\"status\":200,\"body\":{\"a\":1}}\n"
    );
    assert_eq!(body_of(b"ok").as_bytes(), b"ok");
    assert_eq!(body_of(b"\xff").as_bytes(), "\u{fffd}".as_bytes());
}

#[test]
fn v2_host_frames_round_trip() {
    let call = CallId::random();
    assert_eq!(call.as_str().len(), 32);
    let msg: &RawValue =
        serde_json::from_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}").unwrap();
    for frame in [
        HostFrame::Request(Request {
            id: 1,
            method: "POST".into(),
            path: "/mcps/m/tools/t".into(),
            body: None,
            stream: true,
            call: Some(call.clone()),
        }),
        HostFrame::Resume {
            id: 2,
            call: call.clone(),
            after: 3,
            stream: true,
        },
        HostFrame::Ack { call: call.clone() },
        HostFrame::Open {
            id: 4,
            path: "/mcps/m/connection?agent_id=&session_id=".into(),
        },
        HostFrame::Message { id: 4, msg },
        HostFrame::Close { id: 4 },
        HostFrame::Ping,
    ] {
        let text = line(|o| frame.encode(o));
        assert_eq!(text.matches('\n').count(), 1, "{text}");
        let back = HostFrame::parse(&text).unwrap();
        assert_eq!(line(|o| back.encode(o)), text);
    }
    assert_eq!(line(|o| HostFrame::Ping.encode(o)), "{\"t\":\"ping\"}\n");
}

#[test]
fn v2_gateway_frames_round_trip() {
    let msg: &RawValue =
        serde_json::from_str("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}").unwrap();
    for frame in [
        GatewayFrame::Opened { id: 4 },
        GatewayFrame::Message { id: 4, msg },
        GatewayFrame::Closed {
            id: 4,
            reason: Some("the upstream restarted".into()),
            status: None,
        },
        GatewayFrame::Closed {
            id: 5,
            reason: Some("no MCP named x".into()),
            status: Some(404),
        },
        GatewayFrame::Closed {
            id: 6,
            reason: None,
            status: None,
        },
        GatewayFrame::Ping,
    ] {
        let text = line(|o| frame.encode(o));
        let back = GatewayFrame::parse(&text).unwrap();
        assert_eq!(line(|o| back.encode(o)), text);
    }
}

#[test]
fn errors_carry_the_id_and_quote_little() {
    // A field of the wrong type still gives the id.
    let e = HostFrame::parse(
        "{\"t\":\"req\",\"id\":5,\"method\":\"GET\",\"path\":\"/x\",\"stream\":\"yes\"}",
    )
    .unwrap_err();
    assert_eq!(e.id, Some(5), "{e}");
    // A huge value is quoted by its start only.
    let long = format!(
        "{{\"t\":\"req\",\"id\":6,\"method\":\"GET\",\"path\":\"x{}\"}}",
        "a".repeat(1 << 20)
    );
    let e = HostFrame::parse(&long).unwrap_err();
    assert_eq!(e.id, Some(6));
    assert!(e.message.len() < 400, "{} bytes", e.message.len());
    assert!(e.message.contains("(1048577 bytes)"), "{e}");
    for (text, id, says) in [
        ("{\"t\":\"resume\",\"id\":1}", Some(1), "needs a \"call\""),
        (
            "{\"t\":\"resume\",\"id\":1,\"call\":\"XYZ\"}",
            Some(1),
            "hex digits",
        ),
        ("{\"t\":\"ack\"}", None, "needs a \"call\""),
        ("{\"t\":\"msg\",\"id\":2}", Some(2), "needs a \"msg\""),
        ("{\"t\":\"open\",\"id\":3}", Some(3), "needs a \"path\""),
        ("{\"t\":\"close\"}", None, "needs an \"id\""),
    ] {
        let e = HostFrame::parse(text).unwrap_err();
        assert_eq!(e.id, id, "{text}");
        assert!(e.message.contains(says), "{text}: {e}");
    }
    // Any JSON value is a message for the gateway to judge.
    assert!(matches!(
        HostFrame::parse("{\"t\":\"msg\",\"id\":2,\"msg\":[1]}"),
        Ok(HostFrame::Message { id: 2, .. })
    ));
    assert!(CallId::parse(&"a".repeat(31)).is_err());
    assert!(CallId::parse(&"a".repeat(65)).is_err());
    assert!(CallId::parse(&"0".repeat(64)).is_ok());
}
