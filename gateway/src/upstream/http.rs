//! Streamable HTTP upstreams: the gateway's own client of the transport (POST per message,
//! answers as JSON or event streams, the session id, the `GET` stream of legacy sessions),
//! over a reqwest client whose runtime headers can be replaced while the session lives.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use mcpgw::wire::jsonrpc::{self, method};
use mcpgw::wire::{HttpConfig, spec};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::task::AbortHandle;

use super::error_chain;
use super::rpc::{Sink, Wire};
use super::tools::ToolCache;

/// A header map shared between the gateway (which replaces it) and the transport (which reads
/// it on every request).
pub type SharedHeaders = Arc<RwLock<HashMap<HeaderName, HeaderValue>>>;

/// Turns headers checked by the registration validator (`validate_headers`, which also refuses
/// the names the transport sets) into typed ones.
pub fn header_map(
    headers: &BTreeMap<String, String>,
) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    headers
        .iter()
        .map(|(k, v)| {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| format!("header {k:?} is invalid"))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| format!("header {k:?} has an invalid value"))?;
            Ok((name, value))
        })
        .collect()
}

/// The typed headers of a spec's `mcp_config.headers`, secrets resolved.
pub fn spec_headers(config: &HttpConfig) -> Result<HashMap<HeaderName, HeaderValue>, String> {
    let texts = match &config.headers {
        Some(h) => spec::texts(h, "mcp_config.headers")?,
        None => BTreeMap::new(),
    };
    header_map(&texts).map_err(|e| format!("mcp_config.headers: {e}"))
}

/// How long the plain request of [`diagnose`] may take at most.
const DIAGNOSE_LIMIT: Duration = Duration::from_secs(10);

/// Asks the server once more, plainly, why it cannot be reached: a failed exchange's error may
/// keep only reqwest's summary ("error sending request"), while the cause a person can act on
/// (connection refused, an untrusted certificate) sits further down the chain. Only on the
/// failure path.
pub async fn diagnose(config: &HttpConfig) -> Option<String> {
    let client = client_builder(config).ok()?.build().ok()?;
    let limit = super::http_timeout(config).map_or(DIAGNOSE_LIMIT, |t| t.min(DIAGNOSE_LIMIT));
    match tokio::time::timeout(limit, client.get(config.url.as_str()).send()).await {
        Ok(Err(e)) => Some(error_chain(&e)),
        _ => None,
    }
}

/// A reqwest client builder with the shared TLS setup and the MCP's connect timeout.
pub fn client_builder(config: &HttpConfig) -> Result<reqwest::ClientBuilder, String> {
    let mut builder =
        reqwest::Client::builder().tls_backend_preconfigured(super::tls::client_config()?);
    if let Some(t) = super::http_timeout(config) {
        builder = builder.connect_timeout(t);
    }
    Ok(builder)
}

/// One streamable HTTP session's sending half. Every message is a POST; a request's answer
/// comes in the POST's response (one JSON message, or an event stream carrying the request's
/// notifications, the upstream's requests it caused and the reply), read by a task of its own.
/// A legacy session also keeps the `GET` stream open for what the server sends unasked.
pub struct HttpWire(Arc<Inner>);

struct Inner {
    client: reqwest::Client,
    url: Arc<str>,
    static_headers: HashMap<HeaderName, HeaderValue>,
    runtime: SharedHeaders,
    session_id: RwLock<Option<HeaderValue>>,
    version: RwLock<Option<String>>,
    max_reply_bytes: usize,
    sink: Sink,
    /// The upstream's tools, for the `Mcp-Param-*` headers of a `tools/call`.
    tools: Arc<ToolCache>,
    /// The answer streams of requests in flight, to close one (a modern cancellation).
    streams: Mutex<HashMap<u64, AbortHandle>>,
    get_stream: Mutex<Option<AbortHandle>>,
}

/// How often a request's answer stream is resumed (SEP-1699) before the request fails.
const MAX_RESUMES: usize = 5;
/// The longest `retry` time honoured before a resumption.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// What a request's answer stream showed, for resuming it.
struct Resume {
    /// The last event id.
    last_id: Option<String>,
    /// The server's `retry` time (1 s until it gives one).
    retry: Duration,
}

impl Default for Resume {
    fn default() -> Self {
        Resume {
            last_id: None,
            retry: Duration::from_secs(1),
        }
    }
}

/// How much of an error response's body an error message quotes.
const ERROR_BODY_BYTES: usize = 2048;

/// A session's transport: static headers from the spec, runtime headers from `runtime` (read
/// on every request), the spec's `timeout` bounding how long a connection may take to open,
/// and `max_reply_bytes` bounding one response or event.
pub fn connect(
    config: &HttpConfig,
    runtime: SharedHeaders,
    max_reply_bytes: usize,
    sink: Sink,
    tools: Arc<ToolCache>,
) -> Result<HttpWire, String> {
    let static_headers = spec_headers(config)?;
    let client = client_builder(config)?
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    Ok(HttpWire(Arc::new(Inner {
        client,
        url: config.url.as_str().into(),
        static_headers,
        runtime,
        session_id: RwLock::new(None),
        version: RwLock::new(None),
        max_reply_bytes,
        sink,
        tools,
        streams: Mutex::new(HashMap::new()),
        get_stream: Mutex::new(None),
    })))
}

/// A header value as 2026-07-28 carries names and parameters: plain when it is visible ASCII
/// without spaces at its ends (and could not be read as the encoded form), else
/// `=?base64?...?=`.
fn header_safe(value: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(&jsonrpc::header_value(value)).ok()
}

impl Inner {
    fn post(&self, body: Vec<u8>, method: &str, params: Option<&str>) -> reqwest::RequestBuilder {
        let mut headers: HeaderMap = self
            .static_headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in self.runtime.read().unwrap().iter() {
            headers.insert(k.clone(), v.clone());
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(id) = self.session_id.read().unwrap().clone() {
            headers.insert("mcp-session-id", id);
        }
        let version = match method {
            method::DISCOVER => Some(jsonrpc::MODERN.to_string()),
            _ => self.version.read().unwrap().clone(),
        };
        if let Some(v) = version
            .as_deref()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert("mcp-protocol-version", v);
        }
        if version.as_deref().is_some_and(jsonrpc::is_modern) && !method.is_empty() {
            if let Some(m) = header_safe(method) {
                headers.insert("mcp-method", m);
            }
            // The params, read once, of a method whose headers carry some of them.
            let named: Option<serde_json::Map<String, serde_json::Value>> =
                jsonrpc::mcp_name_member(method)
                    .and(params)
                    .and_then(|p| serde_json::from_str(p).ok());
            if let Some(name) = named.as_ref().and_then(|p| mcp_name(method, p))
                && let Some(v) = header_safe(&name)
            {
                headers.insert("mcp-name", v);
            }
            if method == method::TOOLS_CALL
                && let Some(params) = &named
            {
                let tools = self.tools.get();
                for (name, text) in super::param_headers::for_call(&tools, params) {
                    if let (Ok(k), Some(v)) = (HeaderName::try_from(name), header_safe(&text)) {
                        headers.insert(k, v);
                    }
                }
            }
        }
        self.client.post(&*self.url).headers(headers).body(body)
    }

    /// Reads what answered a POST (or the GET stream) and delivers it; `origin` is the request
    /// it answers.
    async fn answer(&self, response: reqwest::Response, origin: Option<u64>) {
        if let Some(id) = response.headers().get("mcp-session-id") {
            *self.session_id.write().unwrap() = Some(id.clone());
        }
        let status = response.status();
        let kind = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if status.is_success() && kind.starts_with("text/event-stream") {
            let mut resume = Resume::default();
            self.events(response, origin, &mut resume).await;
            let Some(id) = origin else { return };
            // A stream that ends without its answer, after events with ids, is resumed as the
            // server asked (SEP-1699): a `GET` with `Last-Event-ID` after its `retry` time.
            for _ in 0..MAX_RESUMES {
                // Answered (on this stream or another), or failed with it.
                if !self.sink.is_pending(id) {
                    break;
                }
                let Some(last) = resume.last_id.clone() else {
                    break;
                };
                tokio::time::sleep(resume.retry).await;
                let get = self.get().header("last-event-id", last);
                match get.send().await {
                    Ok(r) if r.status().is_success() => self.events(r, origin, &mut resume).await,
                    _ => break,
                }
            }
            if self.sink.is_pending(id) {
                let error = jsonrpc::error_object(
                    jsonrpc::code::INTERNAL_ERROR,
                    &format!("{}: the answer stream ended without a reply", self.url),
                    None,
                );
                self.sink.fail(id, error);
            }
            return;
        }
        if status.as_u16() == 202 && origin.is_none() {
            return;
        }
        if status.as_u16() == 404 && self.session_id.read().unwrap().is_some() {
            self.sink.close(&format!(
                "{} ended the session (HTTP 404 for its session id)",
                self.url
            ));
            return;
        }
        let limit = if status.is_success() {
            self.max_reply_bytes
        } else {
            ERROR_BODY_BYTES.max(self.max_reply_bytes.min(1 << 16))
        };
        let body = match read_limited(response, limit).await {
            Ok(body) => body,
            Err(len) => {
                if let Some(id) = origin {
                    self.sink.fail(id, super::stdio::too_large(len, limit));
                }
                return;
            }
        };
        let text = String::from_utf8_lossy(&body);
        if !text.trim().is_empty()
            && let Ok(jsonrpc::Message::Response { .. }) = jsonrpc::parse(&text)
        {
            self.sink.deliver(&text, origin);
            return;
        }
        if let Some(id) = origin {
            let shown: String = text.chars().take(ERROR_BODY_BYTES).collect();
            let message = match status.is_success() {
                true => format!(
                    "{}: the answer was not a JSON-RPC reply: {shown:?}",
                    self.url
                ),
                false => format!("{}: HTTP {status}: {}", self.url, shown.trim()),
            };
            self.sink.fail(
                id,
                jsonrpc::error_object(jsonrpc::code::INTERNAL_ERROR, &message, None),
            );
        }
    }

    /// Delivers the messages of an event stream; `origin` is the request it answers, whose
    /// answer, last event id and retry time go to `resume`.
    async fn events(&self, response: reqwest::Response, origin: Option<u64>, resume: &mut Resume) {
        let too_large = super::sse::CloseReason::default();
        let bytes = super::sse::bounded_events(
            response.bytes_stream(),
            self.max_reply_bytes,
            too_large.clone(),
        );
        let mut events = sse_stream::SseStream::from_bytes_stream(bytes);
        while let Some(event) = events.next().await {
            match event {
                Ok(sse) => {
                    if let Some(id) = sse.id.filter(|i| !i.is_empty()) {
                        resume.last_id = Some(id);
                    }
                    if let Some(ms) = sse.retry {
                        resume.retry = Duration::from_millis(ms).min(MAX_RETRY);
                    }
                    if !matches!(sse.event.as_deref(), None | Some("message")) {
                        continue;
                    }
                    if let Some(data) = sse.data.filter(|d| !d.trim().is_empty()) {
                        self.sink.deliver(&data, origin);
                    }
                }
                Err(e) => {
                    let reason = too_large.lock().unwrap().clone();
                    if let (Some(id), Some(reason)) = (origin, reason) {
                        let error =
                            jsonrpc::error_object(jsonrpc::code::INTERNAL_ERROR, &reason, None);
                        self.sink.fail(id, error);
                    } else {
                        tracing::debug!("an event stream of {} broke off: {e}", self.url);
                    }
                    break;
                }
            }
        }
    }

    /// A `GET` for the session's event stream.
    fn get(&self) -> reqwest::RequestBuilder {
        let mut get = self
            .client
            .get(&*self.url)
            .header(ACCEPT, "text/event-stream");
        for (k, v) in self
            .static_headers
            .iter()
            .chain(self.runtime.read().unwrap().iter())
        {
            get = get.header(k.clone(), v.clone());
        }
        if let Some(id) = self.session_id.read().unwrap().clone() {
            get = get.header("mcp-session-id", id);
        }
        if let Some(v) = self.version.read().unwrap().clone() {
            get = get.header("mcp-protocol-version", v);
        }
        get
    }

    /// Keeps the `GET` stream of a legacy session open while the session lives.
    async fn listen(self: Arc<Self>) {
        while !self.sink.is_closed() {
            match self.get().send().await {
                Ok(r) if r.status().is_success() => self.answer(r, None).await,
                // 405: the server offers no such stream.
                _ => return,
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// `params.name`, or `params.uri`, of a request.
/// What a 2026-07-28 request's `Mcp-Name` header says, for the methods that have one: the
/// params' `name` (a tool, a prompt), `uri` (a resource) or `taskId` (a task), so that
/// intermediaries can route by it.
fn mcp_name(method: &str, params: &serde_json::Map<String, serde_json::Value>) -> Option<String> {
    let key = mcpgw::wire::jsonrpc::mcp_name_member(method)?;
    params.get(key)?.as_str().map(str::to_owned)
}

/// A body of at most `limit` bytes, or its length so far when it is longer.
async fn read_limited(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, usize> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() > limit {
            return Err(body.len());
        }
    }
    Ok(body)
}

impl Wire for HttpWire {
    fn send(
        &self,
        message: Vec<u8>,
        request: Option<u64>,
        method: &str,
        params: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        let inner = self.0.clone();
        let post = inner.post(message, method, params);
        let Some(id) = request else {
            // Notifications and answers: accepted (202) or refused, nothing to read.
            return Box::pin(async move {
                let r = post.send().await.map_err(|e| error_chain(&e))?;
                match r.status() {
                    s if s.is_success() => Ok(()),
                    s if s.as_u16() == 404 && inner.session_id.read().unwrap().is_some() => {
                        inner
                            .sink
                            .close(&format!("{} ended the session (HTTP 404)", inner.url));
                        Err(format!("HTTP {s}"))
                    }
                    s => Err(format!("HTTP {s}")),
                }
            });
        };
        let task_inner = inner.clone();
        let task = tokio::spawn(async move {
            match post.send().await {
                Ok(r) => task_inner.answer(r, Some(id)).await,
                Err(e) => {
                    let message = format!("{}: {}", task_inner.url, error_chain(&e));
                    task_inner.sink.fail(
                        id,
                        jsonrpc::error_object(jsonrpc::code::INTERNAL_ERROR, &message, None),
                    );
                }
            }
            task_inner.streams.lock().unwrap().remove(&id);
        });
        inner
            .streams
            .lock()
            .unwrap()
            .insert(id, task.abort_handle());
        // The task may have ended already: then it found no entry to remove.
        if task.is_finished() {
            inner.streams.lock().unwrap().remove(&id);
        }
        Box::pin(async { Ok(()) })
    }

    fn close_stream(&self, id: u64) -> bool {
        let modern = self
            .0
            .version
            .read()
            .unwrap()
            .as_deref()
            .is_some_and(jsonrpc::is_modern);
        match self.0.streams.lock().unwrap().remove(&id) {
            Some(stream) if modern => {
                stream.abort();
                true
            }
            _ => false,
        }
    }

    fn handshaken(&self, version: &str) {
        *self.0.version.write().unwrap() = Some(version.to_string());
        if !jsonrpc::is_modern(version) {
            let task = tokio::spawn(self.0.clone().listen());
            *self.0.get_stream.lock().unwrap() = Some(task.abort_handle());
        }
    }

    fn shut(&self) -> BoxFuture<'static, ()> {
        let inner = self.0.clone();
        if let Some(get) = inner.get_stream.lock().unwrap().take() {
            get.abort();
        }
        for (_, stream) in inner.streams.lock().unwrap().drain() {
            stream.abort();
        }
        Box::pin(async move {
            let Some(id) = inner.session_id.read().unwrap().clone() else {
                return;
            };
            let delete = inner
                .client
                .delete(&*inner.url)
                .header("mcp-session-id", id);
            let _ = tokio::time::timeout(Duration::from_secs(2), delete.send()).await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `params` read as a request's params object, and its `Mcp-Name` for `method`.
    fn name_of(method: &str, params: &str) -> Option<String> {
        mcp_name(method, &serde_json::from_str(params).ok()?)
    }

    #[test]
    fn mcp_name_comes_from_the_methods_own_member() {
        let params = r#"{"name":"n","uri":"u","taskId":"t"}"#;
        for (method, want) in [
            ("tools/call", Some("n")),
            ("prompts/get", Some("n")),
            ("resources/read", Some("u")),
            ("resources/subscribe", Some("u")),
            ("resources/unsubscribe", Some("u")),
            ("tasks/get", Some("t")),
            ("tasks/update", Some("t")),
            ("tasks/cancel", Some("t")),
            ("tools/list", None),
        ] {
            assert_eq!(name_of(method, params).as_deref(), want, "{method}");
        }
        assert_eq!(name_of("tasks/get", r#"{"taskId":3}"#), None);
        assert_eq!(name_of("tasks/get", "[]"), None);
    }

    #[test]
    fn header_values_that_http_cannot_carry_are_base64() {
        assert_eq!(header_safe("deploy").unwrap(), "deploy");
        assert_eq!(header_safe("é").unwrap(), "=?base64?w6k=?=");
        assert_eq!(header_safe(" x").unwrap(), "=?base64?IHg=?=");
    }
}
