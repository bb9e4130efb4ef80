//! Hostile requests against both layers in an axum stack:
//! `Router -> ListenFilterLayer -> CapabilitiesLayer`, driven with `oneshot`.
//!
//! Each case checks the status, the JSON-RPC code and id the layers answer
//! with, and whether the inner handler ran (it counts its calls).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use mcp_edge::{CapabilitiesLayer, HonouredFilter, ListenFilterLayer, Rejection, ServerProfile};
use serde_json::{json, Value};
use tower::ServiceExt;

mod common;
use common::{body_bytes, post_json, post_stream};

const MIB: usize = 1024 * 1024;
/// The default listen body limit.
const LIMIT: usize = MIB;
const CHUNK: usize = 64 * 1024;
const FIFTY_MIB: usize = 50 * MIB;
/// The handler keeps bodies up to this size; longer ones are only counted.
const KEEP: usize = 4 * MIB;
const LISTEN: &str = "subscriptions/listen";

fn profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(common::public_only)
        .build()
        .expect("valid profile")
}

// ---------------------------------------------------------------------------
// The inner handler: counts calls, drains the body, records what it saw.
// ---------------------------------------------------------------------------

/// One call of the inner handler.
#[derive(Debug, Clone)]
struct Seen {
    /// The body, if it was read to its end and is at most `KEEP` bytes.
    body: Option<Vec<u8>>,
    /// Bytes read, whether kept or not.
    len: usize,
    /// The body stream's error, if it failed.
    error: Option<String>,
    /// Whether a `HonouredFilter` was in the request extensions.
    filter: bool,
}

#[derive(Default)]
struct Probe {
    calls: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
    /// Set when the handler parsed a body into a `serde_json::Value` whose
    /// `method` is a listen the layer did not honour.
    unhonoured_listen: AtomicUsize,
}

impl Probe {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("the inner handler was called")
    }
}

async fn handle(probe: Arc<Probe>, request: Request<Body>) -> Response<Body> {
    probe.calls.fetch_add(1, Ordering::SeqCst);
    let (parts, mut body) = request.into_parts();
    let filter = parts.extensions.get::<HonouredFilter>().is_some();
    let mut kept = Some(Vec::new());
    let mut len = 0;
    let mut error = None;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    len += data.len();
                    if len > KEEP {
                        kept = None;
                    }
                    if let Some(kept) = kept.as_mut() {
                        kept.extend_from_slice(&data);
                    }
                }
            }
            Err(e) => {
                error = Some(e.to_string());
                kept = None;
                break;
            }
        }
    }
    let mut id = json!(1);
    if let Some(bytes) = &kept {
        // What a server that parses into `Value` (last duplicate wins) would see.
        if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
            if value["method"] == LISTEN && !filter {
                probe.unhonoured_listen.fetch_add(1, Ordering::SeqCst);
            }
            if let Some(theirs) = value.get("id") {
                id = theirs.clone();
            }
        }
    }
    let failed = error.is_some();
    probe.seen.lock().unwrap().push(Seen {
        body: kept,
        len,
        error,
        filter,
    });
    if failed {
        return Response::builder()
            .status(StatusCode::BAD_REQUEST)
            .body(Body::from("body read failed"))
            .unwrap();
    }
    // The answer to the request's id, as a listen's own answer may be.
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": {}});
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(answer.to_string()))
        .unwrap()
}

fn app(probe: &Arc<Probe>) -> Router {
    let p = profile();
    let probe = probe.clone();
    Router::new()
        .route(
            "/mcp",
            post(move |request: Request<Body>| handle(probe.clone(), request)),
        )
        // The requests are what these cases are about; the guard's checks of
        // the inner's answers are in `fail_closed.rs` (this handler cannot
        // parse some of the bodies it gets, so its answers are not always
        // for the request's id).
        .layer(ListenFilterLayer::new(p.clone()).guard_stream(false))
        .layer(CapabilitiesLayer::new(p))
}

async fn send<B>(probe: &Arc<Probe>, request: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    app(probe).oneshot(request).await.expect("infallible")
}

// ---------------------------------------------------------------------------
// Request bodies.
// ---------------------------------------------------------------------------

/// A lazy body: chunks are made as they are pulled, and pulled bytes counted.
struct Feed {
    chunks: Box<dyn Iterator<Item = Result<Bytes, io::Error>> + Send>,
    pulled: Arc<AtomicUsize>,
}

impl Feed {
    fn new(
        chunks: impl Iterator<Item = Result<Bytes, io::Error>> + Send + 'static,
    ) -> (Self, Arc<AtomicUsize>) {
        let pulled = Arc::new(AtomicUsize::new(0));
        let feed = Self {
            chunks: Box::new(chunks),
            pulled: pulled.clone(),
        };
        (feed, pulled)
    }

    /// `parts` as chunks, in order.
    fn parts(parts: Vec<Bytes>) -> Self {
        Self::new(parts.into_iter().map(Ok)).0
    }
}

impl http_body::Body for Feed {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(self.chunks.next().map(|chunk| {
            chunk.map(|chunk| {
                self.pulled.fetch_add(chunk.len(), Ordering::SeqCst);
                Frame::data(chunk)
            })
        }))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::new()
    }
}

/// `depth` nested arrays: `[[[...]]]`.
fn nested(depth: usize) -> String {
    let mut out = String::with_capacity(2 * depth);
    out.extend(std::iter::repeat_n('[', depth));
    out.extend(std::iter::repeat_n(']', depth));
    out
}

// ---------------------------------------------------------------------------
// Responses.
// ---------------------------------------------------------------------------

/// Checks a response the layers answered themselves; returns the typed rejection.
async fn refused(response: Response<Body>, status: StatusCode, code: i64, id: Value) -> Rejection {
    assert_eq!(response.status(), status);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    let rejection = response
        .extensions()
        .get::<Rejection>()
        .cloned()
        .expect("the typed rejection is in the response extensions");
    let bytes = body_bytes(response).await;
    let body: Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "the error response is not JSON a client can parse ({e}): {} bytes, starting {:?}",
            bytes.len(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(60)])
        )
    });
    assert_eq!(body["jsonrpc"], "2.0", "{body}");
    assert_eq!(body["id"], id, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    rejection
}

/// Checks the inner handler's plain answer.
async fn answered(response: Response<Body>) {
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.extensions().get::<Rejection>().is_none());
    let body: Value = serde_json::from_slice(&body_bytes(response).await).unwrap();
    assert_eq!(body["result"], json!({}), "{body}");
}

// ---------------------------------------------------------------------------
// 1. Deep nesting: no stack overflow.
// ---------------------------------------------------------------------------

const DEEP: usize = 100_000;

/// serde_json skips a `RawValue` iteratively (no recursion limit), so a
/// listen whose deep nesting sits outside what the filter reads is honoured
/// like any other; nesting where the filter needs a value fails its type
/// check. Either way: no stack overflow, and the inner service never sees
/// an unhonoured filter.
#[tokio::test]
async fn deep_nesting_in_a_listen() {
    let deep = nested(DEEP);
    // Where the filter must read the value: `resourceSubscriptions` is not an array of strings.
    let probe = Arc::new(Probe::default());
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":{deep}}}}}}}"#
    );
    for named in [Some(LISTEN), None] {
        let response = send(&probe, post_json(named, body.clone())).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32602, json!(1)).await;
        assert!(matches!(rejection, Rejection::Listen(_)), "{rejection:?}");
    }
    // A flag that is a deep array is a wrong type.
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":{deep}}}}}}}"#
    );
    let response = send(&probe, post_json(Some(LISTEN), body)).await;
    refused(response, StatusCode::BAD_REQUEST, -32602, json!(2)).await;
    // `params` itself a deep array: not an object.
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{deep}}}"#);
    let response = send(&probe, post_json(None, body)).await;
    refused(response, StatusCode::BAD_REQUEST, -32602, json!(3)).await;
    assert_eq!(probe.calls(), 0, "no refused listen reaches the inner");

    // Nesting the filter does not read (an unknown field, `_meta`, a sibling
    // of `notifications`, before the `method`): honoured, rewritten, passed on.
    for (id, body) in [
        (
            4,
            format!(
                r#"{{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true,"futureField":{deep}}}}}}}"#
            ),
        ),
        (
            5,
            format!(
                r#"{{"jsonrpc":"2.0","id":5,"params":{{"_meta":{{"x":{deep}}},"notifications":{{"toolsListChanged":true}}}},"method":"subscriptions/listen"}}"#
            ),
        ),
    ] {
        let before = probe.calls();
        let response = send(&probe, post_json(Some(LISTEN), body.clone())).await;
        answered(response).await;
        assert_eq!(probe.calls(), before + 1, "id {id}");
        let seen = probe.last();
        assert!(seen.filter, "the inner got the HonouredFilter");
        let received = String::from_utf8(seen.body.unwrap()).unwrap();
        if id == 4 {
            assert_eq!(
                received,
                r#"{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}"#
            );
        } else {
            assert_eq!(received, body, "only `notifications` is rewritten");
        }
    }
    assert_eq!(probe.unhonoured_listen.load(Ordering::SeqCst), 0);
}

/// An id that is not a string or number cannot be echoed: JSON-RPC answers
/// `"id": null` when the request's id cannot be determined. Echoing a
/// 100 000-deep array makes the error unreadable to serde_json clients.
#[tokio::test]
async fn unusable_ids_are_not_echoed() {
    let deep = nested(DEEP);
    let probe = Arc::new(Probe::default());
    let mut echoed = Vec::new();
    for id in ["[1]", r#"{"a":1}"#, "true", &deep] {
        let short = &id[..id.len().min(10)];
        let listen = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{{}}}}}}"#
        );
        // A listen refused for its id, and disguised requests answered by either layer.
        for (header, body, code) in [
            (LISTEN, listen, -32600),
            (
                LISTEN,
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#),
                -32020,
            ),
            (
                "server/discover",
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#),
                -32020,
            ),
        ] {
            let response = send(&probe, post_json(Some(header), body)).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            let rejection = response.extensions().get::<Rejection>().cloned();
            let bytes = body_bytes(response).await;
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(body) if body["id"].is_null() => {
                    assert_eq!(body["error"]["code"], code, "{body}");
                    assert!(rejection.is_some());
                }
                Ok(body) => echoed.push(format!(
                    "Mcp-Method {header}, code {code}: id {} echoed",
                    body["id"]
                )),
                Err(e) => echoed.push(format!(
                    "Mcp-Method {header}, code {code}: id {short}... echoed, {} bytes a client cannot parse ({e})",
                    bytes.len()
                )),
            }
        }
    }
    assert_eq!(probe.calls(), 0);
    assert!(echoed.is_empty(), "{echoed:#?}");
}

#[tokio::test]
async fn deep_nesting_in_a_tools_call_passes_byte_identical() {
    let deep = nested(DEEP);
    let probe = Arc::new(Probe::default());
    for body in [
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"x","arguments":{{"deep":{deep}}}}}}}"#
        ),
        // The method after the nesting: the scan must skip it first.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"params":{{"name":"x","arguments":{{"deep":{deep}}}}},"method":"tools/call"}}"#
        ),
        // Unbalanced: an object opened 100 000 times and never closed.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}"#,
            r#"{"a":"#.repeat(DEEP)
        ),
    ] {
        for named in [Some("tools/call"), None] {
            let before = probe.calls();
            let response = send(&probe, post_json(named, body.clone())).await;
            answered(response).await;
            assert_eq!(probe.calls(), before + 1);
            let seen = probe.last();
            assert!(!seen.filter);
            assert!(seen.body.unwrap() == body.as_bytes(), "byte-identical");
        }
    }
}

// ---------------------------------------------------------------------------
// 2. 50 MiB bodies.
// ---------------------------------------------------------------------------

/// A 50 MiB listen (or other `method`), generated in 64 KiB chunks as pulled.
fn fifty_mib(method: &str) -> (Feed, Arc<AtomicUsize>) {
    let head = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{"notifications":{{}},"blob":""#
    );
    let tail = Bytes::from_static(br#""}}"#);
    let fillers = (FIFTY_MIB - head.len() - tail.len()) / CHUNK;
    let last = FIFTY_MIB - head.len() - tail.len() - fillers * CHUNK;
    let filler = Bytes::from(vec![b'a'; CHUNK]);
    let mut rest = tail.to_vec();
    rest.splice(0..0, std::iter::repeat_n(b'a', last));
    let chunks = std::iter::once(Bytes::from(head))
        .chain(std::iter::repeat_n(filler, fillers))
        .chain(std::iter::once(Bytes::from(rest)))
        .map(Ok);
    Feed::new(chunks)
}

/// A 50 MiB listen that declares its `Content-Length`, and its pulled bytes.
fn fifty_mib_listen_with_content_length() -> (Request<Feed>, Arc<AtomicUsize>) {
    let (feed, pulled) = fifty_mib(LISTEN);
    let mut request = post_stream(Some(LISTEN), feed);
    request
        .headers_mut()
        .insert(header::CONTENT_LENGTH, FIFTY_MIB.into());
    (request, pulled)
}

#[tokio::test]
async fn fifty_mib_listen_with_content_length_is_413_unread() {
    let probe = Arc::new(Probe::default());
    let (request, pulled) = fifty_mib_listen_with_content_length();
    let response = send(&probe, request).await;
    let rejection = refused(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, Value::Null).await;
    assert_eq!(rejection, Rejection::BodyTooLarge { limit: LIMIT });
    assert_eq!(probe.calls(), 0);
    let pulled = pulled.load(Ordering::SeqCst);
    assert!(pulled <= LIMIT + CHUNK, "pulled {pulled} bytes");
    assert_eq!(
        pulled, 0,
        "Content-Length and Mcp-Method already decide the 413: the body must not be polled"
    );
}

/// The listen filter alone answers the same request without polling the body:
/// what the stack above reads, it reads for the capabilities layer.
#[tokio::test]
async fn fifty_mib_listen_with_content_length_listen_filter_alone() {
    let probe = Arc::new(Probe::default());
    let (request, pulled) = fifty_mib_listen_with_content_length();
    let handler_probe = probe.clone();
    let router = Router::new()
        .route(
            "/mcp",
            post(move |request: Request<Body>| handle(handler_probe.clone(), request)),
        )
        .layer(ListenFilterLayer::new(profile()));
    let response = router.oneshot(request).await.unwrap();
    refused(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, Value::Null).await;
    assert_eq!(probe.calls(), 0);
    assert_eq!(pulled.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn fifty_mib_streamed_listen_stops_at_the_limit() {
    for named in [None, Some(LISTEN)] {
        let probe = Arc::new(Probe::default());
        let (feed, pulled) = fifty_mib(LISTEN);
        let response = send(&probe, post_stream(named, feed)).await;
        let rejection = refused(response, StatusCode::PAYLOAD_TOO_LARGE, -32600, Value::Null).await;
        assert_eq!(rejection, Rejection::BodyTooLarge { limit: LIMIT });
        assert_eq!(probe.calls(), 0);
        let pulled = pulled.load(Ordering::SeqCst);
        assert!(
            pulled > LIMIT && pulled <= LIMIT + CHUNK,
            "pulled {pulled} bytes of a {FIFTY_MIB}-byte body; limit {LIMIT}"
        );
    }
}

#[tokio::test]
async fn fifty_mib_tools_call_streams_through() {
    let probe = Arc::new(Probe::default());
    let (feed, pulled) = fifty_mib("tools/call");
    let response = send(&probe, post_stream(Some("tools/call"), feed)).await;
    answered(response).await;
    assert_eq!(probe.calls(), 1);
    let seen = probe.last();
    assert_eq!(seen.error, None);
    assert_eq!(seen.len, FIFTY_MIB, "the inner drained every byte");
    assert!(!seen.filter);
    assert_eq!(pulled.load(Ordering::SeqCst), FIFTY_MIB);
}

// ---------------------------------------------------------------------------
// 3. Bodies that end early or fail.
// ---------------------------------------------------------------------------

const TRUNCATED_LISTEN: &str =
    r#"{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"tools"#;

#[tokio::test]
async fn truncated_listen_is_a_parse_error() {
    for named in [Some(LISTEN), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(named, TRUNCATED_LISTEN)).await;
        assert_eq!(
            probe.calls(),
            0,
            "Mcp-Method {named:?}: a truncated listen reached the inner (status {})",
            response.status()
        );
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
        assert_eq!(rejection, Rejection::Parse, "Mcp-Method: {named:?}");
        assert_eq!(probe.calls(), 0, "Mcp-Method: {named:?}");
    }
}

fn failing(prefix: &'static str) -> Feed {
    Feed::new(
        [
            Ok(Bytes::from_static(prefix.as_bytes())),
            Err(io::Error::other("connection reset")),
        ]
        .into_iter(),
    )
    .0
}

#[tokio::test]
async fn listen_body_error_is_unreadable() {
    for named in [Some(LISTEN), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_stream(named, failing(TRUNCATED_LISTEN))).await;
        assert_eq!(
            probe.calls(),
            0,
            "Mcp-Method {named:?}: a listen whose body failed reached the inner (status {})",
            response.status()
        );
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
        assert_eq!(
            rejection,
            Rejection::BodyUnreadable,
            "Mcp-Method: {named:?}"
        );
        assert_eq!(probe.calls(), 0, "Mcp-Method: {named:?}");
    }
}

#[tokio::test]
async fn tools_call_body_error_reaches_the_inner() {
    for prefix in [
        // The method is known, the error comes while the inner reads.
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"a":"#,
        // The error comes before the method is known.
        r#"{"jsonrpc":"2.0","id":1,"params":{"a":"#,
    ] {
        for named in [Some("tools/call"), None] {
            let probe = Arc::new(Probe::default());
            let response = send(&probe, post_stream(named, failing(prefix))).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST);
            assert_eq!(body_bytes(response).await, "body read failed");
            assert_eq!(probe.calls(), 1);
            let seen = probe.last();
            assert!(seen.error.is_some(), "the inner saw the error");
            assert_eq!(
                seen.len,
                prefix.len(),
                "the peeked prefix is replayed first"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// 4. Invalid UTF-8.
// ---------------------------------------------------------------------------

fn with_bad_utf8(head: &str, tail: &str) -> Bytes {
    let mut body = head.as_bytes().to_vec();
    body.extend_from_slice(b"\xff\xfe\xc3(");
    body.extend_from_slice(tail.as_bytes());
    Bytes::from(body)
}

#[tokio::test]
async fn invalid_utf8_in_a_listen_is_a_parse_error() {
    let body = with_bad_utf8(
        r#"{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["demo://public/"#,
        r#""]}}}"#,
    );
    for named in [Some(LISTEN), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(named, body.clone())).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
        assert_eq!(rejection, Rejection::Parse);
        assert_eq!(probe.calls(), 0);
    }
}

#[tokio::test]
async fn invalid_utf8_in_a_tools_call_passes_untouched() {
    let body = with_bad_utf8(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"s":""#,
        r#""}}}"#,
    );
    for named in [Some("tools/call"), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(named, body.clone())).await;
        answered(response).await;
        assert_eq!(probe.calls(), 1);
        assert_eq!(probe.last().body.unwrap(), body);
    }
}

// ---------------------------------------------------------------------------
// 5. Batches.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn batch_with_a_listen_never_reaches_the_inner() {
    for body in [
        r#"[{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}]"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"subscriptions\/listen","params":{"notifications":{}}}]"#,
        r#"  [{"jsonrpc":"2.0","id":1,"params":{"notifications":{}},"method":"subscriptions/listen"},{"jsonrpc":"2.0","method":"notifications/initialized"}]"#,
    ] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(None, body)).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32600, Value::Null).await;
        assert!(
            matches!(rejection, Rejection::InvalidRequest(_)),
            "{rejection:?}"
        );
        assert_eq!(probe.calls(), 0, "{body}");
    }
}

#[tokio::test]
async fn batch_without_a_listen_passes() {
    let body = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"listen","arguments":{"method":"subscriptions/listen"}}}]"#;
    let probe = Arc::new(Probe::default());
    let response = send(&probe, post_json(None, body)).await;
    answered(response).await;
    assert_eq!(probe.calls(), 1);
    let seen = probe.last();
    assert_eq!(seen.body.unwrap(), body.as_bytes());
    assert!(!seen.filter);
}

// ---------------------------------------------------------------------------
// 6. Duplicate members.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn duplicate_params_in_a_listen() {
    let body = r#"{"jsonrpc":"2.0","id":"dup","method":"subscriptions/listen","params":{"notifications":{}},"params":{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["demo://private/x"]}}}"#;
    for named in [Some(LISTEN), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(named, body)).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32600, json!("dup")).await;
        assert_eq!(
            rejection,
            Rejection::InvalidRequest("the request has more than one `params`")
        );
        assert_eq!(probe.calls(), 0);
    }
}

/// Every split of `body` into two chunks.
fn splits(body: &'static str) -> impl Iterator<Item = Feed> {
    (1..body.len()).map(move |at| {
        Feed::parts(vec![
            Bytes::from_static(&body.as_bytes()[..at]),
            Bytes::from_static(&body.as_bytes()[at..]),
        ])
    })
}

#[tokio::test]
async fn duplicate_method_listen_first_is_refused_at_every_split() {
    let body = r#"{"jsonrpc":"2.0","id":13,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}},"method":"tools/call"}"#;
    let probe = Arc::new(Probe::default());
    let response = send(&probe, post_json(None, body)).await;
    let rejection = refused(response, StatusCode::BAD_REQUEST, -32600, json!(13)).await;
    assert_eq!(
        rejection,
        Rejection::InvalidRequest("the request has more than one `method`")
    );
    for (at, feed) in splits(body).enumerate() {
        let response = send(&probe, post_stream(None, feed)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "split at {at}");
        refused(response, StatusCode::BAD_REQUEST, -32600, json!(13)).await;
    }
    assert_eq!(probe.calls(), 0);
}

#[tokio::test]
async fn duplicate_method_listen_last_never_reaches_the_inner_as_a_listen() {
    let body = r#"{"jsonrpc":"2.0","id":14,"method":"tools/call","method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["demo://private/x"]}}}"#;
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap()["method"],
        LISTEN
    );
    let probe = Arc::new(Probe::default());
    // In one chunk the layer sees both methods before calling the inner.
    let response = send(&probe, post_json(None, body)).await;
    refused(response, StatusCode::BAD_REQUEST, -32600, json!(14)).await;
    assert_eq!(probe.calls(), 0);

    let mut cut_short = 0;
    for (at, feed) in splits(body).enumerate() {
        let before = probe.calls();
        let response = send(&probe, post_stream(Some("tools/call"), feed)).await;
        if probe.calls() == before {
            // Refused by the layer.
            refused(response, StatusCode::BAD_REQUEST, -32600, json!(14)).await;
            continue;
        }
        // Passed as a tools/call: the inner sees a body cut short before the second `method`.
        cut_short += 1;
        let seen = probe.last();
        let received = seen.body.expect("the body ended without an error");
        assert!(
            body.as_bytes().starts_with(&received) && received.len() < body.len(),
            "split at {at}: the inner saw {:?}",
            String::from_utf8_lossy(&received)
        );
        assert!(
            serde_json::from_slice::<Value>(&received).is_err(),
            "split at {at}: a cut-short body is not JSON"
        );
        assert!(!seen.filter);
        drop(response);
    }
    assert!(cut_short > 0, "some split passes the first method alone");
    assert_eq!(
        probe.unhonoured_listen.load(Ordering::SeqCst),
        0,
        "the inner never parsed an unhonoured listen"
    );
}

// ---------------------------------------------------------------------------
// 7. A method hidden in a nested object.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn nested_method_is_not_the_method() {
    let body = r#"{"jsonrpc":"2.0","id":7,"params":{"method":"subscriptions/listen","notifications":{"toolsListChanged":true}},"method":"tools/call"}"#;
    for named in [Some("tools/call"), None] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(named, body)).await;
        answered(response).await;
        assert_eq!(probe.calls(), 1);
        let seen = probe.last();
        assert!(!seen.filter, "no HonouredFilter for a tools/call");
        assert_eq!(seen.body.unwrap(), body.as_bytes());
    }
}

#[tokio::test]
async fn header_listen_with_only_a_nested_method() {
    for (body, id) in [
        (r#"{"x":{"method":"subscriptions/listen"}}"#, Value::Null),
        (
            r#"{"id":"n1","x":{"method":"subscriptions/listen"},"params":{"notifications":{}}}"#,
            json!("n1"),
        ),
    ] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(Some(LISTEN), body)).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32020, id).await;
        assert_eq!(rejection, Rejection::HeaderMismatch);
        assert_eq!(probe.calls(), 0);
    }
}

// ---------------------------------------------------------------------------
// 8. `Mcp-Method` and the body disagree.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn header_and_body_disagree_in_every_direction() {
    let cases = [
        (LISTEN, "tools/call"),
        ("tools/call", LISTEN),
        ("server/discover", "tools/call"),
        ("tools/call", "server/discover"),
        ("initialize", "server/discover"),
        ("server/discover", "initialize"),
        (LISTEN, "server/discover"),
        ("server/discover", LISTEN),
        (LISTEN, "initialize"),
        ("initialize", LISTEN),
    ];
    for (i, (header, method)) in cases.into_iter().enumerate() {
        let id = format!("m{i}");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":"{id}","method":"{method}","params":{{"notifications":{{"toolsListChanged":true}},"_meta":{{}}}}}}"#
        );
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(Some(header), body)).await;
        let rejection = refused(response, StatusCode::BAD_REQUEST, -32020, json!(id)).await;
        assert_eq!(
            rejection,
            Rejection::HeaderMismatch,
            "header {header}, body {method}"
        );
        assert_eq!(probe.calls(), 0, "header {header}, body {method}");
    }
}

// ---------------------------------------------------------------------------
// 9. What a lenient parser behind the layers could read differently.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn a_non_string_first_method_does_not_hide_a_listen() {
    for first in ["null", "5", r#"{"a":[1]}"#, "true"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":{first},"method":"subscriptions/listen","params":{{"notifications":{{"toolsListChanged":true}}}}}}"#
        );
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(None, body.clone())).await;
        refused(response, StatusCode::BAD_REQUEST, -32600, json!(3)).await;
        assert_eq!(probe.calls(), 0, "{body}");
        for feed in splits(Box::leak(body.into_boxed_str())) {
            send(&probe, post_stream(None, feed)).await;
        }
        assert_eq!(probe.unhonoured_listen.load(Ordering::SeqCst), 0, "{first}");
    }
}

#[tokio::test]
async fn bodies_the_scan_cannot_read_as_json_are_parse_errors() {
    let listen =
        r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{}}}"#;
    let with_bom = [&b"\xEF\xBB\xBF"[..], listen.as_bytes()].concat();
    let with_nan = r#"{"method":"tools/call","x":NaN,"method":"subscriptions/listen","params":{"notifications":{}}}"#;
    for body in [Bytes::from(with_bom), Bytes::from(with_nan)] {
        let probe = Arc::new(Probe::default());
        let response = send(&probe, post_json(None, body)).await;
        refused(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
        assert_eq!(probe.calls(), 0);
    }
    // A batch that is not JSON is refused too: it cannot be checked for a listen.
    let probe = Arc::new(Probe::default());
    let response = send(
        &probe,
        post_json(None, r#"[{"method":"subscriptions/listen"}, NaN]"#),
    )
    .await;
    refused(response, StatusCode::BAD_REQUEST, -32700, Value::Null).await;
    assert_eq!(probe.calls(), 0);
}

#[tokio::test]
async fn a_listen_without_a_content_type_is_honoured() {
    let body = r#"{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":false}}}"#;
    let probe = Arc::new(Probe::default());
    let request = Request::post("/mcp").body(Body::from(body)).unwrap();
    send(&probe, request).await;
    let seen = probe.last();
    assert!(seen.filter, "the inner got the HonouredFilter");
    let received: Value = serde_json::from_slice(&seen.body.unwrap()).unwrap();
    assert_eq!(
        received["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
}
