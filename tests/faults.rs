//! Faults of the inner service behind both layers
//! (`CapabilitiesLayer` outside `ListenFilterLayer`): errors, error
//! statuses, odd bodies, failing and endless streams. Nothing panics, each
//! fault is passed through or handled as documented, and everything is
//! released when the client goes away.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use mcp_edge::{capabilities, listen_filter, CapabilitiesLayer, ListenFilterLayer, ServerProfile};
use serde_json::Value;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

mod common;
use common::{ack_event, post_json, post_stream, sse_messages, InnerRequest, SUBSCRIPTION_ID};

const TOOLS: &str = r#"{"toolsListChanged":true}"#;

type Out = Response<capabilities::ResponseBody<listen_filter::ResponseBody<Body>>>;

/// Both layers in front of `inner`.
fn stack<F, Fut, E>(
    inner: F,
) -> impl Service<Request<Body>, Response = Out, Error = E, Future: Send> + Clone + Send
where
    F: Fn(InnerRequest) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = Result<Response<Body>, E>> + Send + 'static,
    E: Send + 'static,
{
    let profile = ServerProfile::builder().build().expect("valid profile");
    ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .layer(ListenFilterLayer::new(profile))
        .service_fn(inner)
}

/// A JSON POST as a Streamable HTTP client sends it, accepting JSON or SSE.
fn post(method: &str, body: String) -> Request<Body> {
    let mut request = post_json(Some(method), body);
    request.headers_mut().insert(
        header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    request
}

fn discover() -> Request<Body> {
    post(
        "server/discover",
        r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#.into(),
    )
}

fn listen(id: u32) -> Request<Body> {
    post(
        "subscriptions/listen",
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"subscriptions/listen","params":{{"notifications":{TOOLS}}}}}"#
        ),
    )
}

fn tools_changed(id: u32) -> String {
    format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{{\"_meta\":{{\"{SUBSCRIPTION_ID}\":{id}}}}}}}\n\n"
    )
}

fn sse(
    stream: impl futures_util::Stream<Item = Result<Bytes, io::Error>> + Send + 'static,
) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// Data frames until the end or the first error: (data, error).
async fn drain<B>(mut body: B) -> (Vec<u8>, Option<String>)
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut data = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(chunk) = frame.into_data() {
                    data.extend_from_slice(&chunk);
                }
            }
            Err(error) => {
                // Polling a failed body again must not panic either.
                let _ = body.frame().await;
                return (data, Some(error.to_string()));
            }
        }
    }
    (data, None)
}

// ---------------------------------------------------------------------------
// 9. The inner service fails.
// ---------------------------------------------------------------------------

#[tokio::test]
async fn inner_errors_are_returned_as_they_are() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let service = stack(move |_: InnerRequest| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {
            Err::<Response<Body>, _>(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "inner down",
            ))
        }
    });
    let tools_call = post(
        "tools/call",
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#.into(),
    );
    for (name, request) in [
        ("discover", discover()),
        ("listen", listen(7)),
        ("tools/call", tools_call),
    ] {
        let before = calls.load(Ordering::SeqCst);
        let error = service
            .clone()
            .oneshot(request)
            .await
            .expect_err("the inner's error comes back");
        assert_eq!(error.kind(), io::ErrorKind::ConnectionRefused, "{name}");
        assert_eq!(error.to_string(), "inner down", "{name}");
        assert_eq!(calls.load(Ordering::SeqCst), before + 1, "{name}");
    }
}

// ---------------------------------------------------------------------------
// 10, 11. Error answers to a discover pass unchanged, as does an error
// status whose body holds no result; anything else that is not its result,
// whatever its type, is replaced.
// ---------------------------------------------------------------------------

/// The inner's answer to a discover through the layers.
async fn discover_answered(
    status: StatusCode,
    content_type: Option<&str>,
    body: &'static str,
) -> Out {
    let content_type = content_type.map(str::to_owned);
    let service = stack(move |_: InnerRequest| {
        let mut response = Response::builder()
            .status(status)
            .header(header::CONTENT_LENGTH, body.len());
        if let Some(content_type) = &content_type {
            response = response.header(header::CONTENT_TYPE, content_type.as_str());
        }
        let response = response.body(Body::from(body)).unwrap();
        async move { Ok::<_, Infallible>(response) }
    });
    service.oneshot(discover()).await.unwrap()
}

/// The layer's -32603 for the discover, in place of the inner's answer.
async fn assert_discover_answer_replaced(
    status: StatusCode,
    content_type: Option<&str>,
    body: &'static str,
) {
    let response = discover_answered(status, content_type, body).await;
    assert_eq!(
        response.status(),
        StatusCode::INTERNAL_SERVER_ERROR,
        "{body}"
    );
    let (data, error) = drain(response.into_body()).await;
    assert_eq!(error, None);
    let message: serde_json::Value = serde_json::from_slice(&data).unwrap();
    assert_eq!(message["error"]["code"], -32603, "{body}");
    assert_eq!(message["id"], 1, "{body}");
}

async fn assert_discover_answer_unchanged(
    status: StatusCode,
    content_type: Option<&str>,
    body: &'static str,
) {
    let response = discover_answered(status, content_type, body).await;
    assert_eq!(response.status(), status, "{body}");
    assert_eq!(
        response.headers()[header::CONTENT_LENGTH],
        body.len().to_string().as_str()
    );
    let (data, error) = drain(response.into_body()).await;
    assert_eq!(error, None);
    assert_eq!(String::from_utf8(data).unwrap(), body, "bytes unchanged");
}

#[tokio::test]
async fn discover_answered_with_500() {
    // No result in them: the inner's own answer, for the client to act on.
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error"}}"#,
        "",
        r#"{"detail":"upstream exploded"}"#,
    ] {
        assert_discover_answer_unchanged(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some("application/json"),
            body,
        )
        .await;
    }
    // A result, though not the discover's own: checked, and replaced.
    let foreign = r#"{"jsonrpc":"2.0","id":2,"result":{"capabilities":{"sampling":{}}}}"#;
    assert_discover_answer_replaced(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some("application/json"),
        foreign,
    )
    .await;
}

#[tokio::test]
async fn discover_answered_with_another_type() {
    // A lenient client reads a body of any type as JSON: a result is
    // rewritten, and what is not one is replaced.
    let lookalike =
        r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"tools":{},"sampling":{}}}}"#;
    for content_type in [Some("text/plain"), Some("text/html; charset=utf-8"), None] {
        let response = discover_answered(StatusCode::OK, content_type, lookalike).await;
        let (data, _) = drain(response.into_body()).await;
        let message: serde_json::Value = serde_json::from_slice(&data).unwrap();
        let capabilities = &message["result"]["capabilities"];
        // The profile's managed keys in place of the inner's `tools: {}`.
        assert_eq!(
            capabilities["tools"],
            serde_json::json!({"listChanged": true}),
            "{content_type:?}: {message}"
        );
        assert_discover_answer_replaced(StatusCode::OK, content_type, "plain words, not JSON")
            .await;
    }
}

// ---------------------------------------------------------------------------
// 12. A listen stream that fails.
// ---------------------------------------------------------------------------

fn failing_listen(
    chunks: Vec<String>,
) -> impl Service<Request<Body>, Response = Out, Error = Infallible> {
    stack(move |_: InnerRequest| {
        let items: Vec<Result<Bytes, io::Error>> = chunks
            .iter()
            .cloned()
            .map(|chunk| Ok(Bytes::from(chunk)))
            .chain([Err(io::Error::other("inner stream broke"))])
            .collect();
        async move { Ok::<_, Infallible>(sse(futures_util::stream::iter(items))) }
    })
}

#[tokio::test]
async fn listen_stream_error_after_the_first_event() {
    // The inner acks exactly the honoured filter: the ack passes as it is.
    let service = failing_listen(vec![ack_event(7, TOOLS)]);
    let response = service.oneshot(listen(7)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (data, error) = drain(response.into_body()).await;
    assert_eq!(String::from_utf8(data).unwrap(), ack_event(7, TOOLS));
    assert!(error.unwrap().contains("inner stream broke"));

    // A wider ack is narrowed before the error.
    let service = failing_listen(vec![ack_event(
        7,
        r#"{"toolsListChanged":true,"promptsListChanged":true}"#,
    )]);
    let (data, error) = drain(service.oneshot(listen(7)).await.unwrap().into_body()).await;
    assert_eq!(
        sse_messages(&data),
        [serde_json::from_str::<Value>(&ack_event(7, TOOLS)[6..]).unwrap()]
    );
    assert!(error.is_some());

    // A notification first: the layer's ack goes before it, then the error.
    let service = failing_listen(vec![tools_changed(7)]);
    let (data, error) = drain(service.oneshot(listen(7)).await.unwrap().into_body()).await;
    assert_eq!(
        String::from_utf8(data).unwrap(),
        ack_event(7, TOOLS) + &tools_changed(7)
    );
    assert!(error.is_some());
}

#[tokio::test]
async fn half_an_event_before_the_error_never_leaks() {
    let leak = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/prompts/list_changed\",\"params\":{}}";
    let service = failing_listen(vec![ack_event(7, TOOLS), leak.to_owned()]);
    let (data, error) = drain(service.oneshot(listen(7)).await.unwrap().into_body()).await;
    let data = String::from_utf8(data).unwrap();
    assert_eq!(data, ack_event(7, TOOLS));
    assert!(!data.contains("prompts"));
    assert!(error.is_some());
}

#[tokio::test]
async fn discover_stream_error_passes_the_error() {
    let service = stack(|_: InnerRequest| {
        let items: Vec<Result<Bytes, io::Error>> = vec![
            Ok(Bytes::from_static(
                b": keep-alive\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"res",
            )),
            Err(io::Error::other("inner stream broke")),
        ];
        async move { Ok::<_, Infallible>(sse(futures_util::stream::iter(items))) }
    });
    let response = service.oneshot(discover()).await.unwrap();
    let (data, error) = drain(response.into_body()).await;
    assert!(error.unwrap().contains("inner stream broke"));
    // Only whole events pass; the cut-off result is never sent half rewritten.
    let data = String::from_utf8(data).unwrap();
    assert!(!data.contains("\"res"), "{data:?}");
}

// ---------------------------------------------------------------------------
// 13. An acknowledgment for another subscription.
// ---------------------------------------------------------------------------

async fn listen_stream(events: Vec<String>) -> String {
    let service = stack(move |_: InnerRequest| {
        let items: Vec<Result<Bytes, io::Error>> =
            events.iter().cloned().map(|e| Ok(Bytes::from(e))).collect();
        async move { Ok::<_, Infallible>(sse(futures_util::stream::iter(items))) }
    });
    let (data, error) = drain(service.oneshot(listen(7)).await.unwrap().into_body()).await;
    assert_eq!(error, None);
    String::from_utf8(data).unwrap()
}

#[tokio::test]
async fn foreign_ack_is_dropped_and_ours_injected() {
    // Then a notification for this subscription: our ack goes first.
    let out = listen_stream(vec![ack_event(99, TOOLS), tools_changed(7)]).await;
    assert_eq!(out, ack_event(7, TOOLS) + &tools_changed(7));

    // Then nothing: nothing leaks.
    let out = listen_stream(vec![ack_event(99, TOOLS)]).await;
    assert_eq!(out, "");

    // Then the real ack: it is the one sent.
    let out = listen_stream(vec![
        ack_event(99, TOOLS),
        ack_event(7, TOOLS),
        tools_changed(7),
    ])
    .await;
    assert_eq!(out, ack_event(7, TOOLS) + &tools_changed(7));

    // Foreign notifications around it are dropped as well.
    let out = listen_stream(vec![
        tools_changed(99),
        ack_event(99, TOOLS),
        tools_changed(99),
        tools_changed(7),
    ])
    .await;
    assert_eq!(out, ack_event(7, TOOLS) + &tools_changed(7));
    assert!(!out.contains("99"));
}

// ---------------------------------------------------------------------------
// 14. The client goes away.
// ---------------------------------------------------------------------------

/// Counts live holders; counts drops.
#[derive(Default)]
struct Gauge {
    live: AtomicUsize,
    dropped: AtomicUsize,
}

struct Held(Arc<Gauge>);

impl Held {
    fn new(gauge: &Arc<Gauge>) -> Self {
        gauge.live.fetch_add(1, Ordering::SeqCst);
        Self(gauge.clone())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
        self.0.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

impl Gauge {
    fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// An inner service whose listen stream sends the ack and then pends forever,
/// holding a `Held`.
fn endless(
    gauge: &Arc<Gauge>,
) -> impl Service<Request<Body>, Response = Out, Error = Infallible, Future: Send> + Clone + Send {
    let gauge = gauge.clone();
    stack(move |request: InnerRequest| {
        let held = Held::new(&gauge);
        let id: u32 = request
            .headers()
            .get("x-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .unwrap_or(7);
        let ack =
            futures_util::stream::once(std::future::ready(Ok(Bytes::from(ack_event(id, TOOLS)))));
        let forever = futures_util::stream::pending::<Result<Bytes, io::Error>>();
        let stream = ack.chain(forever).map(move |item| {
            let _ = &held;
            item
        });
        async move { Ok::<_, Infallible>(sse(stream)) }
    })
}

fn listen_with_id(id: u32) -> Request<Body> {
    let mut request = listen(id);
    request
        .headers_mut()
        .insert("x-id", id.to_string().parse().unwrap());
    request
}

#[tokio::test]
async fn dropping_the_response_drops_an_endless_stream() {
    let gauge = Arc::new(Gauge::default());
    let response = endless(&gauge).oneshot(listen(7)).await.unwrap();
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, ack_event(7, TOOLS));
    assert_eq!(gauge.live(), 1);
    // Nothing more comes; the stream is still there.
    assert!(
        tokio::time::timeout(Duration::from_millis(20), body.frame())
            .await
            .is_err()
    );
    assert_eq!(gauge.live(), 1);
    drop(body);
    assert_eq!(
        gauge.dropped(),
        1,
        "the inner stream is dropped with the body"
    );
    assert_eq!(gauge.live(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_endless_listens_are_all_released() {
    let gauge = Arc::new(Gauge::default());
    let service = endless(&gauge);
    let tasks: Vec<_> = (0..100)
        .map(|id| {
            let service = service.clone();
            tokio::spawn(async move {
                let response = service.oneshot(listen_with_id(id)).await.unwrap();
                let mut body = response.into_body();
                let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
                assert_eq!(first, ack_event(id, TOOLS));
                body
            })
        })
        .collect();
    let mut bodies = Vec::new();
    for task in tasks {
        bodies.push(task.await.unwrap());
    }
    assert_eq!(gauge.live(), 100);
    drop(bodies);
    assert_eq!(gauge.live(), 0);
    assert_eq!(gauge.dropped(), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_before_the_answer_releases_everything() {
    // The inner never answers.
    let gauge = Arc::new(Gauge::default());
    let inner_gauge = gauge.clone();
    let service = stack(move |_: InnerRequest| {
        let held = Held::new(&inner_gauge);
        async move {
            std::future::pending::<()>().await;
            drop(held);
            Ok::<Response<Body>, Infallible>(Response::new(Body::empty()))
        }
    });
    let tasks: Vec<_> = (0..100)
        .map(|id| tokio::spawn(service.clone().oneshot(listen(id))))
        .collect();
    while gauge.live() < 100 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        assert!(task.await.unwrap_err().is_cancelled());
    }
    assert_eq!(gauge.live(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_request_body_releases_it() {
    // The request body sends half a listen and then pends forever.
    let gauge = Arc::new(Gauge::default());
    // A tools/call is passed on once its method is known; the inner then waits for the rest.
    let service = stack(|request: InnerRequest| async move {
        let _ = request.into_body().collect().await;
        Ok::<Response<Body>, Infallible>(Response::new(Body::empty()))
    });
    let mut tasks = Vec::new();
    for method in ["subscriptions/listen", "server/discover", "tools/call"] {
        for _ in 0..10 {
            let held = Held::new(&gauge);
            let head =
                futures_util::stream::once(std::future::ready(Ok::<_, BoxError>(Bytes::from(
                    format!(r#"{{"jsonrpc":"2.0","id":1,"params":{{}},"method":"{method}""#),
                ))));
            let body = head
                .chain(futures_util::stream::pending())
                .map(move |item| {
                    let _ = &held;
                    item
                });
            let request = post_stream(None, Body::from_stream(body));
            tasks.push(tokio::spawn(service.clone().oneshot(request)));
        }
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(gauge.live(), 30);
    for task in &tasks {
        task.abort();
    }
    for task in tasks {
        let joined = task.await;
        assert!(
            joined.as_ref().is_err_and(|e| e.is_cancelled()),
            "the request was still waiting for its body: {:?}",
            joined.map(|r| r.map(|r| r.status()))
        );
    }
    assert_eq!(gauge.live(), 0);
}
