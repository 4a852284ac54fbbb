//! Streamable HTTP upstreams: rmcp's transport over a reqwest client whose runtime headers can be
//! replaced while the session lives.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use mcpgw::wire::HttpConfig;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpClientTransportConfig, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

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

/// A reqwest client that adds the current runtime headers to each request; they override the
/// spec's static headers of the same name.
#[derive(Clone)]
pub struct HeaderedClient {
    inner: reqwest::Client,
    runtime: SharedHeaders,
}

impl HeaderedClient {
    fn merged(
        &self,
        mut headers: HashMap<HeaderName, HeaderValue>,
    ) -> HashMap<HeaderName, HeaderValue> {
        let runtime = self.runtime.read().unwrap();
        headers.extend(runtime.iter().map(|(k, v)| (k.clone(), v.clone())));
        headers
    }
}

impl StreamableHttpClient for HeaderedClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.merged(custom_headers);
        self.inner
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let headers = self.merged(custom_headers);
        self.inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let headers = self.merged(custom_headers);
        self.inner
            .delete_session(uri, session_id, auth_header, headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.merged(custom_headers);
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let headers = self.merged(custom_headers);
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }
}

/// How long the plain request of [`diagnose`] may take at most.
const DIAGNOSE_LIMIT: Duration = Duration::from_secs(10);

/// Asks the server once more, plainly, why it cannot be reached: rmcp's transport error keeps
/// only reqwest's summary ("error sending request"), while the cause a person can act on
/// (connection refused, an untrusted certificate) sits further down the chain. Only on the
/// failure path.
pub async fn diagnose(config: &HttpConfig) -> Option<String> {
    let client = client_builder(config).ok()?.build().ok()?;
    let limit = super::http_timeout(config).map_or(DIAGNOSE_LIMIT, |t| t.min(DIAGNOSE_LIMIT));
    match tokio::time::timeout(limit, client.get(config.url.as_str()).send()).await {
        Ok(Err(e)) => Some(super::error_chain(&e)),
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

/// Builds the transport for one session: static headers from the spec, runtime headers from
/// `runtime`, the spec's `timeout` bounding how long a connection may take to open, and
/// `max_reply_bytes` bounding one response or event.
pub fn transport(
    config: &HttpConfig,
    runtime: SharedHeaders,
    max_reply_bytes: usize,
) -> Result<StreamableHttpClientTransport<HeaderedClient>, String> {
    let static_headers = header_map(config.headers.as_ref().unwrap_or(&BTreeMap::new()))
        .map_err(|e| format!("mcp_config.headers: {e}"))?;
    let inner = client_builder(config)?
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let transport_config = StreamableHttpClientTransportConfig::with_uri(config.url.as_str())
        .custom_headers(static_headers)
        .max_sse_event_size(max_reply_bytes)
        .max_json_response_size(max_reply_bytes);
    Ok(StreamableHttpClientTransport::with_client(
        HeaderedClient { inner, runtime },
        transport_config,
    ))
}
