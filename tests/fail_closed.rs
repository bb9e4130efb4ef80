//! The edge fails closed in front of a lenient inner service: one that reads
//! every body as JSON whatever its `Content-Type`, keeps the last of
//! duplicate keys (`serde_json::Value`), decodes the Base64 form of
//! `Mcp-Method`, and answers `initialize`, `server/discover` and a listen
//! with everything it has. Each case runs through each layer alone, the two
//! stacked and `EdgeLayer`, and checks what reaches either side.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http::{header, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use mcp_edge::{
    CapabilitiesLayer, EdgeLayer, ListenFilterLayer, Rejection, RequestBody, ServerProfile,
};
use serde_json::{json, Value};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

mod common;

/// The tests, by section (each a file of `tests/fail_closed/`); the lenient
/// inner, the stacks and the canned inner they all use are below.
mod fail_closed {
    mod errors;
    mod guard;
    mod legacy;
    mod requests;
    mod streams;
}

/// The inner service's own capabilities: more than the profile says.
fn inner_capabilities() -> Value {
    json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}})
}

fn profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(json!({"tools": {}}))
        .resource_access(common::public_only)
        .build()
        .unwrap()
}

/// What the lenient inner service did.
#[derive(Default)]
struct Lenient {
    calls: AtomicUsize,
    /// Answers that carried the inner's own capabilities.
    capabilities: AtomicUsize,
    /// Listens it acknowledged as it read them (no honoured filter).
    unhonoured_listens: AtomicUsize,
    /// The last body it read.
    body: std::sync::Mutex<Bytes>,
}

impl Lenient {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// Reads any body as JSON, last duplicate winning, and answers it.
    async fn answer<B>(
        self: Arc<Self>,
        request: Request<B>,
    ) -> Result<Response<Full<Bytes>>, BoxError>
    where
        B: http_body::Body,
        B::Error: Into<BoxError>,
    {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let honoured = request
            .extensions()
            .get::<mcp_edge::HonouredFilter>()
            .is_some();
        let body = request
            .into_body()
            .collect()
            .await
            .map_err(Into::into)?
            .to_bytes();
        *self.body.lock().unwrap() = body.clone();
        let message: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let id = message.get("id").cloned().unwrap_or(json!(1));
        let answer = match message["method"].as_str() {
            Some("initialize") | Some("server/discover") => {
                self.capabilities.fetch_add(1, Ordering::SeqCst);
                json!({"jsonrpc": "2.0", "id": id, "result": {"capabilities": inner_capabilities()}})
            }
            Some("subscriptions/listen") => {
                if !honoured {
                    self.unhonoured_listens.fetch_add(1, Ordering::SeqCst);
                }
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            }
            _ => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        };
        Ok(Response::builder()
            .header(header::CONTENT_TYPE, "application/json")
            .body(Full::from(answer.to_string()))
            .unwrap())
    }
}

/// The lenient inner as a service, for any request body.
#[derive(Clone)]
struct Inner(Arc<Lenient>);

impl<B> Service<Request<B>> for Inner
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Full<Bytes>>;
    type Error = BoxError;
    type Future = futures_util::future::BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        Box::pin(self.0.clone().answer(request))
    }
}

/// The stacks every case runs through.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stack {
    Capabilities,
    Listen,
    Stacked,
    Edge,
}

const STACKS: [Stack; 4] = [
    Stack::Capabilities,
    Stack::Listen,
    Stack::Stacked,
    Stack::Edge,
];

impl Stack {
    fn keeps_capabilities(self) -> bool {
        self != Stack::Listen
    }

    fn keeps_listens(self) -> bool {
        self != Stack::Capabilities
    }

    /// Whether the stack intercepts a listen (`listen`) or a capabilities
    /// request.
    fn keeps(self, listen: bool) -> bool {
        match listen {
            true => self.keeps_listens(),
            false => self.keeps_capabilities(),
        }
    }
}

/// `request` through `stack` in front of a fresh lenient inner.
async fn send<B>(stack: Stack, request: Request<B>) -> (Response<Bytes>, Arc<Lenient>)
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send + 'static,
{
    let lenient = Arc::new(Lenient::default());
    let response = through(stack, profile(), Inner(lenient.clone()), request).await;
    (response, lenient)
}

/// `request` through `stack`, built from `p`, in front of `inner`.
async fn through<S, B, R>(
    stack: Stack,
    p: ServerProfile,
    inner: S,
    request: Request<B>,
) -> Response<Bytes>
where
    S: Service<Request<RequestBody<B>>, Response = Response<R>, Error = BoxError>
        + Service<Request<RequestBody<RequestBody<B>>>, Response = Response<R>, Error = BoxError>
        + Clone,
    B: http_body::Body,
    R: http_body::Body + 'static,
    R::Error: std::fmt::Debug,
{
    match stack {
        Stack::Capabilities => collect(CapabilitiesLayer::new(p).layer_to(inner), request).await,
        Stack::Listen => collect(ListenFilterLayer::new(p).layer_to(inner), request).await,
        Stack::Stacked => {
            let service = ServiceBuilder::new()
                .layer(CapabilitiesLayer::new(p.clone()))
                .layer(ListenFilterLayer::new(p))
                .service(inner);
            collect(service, request).await
        }
        Stack::Edge => collect(EdgeLayer::new(p).layer_to(inner), request).await,
    }
}

/// `tower::Layer::layer`, named so as not to clash with `ServiceBuilder`.
trait LayerTo<S>: tower::Layer<S> + Sized {
    fn layer_to(self, inner: S) -> Self::Service {
        tower::Layer::layer(&self, inner)
    }
}

impl<L: tower::Layer<S>, S> LayerTo<S> for L {}

async fn collect<S, B, R>(service: S, request: Request<B>) -> Response<Bytes>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Error: std::fmt::Debug,
    R: http_body::Body,
    R::Error: std::fmt::Debug,
{
    let response = service.oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    Response::from_parts(parts, bytes)
}

fn json_of(response: &Response<Bytes>) -> Value {
    serde_json::from_slice(response.body()).unwrap_or(Value::Null)
}

/// Request headers, name and value.
type Headers<'a> = &'a [(&'a str, &'a str)];

/// A POST of `body` with `headers`, in one chunk.
fn post(headers: &[(&str, &str)], body: &str) -> Request<Full<Bytes>> {
    let mut request = Request::post("/mcp");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Full::from(body.to_owned())).unwrap()
}

/// A POST of `body` cut at `at`, in two chunks.
fn post_split(
    headers: &[(&str, &str)],
    body: &str,
    at: usize,
) -> Request<StreamBody<impl futures_util::Stream<Item = Result<http_body::Frame<Bytes>, BoxError>>>>
{
    let (a, b) = body.as_bytes().split_at(at);
    let frames = [a, b]
        .into_iter()
        .filter(|chunk| !chunk.is_empty())
        .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
        .collect::<Vec<_>>();
    let mut request = Request::post("/mcp");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(StreamBody::new(stream::iter(frames))).unwrap()
}

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{}}"#;
const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
const LISTEN: &str = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["demo://public/a","demo://private/b"]}}}"#;

/// The lenient inner's answer reached the client with its own capabilities.
fn leaked(response: &Response<Bytes>) -> bool {
    json_of(response)["result"]["capabilities"] == inner_capabilities()
}

/// The answer is the layer's JSON-RPC error `code` for id 7, with `status`.
fn assert_refused(response: &Response<Bytes>, status: StatusCode, code: i64, what: &str) {
    assert_eq!(response.status(), status, "{what}");
    let message = json_of(response);
    assert_eq!(message["error"]["code"], code, "{what}: {message}");
    assert!(response.extensions().get::<Rejection>().is_some(), "{what}");
}

// ---------------------------------------------------------------------------
// A canned inner, and a listen through the guard (7-9 and the sections after).
// ---------------------------------------------------------------------------

/// An inner service that answers every request with `status`, `headers`
/// and `body`.
#[derive(Clone)]
struct Canned {
    status: StatusCode,
    headers: Vec<(&'static str, &'static str)>,
    body: Bytes,
    /// The answer in chunks of this size.
    chunk: usize,
}

impl<B> Service<Request<B>> for Canned
where
    B: http_body::Body + Send + 'static,
{
    type Response = Response<
        StreamBody<stream::Iter<std::vec::IntoIter<Result<http_body::Frame<Bytes>, BoxError>>>>,
    >;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Self::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        let frames: Vec<_> = self
            .body
            .chunks(self.chunk.max(1))
            .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
            .collect();
        let mut response = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            response = response.header(*name, *value);
        }
        std::future::ready(Ok(response
            .body(StreamBody::new(stream::iter(frames)))
            .unwrap()))
    }
}

const SSE: (&str, &str) = ("content-type", "text/event-stream");
const JSON: (&str, &str) = ("content-type", "application/json");
const TEXT: (&str, &str) = ("content-type", "text/plain");
const ASK: &str = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["demo://public/a","demo://private/b"]}}}"#;

/// A profile that honours tool list changes and subscriptions to public URIs.
fn listen_profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(
            json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}),
        )
        .resource_access(common::public_only)
        .subscription_hook(|uris: &[&str]| std::future::ready(vec![true; uris.len()]))
        .build()
        .unwrap()
}

/// The listen `ASK` answered by a canned inner, through the listen filter
/// and through `EdgeLayer`: the messages the client gets, and its raw body.
async fn guarded(canned: Canned) -> Vec<(Response<Bytes>, Vec<Value>)> {
    let mut out = Vec::new();
    for stack in [Stack::Listen, Stack::Edge] {
        let response = through(stack, listen_profile(), canned.clone(), post(&[], ASK)).await;
        let sse = response
            .headers()
            .get("content-type")
            .is_some_and(|v| v == "text/event-stream");
        let messages = match sse {
            true => common::sse_messages(response.body()),
            false => vec![json_of(&response)],
        };
        out.push((response, messages));
    }
    out
}
