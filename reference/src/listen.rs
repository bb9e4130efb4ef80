//! `subscriptions/listen`, served from the bus.
//!
//! By the time a listen gets here, `EdgeLayer` has validated its
//! filter, authorized every URI and task id for the caller, and put the
//! result into the request extensions as a [`HonouredFilter`]. What is left
//! is what rmcp does for every request — check the per-request `_meta` and
//! the `MCP-Protocol-Version` header — and then holding the stream open: the
//! acknowledgment first, then each bus event under the honoured topics,
//! tagged with the subscription id, with a keep-alive comment while idle.

use std::convert::Infallible;
use std::fmt::Display;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use mcp_edge::jsonrpc::{
    JsonRpcError, HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION,
};
use mcp_edge::HonouredFilter;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use tokio::time::{interval_at, Instant, Interval, MissedTickBehavior};

use crate::bus::{Bus, End, Subscription, SUBSCRIPTION_ID};
use crate::handler::listen_versions;

/// The response body type of the whole MCP endpoint (rmcp's too).
pub type McpBody = BoxBody<Bytes, Infallible>;

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// Serves listens that carry a [`HonouredFilter`] from the bus.
#[derive(Clone)]
pub struct ListenEndpoint {
    bus: Arc<Bus>,
    keep_alive: Duration,
}

impl ListenEndpoint {
    /// Streams from `bus`, with a keep-alive comment every `keep_alive` when idle.
    pub fn new(bus: Arc<Bus>, keep_alive: Duration) -> Self {
        Self { bus, keep_alive }
    }

    /// Answers one listen request.
    pub async fn serve<B>(self, request: Request<B>) -> Response<McpBody>
    where
        B: Body,
        B::Error: Display,
    {
        let Some(filter) = request.extensions().get::<HonouredFilter>().cloned() else {
            return plain(StatusCode::INTERNAL_SERVER_ERROR, "listen without a filter");
        };
        let (parts, body) = request.into_parts();
        if !accepts_event_stream(&parts.headers) {
            return plain(
                StatusCode::NOT_ACCEPTABLE,
                "Not Acceptable: a listen stream needs Accept: text/event-stream",
            );
        }
        let body = match body.collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) => {
                tracing::debug!(%error, "listen body unreadable");
                return plain(StatusCode::BAD_REQUEST, "unreadable request body");
            }
        };
        if let Err(error) = check_request(&parts.headers, &body) {
            return error
                .to_response::<Full<Bytes>>(Some(filter.subscription_id()))
                .map(BodyExt::boxed);
        }

        let subscription = self.bus.subscribe(filter.topics().iter().cloned());
        // mcp-edge already logged what it honoured; this ties it to a stream.
        tracing::debug!(stream = subscription.id(), "listen stream opened");
        let body = ListenBody::new(&filter, subscription, self.keep_alive);
        Response::builder()
            .header(CONTENT_TYPE, "text/event-stream")
            .header(CACHE_CONTROL, "no-cache")
            // Proxies such as nginx must pass each event on at once.
            .header("x-accel-buffering", "no")
            .body(BodyExt::boxed(body))
            .expect("static headers are valid")
    }
}

fn plain(status: StatusCode, message: &'static str) -> Response<McpBody> {
    let mut response = Response::new(BodyExt::boxed(Full::new(Bytes::from_static(
        message.as_bytes(),
    ))));
    *response.status_mut() = status;
    response
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|media| media.split(';').next().unwrap_or("").trim())
        .any(|media| media.eq_ignore_ascii_case("text/event-stream") || media == "*/*")
}

/// The per-request checks rmcp applies to every 2026-07-28 request.
fn check_request(headers: &HeaderMap, body: &[u8]) -> Result<(), JsonRpcError> {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(default)]
        params: Option<Params>,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "_meta", default)]
        meta: Option<Map<String, Value>>,
    }
    let meta = serde_json::from_slice::<Envelope>(body)
        .ok()
        .and_then(|envelope| envelope.params?.meta)
        .unwrap_or_default();
    let version = meta.get(PROTOCOL_VERSION).and_then(Value::as_str);
    let has_capabilities = meta.get(CLIENT_CAPABILITIES).is_some_and(Value::is_object);
    let missing: Vec<&str> = [
        (PROTOCOL_VERSION, version.is_some()),
        (CLIENT_CAPABILITIES, has_capabilities),
    ]
    .into_iter()
    .filter_map(|(key, present)| (!present).then_some(key))
    .collect();
    let Some(version) = version.filter(|_| missing.is_empty()) else {
        return Err(JsonRpcError::new(
            INVALID_PARAMS,
            format!(
                "request _meta is missing or has malformed required fields: {}",
                missing.join(", ")
            ),
        ));
    };
    let header = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok());
    if header != Some(version) {
        return Err(JsonRpcError::new(
            HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match request _meta protocolVersion",
        ));
    }
    // The layer already refused a header that disagrees with the body; like
    // rmcp, also refuse one that is missing.
    if headers.get("mcp-method").is_none() {
        return Err(JsonRpcError::new(
            HEADER_MISMATCH,
            "missing required Mcp-Method header",
        ));
    }
    if !listen_versions().any(|supported| supported == version) {
        let supported: Vec<&str> = listen_versions().collect();
        return Err(JsonRpcError::new(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({ "requested": version, "supported": supported })));
    }
    Ok(())
}

/// One SSE event carrying `json` (compact JSON has no line breaks, but a
/// `data:` line per line keeps the framing right whatever it holds).
fn sse_event(json: &str) -> Bytes {
    let mut event = String::with_capacity(json.len() + 16);
    for line in json.lines() {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
    event.into()
}

/// The body of an open listen: ack, events, keep-alives, then maybe the
/// graceful-close result. Dropping it (the client went away) drops the
/// [`Subscription`], which unregisters from the bus.
struct ListenBody {
    ack: Option<Bytes>,
    subscription_id: Box<RawValue>,
    subscription: Subscription,
    keep_alive: Interval,
    finished: bool,
}

impl ListenBody {
    fn new(filter: &HonouredFilter, subscription: Subscription, keep_alive: Duration) -> Self {
        let id = filter.subscription_id();
        let ack = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"_meta":{{"{SUBSCRIPTION_ID}":{}}},"notifications":{}}}}}"#,
            id.get(),
            filter.ack().get(),
        );
        let mut keep_alive = interval_at(Instant::now() + keep_alive, keep_alive);
        keep_alive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        Self {
            ack: Some(sse_event(&ack)),
            subscription_id: id.to_owned(),
            subscription,
            keep_alive,
            finished: false,
        }
    }

    /// The response to the listen request that says it ended on purpose.
    fn graceful_close(&self) -> Bytes {
        let id = self.subscription_id.get();
        sse_event(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
        ))
    }
}

impl Body for ListenBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some(ack) = this.ack.take() {
            return Poll::Ready(Some(Ok(Frame::data(ack))));
        }
        if this.finished {
            return Poll::Ready(None);
        }
        match this.subscription.poll_recv(cx) {
            Poll::Ready(Ok(event)) => {
                this.keep_alive.reset();
                let event = sse_event(&event.tagged(&this.subscription_id));
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            Poll::Ready(Err(End::Shutdown)) => {
                this.finished = true;
                return Poll::Ready(Some(Ok(Frame::data(this.graceful_close()))));
            }
            // Ending without the result tells the client to listen again.
            Poll::Ready(Err(End::Lagged)) => {
                this.finished = true;
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        if this.keep_alive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                b": keep-alive\n\n",
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.finished && self.ack.is_none()
    }
}
