//! What 2026-07-28 asks of a request without a session, over HTTP: its revision spoken (else
//! 400, `UNSUPPORTED_PROTOCOL_VERSION`, with the revisions spoken), its `_meta` (400,
//! `INVALID_PARAMS`), headers that match the body (400, `HEADER_MISMATCH`), none of the methods
//! it removed (404, `METHOD_NOT_FOUND`); an answer that is an error gets its HTTP status (404,
//! 400). The request then gets a virtual connection of its own while its stream is open, its
//! `Mcp-Param-*` headers handed to the gateway, which checks them against the tool's schema.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{Request, Response, StatusCode};
use mcpgw::wire::jsonrpc;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Out, Server, Sink, empty, header, json_reply, rpc_error, sse};
use crate::link::{Link, sandbox_error};
use crate::relay::Relay;

/// A request whose `MCP-Protocol-Version` names a revision this endpoint does not speak: 400
/// with `UNSUPPORTED_PROTOCOL_VERSION`, its `data` the revisions spoken and the one asked for.
pub(super) fn unsupported_version<B>(req: &Request<B>, id: Option<&str>) -> Option<Response<Out>> {
    let v = req.headers().get("mcp-protocol-version")?;
    if v.to_str().is_ok_and(jsonrpc::is_known_revision) {
        return None;
    }
    let requested = String::from_utf8_lossy(v.as_bytes()).into_owned();
    let supported = jsonrpc::supported_revisions();
    let message = format!(
        "unsupported MCP-Protocol-Version {requested:?}: this endpoint speaks {}",
        supported.join(", ")
    );
    let data = json!({"supported": supported, "requested": requested});
    let error = jsonrpc::error_object(
        jsonrpc::code::UNSUPPORTED_PROTOCOL_VERSION,
        &message,
        Some(&data),
    );
    let body = jsonrpc::response(id, Err(error.get()));
    Some(json_reply(StatusCode::BAD_REQUEST, body))
}

/// Whether a request without a session is of 2026-07-28: its `_meta` or its
/// `MCP-Protocol-Version` names that revision.
pub(super) fn is_modern<B>(req: &Request<B>, msg: &Value) -> bool {
    msg["params"]["_meta"][jsonrpc::META_PROTOCOL_VERSION]
        .as_str()
        .is_some_and(jsonrpc::is_modern)
        || header(req, "mcp-protocol-version").is_some_and(jsonrpc::is_modern)
}

/// A request of 2026-07-28 for a method that revision removed: 404 with `METHOD_NOT_FOUND`.
pub(super) fn removed(method: &str, id: &str) -> Option<Response<Out>> {
    jsonrpc::REMOVED_IN_MODERN.contains(&method).then(|| {
        let why = format!(
            "method not found: {method} is not a method of {}",
            jsonrpc::MODERN
        );
        rpc_error(
            StatusCode::NOT_FOUND,
            Some(id),
            jsonrpc::code::METHOD_NOT_FOUND,
            &why,
        )
    })
}

/// A request of 2026-07-28 refused before it goes anywhere: its `_meta` lacks what it must
/// carry (400, `INVALID_PARAMS`), or its headers do not match its body (400,
/// `HEADER_MISMATCH`).
pub(super) fn refusal<B>(
    req: &Request<B>,
    method: &str,
    msg: &Value,
    id: &str,
) -> Option<Response<Out>> {
    if let Some(why) = meta_refusal(msg) {
        return Some(rpc_error(
            StatusCode::BAD_REQUEST,
            Some(id),
            jsonrpc::code::INVALID_PARAMS,
            &why,
        ));
    }
    let why = header_mismatch(req, method, msg)?;
    Some(rpc_error(
        StatusCode::BAD_REQUEST,
        Some(id),
        jsonrpc::code::HEADER_MISMATCH,
        &why,
    ))
}

/// What a request of 2026-07-28 lacks of the `_meta` every such request carries (its revision
/// and the client's capabilities): the refusal's message, for `INVALID_PARAMS`.
fn meta_refusal(msg: &Value) -> Option<String> {
    let meta = &msg["params"]["_meta"];
    let missing = if !meta.is_object() {
        "_meta"
    } else if !meta[jsonrpc::META_PROTOCOL_VERSION].is_string() {
        jsonrpc::META_PROTOCOL_VERSION
    } else if !meta[jsonrpc::META_CLIENT_CAPABILITIES].is_object() {
        jsonrpc::META_CLIENT_CAPABILITIES
    } else {
        return None;
    };
    Some(format!(
        "invalid params: missing or invalid {missing:?}: a request of {} without a session \
         carries params._meta with {:?} (a string) and {:?} (an object)",
        jsonrpc::MODERN,
        jsonrpc::META_PROTOCOL_VERSION,
        jsonrpc::META_CLIENT_CAPABILITIES
    ))
}

/// A `tools/call` of 2026-07-28 with its `Mcp-Param-*` headers (SEP-2243) in its `_meta`
/// ([`jsonrpc::META_PARAM_HEADERS`]), where the gateway checks them against the tool's
/// schema: they belong to this hop, and the body is what crosses.
pub(super) fn with_param_headers<B>(req: &Request<B>, mut msg: Value) -> String {
    let given: serde_json::Map<String, Value> = req
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            let suffix = name.as_str().strip_prefix("mcp-param-")?;
            Some((
                suffix.to_owned(),
                json!(String::from_utf8_lossy(value.as_bytes())),
            ))
        })
        .collect();
    msg["params"]["_meta"][jsonrpc::META_PARAM_HEADERS] = Value::Object(given);
    msg.to_string()
}

/// The HTTP status of a 2026-07-28 request's answer `msg`: 404 for a method the server does
/// not have, 400 for a request it refused as malformed (bad params, headers that do not match
/// the body, a capability not declared, a revision not spoken), else 200.
pub(super) fn answer_status(msg: &str) -> StatusCode {
    use jsonrpc::code;
    let Ok(jsonrpc::Message::Response {
        outcome: Err(error),
        ..
    }) = jsonrpc::parse(msg)
    else {
        return StatusCode::OK;
    };
    match jsonrpc::error_parts(error).0 {
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        code::INVALID_PARAMS
        | code::HEADER_MISMATCH
        | code::MISSING_REQUIRED_CLIENT_CAPABILITY
        | code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The JSON-RPC message an SSE event of [`event`] carries.
pub(super) fn event_text(event: &[u8]) -> Option<&str> {
    std::str::from_utf8(event)
        .ok()?
        .strip_prefix("event: message\ndata: ")
        .map(str::trim_end)
}

/// Whether `msg` is the answer to request `id` (as [`jsonrpc::id_key`] knows it).
pub(super) fn answers(msg: &str, id: &str) -> bool {
    matches!(jsonrpc::parse(msg), Ok(jsonrpc::Message::Response { id: answered, .. })
        if jsonrpc::id_key(answered) == id)
}

/// The request metadata headers of 2026-07-28 against the body: the mismatch, if any.
pub fn header_mismatch<B>(req: &Request<B>, method: &str, msg: &Value) -> Option<String> {
    let version = msg["params"]["_meta"][jsonrpc::META_PROTOCOL_VERSION].as_str();
    let given = header(req, "mcp-protocol-version");
    if given != version {
        return Some(format!(
            "Header mismatch: MCP-Protocol-Version {given:?} does not match the body's {version:?}"
        ));
    }
    if header(req, "mcp-method") != Some(method) {
        return Some(format!(
            "Header mismatch: Mcp-Method {:?} does not match the body's {method:?}",
            header(req, "mcp-method")
        ));
    }
    let named = msg["params"][jsonrpc::mcp_name_member(method)?].as_str();
    let given =
        header(req, "mcp-name").map(|v| jsonrpc::header_text(v).unwrap_or_else(|_| v.to_owned()));
    (given.as_deref() != named)
        .then(|| format!("Header mismatch: Mcp-Name {given:?} does not match the body's {named:?}"))
}

/// A 2026-07-28 request's response to a client that takes either form: when its first message
/// is an error answer that has a status of its own (see [`answer_status`]), that answer as JSON
/// with that status; else the SSE stream, from that first message on.
pub(super) async fn stateless_stream(
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    id: &str,
) -> Response<Out> {
    let Some(first) = rx.recv().await else {
        return empty(StatusCode::ACCEPTED);
    };
    if let Some(msg) = event_text(&first)
        && answers(msg, id)
    {
        let status = answer_status(msg);
        if status != StatusCode::OK {
            return json_reply(status, msg.to_owned());
        }
    }
    sse(Some(first), rx)
}

/// A request of 2026-07-28 without a session: a connection of its own while its stream is
/// open.
pub(super) async fn stateless(server: Arc<Server>, text: String, id: String, sink: Sink) {
    // A request of its own needs no server session of its own: it shares the MCP's.
    let mut link = Link::new(
        server.sandbox.host.clone(),
        &server.sandbox.servers[0],
        server.level,
        false,
    );
    let mut out = Vec::new();
    if !link.open_now().await {
        let why = link
            .dead()
            .unwrap_or("the sandbox cannot be reached")
            .to_owned();
        sink.send(&sandbox_error(&id, &why));
        return;
    }
    let mut relay = Relay::One(Box::new(link));
    relay.from_client(&text, &mut out).await;
    loop {
        let mut done = false;
        for msg in out.drain(..) {
            let answer = answers(&msg, &id);
            if !sink.send(&msg) {
                done = true;
            }
            done |= answer;
        }
        if done {
            break;
        }
        tokio::select! {
            wake = relay.wait() => relay.handle(wake, &mut out).await,
            () = sink.0.closed() => break,
        }
    }
    relay.close();
}
