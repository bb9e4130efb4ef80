//! `CapabilitiesLayer` through the public API: in a tonic server and over
//! real HTTP in front of an axum app.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::routing::post;
use axum::Router;
use bytes::Bytes;
use http::{header, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use mcp_edge::{CapabilitiesLayer, Era, ServerProfile};
use serde_json::{json, Value};
use tokio::net::TcpStream;

mod common;
use common::{body_json, http1_connect, LoopbackServer};

fn profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(json!({"tools": {"listChanged": false}}))
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------
// tonic
// ---------------------------------------------------------------------------

/// A gRPC service that answers every call with an empty body. Generic over
/// the request body with the bounds tonic's generated servers have.
#[derive(Clone)]
struct Dummy;

impl<B> tower::Service<http::Request<B>> for Dummy
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<B>) -> Self::Future {
        let body =
            tonic::body::Body::new(Full::new(Bytes::from_static(DISCOVER_RESULT.as_bytes())));
        let mut response = http::Response::new(body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        ready(Ok(response))
    }
}

/// A tonic server with the layer, serving the connections of `incoming`
/// until `signal`. (`add_service` needs tonic's `router` feature, which the
/// dev-dependency leaves off, so the service is served directly.)
fn tonic_server<I>(
    profile: ServerProfile,
    incoming: I,
    signal: impl Future<Output = ()>,
) -> impl Future<Output = Result<(), tonic::transport::Error>>
where
    I: futures_util::Stream<Item = Result<TcpStream, std::io::Error>>,
{
    tonic::transport::Server::builder()
        .layer(CapabilitiesLayer::new(profile))
        .serve_with_incoming_shutdown(Dummy, incoming, signal)
}

#[tokio::test]
async fn layer_fits_a_tonic_server() {
    let incoming = futures_util::stream::empty::<Result<TcpStream, std::io::Error>>();
    let served = tonic_server(profile(), incoming, ready(()));
    tokio::time::timeout(Duration::from_secs(10), served)
        .await
        .expect("the server stops when its connections end")
        .unwrap();
}

#[tokio::test]
async fn discover_is_rewritten_in_a_tonic_server_over_http2() {
    let profile = profile();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // One connection, then the incoming stream ends.
    let incoming =
        futures_util::stream::once(
            async move { listener.accept().await.map(|(stream, _)| stream) },
        );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(tonic_server(profile.clone(), incoming, async move {
        let _ = stopped.await;
    }));

    let client = async {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            TokioIo::new(stream),
        )
        .await
        .unwrap();
        let connection = tokio::spawn(connection);
        let request = Request::post(format!("http://{addr}/mcp"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("mcp-method", "server/discover")
            .body(Full::new(Bytes::from_static(DISCOVER.as_bytes())))
            .unwrap();
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let body = body_json(response).await;
        assert_eq!(
            body["result"]["capabilities"],
            json!({"tools": {"listChanged": true}, "logging": {}, "experimental": {"x": {}}})
        );
        drop(sender);
        let _ = connection.await;
    };
    tokio::time::timeout(Duration::from_secs(30), client)
        .await
        .expect("the exchange finishes");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server shuts down")
        .unwrap()
        .unwrap();
}

// ---------------------------------------------------------------------------
// axum over real HTTP
// ---------------------------------------------------------------------------

const DISCOVER: &str = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
const TOOLS_CALL: &str =
    r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}"#;
/// An inner server that advertises more than it serves.
const DISCOVER_RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{},"resources":{"subscribe":true},"experimental":{"x":{}}},"_meta":{"serverInfo":{"name":"s","version":"1"}},"ttlMs":1000,"cacheScope":"shared"}}"#;

/// The axum app: answers discover (as SSE when the client prefers it) and
/// echoes anything else; counts the requests it handles.
fn app(profile: ServerProfile, hits: Arc<AtomicUsize>) -> Router {
    Router::new()
        .route(
            "/mcp",
            post(move |headers: http::HeaderMap, body: Bytes| {
                hits.fetch_add(1, Ordering::SeqCst);
                async move {
                    let is_discover = body == DISCOVER.as_bytes();
                    let sse = headers
                        .get(header::ACCEPT)
                        .is_some_and(|v| v == "text/event-stream");
                    match (is_discover, sse) {
                        (true, true) => (
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            format!(": hi\n\nevent: message\ndata: {DISCOVER_RESULT}\n\n")
                                .into_bytes(),
                        ),
                        (true, false) => (
                            [(header::CONTENT_TYPE, "application/json")],
                            DISCOVER_RESULT.as_bytes().to_vec(),
                        ),
                        (false, _) => ([(header::CONTENT_TYPE, "application/json")], body.to_vec()),
                    }
                }
            }),
        )
        .layer(CapabilitiesLayer::new(profile))
}

struct Reply {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

async fn send(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    mcp_method: &str,
    accept: &str,
    body: &'static str,
) -> Reply {
    let request = Request::post("/mcp")
        .header(header::HOST, addr.to_string())
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, accept)
        .header("mcp-method", mcp_method)
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .unwrap();
    sender.ready().await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

#[tokio::test]
async fn discover_is_rewritten_over_real_http() {
    let profile = profile();
    let hits = Arc::new(AtomicUsize::new(0));
    let server = LoopbackServer::axum(app(profile.clone(), hits.clone())).await;
    let addr = server.addr;

    let client = async {
        let (mut sender, connection) = http1_connect(addr).await;

        let mut expected = profile.capabilities(Era::Modern).clone();
        expected.insert("experimental".into(), json!({"x": {}}));
        let expected = Value::Object(expected);

        // JSON.
        let reply = send(
            &mut sender,
            addr,
            "server/discover",
            "application/json",
            DISCOVER,
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        let body: Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(body["result"]["capabilities"], expected);
        assert_eq!(
            body["result"]["capabilities"],
            json!({"tools": {"listChanged": true}, "logging": {}, "experimental": {"x": {}}})
        );
        assert_eq!(body["result"]["ttlMs"], 1000);
        assert_eq!(
            reply.headers[header::CONTENT_LENGTH],
            reply.body.len().to_string().as_str()
        );

        // SSE.
        let reply = send(
            &mut sender,
            addr,
            "server/discover",
            "text/event-stream",
            DISCOVER,
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        assert!(reply.headers.get(header::CONTENT_LENGTH).is_none());
        let text = std::str::from_utf8(&reply.body).unwrap();
        let data = text
            .strip_prefix(": hi\n\nevent: message\ndata: ")
            .and_then(|rest| rest.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("unexpected stream: {text:?}"));
        let body: Value = serde_json::from_str(data).unwrap();
        assert_eq!(body["result"]["capabilities"], expected);

        // Anything else passes through.
        let reply = send(
            &mut sender,
            addr,
            "tools/call",
            "application/json",
            TOOLS_CALL,
        )
        .await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(&reply.body[..], TOOLS_CALL.as_bytes());

        drop(sender);
        connection.await.unwrap().unwrap();
    };
    tokio::time::timeout(Duration::from_secs(30), client)
        .await
        .expect("the exchange finishes");

    server.stop("the server shuts down").await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "one handler call per request"
    );
}
