mod chunks;
mod compile;
mod disguise;
mod json;
mod large;
mod narrowing;
mod readiness;
mod sse;
mod uninspected;
mod untouched;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Ready;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Map, Value};
use tower::{Service, ServiceBuilder, ServiceExt};

use super::body::ResponseBody;
use super::layer::CapabilitiesLayer;
use super::service::Capabilities;
use crate::advertise::Era;
use crate::hooks::Principal;
use crate::http::body::RequestBody;
use crate::profile::ServerProfile;
use crate::rejection::Rejection;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// A body of fixed frames that counts how many frames were pulled from it.
struct Counted {
    frames: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    pulled: Arc<AtomicUsize>,
}

impl Counted {
    fn new(frames: Vec<Bytes>) -> Self {
        Self {
            frames: frames.into(),
            trailers: None,
            pulled: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn one(data: &str) -> Self {
        Self::new(vec![Bytes::copy_from_slice(data.as_bytes())])
    }

    /// `data` in frames of `size` bytes.
    fn split(data: &[u8], size: usize) -> Self {
        Self::new(data.chunks(size).map(Bytes::copy_from_slice).collect())
    }
}

impl Body for Counted {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let Some(data) = self.frames.pop_front() else {
            return Poll::Ready(self.trailers.take().map(|t| Ok(Frame::trailers(t))));
        };
        self.pulled.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Some(Ok(Frame::data(data))))
    }
}

/// What the inner service answers with.
#[derive(Clone)]
struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Reply {
    fn new(content_type: &'static str, body: &str) -> Self {
        Self {
            status: StatusCode::OK,
            headers: vec![
                (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
                (header::CONTENT_LENGTH, body.len().into()),
            ],
            chunks: vec![Bytes::copy_from_slice(body.as_bytes())],
            trailers: None,
        }
    }

    fn json(body: &str) -> Self {
        Self::new("application/json", body)
    }

    fn sse(body: &str) -> Self {
        Self::new("text/event-stream", body)
    }

    /// The same reply with its body in frames of `size` bytes.
    fn split(mut self, size: usize) -> Self {
        let all: Vec<u8> = self.chunks.concat();
        self.chunks = all.chunks(size).map(Bytes::copy_from_slice).collect();
        self
    }

    fn trailer(mut self, name: &'static str, value: &'static str) -> Self {
        self.trailers
            .get_or_insert_with(HeaderMap::new)
            .insert(name, HeaderValue::from_static(value));
        self
    }

    fn header(mut self, name: HeaderName, value: &'static str) -> Self {
        self.headers.push((name, HeaderValue::from_static(value)));
        self
    }

    fn into_response(self) -> Response<Counted> {
        let mut body = Counted::new(self.chunks);
        body.trailers = self.trailers;
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        for (name, value) in self.headers {
            response.headers_mut().append(name, value);
        }
        response
    }
}

/// What the inner service saw.
#[derive(Debug)]
struct Seen {
    method: http::Method,
    headers: HeaderMap,
    frames: Vec<Bytes>,
    /// Frames pulled from the original body before the inner service was called.
    pulled_at_call: usize,
}

impl Seen {
    fn body(&self) -> Vec<u8> {
        self.frames.concat()
    }
}

/// What the client got.
#[derive(Debug)]
struct Out {
    status: StatusCode,
    headers: HeaderMap,
    rejection: Option<Rejection>,
    body: Bytes,
    trailers: Option<HeaderMap>,
}

impl Out {
    fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    fn content_length(&self) -> Option<usize> {
        self.headers
            .get(header::CONTENT_LENGTH)
            .map(|v| v.to_str().unwrap().parse().unwrap())
    }
}

async fn collect_out(response: Response<ResponseBody<Counted>>) -> Out {
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned();
    Out {
        status: parts.status,
        rejection: parts.extensions.get::<Rejection>().cloned(),
        headers: parts.headers,
        body: collected.to_bytes(),
        trailers,
    }
}

/// Sends `request` through the layer to an inner service that records what
/// it saw and answers `reply`.
async fn run(profile: &ServerProfile, request: Request<Counted>, reply: Reply) -> (Out, Seen) {
    let (out, seen) = try_run(profile, request, reply).await;
    (out, seen.expect("the inner service was called"))
}

/// [`run`], when the inner service may not be called.
async fn try_run(
    profile: &ServerProfile,
    request: Request<Counted>,
    reply: Reply,
) -> (Out, Option<Seen>) {
    let pulled = request.body().pulled.clone();
    let seen = Arc::new(Mutex::new(None));
    let record = seen.clone();
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .service_fn(move |request: Request<RequestBody<Counted>>| {
            let pulled_at_call = pulled.load(Ordering::SeqCst);
            let record = record.clone();
            let reply = reply.clone();
            async move {
                let (parts, mut body) = request.into_parts();
                let mut frames = Vec::new();
                while let Some(frame) = body.frame().await {
                    frames.push(frame.unwrap().into_data().unwrap());
                }
                *record.lock().unwrap() = Some(Seen {
                    method: parts.method,
                    headers: parts.headers,
                    frames,
                    pulled_at_call,
                });
                Ok::<_, Infallible>(reply.into_response())
            }
        });
    let out = collect_out(service.oneshot(request).await.unwrap()).await;
    let seen = seen.lock().unwrap().take();
    (out, seen)
}

/// Sends `request` through the layer to an inner service that must not be called.
async fn rejected(profile: &ServerProfile, request: Request<Counted>) -> Out {
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .service_fn(
            |_: Request<RequestBody<Counted>>| -> Ready<Result<Response<Counted>, Infallible>> {
                panic!("the inner service was called")
            },
        );
    collect_out(service.oneshot(request).await.unwrap()).await
}

fn discover_request(body: Counted) -> Request<Counted> {
    post_request(Some("server/discover"), body)
}

fn post_request(mcp_method: Option<&str>, body: Counted) -> Request<Counted> {
    let mut builder = Request::post("/mcp").header(header::CONTENT_TYPE, "application/json");
    if let Some(method) = mcp_method {
        builder = builder.header("mcp-method", method);
    }
    builder.body(body).unwrap()
}

fn profile() -> ServerProfile {
    ServerProfile::builder().build().unwrap()
}

fn caps(profile: &ServerProfile, era: Era) -> Value {
    Value::Object(profile.capabilities(era).clone())
}

fn caps_json(profile: &ServerProfile, era: Era) -> String {
    serde_json::to_string(profile.capabilities(era)).unwrap()
}

/// The raw bytes of member `key` of the JSON object `text`.
fn member<'a>(text: &'a str, key: &str) -> &'a str {
    let members = crate::codec::json::members(text).expect("an object");
    crate::codec::json::unique(&members, key)
        .one()
        .expect("the member is there")
}

fn with_caps(mut base: Value, extra: Value) -> Value {
    let (Value::Object(map), Value::Object(extra)) = (&mut base, extra) else {
        unreachable!("objects")
    };
    map.extend(extra);
    base
}

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const INNER_CAPS: &str = r#"{"tools":{},"prompts":{},"experimental":{"x":1}}"#;
const DISCOVER_RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{},"experimental":{"x":1}},"_meta":{"serverInfo":{"name":"s","version":"1"}},"ttlMs":1000,"cacheScope":"shared"}}"#;
/// All of its capabilities are managed, so the profile's replace them whole.
const DISCOVER_MANAGED: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{}},"_meta":{"serverInfo":{"name":"sérvér ✓","version":"1"}},"ttlMs":1000,"cacheScope":"shared"}}"#;
const MANAGED_CAPS: &str = r#"{"tools":{},"prompts":{}}"#;
const INITIALIZE_RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"s","version":"1"}}}"#;

/// Asserts that `out` is `input` with only the capabilities value replaced,
/// and returns the new capabilities.
fn assert_only_caps_changed(out: &str, input: &str, inner_caps: &str) -> Value {
    let new_caps = member(member(out, "result"), "capabilities");
    assert_eq!(
        out,
        input.replacen(inner_caps, new_caps, 1),
        "every other byte is kept"
    );
    serde_json::from_str(new_caps).unwrap()
}

fn narrowing_profile() -> ServerProfile {
    ServerProfile::builder()
        .narrowing(
            |caller: Option<&Principal>, _: Era, caps: &mut Map<String, Value>| {
                if caller.is_none() {
                    caps.remove("prompts");
                }
            },
        )
        .build()
        .unwrap()
}
