//! Both mcp-edge layers composed with common tower / tower-http middleware
//! and with tonic's server builder.
//!
//! The documented order: authentication outermost, then timeout, then
//! compression (outside the mcp-edge layers, which pass encoded bodies
//! through), then `CapabilitiesLayer`, `ListenFilterLayer`, the server.

use std::convert::Infallible;
use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use mcp_edge::{CapabilitiesLayer, HonouredFilter, ListenFilterLayer, Principal, ServerProfile};
use serde_json::{json, Value};
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};
use tower_http::auth::AsyncRequireAuthorizationLayer;
use tower_http::compression::CompressionLayer;
use tower_http::validate_request::ValidateRequestHeaderLayer;

mod common;
use common::{
    bearer_principal, body_bytes, modern_body, modern_post, sse_messages, tonic_exchange,
    LoopbackServer, MODERN, SUBSCRIPTION_ID,
};

/// Tools and resources; public URIs for everyone, `demo://users/NAME/...`
/// only for NAME.
fn profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(json!({"tools": {}, "resources": {}}))
        .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
            let own = caller.map(|caller| format!("demo://users/{}/", caller.as_str()));
            let answers: Vec<bool> = uris
                .iter()
                .map(|uri| {
                    uri.starts_with("demo://public/")
                        || own.as_deref().is_some_and(|own| uri.starts_with(own))
                })
                .collect();
            std::future::ready(answers)
        })
        .build()
        .expect("valid profile")
}

/// The profile's modern capabilities plus the inner service's unmanaged
/// `experimental` entry, which is kept.
fn expected_discover_capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "logging": {},
        "experimental": {"inner": {}}
    })
}

/// One recorded call of the inner service.
#[derive(Debug, Clone)]
struct Call {
    message: Value,
    filter: Option<HonouredFilter>,
    principal: Option<Principal>,
}

/// A hand-written MCP server that over-advertises on discover and leaks on
/// listen (its ack adds `promptsListChanged`, and it sends notifications
/// the caller did not ask for). Records every call.
#[derive(Clone, Default)]
struct Inner {
    calls: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Call>>>,
}

impl Inner {
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn last(&self) -> Call {
        self.seen.lock().unwrap().last().cloned().expect("a call")
    }
}

fn json_response(value: &Value) -> Response<Full<Bytes>> {
    Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())))
        .unwrap()
}

fn leaky_listen_stream(id: &Value, notifications: &Value) -> Response<Full<Bytes>> {
    let meta = json!({"io.modelcontextprotocol/subscriptionId": id});
    let mut ack = notifications.clone();
    ack["promptsListChanged"] = json!(true);
    let events = [
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
               "params": {"_meta": meta, "notifications": ack}}),
        json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed",
               "params": {"_meta": meta}}),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"_meta": meta, "uri": "demo://users/bob/notes"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
               "params": {"_meta": meta, "uri": "demo://users/alice/notes"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
               "params": {"_meta": meta}}),
    ];
    let body: String = events
        .iter()
        .map(|event| format!("event: message\ndata: {event}\n\n"))
        .collect();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

impl<B> Service<Request<B>> for Inner
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: std::fmt::Debug,
{
    type Response = Response<Full<Bytes>>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let seen = self.seen.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let bytes = body.collect().await.expect("request body").to_bytes();
            let message: Value = serde_json::from_slice(&bytes).expect("JSON request");
            seen.lock().unwrap().push(Call {
                message: message.clone(),
                filter: parts.extensions.get::<HonouredFilter>().cloned(),
                principal: parts.extensions.get::<Principal>().cloned(),
            });
            let id = message["id"].clone();
            let response = match message["method"].as_str() {
                Some("server/discover") => json_response(&json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "result": {
                        "resultType": "complete",
                        "supportedVersions": [MODERN],
                        "capabilities": {
                            "tools": {},
                            "prompts": {"listChanged": true},
                            "completions": {},
                            "experimental": {"inner": {}}
                        },
                        "_meta": {"io.modelcontextprotocol/serverInfo":
                            {"name": "inner", "version": "0.1.0"}},
                        "ttlMs": 60000,
                        "cacheScope": "public",
                        "instructions": "A hand-written inner server used by the mcp-edge stack tests."
                    }
                })),
                Some("subscriptions/listen") => {
                    leaky_listen_stream(&id, &message["params"]["notifications"])
                }
                _ => json_response(&json!({"jsonrpc": "2.0", "id": id, "result": {}})),
            };
            Ok(response)
        })
    }
}

/// A 2026-07-28 POST that accepts a gzipped answer, with `token` as its bearer.
fn mcp_post(method: &str, id: Value, params: Value, token: Option<&str>) -> Request<Body> {
    let mut request = modern_post("/mcp", method).header("accept-encoding", "gzip");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request
        .body(Body::from(modern_body(method, id, params)))
        .expect("valid request")
}

fn discover(token: Option<&str>) -> Request<Body> {
    mcp_post("server/discover", json!(7), json!({}), token)
}

/// Turns any response body into axum's boxed `Body`.
///
/// Needed above the mcp-edge layers wherever a middleware builds its own
/// response with `ResBody::default()` (tower-http's bearer check and
/// timeout) or needs one fixed body type (`AsyncRequireAuthorization`):
/// tower-http's `CompressionBody` is `Default` only when its inner body is.
fn boxed<B>(response: Response<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(Body::new)
}

async fn collect(response: Response<Body>) -> Bytes {
    tokio::time::timeout(Duration::from_secs(10), body_bytes(response))
        .await
        .expect("timed out")
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .expect("valid gzip");
    out
}

/// Asserts a gzip-compressed discover answer carrying the profile's
/// capabilities.
async fn assert_gzipped_discover(response: Response<Body>) {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response
            .headers()
            .get("content-encoding")
            .map(|v| v.as_bytes()),
        Some(&b"gzip"[..]),
        "headers: {:?}",
        response.headers()
    );
    let compressed = collect(response).await;
    let message: Value = serde_json::from_slice(&gunzip(&compressed)).expect("JSON after gunzip");
    assert_eq!(message["id"], 7);
    assert_eq!(
        message["result"]["capabilities"],
        expected_discover_capabilities()
    );
    assert_eq!(message["result"]["cacheScope"], "public");
}

mod bearer_stack {
    use super::*;

    /// `ValidateRequestHeaderLayer::bearer` + tower-http `TimeoutLayer` +
    /// `CompressionLayer` + both mcp-edge layers.
    ///
    /// tower-http 0.7 deprecates `bearer` as "too basic to be useful in real
    /// applications"; it is still the simplest token check to stack here.
    #[allow(deprecated)]
    fn stack(
        inner: Inner,
    ) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone {
        let profile = profile();
        ServiceBuilder::new()
            .layer(ValidateRequestHeaderLayer::bearer("alice-token"))
            .layer(tower_http::timeout::TimeoutLayer::with_status_code(
                StatusCode::REQUEST_TIMEOUT,
                Duration::from_secs(10),
            ))
            .map_response(boxed)
            .layer(CompressionLayer::new())
            .layer(CapabilitiesLayer::new(profile.clone()))
            .layer(ListenFilterLayer::new(profile))
            .service(inner)
    }

    #[tokio::test]
    async fn discover_through_the_whole_stack_is_gzipped_and_rewritten() {
        let inner = Inner::default();
        let response = stack(inner.clone())
            .oneshot(discover(Some("alice-token")))
            .await
            .unwrap();
        assert_gzipped_discover(response).await;
        assert_eq!(inner.calls(), 1);
        assert_eq!(inner.last().message["method"], "server/discover");
    }

    #[tokio::test]
    async fn without_the_bearer_token_the_inner_is_never_called() {
        let inner = Inner::default();
        let service = stack(inner.clone());
        for token in [None, Some("mallory-token")] {
            let response = service.clone().oneshot(discover(token)).await.unwrap();
            assert_eq!(
                response.status(),
                StatusCode::UNAUTHORIZED,
                "token {token:?}"
            );
            assert!(collect(response).await.is_empty());
        }
        let listen = mcp_post(
            "subscriptions/listen",
            json!(1),
            json!({"notifications": {"toolsListChanged": true}}),
            None,
        );
        let response = service.oneshot(listen).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            inner.calls(),
            0,
            "no unauthenticated request reached the inner"
        );
    }
}

/// Compression *inside* `CapabilitiesLayer` cannot hide the inner
/// service's capabilities: an intercepted request reaches the inner without
/// its `Accept-Encoding`, so the answer comes back uncompressed and is
/// rewritten (compression belongs outside the layer, where the whole answer
/// is compressed).
#[tokio::test]
async fn compression_inside_the_capabilities_layer_is_not_asked_for() {
    let profile = profile();
    let inner = Inner::default();
    let service = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()))
        .layer(CompressionLayer::new())
        .layer(ListenFilterLayer::new(profile))
        .service(inner.clone());
    let response = service.oneshot(discover(None)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers().get("content-encoding"), None);
    let message: Value = serde_json::from_slice(&collect(boxed(response)).await).unwrap();
    assert_eq!(
        message["result"]["capabilities"],
        json!({
            "tools": {"listChanged": true},
            "resources": {"listChanged": true, "subscribe": true},
            "logging": {},
            "experimental": {"inner": {}}
        }),
        "the profile's capabilities"
    );
    assert_eq!(inner.calls(), 1);
}

mod principal_stack {
    use super::*;

    /// Bearer auth that puts the caller's `Principal` in the request
    /// extensions, as the profile's default principal lookup expects.
    async fn authorize(mut request: Request<Body>) -> Result<Request<Body>, Response<Body>> {
        let Some(principal) = bearer_principal(request.headers()) else {
            return Err(Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header("www-authenticate", "Bearer")
                .body(Body::empty())
                .unwrap());
        };
        request.extensions_mut().insert(principal);
        Ok(request)
    }

    /// `AsyncRequireAuthorizationLayer` (inserting `Principal`) + tower's
    /// `TimeoutLayer` + `CompressionLayer` + both mcp-edge layers.
    fn stack(
        inner: Inner,
    ) -> impl Service<Request<Body>, Response = Response<Body>, Error = BoxError> + Clone {
        let profile = profile();
        ServiceBuilder::new()
            .layer(AsyncRequireAuthorizationLayer::new(authorize))
            .map_response(boxed)
            .layer(tower::timeout::TimeoutLayer::new(Duration::from_secs(10)))
            .layer(CompressionLayer::new())
            .layer(CapabilitiesLayer::new(profile.clone()))
            .layer(ListenFilterLayer::new(profile))
            .service(inner)
    }

    #[tokio::test]
    async fn discover_through_the_whole_stack_is_gzipped_and_rewritten() {
        let inner = Inner::default();
        let response = stack(inner.clone())
            .oneshot(discover(Some("alice-token")))
            .await
            .unwrap();
        assert_gzipped_discover(response).await;
        assert_eq!(inner.calls(), 1);
        assert_eq!(
            inner.last().principal.as_ref().map(Principal::as_str),
            Some("alice")
        );
    }

    #[tokio::test]
    async fn without_the_bearer_token_the_inner_is_never_called() {
        let inner = Inner::default();
        let response = stack(inner.clone()).oneshot(discover(None)).await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(inner.calls(), 0);
    }

    /// The principal the auth layer inserted decides which URIs are
    /// honoured; the leaky inner's extra ack field and notifications are
    /// dropped on the way out.
    #[tokio::test]
    async fn listen_is_honoured_for_the_authenticated_caller() {
        let inner = Inner::default();
        let listen = mcp_post(
            "subscriptions/listen",
            json!("sub-1"),
            json!({"notifications": {
                "toolsListChanged": true,
                "promptsListChanged": true,
                "resourceSubscriptions": [
                    "demo://users/alice/notes",
                    "demo://users/bob/notes",
                    "demo://public/readme",
                    "demo://users/alice/notes"
                ]
            }}),
            Some("alice-token"),
        );
        let response = stack(inner.clone()).oneshot(listen).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers().get("content-encoding").is_none(),
            "tower-http does not compress text/event-stream"
        );
        let events = sse_messages(&collect(response).await);

        let honoured = json!({
            "toolsListChanged": true,
            "resourceSubscriptions": ["demo://users/alice/notes", "demo://public/readme"]
        });
        // What the inner service received.
        let call = inner.last();
        assert_eq!(call.message["params"]["notifications"], honoured);
        let filter = call.filter.expect("HonouredFilter extension");
        let ack: Value = serde_json::from_str(filter.ack().get()).unwrap();
        assert_eq!(ack, honoured);
        assert_eq!(
            call.principal.as_ref().map(Principal::as_str),
            Some("alice")
        );

        // What the client received.
        let methods: Vec<&str> = events
            .iter()
            .map(|event| event["method"].as_str().unwrap())
            .collect();
        assert_eq!(
            methods,
            [
                "notifications/subscriptions/acknowledged",
                "notifications/resources/updated",
                "notifications/tools/list_changed"
            ],
            "events: {events:?}"
        );
        assert_eq!(events[0]["params"]["notifications"], honoured);
        assert_eq!(events[1]["params"]["uri"], "demo://users/alice/notes");
        for event in &events {
            assert_eq!(event["params"]["_meta"][SUBSCRIPTION_ID], "sub-1");
        }
    }
}

mod tonic_stack {
    use super::*;

    use tonic::transport::server::TcpIncoming;
    use tonic::transport::Server;

    /// A tonic server with both mcp-edge layers around a plain tower
    /// service, served on `listener` until `shutdown` resolves. Compiling
    /// this function is the check that tonic 0.14's bounds accept the layers.
    fn tonic_server(
        profile: ServerProfile,
        inner: Inner,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = Result<(), tonic::transport::Error>> + Send {
        Server::builder()
            .layer(CapabilitiesLayer::new(profile.clone()))
            .layer(ListenFilterLayer::new(profile))
            .serve_with_incoming_shutdown(inner, TcpIncoming::from(listener), shutdown)
    }

    #[tokio::test]
    async fn tonic_server_builder_accepts_both_layers() {
        let inner = Inner::default();
        let server = LoopbackServer::start(|listener, shutdown| {
            tonic_server(profile(), inner.clone(), listener, shutdown)
        })
        .await;
        let request = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("mcp-method", "server/discover")
            .body(tonic::body::Body::new(Full::new(Bytes::from(modern_body(
                "server/discover",
                json!(7),
                json!({}),
            )))))
            .unwrap();
        let (status, body) = tonic_exchange(server.addr, request).await;
        assert_eq!(status, StatusCode::OK);
        let message: Value = serde_json::from_slice(&body).expect("a JSON answer");
        assert_eq!(
            message["result"]["capabilities"],
            expected_discover_capabilities()
        );
        assert_eq!(inner.calls(), 1);

        server.stop("server stopped").await;
    }
}
