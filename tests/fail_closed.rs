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
const LISTEN: &str = r#"{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["demo://public/a","demo://private/b"]}}}"#;

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
// 1. Every POST is classified by its body, whatever its content type.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn the_content_type_decides_nothing() {
    let types: [&[(&str, &str)]; 4] = [
        &[("content-type", "text/plain")],
        &[("content-type", "application/x-www-form-urlencoded")],
        &[("content-type", "application/octet-stream")],
        &[],
    ];
    for stack in STACKS {
        for headers in types {
            let what = format!("{stack:?} {headers:?}");
            for body in [DISCOVER, INITIALIZE] {
                let (response, lenient) = send(stack, post(headers, body)).await;
                assert_eq!(lenient.calls(), 1, "{what}");
                assert_eq!(
                    leaked(&response),
                    !stack.keeps_capabilities(),
                    "{what}: {body}"
                );
            }
            let (response, lenient) = send(stack, post(headers, LISTEN)).await;
            assert_eq!(
                lenient.unhonoured_listens.load(Ordering::SeqCst),
                usize::from(!stack.keeps_listens()),
                "{what}: {}",
                String::from_utf8_lossy(response.body())
            );
        }
    }
}

#[tokio::test]
async fn a_body_that_is_not_json_up_to_its_method_is_refused() {
    for stack in STACKS {
        for body in [
            "method=subscriptions/listen",
            "",
            "{\"method\"",
            "\"initialize\"",
            "{\"id\":1,]",
        ] {
            let (response, lenient) =
                send(stack, post(&[("content-type", "text/plain")], body)).await;
            assert_refused(
                &response,
                StatusCode::BAD_REQUEST,
                -32700,
                &format!("{stack:?} {body:?}"),
            );
            assert_eq!(lenient.calls(), 0);
        }
    }
}

// ---------------------------------------------------------------------------
// 2. `Mcp-Method` is decoded before it is compared.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_base64_method_header_that_matches_the_body_is_accepted() {
    let cases = [
        (DISCOVER, "=?base64?c2VydmVyL2Rpc2NvdmVy?="),
        (INITIALIZE, "=?base64?aW5pdGlhbGl6ZQ==?="),
        (LISTEN, "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?="),
    ];
    for stack in STACKS {
        for (body, encoded) in cases {
            let headers = [("content-type", "text/plain"), ("mcp-method", encoded)];
            let (response, lenient) = send(stack, post(&headers, body)).await;
            assert_eq!(lenient.calls(), 1, "{stack:?} {encoded}");
            assert_eq!(response.status(), StatusCode::OK, "{stack:?} {encoded}");
            assert!(
                !stack.keeps_capabilities() || !leaked(&response),
                "{stack:?} {encoded}"
            );
            assert_eq!(
                lenient.unhonoured_listens.load(Ordering::SeqCst),
                usize::from(body == LISTEN && !stack.keeps_listens()),
            );
        }
    }
}

#[tokio::test]
async fn an_undecodable_or_repeated_method_header_is_refused_with_the_id() {
    // The body, the headers, and whether the capabilities layer and the
    // listen filter each refuse it: a value that does not decode could name
    // anything; a repeated one, what its values name.
    let cases: [(&str, Headers, bool, bool); 5] = [
        (
            DISCOVER,
            &[("mcp-method", "=?base64?c2VydmVyL2Rpc2NvdmVy")],
            true,
            true,
        ),
        (LISTEN, &[("mcp-method", "=?base64?***?=")], true, true),
        (
            LISTEN,
            &[
                ("mcp-method", "subscriptions/listen"),
                ("mcp-method", "subscriptions/listen"),
            ],
            false,
            true,
        ),
        (
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            &[
                ("mcp-method", "tools/call"),
                ("mcp-method", "server/discover"),
            ],
            true,
            false,
        ),
        (
            INITIALIZE,
            &[
                ("mcp-method", "initialize"),
                ("mcp-method", "=?base64?aW5pdGlhbGl6ZQ==?="),
            ],
            true,
            false,
        ),
    ];
    for (body, headers, capabilities, listen) in cases {
        for stack in STACKS {
            let what = format!("{stack:?} {headers:?}");
            let (response, lenient) = send(stack, post(headers, body)).await;
            let refused =
                capabilities && stack.keeps_capabilities() || listen && stack.keeps_listens();
            if refused {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32020, &what);
                assert_eq!(json_of(&response)["id"], 7, "{what}");
                assert_eq!(lenient.calls(), 0, "{what}");
            } else {
                assert_eq!(lenient.calls(), 1, "{what}: not this layer's method");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 3. A second top-level `method`, with either layer alone.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_second_method_never_reaches_a_last_wins_parser() {
    let hidden = [
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"initialize","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
    ];
    for stack in STACKS {
        for body in hidden {
            // In one chunk the layer reads both methods before the call.
            let (response, lenient) = send(stack, post(&[], body)).await;
            assert_refused(
                &response,
                StatusCode::BAD_REQUEST,
                -32600,
                &format!("{stack:?} {body}"),
            );
            assert_eq!(lenient.calls(), 0);
            // Cut anywhere, either refused or cut short before the second method.
            for at in 0..=body.len() {
                let (response, lenient) = send(stack, post_split(&[], body, at)).await;
                let what = format!("{stack:?} split at {at}: {body}");
                assert!(!leaked(&response), "{what}");
                assert_eq!(
                    lenient.unhonoured_listens.load(Ordering::SeqCst),
                    0,
                    "{what}"
                );
                assert_eq!(lenient.capabilities.load(Ordering::SeqCst), 0, "{what}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Batches and notifications of intercepted methods.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_batch_holding_an_intercepted_method_is_refused() {
    let batches = [
        (format!("[{DISCOVER}]"), false),
        (
            format!(r#"[{{"jsonrpc":"2.0","id":1,"method":"tools/list"}},{INITIALIZE}]"#),
            false,
        ),
        (format!("[{LISTEN}]"), true),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"server/discover"}]"#
                .to_owned(),
            false,
        ),
    ];
    for stack in STACKS {
        for (batch, listen) in &batches {
            let what = format!("{stack:?} {batch}");
            let (response, lenient) =
                send(stack, post(&[("content-type", "text/plain")], batch)).await;
            let kept = stack.keeps(*listen);
            if kept {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32600, &what);
                assert_eq!(lenient.calls(), 0, "{what}");
            } else {
                assert_eq!(lenient.calls(), 1, "{what}: not this layer's method");
            }
        }
        let plain = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]"#;
        let (_, lenient) = send(stack, post(&[], plain)).await;
        assert_eq!(
            lenient.calls(),
            1,
            "{stack:?}: a batch of other methods passes"
        );
    }
}

#[tokio::test]
async fn an_intercepted_method_without_an_id_is_refused() {
    let notifications = [
        (r#"{"jsonrpc":"2.0","method":"server/discover"}"#, false),
        (
            r#"{"jsonrpc":"2.0","method":"initialize","params":{}}"#,
            false,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#,
            true,
        ),
    ];
    for stack in STACKS {
        for (body, listen) in notifications {
            let what = format!("{stack:?} {body}");
            let (response, lenient) = send(stack, post(&[], body)).await;
            let kept = stack.keeps(listen);
            if kept {
                assert_refused(&response, StatusCode::BAD_REQUEST, -32600, &what);
                assert_eq!(lenient.calls(), 0, "{what}");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// 5. An empty `Content-Encoding` is identity.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn an_empty_content_encoding_is_identity() {
    for stack in STACKS {
        let headers = [("content-encoding", "")];
        let (response, lenient) = send(stack, post(&headers, DISCOVER)).await;
        assert_eq!(lenient.calls(), 1, "{stack:?}");
        assert_eq!(leaked(&response), !stack.keeps_capabilities(), "{stack:?}");
        let (_, lenient) = send(stack, post(&headers, LISTEN)).await;
        assert_eq!(
            lenient.unhonoured_listens.load(Ordering::SeqCst),
            usize::from(!stack.keeps_listens()),
            "{stack:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// 7-9. What leaves the guard is exactly what it checked.
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
const TAG: &str = r#""_meta":{"io.modelcontextprotocol/subscriptionId":7}"#;

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

#[tokio::test]
async fn only_what_the_filter_honours_leaves_the_stream() {
    let ack = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["demo://public/a","demo://private/b"]}},"extra":"leak",{TAG}}},"extra":1}}"#
    );
    let events = [
        ack.clone(),
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{{TAG}}}}}"#),
        // Not honoured (prompts are not advertised), a case variant, a request, a batch.
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{{{TAG}}}}}"#),
        r#"{"jsonrpc":"2.0","method":"Notifications/tools/list_changed"}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":99,"method":"ping"}"#.to_owned(),
        r#"[{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}]"#.to_owned(),
        // A covered URI, an uncovered one, one escaping by dot segments.
        format!(r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"demo://public/a/x",{TAG}}}}}"#),
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://private/b"}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"demo://public/a/../../private/b"}}"#.to_owned(),
        // Ambiguous or foreign tags.
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7,"io.modelcontextprotocol/subscriptionId":7}}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":[7]}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":8}}}"#.to_owned(),
        // Results for other ids; the listen's own, with a leak.
        r#"{"jsonrpc":"2.0","id":8,"result":{}}"#.to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","_meta":{"k":1},"leak":"secret"}}"#.to_owned(),
    ];
    let mut stream: String = events
        .iter()
        .map(|data| format!("data: {data}\n\n"))
        .collect();
    // Data that is not exactly one JSON value, then an unterminated last block.
    stream.push_str(
        "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\ndata: {}\n\n",
    );
    stream.push_str(": keep-alive\n\n");
    stream.push_str("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}");
    let expected = vec![
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {
            "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://public/a"]},
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {
            "uri": "demo://public/a/x", "_meta": {"io.modelcontextprotocol/subscriptionId": 7}}}),
        json!({"jsonrpc": "2.0", "id": 7, "result": {"_meta": {"k": 1}, "resultType": "complete"}}),
    ];
    for chunk in 1..=stream.len() {
        let canned = Canned {
            status: StatusCode::OK,
            headers: vec![SSE],
            body: Bytes::from(stream.clone()),
            chunk,
        };
        for (response, messages) in guarded(canned).await {
            assert_eq!(messages, expected, "chunks of {chunk}");
            let text = std::str::from_utf8(response.body()).unwrap();
            assert!(text.contains(": keep-alive\n\n"), "comments pass");
            assert!(
                !text.contains("leak") && !text.contains("extra"),
                "chunks of {chunk}: {text}"
            );
        }
    }
}

#[tokio::test]
async fn events_leave_as_they_were_parsed() {
    let tools = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    // An unknown field, a CR-only line end inside the event, a BOM inside
    // the stream (its line is no field), a valid event.
    let stream = format!(
        "foo: hidden\ndata: {tools}\n\nid: 1\rdata: {tools}\n\n\u{feff}data: {tools}\n\nid: 2\ndata: {tools}\n\n"
    );
    for chunk in 1..=stream.len() {
        let canned = Canned {
            status: StatusCode::OK,
            headers: vec![SSE],
            body: Bytes::from(stream.clone()),
            chunk,
        };
        for (response, messages) in guarded(canned).await {
            let text = std::str::from_utf8(response.body()).unwrap();
            assert_eq!(messages.len(), 4, "ack and three events: {text}");
            assert!(
                !text.contains("foo") && !text.contains('\r') && !text.contains('\u{feff}'),
                "{text:?}"
            );
            assert!(
                text.ends_with(&format!("id: 2\ndata: {tools}\n\n")),
                "a plain event passes as it came: {text:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_listen_answered_other_than_by_a_stream_passes_only_as_its_own_answer() {
    let cases: [(Headers<'static>, &str, Option<Value>); 7] = [
        (
            &[JSON],
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"no"},"x":1}"#,
            Some(json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": "no"}})),
        ),
        (
            &[("content-type", "text/plain")],
            r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","leak":1}}"#,
            Some(json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}})),
        ),
        (&[JSON], r#"{"jsonrpc":"2.0","id":8,"result":{}}"#, None),
        (
            &[JSON],
            r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{"toolsListChanged":true}}}"#,
            None,
        ),
        (&[], "plain words", None),
        (&[JSON, ("content-encoding", "gzip")], "\u{1f}\u{8b}", None),
        (&[SSE, ("content-encoding", "br")], "data: {}\n\n", None),
    ];
    for (headers, body, expected) in cases {
        let canned = Canned {
            status: StatusCode::OK,
            headers: headers.to_vec(),
            body: Bytes::from(body),
            chunk: 3,
        };
        for (response, messages) in guarded(canned).await {
            match &expected {
                Some(expected) => assert_eq!(&messages[0], expected, "{body}"),
                None => {
                    assert_eq!(
                        response.status(),
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "{body}"
                    );
                    assert_eq!(messages[0]["error"]["code"], -32603, "{body}");
                    assert_eq!(messages[0]["id"], 7, "{body}");
                    assert!(response.headers().get("content-encoding").is_none());
                }
            }
        }
    }
    // An empty answer carries nothing: it passes.
    let canned = Canned {
        status: StatusCode::OK,
        headers: vec![],
        body: Bytes::new(),
        chunk: 1,
    };
    for (response, _) in guarded(canned).await {
        assert!(response.body().is_empty());
    }
}

// ---------------------------------------------------------------------------
// The legacy era: `resources/subscribe` at the edge.
// ---------------------------------------------------------------------------

/// `resources/subscribe` of `params`, id 7.
fn subscribe(params: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{params}}}"#)
}

/// A profile whose subscription hook refuses `demo://public/static`.
fn subscribe_profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(common::public_only)
        .subscription_hook(|uris: &[&str]| {
            std::future::ready(uris.iter().map(|uri| !uri.ends_with("/static")).collect())
        })
        .build()
        .unwrap()
}

/// `request` through the listen filter of `subscribe_profile`, alone,
/// stacked and as `EdgeLayer`, in front of a fresh lenient inner each.
async fn through_listen_filters<B>(
    request: impl Fn() -> Request<B>,
) -> Vec<(Response<Bytes>, Arc<Lenient>)>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError> + Send + 'static,
{
    let mut out = Vec::new();
    for stack in [Stack::Listen, Stack::Stacked, Stack::Edge] {
        let lenient = Arc::new(Lenient::default());
        let inner = Inner(lenient.clone());
        let response = through(stack, subscribe_profile(), inner, request()).await;
        out.push((response, lenient));
    }
    out
}

#[tokio::test]
async fn a_readable_subscription_reaches_the_inner_byte_for_byte() {
    let body = subscribe(r#"{"uri":"demo://public/a","_meta":{"k":1}}"#);
    for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(lenient.calls(), 1);
        assert_eq!(&lenient.body.lock().unwrap()[..], body.as_bytes());
    }
    // Through the capabilities layer alone it is not intercepted.
    let (_, lenient) = send(
        Stack::Capabilities,
        post(&[], &subscribe(r#"{"uri":"demo://private/b"}"#)),
    )
    .await;
    assert_eq!(lenient.calls(), 1);
    // `resources/unsubscribe` passes through.
    let unsubscribe = r#"{"jsonrpc":"2.0","id":8,"method":"resources/unsubscribe","params":{"uri":"demo://private/b"}}"#;
    for (_, lenient) in through_listen_filters(|| post(&[], unsubscribe)).await {
        assert_eq!(lenient.calls(), 1);
    }
}

#[tokio::test]
async fn an_unreadable_or_unknown_uri_is_answered_alike() {
    let mut answers = Vec::new();
    for uri in ["demo://private/b", "demo://nowhere/c", "file:///etc/passwd"] {
        let body = subscribe(&format!(r#"{{"uri":"{uri}"}}"#));
        for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
            assert_refused(&response, StatusCode::OK, -32002, uri);
            assert_eq!(json_of(&response)["id"], 7);
            let text = std::str::from_utf8(response.body()).unwrap().to_owned();
            assert!(!text.contains(uri), "the answer names no URI: {text}");
            assert_eq!(lenient.calls(), 0, "{uri}");
            answers.push((response.status(), text));
        }
    }
    assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
}

#[tokio::test]
async fn a_subscription_the_hook_refuses_is_answered_by_the_layer() {
    let body = subscribe(r#"{"uri":"demo://public/static"}"#);
    for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
        assert_refused(&response, StatusCode::OK, -32602, "refused by the hook");
        assert_eq!(lenient.calls(), 0);
    }
}

#[tokio::test]
async fn a_subscription_without_one_string_uri_is_invalid_params() {
    for params in [
        "{}",
        r#"{"uri":7}"#,
        r#"{"uri":null}"#,
        r#"{"uri":"demo://public/a","uri":"demo://private/b"}"#,
        "[]",
        r#""demo://public/a""#,
    ] {
        let body = subscribe(params);
        for (response, lenient) in through_listen_filters(|| post(&[], &body)).await {
            assert_refused(&response, StatusCode::OK, -32602, params);
            assert_eq!(json_of(&response)["id"], 7, "{params}");
            assert_eq!(lenient.calls(), 0, "{params}");
        }
    }
    let no_params = r#"{"jsonrpc":"2.0","id":7,"method":"resources/subscribe"}"#;
    for (response, _) in through_listen_filters(|| post(&[], no_params)).await {
        assert_refused(&response, StatusCode::OK, -32602, "no params");
    }
}

#[tokio::test]
async fn a_subscription_in_disguise_is_refused() {
    let cases: [(Headers<'static>, &str, i64); 5] = [
        (
            &[("mcp-method", "tools/call")],
            r#"{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32020,
        ),
        (
            &[("mcp-method", "resources/subscribe")],
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#,
            -32020,
        ),
        (
            &[],
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32600,
        ),
        (
            &[],
            r#"[{"jsonrpc":"2.0","id":7,"method":"resources/subscribe","params":{"uri":"demo://private/b"}}]"#,
            -32600,
        ),
        (
            &[],
            r#"{"jsonrpc":"2.0","method":"resources/subscribe","params":{"uri":"demo://private/b"}}"#,
            -32600,
        ),
    ];
    for (headers, body, code) in cases {
        for (response, lenient) in through_listen_filters(|| post(headers, body)).await {
            assert_refused(&response, StatusCode::BAD_REQUEST, code, body);
            assert_eq!(lenient.calls(), 0, "{body}");
        }
    }
    // Cut anywhere, a subscription to an unreadable URI never reaches the inner.
    let body = subscribe(r#"{"uri":"demo://private/b"}"#);
    for at in 0..=body.len() {
        for (response, lenient) in through_listen_filters(|| post_split(&[], &body, at)).await {
            assert_refused(&response, StatusCode::OK, -32002, &format!("split at {at}"));
            assert_eq!(lenient.calls(), 0);
        }
    }
}

#[tokio::test]
async fn a_subscription_of_the_modern_era_is_method_not_found() {
    // 2026-07-28 removed `resources/subscribe`: by its header or its `_meta`.
    let meta = subscribe(
        r#"{"uri":"demo://public/a","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    );
    let plain = subscribe(r#"{"uri":"demo://public/a"}"#);
    let cases: [(Headers<'static>, &str); 2] = [
        (&[], &meta),
        (&[("mcp-protocol-version", "2026-07-28")], &plain),
    ];
    for (headers, body) in cases {
        for (response, lenient) in through_listen_filters(|| post(headers, body)).await {
            assert_refused(&response, StatusCode::NOT_FOUND, -32601, body);
            assert_eq!(lenient.calls(), 0);
        }
    }
    // A legacy session's version is the legacy era.
    let legacy = [("mcp-protocol-version", "2025-11-25")];
    for (_, lenient) in through_listen_filters(|| post(&legacy, &plain)).await {
        assert_eq!(lenient.calls(), 1);
    }
}

#[tokio::test]
async fn ids_the_layer_cannot_vouch_for_never_let_capabilities_through() {
    for body in [
        // Not JSON as an id: refused, never answered with a malformed id.
        r#"{"jsonrpc":"2.0","id":01,"method":"initialize","params":{}}"#,
        "{\"jsonrpc\":\"2.0\",\"id\":\"a\tb\",\"method\":\"server/discover\"}",
        // A second id after the method: a last-wins inner answers id 2.
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{},"id":2}"#,
    ] {
        for stack in [Stack::Capabilities, Stack::Stacked, Stack::Edge] {
            let (response, lenient) = send(stack, post(&[], body)).await;
            assert!(!leaked(&response), "{stack:?} {body}");
            assert!(
                json_of(&response)["error"]["code"].is_i64(),
                "{stack:?} {body}: {}",
                String::from_utf8_lossy(response.body())
            );
            assert_eq!(
                lenient.capabilities.load(Ordering::SeqCst) > 0,
                lenient.calls() > 0
            );
        }
    }
}

#[tokio::test]
async fn the_capabilities_layer_alone_refuses_what_it_cannot_read() {
    // A coding the inner may ignore, and a method past the peek limit.
    let (response, lenient) = send(
        Stack::Capabilities,
        post(&[("content-encoding", "bogus")], INITIALIZE),
    )
    .await;
    assert_refused(
        &response,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        -32600,
        "encoded",
    );
    assert_eq!(lenient.calls(), 0);
    let padded = format!(
        r#"{{"jsonrpc":"2.0","id":7,"pad":"{}","method":"initialize","params":{{}}}}"#,
        "x".repeat(2 << 20)
    );
    // Whole in memory, the method is read and the answer rewritten.
    let (response, _) = send(Stack::Capabilities, post(&[], &padded)).await;
    assert!(!leaked(&response));
    // Streamed in small chunks, the method comes after the limit: refused
    // without reading further.
    let frames: Vec<Result<http_body::Frame<Bytes>, BoxError>> = padded
        .as_bytes()
        .chunks(64 << 10)
        .map(|chunk| Ok(http_body::Frame::data(Bytes::copy_from_slice(chunk))))
        .collect();
    let request = Request::post("/mcp")
        .body(StreamBody::new(stream::iter(frames)))
        .unwrap();
    let (response, lenient) = send(Stack::Capabilities, request).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(lenient.calls(), 0);
}

// ---------------------------------------------------------------------------
// Every other event stream: resource updates only for what the caller reads.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn every_other_stream_drops_updates_the_caller_may_not_read() {
    let update = |uri: &str| {
        format!(
            "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{uri}\"}}}}\n\n"
        )
    };
    let answer = |id: u32| {
        format!(
            r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-11-25","capabilities":{{}},"serverInfo":{{"name":"x","version":"1"}}}}}}"#
        ) + "\n\n"
    };
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
    let stream = [
        update("demo://private/b"),
        update("demo://public/a"),
        answer(1),
        "data: {\"method\":\"notifications\\/resources\\/updated\",\"params\":{\"uri\":\"demo://private/c\"}}\n\n"
            .to_owned(),
    ]
    .concat();
    let request = |what: &str| match what {
        "GET" => Request::get("/mcp")
            .header("accept", "text/event-stream")
            .body(Full::new(Bytes::new()))
            .unwrap(),
        "tools/call" => post(&[], call),
        _ => post(&[], initialize),
    };
    for what in ["GET", "tools/call", "initialize"] {
        for chunk in 1..=stream.len() {
            let canned = Canned {
                status: StatusCode::OK,
                headers: vec![SSE],
                body: Bytes::from(stream.clone()),
                chunk,
            };
            for stack in STACKS {
                let response =
                    through(stack, listen_profile(), canned.clone(), request(what)).await;
                let messages = common::sse_messages(response.body());
                let uris: Vec<&str> = messages
                    .iter()
                    .filter_map(|m| m["params"]["uri"].as_str())
                    .collect();
                let context = format!("{what} through {stack:?}, chunks of {chunk}");
                // The capabilities layer alone makes no promise about updates.
                match stack {
                    Stack::Capabilities => assert_eq!(
                        uris,
                        ["demo://private/b", "demo://public/a", "demo://private/c"],
                        "{context}"
                    ),
                    _ => assert_eq!(uris, ["demo://public/a"], "{context}"),
                }
                assert!(
                    messages.iter().any(|m| m["id"] == 1),
                    "the answer arrives: {context}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The inner's own errors keep their status; what could carry a result is
// checked.
// ---------------------------------------------------------------------------

/// An inner that answers `status`, `headers` and `body`, in chunks of 5.
fn answering(status: StatusCode, headers: Headers<'static>, body: impl Into<Bytes>) -> Canned {
    Canned {
        status,
        headers: headers.to_vec(),
        body: body.into(),
        chunk: 5,
    }
}

/// The answer is the layers' -32603 error for id 7, in place of the inner's.
fn assert_replaced(response: &Response<Bytes>, what: &str) {
    assert_eq!(
        response.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "{what}"
    );
    let message = json_of(response);
    assert_eq!(message["error"]["code"], -32603, "{what}: {message}");
    assert_eq!(message["id"], 7, "{what}: {message}");
}

/// A result to id 7 carrying the inner's own capabilities.
fn inner_result() -> String {
    json!({"jsonrpc": "2.0", "id": 7, "result": {"capabilities": inner_capabilities()}}).to_string()
}

#[tokio::test]
async fn an_error_status_without_a_result_passes_as_it_came() {
    let answers = [
        // rmcp's answer to a request without a session.
        answering(
            StatusCode::BAD_REQUEST,
            &[TEXT],
            "Bad Request: Session ID is required",
        ),
        answering(StatusCode::BAD_REQUEST, &[], ""),
        // Not rebuilt, as the guard rebuilds a listen's answer with a 200.
        answering(
            StatusCode::NOT_FOUND,
            &[JSON],
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"},"x":1}"#,
        ),
        answering(
            StatusCode::UNAUTHORIZED,
            &[JSON, ("www-authenticate", "Bearer")],
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"\"token\" is missing"}}"#,
        ),
        answering(
            StatusCode::SERVICE_UNAVAILABLE,
            &[("content-type", "text/html"), ("retry-after", "5")],
            "<html><style>p{color:red}</style><p>busy</p></html>",
        ),
    ];
    for answer in answers {
        for request in [DISCOVER, INITIALIZE, LISTEN] {
            for stack in STACKS {
                let what = format!("{stack:?} {request}: {:?}", answer.body);
                let response =
                    through(stack, listen_profile(), answer.clone(), post(&[], request)).await;
                assert_eq!(response.status(), answer.status, "{what}");
                assert_eq!(response.headers().len(), answer.headers.len(), "{what}");
                for (name, value) in &answer.headers {
                    assert_eq!(response.headers()[*name], *value, "{what}");
                }
                assert_eq!(response.body(), &answer.body, "{what}");
                assert!(response.extensions().get::<Rejection>().is_none(), "{what}");
            }
        }
    }
}

#[tokio::test]
async fn an_error_status_with_a_result_is_checked() {
    let stacks = [Stack::Capabilities, Stack::Stacked, Stack::Edge];
    // The request's own answer, in any spelling of its key: rewritten, and
    // its status kept.
    for body in [
        inner_result(),
        inner_result().replace("result", r"\u0072esult"),
    ] {
        for request in [DISCOVER, INITIALIZE] {
            for stack in stacks {
                let what = format!("{stack:?} {request}: {body}");
                let answer = answering(StatusCode::BAD_REQUEST, &[JSON], body.clone());
                let response = through(stack, profile(), answer, post(&[], request)).await;
                assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{what}");
                let message = json_of(&response);
                assert_eq!(message["id"], 7, "{what}");
                assert!(message["result"]["capabilities"]["tools"].is_object());
                assert!(!leaked(&response), "{what}");
            }
        }
    }
    // A UTF-16 reader finds the result; a byte search does not.
    let utf16: Vec<u8> = inner_result()
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    let mut too_long = answering(StatusCode::BAD_REQUEST, &[TEXT], "x".repeat((1 << 20) + 1));
    too_long.chunk = 64 << 10;
    let failing = [
        // A reader of the first JSON value finds the inner's result.
        answering(
            StatusCode::BAD_REQUEST,
            &[TEXT],
            format!("{} and more", inner_result()),
        ),
        answering(
            StatusCode::BAD_REQUEST,
            &[JSON],
            inner_result().replace(r#""id":7"#, r#""id":8"#),
        ),
        // A reader that folds the case of keys finds it too.
        answering(
            StatusCode::BAD_REQUEST,
            &[JSON],
            inner_result().replace("result", "Result"),
        ),
        answering(
            StatusCode::CONFLICT,
            &[JSON],
            inner_result().replace(r#""id":7"#, r#""id":7,"error":{"code":1,"message":"x"}"#),
        ),
        answering(StatusCode::BAD_REQUEST, &[JSON], utf16),
        // Past `max_rewritten_response`, even with no result in sight.
        too_long,
    ];
    for answer in failing {
        for request in [DISCOVER, INITIALIZE] {
            for stack in stacks {
                let what = format!("{stack:?} {request}: {}", answer.body.len());
                let response = through(stack, profile(), answer.clone(), post(&[], request)).await;
                assert_replaced(&response, &what);
            }
        }
    }
}

#[tokio::test]
async fn a_listen_answered_with_an_error_status_and_a_result_is_checked() {
    let leaky = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"complete","leak":1}}"#;
    for (response, messages) in guarded(answering(StatusCode::BAD_REQUEST, &[JSON], leaky)).await {
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            messages[0],
            json!({"jsonrpc": "2.0", "id": 7, "result": {"resultType": "complete"}})
        );
    }
    for body in [
        r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":7,"Result":{"leak":1}}"#,
        r#"{"jsonrpc":"2.0","id":7,"result":{}} and more"#,
    ] {
        let answer = answering(StatusCode::BAD_REQUEST, &[JSON], body);
        for (response, _) in guarded(answer).await {
            assert_replaced(&response, body);
        }
    }
}
