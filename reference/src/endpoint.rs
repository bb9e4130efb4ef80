//! The inner service at `/mcp`: rmcp, with the mcp-edge listen hub in front
//! of it. A listen the layer honoured (it carries a [`HonouredFilter`]) is
//! checked the way rmcp checks every 2026-07-28 request (the `Accept`
//! header, the per-request `_meta`, the protocol-version and method
//! headers) and then served by the hub; everything else goes to rmcp.
//!
//! The hub's response body reaches the `EdgeLayer` as it is, not boxed:
//! the layer's guard passes unread only a body that is, by type, the hub's
//! stream for its filter, and reads every event of any other.

use std::convert::Infallible;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use mcp_edge::hub::{ListenHubService, ResponseBody};
use mcp_edge::jsonrpc::{
    JsonRpcError, HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION,
};
use mcp_edge::HonouredFilter;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::StreamableHttpService;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tower::Service;

use crate::handler::{listen_versions, Demo};

/// rmcp's Streamable HTTP service: stateless for 2026-07-28 requests, with
/// sessions for the legacy era (an `initialize` opens one).
pub type RmcpService = StreamableHttpService<Demo, LocalSessionManager>;

/// The response body type of rmcp.
pub type McpBody = BoxBody<Bytes, Infallible>;

/// The response body type of the whole MCP endpoint: the hub's, around
/// rmcp's.
pub type EndpointBody = ResponseBody<McpBody>;

const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// rmcp behind the listen hub, with rmcp's checks of a listen first.
#[derive(Clone)]
pub struct McpEndpoint {
    inner: ListenHubService<RmcpService>,
}

impl McpEndpoint {
    /// Honoured listens go to the hub of `inner`, everything else to rmcp.
    pub fn new(inner: ListenHubService<RmcpService>) -> Self {
        Self { inner }
    }
}

impl<B> Service<Request<B>> for McpEndpoint
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Display + std::error::Error + Send + Sync + 'static,
{
    type Response = Response<EndpointBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The hub and rmcp are always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let mut inner = self.inner.clone();
        let Some(filter) = request.extensions().get::<HonouredFilter>().cloned() else {
            return Box::pin(inner.call(request));
        };
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            if !accepts_event_stream(&parts.headers) {
                return Ok(plain(
                    StatusCode::NOT_ACCEPTABLE,
                    "Not Acceptable: a listen stream needs Accept: text/event-stream",
                ));
            }
            let body = match body.collect().await {
                Ok(body) => body.to_bytes(),
                Err(error) => {
                    tracing::debug!(%error, "listen body unreadable");
                    return Ok(plain(StatusCode::BAD_REQUEST, "unreadable request body"));
                }
            };
            if let Err(error) = check_request(&parts.headers, &body) {
                return Ok(error.to_response(Some(filter.subscription_id())));
            }
            let request = Request::from_parts(parts, Full::new(body));
            inner.call(request).await
        })
    }
}

fn plain(status: StatusCode, message: &'static str) -> Response<EndpointBody> {
    let mut response = Response::new(Bytes::from_static(message.as_bytes()).into());
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
