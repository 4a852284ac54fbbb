//! Legacy SSE upstreams (the 2024-11-05 "HTTP+SSE" transport): the client holds one `GET` event stream open; the server's first event, `endpoint`,
//! names where to `POST` messages; replies and notifications arrive as `message` events.
//!
//! One event may be at most `--max-reply-bytes` long: the stream is measured before it is
//! parsed, and a server that sends a longer event (or one endless line) is disconnected, which
//! fails its calls with that reason. (Streamable HTTP's event streams are bounded the same way.)

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use mcpgw::wire::HttpConfig;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use sse_stream::{Sse, SseStream};
use tokio::sync::mpsc;

use super::rpc::{Sink, Wire, queue};

type Events = BoxStream<'static, Result<Sse, sse_stream::Error>>;

/// Messages queued for POSTing; beyond, senders wait.
const QUEUE: usize = 256;

/// One legacy SSE session's sending half: one task POSTs the queued messages in order (the
/// server reads them in the order they come), another owns the event stream.
pub struct SseWire {
    posts: mpsc::Sender<Vec<u8>>,
    events: tokio::task::AbortHandle,
}

/// Opens the event stream, waits for the `endpoint` event, and starts the tasks: what the
/// stream carries goes to `sink`. No event may be longer than `max_event_bytes`; a server that
/// sends one is disconnected with that reason.
pub async fn connect(
    name: &str,
    config: &HttpConfig,
    max_event_bytes: usize,
    sink: Sink,
) -> Result<SseWire, String> {
    let url = Url::parse(&config.url).map_err(|e| format!("{:?} is not a URL: {e}", config.url))?;
    let headers: HeaderMap = super::http::spec_headers(config)?.into_iter().collect();
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
    let too_large = CloseReason::default();
    let bytes = bounded_events(response.bytes_stream(), max_event_bytes, too_large.clone());
    let mut events: Events = SseStream::from_bytes_stream(bytes).boxed();
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
    let name: std::sync::Arc<str> = name.into();
    let reader_sink = sink.clone();
    let events = tokio::spawn(async move {
        let reason = loop {
            match events.next().await {
                Some(Ok(sse)) if matches!(sse.event.as_deref(), None | Some("message")) => {
                    if let Some(data) = sse.data {
                        reader_sink.deliver(&data, None);
                    }
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => {
                    tracing::warn!(mcp = %name, "the event stream failed: {e}");
                    break too_large
                        .lock()
                        .unwrap()
                        .clone()
                        .unwrap_or_else(|| format!("its event stream failed: {e}"));
                }
                None => break "closed its event stream".to_string(),
            }
        };
        reader_sink.close(&reason);
    })
    .abort_handle();
    let (posts, mut queue) = mpsc::channel::<Vec<u8>>(QUEUE);
    tokio::spawn(async move {
        while let Some(body) = queue.recv().await {
            let sent = client
                .post(endpoint.clone())
                .headers(headers.clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body)
                .send()
                .await;
            let failure = match sent {
                Ok(r) if r.status().is_success() => continue,
                Ok(r) => format!("POST {endpoint}: HTTP {}", r.status()),
                Err(e) => format!("POST {endpoint}: {}", super::error_chain(&e)),
            };
            sink.close(&failure);
            return;
        }
    });
    Ok(SseWire { posts, events })
}

impl Wire for SseWire {
    fn send(
        &self,
        message: Vec<u8>,
        _request: Option<u64>,
        _method: &str,
        _params: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        queue(&self.posts, message, "the session's event stream has ended")
    }

    fn shut(&self) -> BoxFuture<'static, ()> {
        // Dropping the stream closes the GET; the server ends the session.
        self.events.abort();
        Box::pin(async {})
    }
}

/// Why a stream was cut, set by [`bounded_events`].
pub type CloseReason = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// Ends `bytes` with an error as soon as one event (the bytes between blank lines) grows past
/// `max`, so the parser never buffers more than that.
pub fn bounded_events<S>(
    bytes: S,
    max: usize,
    closed_because: CloseReason,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static
where
    S: futures::Stream<Item = Result<bytes::Bytes, reqwest::Error>> + Send + 'static,
{
    let mut size = EventSize::default();
    let mut failed = false;
    bytes.map(move |chunk| {
        if failed {
            return Err(std::io::Error::other("the event stream was cut"));
        }
        let chunk = chunk.map_err(std::io::Error::other)?;
        if size.feed(&chunk) > max {
            failed = true;
            let reason =
                format!("sent an event larger than --max-reply-bytes ({max}) and was disconnected");
            *closed_because.lock().unwrap() = Some(reason.clone());
            return Err(std::io::Error::other(reason));
        }
        Ok(chunk)
    })
}

/// The size of the event being received: bytes since the last blank line (`\n\n`, with or
/// without `\r`).
#[derive(Default)]
struct EventSize {
    since_blank: usize,
    /// The last byte other than `\r` was a `\n`.
    after_newline: bool,
    /// The largest event size seen in the last chunk.
    peak: usize,
}

impl EventSize {
    /// Feeds a chunk; returns the largest size an event reached within it.
    fn feed(&mut self, chunk: &[u8]) -> usize {
        self.peak = self.since_blank;
        for &b in chunk {
            match b {
                b'\n' if self.after_newline => {
                    self.peak = self.peak.max(self.since_blank);
                    self.since_blank = 0;
                }
                b'\n' => {
                    self.after_newline = true;
                    self.since_blank += 1;
                }
                b'\r' => self.since_blank += 1,
                _ => {
                    self.after_newline = false;
                    self.since_blank += 1;
                }
            }
        }
        self.peak.max(self.since_blank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_size_counts_from_the_last_blank_line() {
        let mut size = EventSize::default();
        assert_eq!(size.feed(b"event: endpoint\ndata: /m\n\n"), 25);
        assert_eq!(size.feed(b"data: ab"), 8);
        assert_eq!(size.feed(b"cd\r\n\r\ndata: x"), 13);
        assert_eq!(size.since_blank, 7);
        let mut endless = EventSize::default();
        for _ in 0..10 {
            endless.feed(&[b'x'; 1000]);
        }
        assert_eq!(endless.feed(b"x"), 10_001);
    }
}
