//! One `req` frame's HTTP exchange with the gateway: the request it becomes, the response read
//! back (an NDJSON stream's lines sent on as `chunk` frames as they come), and the errors that
//! name what broke (the gateway gone, unreachable, or the answer cut off).

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http_body_util::{BodyExt, Full};
use mcpgw::wire::frame::{Body, GatewayFrame, body_of, quoted};
use mcpgw::wire::rest::{NDJSON, header};
use serde_json::value::RawValue;

use super::input::{Call, Resumable};
use super::pool::SendError;
use super::relay::{Relay, encode};

impl Relay {
    pub(super) fn request(&self, call: &Call) -> Result<http::Request<Full<Bytes>>, String> {
        let mut request = self.builder(call.method.clone(), call.path.as_str());
        if call.body.is_some() {
            request = request.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if call.stream {
            request = request.header(ACCEPT, HeaderValue::from_static(NDJSON));
        }
        if let Some(Resumable {
            call,
            resume: false,
        }) = &call.resumable
        {
            let id = HeaderValue::try_from(call.as_str()).expect("hex digits");
            request = request.header(header::CALL_ID, id);
        }
        request
            .body(Full::new(call.body.clone().unwrap_or_default()))
            .map_err(|e| format!("cannot build the request: {e}"))
    }

    /// Sends the request, relays a streamed answer's chunks, and returns the last frame.
    pub(super) async fn exchange(&self, call: &Call) -> Result<Vec<u8>, String> {
        let (response, mut lease) = self
            .request_gateway(self.request(call)?)
            .await
            .map_err(|e| self.unreachable(&e))?;
        let status = response.status().as_u16();
        let streamed = call.stream
            && response
                .headers()
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(NDJSON.as_bytes()));
        let id = call.id;
        if !streamed {
            let body = self.whole_body(response, lease).await?;
            return Ok(encode(&GatewayFrame::Response {
                id,
                status,
                body: body_of(&body),
            }));
        }
        // NDJSON: every line is a ToolChunk, relayed the moment it is complete; a resumable
        // call's lines are numbered from the one the gateway says.
        let mut seq = call.resumable.as_ref().map(|_| {
            response
                .headers()
                .get(header::SEQ)
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1)
        });
        let mut body = response.into_body();
        let mut partial = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| self.broke_off(&e))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            let mut rest = &data[..];
            while let Some(at) = memchr::memchr(b'\n', rest) {
                if partial.is_empty() {
                    self.chunk(id, &rest[..at], &mut seq).await?;
                } else {
                    partial.extend_from_slice(&rest[..at]);
                    self.chunk(id, &partial, &mut seq).await?;
                    partial.clear();
                }
                rest = &rest[at + 1..];
            }
            partial.extend_from_slice(rest);
        }
        lease.reusable();
        self.chunk(id, &partial, &mut seq).await?;
        Ok(encode(&GatewayFrame::Response {
            id,
            status,
            body: Body::Empty,
        }))
    }

    pub(super) async fn chunk(
        &self,
        id: u64,
        line: &[u8],
        seq: &mut Option<u64>,
    ) -> Result<(), String> {
        let line = line.trim_ascii();
        if line.is_empty() {
            return Ok(());
        }
        let chunk: &RawValue = std::str::from_utf8(line)
            .ok()
            .and_then(|text| serde_json::from_str(text).ok())
            .ok_or_else(|| {
                format!(
                    "the gateway streamed a line that is not JSON: {}",
                    quoted(&String::from_utf8_lossy(line))
                )
            })?;
        let this = *seq;
        if let Some(next) = seq {
            *next += 1;
        }
        self.send(&GatewayFrame::Chunk {
            id,
            chunk,
            seq: this,
        })
        .await;
        Ok(())
    }

    pub(super) fn gone(&self) -> String {
        if self.gateway_pid != 0 && !mcpgw_sys::process::exists(self.gateway_pid) {
            format!(" (its process {} is gone)", self.gateway_pid)
        } else {
            String::new()
        }
    }

    pub(super) fn unreachable(&self, e: &SendError) -> String {
        match e {
            SendError::Connect(e) => format!(
                "cannot reach the gateway at {}{}: {e}",
                self.addr,
                self.gone()
            ),
            SendError::Request(e) => format!(
                "the gateway at {} failed the request{}: {}",
                self.addr,
                self.gone(),
                crate::upstream::error_chain(e)
            ),
        }
    }

    pub(super) fn broke_off(&self, e: &axum::Error) -> String {
        format!(
            "the gateway at {} broke off its answer{}: {}",
            self.addr,
            self.gone(),
            crate::upstream::error_chain(e)
        )
    }
}
