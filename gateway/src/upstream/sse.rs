//! Legacy SSE upstreams (the 2024-11-05 "HTTP+SSE" transport), which rmcp 3.x no longer
//! speaks: the client holds one `GET` event stream open; the server's first event, `endpoint`,
//! names where to `POST` messages; replies and notifications arrive as `message` events.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use mcpgw::wire::HttpConfig;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use sse_stream::{Sse, SseStream};

type Events = BoxStream<'static, Result<Sse, sse_stream::Error>>;

/// One legacy SSE session.
pub struct SseTransport {
    name: Arc<str>,
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    events: Option<Events>,
}

/// Opens the event stream and waits for the `endpoint` event.
pub async fn connect(name: &str, config: &HttpConfig) -> Result<SseTransport, String> {
    let url = Url::parse(&config.url).map_err(|e| format!("{:?} is not a URL: {e}", config.url))?;
    let headers: HeaderMap =
        super::http::header_map(config.headers.as_ref().unwrap_or(&Default::default()))
            .map_err(|e| format!("mcp_config.headers: {e}"))?
            .into_iter()
            .collect();
    let client = super::http::client_builder(config)?
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
    let response = client
        .get(url.clone())
        .headers(headers.clone())
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| format!("GET {url}: {}", super::error_chain(&e)))?;
    if !response.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", response.status()));
    }
    let mut events: Events = SseStream::from_bytes_stream(response.bytes_stream()).boxed();
    let endpoint = loop {
        match events.next().await {
            Some(Ok(sse)) if sse.event.as_deref() == Some("endpoint") => {
                let data = sse.data.unwrap_or_default();
                break url
                    .join(data.trim())
                    .map_err(|e| format!("the server's endpoint {data:?} is not a URL: {e}"))?;
            }
            Some(Ok(_)) => continue,
            Some(Err(e)) => {
                return Err(format!(
                    "reading the event stream of {url}: {}",
                    super::error_chain(&e)
                ));
            }
            None => {
                return Err(format!(
                    "{url} closed its event stream before naming an endpoint"
                ));
            }
        }
    };
    Ok(SseTransport {
        name: name.into(),
        client,
        endpoint,
        headers,
        events: Some(events),
    })
}

impl Transport<RoleClient> for SseTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let (client, endpoint, headers) = (
            self.client.clone(),
            self.endpoint.clone(),
            self.headers.clone(),
        );
        async move {
            let body = serde_json::to_vec(&item)?;
            let response = client
                .post(endpoint.clone())
                .headers(headers)
                .header(CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await
                .map_err(std::io::Error::other)?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "POST {endpoint}: HTTP {}",
                    response.status()
                )))
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let events = self.events.as_mut()?;
        loop {
            match events.next().await? {
                Ok(sse) if matches!(sse.event.as_deref(), None | Some("message")) => {
                    let Some(data) = sse.data else { continue };
                    match serde_json::from_str(&data) {
                        Ok(msg) => return Some(msg),
                        Err(e) => {
                            let shown: String = data.chars().take(200).collect();
                            tracing::warn!(mcp = %self.name, "ignoring an event that is not JSON-RPC ({e}): {shown:?}");
                        }
                    }
                }
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(mcp = %self.name, "the event stream failed: {e}");
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the stream closes the GET; the server ends the session.
        self.events = None;
        Ok(())
    }
}
