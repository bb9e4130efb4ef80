//! Real MCP servers as the inner service of both mcp-edge layers:
//! rmcp's `StreamableHttpService` (stateless, protocol 2026-07-28) and a
//! tower-mcp `HttpTransport` router.
//!
//! Every request goes through
//! `ServiceBuilder::new().layer(CapabilitiesLayer).layer(ListenFilterLayer)`
//! in-process with `oneshot`; no socket is opened.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use mcp_edge::{
    CapabilitiesLayer, EdgeLayer, HonouredFilter, ListenFilterLayer, Rejection, ServerProfile,
};
use serde_json::{json, Value};
use tower::{Service, ServiceBuilder, ServiceExt};

mod common;
use common::{body_json, modern_body, modern_post, InnerRequest, MODERN, SUBSCRIPTION_ID};

/// Keys whose value is always the profile's.
const MANAGED: [&str; 5] = ["tools", "resources", "prompts", "completions", "logging"];

/// A server with tools and resources (no prompts, no completions) whose
/// callers may read only `demo://public/...`.
fn profile() -> ServerProfile {
    ServerProfile::builder()
        .base_capabilities(json!({"tools": {}, "resources": {}}))
        .resource_access(common::public_only)
        .build()
        .expect("valid profile")
}

/// The profile's modern capabilities, as the design brief's worked example
/// spells them for this base set.
fn expected_modern_capabilities() -> Value {
    json!({
        "tools": {"listChanged": true},
        "resources": {"listChanged": true, "subscribe": true},
        "logging": {}
    })
}

fn assert_modern_capabilities(capabilities: &Value) {
    let expected = expected_modern_capabilities();
    for key in MANAGED {
        assert_eq!(
            capabilities.get(key),
            expected.get(key),
            "managed capability `{key}` in {capabilities}"
        );
    }
}

/// The listen filter every test asks for: two kinds the profile honours or
/// not (`promptsListChanged` on a server without prompts), a readable URI,
/// an unreadable one.
fn requested_notifications() -> Value {
    json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourceSubscriptions": ["demo://public/readme", "demo://secret/keys"]
    })
}

fn honoured_ack() -> Value {
    json!({
        "toolsListChanged": true,
        "resourceSubscriptions": ["demo://public/readme"]
    })
}

/// A 2026-07-28 Streamable HTTP POST, with the `Host` the SDKs also require.
fn mcp_post(uri: &str, method: &str, id: Value, params: Value) -> Request<Body> {
    modern_post(uri, method)
        .header("host", "localhost")
        .body(Body::from(modern_body(method, id, params)))
        .expect("valid request")
}

fn discover(uri: &str) -> Request<Body> {
    mcp_post(uri, "server/discover", json!(1), json!({}))
}

fn listen(uri: &str) -> Request<Body> {
    mcp_post(
        uri,
        "subscriptions/listen",
        json!("listen-1"),
        json!({"notifications": requested_notifications()}),
    )
}

fn content_type<B>(response: &Response<B>) -> String {
    response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// Reads SSE events off `body` until `n` events with JSON data arrived
/// (priming events and comments are skipped). Leaves the rest unread, so it
/// works on a listen stream that never ends.
async fn read_events<B>(body: &mut Pin<Box<B>>, n: usize) -> Vec<Value>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let mut buffer = String::new();
    let mut events = Vec::new();
    let read = async {
        while events.len() < n {
            let frame = body
                .as_mut()
                .frame()
                .await
                .expect("the stream ended before the expected events")
                .expect("body error");
            let Ok(data) = frame.into_data() else {
                continue;
            };
            buffer.push_str(&String::from_utf8_lossy(&data).replace("\r\n", "\n"));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(|data| data.strip_prefix(' ').unwrap_or(data))
                    .collect();
                let data = data.join("\n");
                if data.trim().is_empty() {
                    continue;
                }
                events.push(serde_json::from_str(&data).expect("event data is JSON"));
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("timed out reading SSE events");
    events
}

/// The first JSON event of an answer that must be a 200 stream.
async fn first_event<B>(response: Response<B>) -> Value
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = Box::pin(response.into_body());
    let events = read_events(&mut body, 1).await;
    events.into_iter().next().expect("one event")
}

/// The JSON-RPC message a discover answered with, whether as JSON or as SSE.
async fn discover_message<B>(response: Response<B>) -> Value
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    assert_eq!(response.status(), StatusCode::OK);
    if content_type(&response).starts_with("text/event-stream") {
        first_event(response).await
    } else {
        tokio::time::timeout(Duration::from_secs(10), body_json(response))
            .await
            .expect("timed out")
    }
}

/// Checks a discover answer to id 1 (JSON or SSE) for the profile's
/// capabilities; returns its result.
async fn rewritten_discover_result<B>(response: Response<B>) -> Value
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let message = discover_message(response).await;
    assert_eq!(message["id"], 1, "{message}");
    assert_modern_capabilities(&message["result"]["capabilities"]);
    message["result"].clone()
}

/// The head of `response` and its whole body.
async fn whole<B>(response: Response<B>) -> (http::response::Parts, Bytes)
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let (parts, body) = response.into_parts();
    (parts, body.collect().await.unwrap().to_bytes())
}

/// Records the `HonouredFilter` extension of every request the inner
/// service receives.
type Seen = Arc<Mutex<Vec<Option<HonouredFilter>>>>;

fn record(seen: &Seen) -> impl Fn(InnerRequest) -> InnerRequest + Clone {
    let seen = seen.clone();
    move |request: InnerRequest| {
        seen.lock()
            .unwrap()
            .push(request.extensions().get::<HonouredFilter>().cloned());
        request
    }
}

fn assert_inner_saw_honoured_filter(seen: &Seen) {
    let seen = seen.lock().unwrap();
    let filter = seen
        .iter()
        .flatten()
        .next()
        .expect("the inner service got a HonouredFilter extension");
    let ack: Value = serde_json::from_str(filter.ack().get()).unwrap();
    assert_eq!(ack, honoured_ack());
    assert_eq!(filter.subscription_id().get(), r#""listen-1""#);
    assert_eq!(
        filter.resource_uris().collect::<Vec<_>>(),
        ["demo://public/readme"]
    );
    assert_eq!(filter.requested_uris(), 2);
}

/// Checks the first event of a listen stream: the acknowledgment, carrying
/// the honoured subset and the subscription id.
fn assert_ack(event: &Value, expected: &Value) {
    assert_eq!(
        event["method"], "notifications/subscriptions/acknowledged",
        "first event: {event}"
    );
    assert_eq!(event["params"]["_meta"][SUBSCRIPTION_ID], "listen-1");
    assert_eq!(&event["params"]["notifications"], expected, "ack: {event}");
}

mod rmcp_inner {
    use super::*;

    use rmcp::model::{ServerCapabilities, ServerConfig, SubscriptionFilter};
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    use rmcp::ServerHandler;

    /// An rmcp server that advertises more than it serves (prompts,
    /// completions) and accepts every listen filter it is sent.
    #[derive(Clone)]
    struct Overpromising;

    impl ServerHandler for Overpromising {
        fn get_info(&self) -> ServerConfig {
            let capabilities: ServerCapabilities = serde_json::from_value(json!({
                "tools": {"listChanged": true},
                "prompts": {"listChanged": true},
                "resources": {"listChanged": true, "subscribe": true},
                "completions": {}
            }))
            .expect("valid capabilities");
            ServerConfig::new(capabilities)
        }

        fn accepted_subscription_filter(
            &self,
            requested: &SubscriptionFilter,
        ) -> Option<SubscriptionFilter> {
            Some(requested.clone())
        }
    }

    fn rmcp_service(
        json_response: bool,
    ) -> StreamableHttpService<Overpromising, NeverSessionManager> {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(json_response)
            .with_sse_keep_alive(None);
        StreamableHttpService::new(
            || Ok(Overpromising),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }

    fn stack(
        json_response: bool,
        guard_stream: bool,
        seen: &Seen,
    ) -> impl Service<
        Request<Body>,
        Response = Response<impl http_body::Body<Data = Bytes, Error = std::convert::Infallible>>,
        Error = std::convert::Infallible,
    > {
        let profile = profile();
        ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(profile.clone()))
            .layer(ListenFilterLayer::new(profile).guard_stream(guard_stream))
            .map_request(record(seen))
            .service(rmcp_service(json_response))
    }

    #[tokio::test]
    async fn discover_as_sse_gets_the_profile_capabilities() {
        let seen = Seen::default();
        let response = stack(false, true, &seen)
            .oneshot(discover("/mcp"))
            .await
            .unwrap();
        assert!(
            content_type(&response).starts_with("text/event-stream"),
            "rmcp answers discover as SSE by default"
        );
        let result = rewritten_discover_result(response).await;
        assert!(result["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN)));
        assert_eq!(seen.lock().unwrap().len(), 1, "reached rmcp once");
    }

    #[tokio::test]
    async fn discover_as_json_gets_the_profile_capabilities() {
        let seen = Seen::default();
        let response = stack(true, true, &seen)
            .oneshot(discover("/mcp"))
            .await
            .unwrap();
        assert!(
            content_type(&response).starts_with("application/json"),
            "json_response(true) answers discover as JSON: {:?}",
            response.headers()
        );
        rewritten_discover_result(response).await;
    }

    /// An rmcp server with legacy sessions, as a dual-era deployment runs
    /// it (the reference server does).
    fn rmcp_with_sessions() -> StreamableHttpService<Overpromising, LocalSessionManager> {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(true)
            .with_sse_keep_alive(None);
        StreamableHttpService::new(
            || Ok(Overpromising),
            Arc::new(LocalSessionManager::default()),
            config,
        )
    }

    /// A discover sent without a protocol version (no header, no `_meta`):
    /// rmcp reads it as the legacy era's and wants a session.
    fn version_less_discover() -> Request<Body> {
        Request::post("/mcp")
            .header("host", "localhost")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#,
            ))
            .expect("valid request")
    }

    /// rmcp's own refusal of a version-less discover (400, plain text)
    /// reaches the client as rmcp sent it, through the stacked layers and
    /// through `EdgeLayer`: a dual-era client falls back on a 400.
    #[tokio::test]
    async fn a_version_less_discover_keeps_rmcps_own_400() {
        let alone = rmcp_with_sessions().oneshot(version_less_discover());
        let (expected, expected_body) = whole(alone.await.unwrap()).await;
        assert_eq!(expected.status, StatusCode::BAD_REQUEST);
        assert_eq!(&expected_body[..], b"Bad Request: Session ID is required");
        let stacked = ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(profile()))
            .layer(ListenFilterLayer::new(profile()))
            .service(rmcp_with_sessions())
            .oneshot(version_less_discover());
        let edge = ServiceBuilder::new()
            .layer(EdgeLayer::new(profile()))
            .service(rmcp_with_sessions())
            .oneshot(version_less_discover());
        for (name, (parts, body)) in [
            ("stacked", whole(stacked.await.unwrap()).await),
            ("edge", whole(edge.await.unwrap()).await),
        ] {
            assert_eq!(parts.status, expected.status, "{name}");
            assert_eq!(parts.headers, expected.headers, "{name}");
            assert!(parts.extensions.get::<Rejection>().is_none(), "{name}");
            assert_eq!(body, expected_body, "{name}");
        }
    }

    /// Baseline: rmcp alone acknowledges everything it was asked for,
    /// including prompts it does not serve and a URI the caller may not read.
    #[tokio::test]
    async fn without_the_layers_rmcp_acknowledges_the_whole_request() {
        let response = rmcp_service(false).oneshot(listen("/mcp")).await.unwrap();
        assert_ack(&first_event(response).await, &requested_notifications());
    }

    /// The ack rmcp itself sends, with the response-side guard off: rmcp saw
    /// only the honoured subset in the request body.
    #[tokio::test]
    async fn listen_acknowledged_by_rmcp_is_the_honoured_subset() {
        let seen = Seen::default();
        let response = stack(false, false, &seen)
            .oneshot(listen("/mcp"))
            .await
            .unwrap();
        assert!(content_type(&response).starts_with("text/event-stream"));
        assert_ack(&first_event(response).await, &honoured_ack());
        assert_inner_saw_honoured_filter(&seen);
    }

    /// Same with the default guard on.
    #[tokio::test]
    async fn listen_with_the_guard_is_acknowledged_with_the_honoured_subset() {
        let seen = Seen::default();
        let response = stack(false, true, &seen)
            .oneshot(listen("/mcp"))
            .await
            .unwrap();
        assert_ack(&first_event(response).await, &honoured_ack());
        assert_inner_saw_honoured_filter(&seen);
    }
}

mod tower_mcp_inner {
    use super::*;

    use tower_mcp::{HttpTransport, McpRouter};

    /// tower-mcp echoes every requested listen kind and URI back in its ack.
    fn tower_mcp_router(sse_responses: bool) -> axum::Router {
        let router = McpRouter::new().server_info("tower-mcp-inner", "0.1.0");
        HttpTransport::new(router)
            .sse_responses(sse_responses)
            .into_router()
    }

    fn stack(
        sse_responses: bool,
        guard_stream: bool,
        seen: &Seen,
    ) -> impl Service<
        Request<Body>,
        Response = Response<impl http_body::Body<Data = Bytes, Error = axum::Error>>,
        Error = std::convert::Infallible,
    > {
        let profile = profile();
        ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(profile.clone()))
            .layer(ListenFilterLayer::new(profile).guard_stream(guard_stream))
            .map_request(record(seen))
            .map_request(|request: InnerRequest| request.map(Body::new))
            .service(tower_mcp_router(sse_responses))
    }

    #[tokio::test]
    async fn discover_as_json_gets_the_profile_capabilities() {
        let seen = Seen::default();
        let response = stack(false, true, &seen)
            .oneshot(discover("/"))
            .await
            .unwrap();
        assert!(
            content_type(&response).starts_with("application/json"),
            "tower-mcp answers discover as JSON by default: {:?}",
            response.headers()
        );
        rewritten_discover_result(response).await;
        assert_eq!(seen.lock().unwrap().len(), 1, "reached tower-mcp once");
    }

    #[tokio::test]
    async fn discover_as_sse_gets_the_profile_capabilities() {
        let seen = Seen::default();
        let response = stack(true, true, &seen)
            .oneshot(discover("/"))
            .await
            .unwrap();
        assert!(
            content_type(&response).starts_with("text/event-stream"),
            "sse_responses(true) answers discover as SSE: {:?}",
            response.headers()
        );
        rewritten_discover_result(response).await;
    }

    /// Baseline: tower-mcp alone acknowledges the whole request.
    #[tokio::test]
    async fn without_the_layers_tower_mcp_acknowledges_the_whole_request() {
        let response = tower_mcp_router(false).oneshot(listen("/")).await.unwrap();
        assert_ack(&first_event(response).await, &requested_notifications());
    }

    /// tower-mcp's own ack, guard off: it saw only the honoured subset.
    #[tokio::test]
    async fn listen_acknowledged_by_tower_mcp_is_the_honoured_subset() {
        let seen = Seen::default();
        let response = stack(false, false, &seen)
            .oneshot(listen("/"))
            .await
            .unwrap();
        assert!(content_type(&response).starts_with("text/event-stream"));
        assert_ack(&first_event(response).await, &honoured_ack());
        assert_inner_saw_honoured_filter(&seen);
    }

    /// Same with the default guard on: the ack is exactly the honoured one.
    #[tokio::test]
    async fn listen_with_the_guard_is_acknowledged_with_the_honoured_subset() {
        let seen = Seen::default();
        let response = stack(false, true, &seen)
            .oneshot(listen("/"))
            .await
            .unwrap();
        assert_ack(&first_event(response).await, &honoured_ack());
        assert_inner_saw_honoured_filter(&seen);
    }

    /// `request` in disguise as a lenient server still reads it: `text/plain`,
    /// its `Mcp-Method` in the transport's Base64 form.
    fn disguised(mut request: Request<Body>) -> Request<Body> {
        let method = request.headers()["mcp-method"].to_str().unwrap().to_owned();
        let encoded = format!("=?base64?{}?=", base64_of(method.as_bytes()));
        let headers = request.headers_mut();
        headers.insert("content-type", "text/plain".parse().unwrap());
        headers.insert("mcp-method", encoded.parse().unwrap());
        request
    }

    /// Standard Base64 with padding, written out here so that the test does
    /// not share the layer's decoder.
    fn base64_of(bytes: &[u8]) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for chunk in bytes.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |n, (i, b)| n | (*b as u32) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    /// Baseline: tower-mcp reads a `text/plain` body and decodes the Base64
    /// header, and acknowledges every requested URI.
    #[tokio::test]
    async fn without_the_layers_tower_mcp_honours_a_disguised_listen_whole() {
        let response = tower_mcp_router(false)
            .oneshot(disguised(listen("/")))
            .await
            .unwrap();
        assert_ack(&first_event(response).await, &requested_notifications());
    }

    /// The same disguised listen through the layers is honoured like any other.
    #[tokio::test]
    async fn a_disguised_listen_is_honoured() {
        for guard in [false, true] {
            let seen = Seen::default();
            let response = stack(false, guard, &seen)
                .oneshot(disguised(listen("/")))
                .await
                .unwrap();
            assert_ack(&first_event(response).await, &honoured_ack());
            assert_inner_saw_honoured_filter(&seen);
        }
    }

    /// A disguised discover gets the profile's capabilities, through either
    /// layer alone too.
    #[tokio::test]
    async fn a_disguised_discover_gets_the_profile_capabilities() {
        let seen = Seen::default();
        let response = stack(false, true, &seen)
            .oneshot(disguised(discover("/")))
            .await
            .unwrap();
        rewritten_discover_result(response).await;
        let alone = ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(profile()))
            .map_request(|request: Request<mcp_edge::RequestBody<Body>>| request.map(Body::new))
            .service(tower_mcp_router(true));
        rewritten_discover_result(alone.oneshot(disguised(discover("/"))).await.unwrap()).await;
    }

    /// A header that does not decode, or two of them, is refused before
    /// tower-mcp could read either.
    #[tokio::test]
    async fn an_undecodable_or_repeated_method_header_is_refused() {
        let mut broken = disguised(listen("/"));
        broken.headers_mut().insert(
            "mcp-method",
            "=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4?".parse().unwrap(),
        );
        let mut twice = listen("/");
        twice
            .headers_mut()
            .append("mcp-method", "tools/call".parse().unwrap());
        for request in [broken, twice] {
            let seen = Seen::default();
            let response = stack(false, true, &seen).oneshot(request).await.unwrap();
            assert_eq!(response.status(), http::StatusCode::BAD_REQUEST);
            let body: Value =
                serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes())
                    .unwrap();
            assert_eq!(body["error"]["code"], -32020);
            assert_eq!(body["id"], "listen-1");
            assert!(seen.lock().unwrap().is_empty(), "tower-mcp was not called");
        }
    }
}
