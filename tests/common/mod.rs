//! Pieces the integration tests share: requests as clients send them, the
//! SSE events and bodies they read back, hooks and auth of the test servers,
//! and servers on a loopback port with clients for them.
#![allow(dead_code)]

use std::fmt::{Debug, Display};
use std::future::{ready, Future, Ready};
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::Router;
use bytes::Bytes;
use http::{header, HeaderMap, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use mcp_edge::{Principal, RequestBody};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tower::{Service, ServiceExt};

/// The protocol version the tests speak.
pub const MODERN: &str = "2026-07-28";

/// The `_meta` key that names the subscription a listen event belongs to.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What reaches the inner service under both layers.
pub type InnerRequest = Request<RequestBody<RequestBody<Body>>>;

// ---------------------------------------------------------------------------
// Hooks and auth.
// ---------------------------------------------------------------------------

/// A `resource_access` hook: `demo://public/...` is readable by everyone, nothing else.
pub fn public_only(_caller: Option<&Principal>, uris: &[&str]) -> Ready<Vec<bool>> {
    ready(
        uris.iter()
            .map(|uri| uri.starts_with("demo://public/"))
            .collect(),
    )
}

/// The caller a bearer token names: `alice-token` is alice, `bob-token` is bob.
pub fn bearer_principal(headers: &HeaderMap) -> Option<Principal> {
    match headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
    {
        Some("Bearer alice-token") => Some(Principal::new("alice")),
        Some("Bearer bob-token") => Some(Principal::new("bob")),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Requests.
// ---------------------------------------------------------------------------

/// A JSON POST to `/mcp` of `body` in one chunk, with its `Content-Length`.
pub fn post_json(mcp_method: Option<&str>, body: impl Into<Bytes>) -> Request<Body> {
    let body = body.into();
    let mut request = Request::post("/mcp")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_LENGTH, body.len());
    if let Some(method) = mcp_method {
        request = request.header("mcp-method", method);
    }
    request.body(Body::from(body)).unwrap()
}

/// A JSON POST to `/mcp` of a streamed body, without `Content-Length`.
pub fn post_stream<B>(mcp_method: Option<&str>, body: B) -> Request<B> {
    let mut request = Request::post("/mcp").header(header::CONTENT_TYPE, "application/json");
    if let Some(method) = mcp_method {
        request = request.header("mcp-method", method);
    }
    request.body(body).unwrap()
}

/// The head of a 2026-07-28 Streamable HTTP POST: the headers every SDK requires.
pub fn modern_post(uri: &str, method: &str) -> http::request::Builder {
    Request::post(uri)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method)
}

/// The `_meta` a 2026-07-28 client puts in every request.
pub fn request_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-edge-tests", "version": "0.1.0"}
    })
}

/// A 2026-07-28 JSON-RPC request, `params` carrying [`request_meta`].
pub fn modern_body(method: &str, id: Value, mut params: Value) -> String {
    params["_meta"] = request_meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

// ---------------------------------------------------------------------------
// Responses.
// ---------------------------------------------------------------------------

/// The whole body of `response`.
pub async fn body_bytes<B>(response: Response<B>) -> Bytes
where
    B: http_body::Body,
    B::Error: Debug,
{
    response.into_body().collect().await.unwrap().to_bytes()
}

/// The body of `response`, parsed as JSON.
pub async fn body_json<B>(response: Response<B>) -> Value
where
    B: http_body::Body,
    B::Error: Debug,
{
    serde_json::from_slice(&body_bytes(response).await).expect("the body is JSON")
}

/// The SSE event acknowledging a listen: `id` and `notifications` as JSON text.
pub fn ack_event(id: impl Display, notifications: impl Display) -> String {
    format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{{\"notifications\":{notifications},\"_meta\":{{\"{SUBSCRIPTION_ID}\":{id}}}}}}}\n\n"
    )
}

/// The JSON data of each event of a whole SSE stream; events without data
/// (comments, keep-alives) are skipped.
pub fn sse_messages(stream: &[u8]) -> Vec<Value> {
    std::str::from_utf8(stream)
        .expect("the stream is UTF-8")
        .replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|block| {
            let data: Vec<&str> = block
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|data| data.strip_prefix(' ').unwrap_or(data))
                .collect();
            (!data.is_empty())
                .then(|| serde_json::from_str(&data.join("\n")).expect("event data is JSON"))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Over TCP.
// ---------------------------------------------------------------------------

/// What a server spawned by [`LoopbackServer::start`] waits for before it shuts down.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A server task on a loopback port, serving until [`stop`](Self::stop).
pub struct LoopbackServer<E> {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), E>>,
}

impl<E: Debug + Send + 'static> LoopbackServer<E> {
    /// Binds `127.0.0.1:0` and spawns `serve` on the listener and a shutdown signal.
    pub async fn start<Fut>(serve: impl FnOnce(TcpListener, Shutdown) -> Fut) -> Self
    where
        Fut: Future<Output = Result<(), E>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = Box::pin(async move {
            stopped.await.ok();
        });
        let task = tokio::spawn(serve(listener, shutdown));
        Self { addr, stop, task }
    }

    /// Signals shutdown, then waits at most 10 s for a clean end (`waiting` says for what).
    pub async fn stop(self, waiting: &str) {
        self.stop.send(()).expect("the server was still serving");
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect(waiting)
            .expect("the server task did not panic")
            .expect("the server ran cleanly");
    }
}

impl LoopbackServer<std::io::Error> {
    /// `app` served by axum, shutting down gracefully.
    pub async fn axum(app: Router) -> Self {
        Self::start(|listener, shutdown| async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        })
        .await
    }
}

/// Sends `request` to the tonic server at `addr` over a channel of tonic's
/// own (tonic serves HTTP/2 only): the status, and the whole body, read
/// before the channel is dropped.
pub async fn tonic_exchange(
    addr: SocketAddr,
    request: Request<tonic::body::Body>,
) -> (StatusCode, Bytes) {
    let mut channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("connect to the tonic server");
    let response = ServiceExt::ready(&mut channel)
        .await
        .unwrap()
        .call(request)
        .await
        .expect("response");
    (response.status(), body_bytes(response).await)
}

/// An HTTP/1 connection to `addr`: its sender, and the task that drives it.
pub async fn http1_connect(
    addr: SocketAddr,
) -> (SendRequest<Full<Bytes>>, JoinHandle<hyper::Result<()>>) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    (sender, tokio::spawn(connection))
}
