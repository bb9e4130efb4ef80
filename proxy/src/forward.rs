//! The forwarding service: the innermost service of the proxy, after the
//! edge. It sends each request to the upstream over a pooled HTTP/1.1 (or
//! h2c) connection and streams the answer back, both bodies unbuffered:
//!
//! - hop-by-hop headers are dropped both ways (RFC 9110 §7.6.1), and the
//!   request gets `Host` for the upstream, `X-Forwarded-For` (the peer's
//!   address), `-Proto` and `-Host`; what a client sent under those names,
//!   or under the principal header, never reaches the upstream;
//! - the principal header names the caller (absent for an anonymous one);
//!   `Authorization` passes unchanged unless switched off;
//! - a legacy session is bound to the caller that opened it
//!   ([`Sessions`]);
//! - a `resources/read` of a URI the `[[allow]]` rules do not grant the
//!   caller is answered as a resource that does not exist (-32002), never
//!   forwarded: each POST body is read whole for it (within
//!   `max_body_bytes`, else 413), unless `check_reads` is off;
//! - the upstream unreachable, or not beginning its answer in time, is
//!   answered 502 or 504 with a JSON-RPC error for the request's id (read
//!   from the body's first frame, which a client sends whole), never a hang.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::extract::ConnectInfo;
use bytes::Bytes;
use http::header::{self, HeaderName};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use mcp_edge::{Principal, RequestBody};
use serde_json::value::RawValue;

use crate::allow::Allows;
use crate::answer::{self, ProxyBody};
use crate::config::Config;
use crate::inspect::Inspected;
use crate::sessions::{Over, Sessions};
use crate::upstream::{Pool, UpstreamBody};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The legacy era's session header.
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");

/// Headers of one connection, never forwarded (RFC 9110 §7.6.1), besides
/// those `Connection` names.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
];

/// The forwarding service; cloning it is an `Arc` clone.
#[derive(Clone)]
pub struct Forward {
    upstream: Arc<Upstream>,
}

struct Upstream {
    client: Client,
    /// Who may read what, with `check_reads`.
    reads: Option<Allows>,
    max_body: usize,
    uri: Uri,
    host: HeaderValue,
    principal_header: HeaderName,
    forward_authorization: bool,
    response_timeout: Duration,
    sessions: Sessions,
}

impl Forward {
    /// The forwarding service of `config`, granting reads by `allows`.
    pub fn new(config: &Config, allows: Allows) -> Self {
        let authority = config.upstream.authority().expect("checked").as_str();
        let client = Client::new(config, authority);
        Self {
            upstream: Arc::new(Upstream {
                client,
                reads: config.check_reads.then_some(allows),
                max_body: config.max_body_bytes,
                uri: config.upstream.clone(),
                host: HeaderValue::from_str(authority).expect("an authority is a header value"),
                principal_header: config.principal_header.clone(),
                forward_authorization: config.forward_authorization,
                response_timeout: config.response_timeout(),
                sessions: Sessions::new(&config.sessions),
            }),
        }
    }

    /// How many legacy sessions are bound.
    pub fn sessions(&self) -> usize {
        self.upstream.sessions.len()
    }
}

/// The request as the edge hands it on: axum's body, peeked or rewritten.
type EdgeRequest = Request<RequestBody<axum::body::Body>>;

impl tower::Service<EdgeRequest> for Forward {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<ProxyBody>, Infallible>> + Send>>;

    #[inline]
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The pooled client is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: EdgeRequest) -> Self::Future {
        let upstream = self.upstream.clone();
        Box::pin(async move { Ok(upstream.forward(request).await) })
    }
}

impl Upstream {
    async fn forward(&self, request: EdgeRequest) -> Response<ProxyBody> {
        let (mut parts, body) = request.into_parts();
        let whole = self.reads.is_some() && parts.method == Method::POST;
        let (first, body) = match read(body, whole, self.max_body).await {
            Ok(read) => read,
            Err(Unread::TooLarge) => {
                let message = format!(
                    "Payload too large: a request body is at most {} bytes",
                    self.max_body
                );
                return own(StatusCode::PAYLOAD_TOO_LARGE, None, -32600, &message);
            }
            Err(Unread::Failed) => {
                let message = "the request body could not be read";
                return own(StatusCode::BAD_REQUEST, None, -32600, message);
            }
        };
        let data = first.as_ref().and_then(Frame::data_ref);
        let inspected = data.map(|data| Inspected::of(data)).unwrap_or_default();
        let id = inspected.id;
        let caller = parts.extensions.get::<Principal>().cloned();
        if let (true, Some(allows)) = (inspected.reads, &self.reads) {
            let granted = |uri: &String| allows.allows(caller.as_ref(), uri);
            if inspected.uris.is_empty() || !inspected.uris.iter().all(granted) {
                // As for a URI that does not exist: nothing is told of it.
                return own(StatusCode::OK, id.as_deref(), -32002, "Resource not found");
            }
        }
        let session = session_id(&parts.headers);
        if let Some(session) = &session {
            if !self.sessions.owns(session, caller.as_ref(), Instant::now()) {
                return own(
                    StatusCode::NOT_FOUND,
                    id.as_deref(),
                    -32600,
                    "Session not found",
                );
            }
        }
        let deleting = parts.method == Method::DELETE;
        self.prepare(&mut parts, caller.as_ref());
        // What a `DELETE` of a session opened beyond the bounds carries.
        let authorization = parts.headers.get(header::AUTHORIZATION).cloned();
        let body = Prefixed { first, rest: body }.boxed_unsync();
        let request = Request::from_parts(parts, body);
        let answer = match tokio::time::timeout(self.response_timeout, self.client.send(request))
            .await
        {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => {
                tracing::warn!(%error, "the upstream could not be reached");
                let message = "Bad gateway: the upstream MCP server could not be reached";
                return own(StatusCode::BAD_GATEWAY, id.as_deref(), -32603, message);
            }
            Err(_) => {
                tracing::warn!(timeout = ?self.response_timeout, "the upstream did not answer in time");
                let message = "Gateway timeout: the upstream MCP server did not answer in time";
                return own(StatusCode::GATEWAY_TIMEOUT, id.as_deref(), -32603, message);
            }
        };
        let (mut head, body) = answer.into_parts();
        strip_hop_by_hop(&mut head.headers);
        head.headers.remove(header::PROXY_AUTHENTICATE);
        match &session {
            Some(session) if ends(deleting, head.status) => self.sessions.unbind(session),
            Some(_) => {}
            None => {
                if let Some(opened) = session_id(&head.headers) {
                    if let Err(over) = self.sessions.bind(&opened, caller.as_ref(), Instant::now())
                    {
                        self.close(&opened, caller.as_ref(), authorization);
                        return too_many(over, id.as_deref());
                    }
                }
            }
        }
        Response::from_parts(head, body)
    }

    /// The request's head as the upstream gets it.
    fn prepare(&self, parts: &mut Parts, caller: Option<&Principal>) {
        let headers = &mut parts.headers;
        let client_host = headers.remove(header::HOST);
        strip_hop_by_hop(headers);
        for name in [
            "x-forwarded-for",
            "x-forwarded-proto",
            "x-forwarded-host",
            "forwarded",
        ] {
            headers.remove(name);
        }
        headers.remove(&self.principal_header);
        if !self.forward_authorization {
            headers.remove(header::AUTHORIZATION);
        }
        headers.insert(header::HOST, self.host.clone());
        if let Some(caller) = caller.and_then(|c| HeaderValue::from_str(c.as_str()).ok()) {
            headers.insert(self.principal_header.clone(), caller);
        }
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip());
        if let Some(peer) = peer.and_then(|ip| HeaderValue::from_str(&ip.to_string()).ok()) {
            headers.insert("x-forwarded-for", peer);
        }
        headers.insert("x-forwarded-proto", HeaderValue::from_static("http"));
        if let Some(host) = client_host {
            headers.insert("x-forwarded-host", host);
        }
        parts.uri = self.uri.clone();
        parts.version = http::Version::HTTP_11;
    }

    /// Ends at the upstream a session opened beyond the bounds, as its
    /// caller did (the same principal and `Authorization`).
    fn close(&self, session: &str, caller: Option<&Principal>, authorization: Option<HeaderValue>) {
        let Ok(session) = HeaderValue::from_str(session) else {
            return;
        };
        let mut request = Request::delete(self.uri.clone())
            .header(header::HOST, self.host.clone())
            .header(MCP_SESSION_ID, session);
        if let Some(authorization) = authorization {
            request = request.header(header::AUTHORIZATION, authorization);
        }
        if let Some(caller) = caller.and_then(|c| HeaderValue::from_str(c.as_str()).ok()) {
            request = request.header(self.principal_header.clone(), caller);
        }
        let empty = http_body_util::Empty::new()
            .map_err(|e| match e {})
            .boxed_unsync();
        let Ok(request) = request.body(empty) else {
            return;
        };
        let client = self.client.clone();
        tokio::spawn(async move {
            if let Err(error) = client.send(request).await {
                tracing::debug!(%error, "a session over the bounds could not be closed upstream");
            }
        });
    }
}

/// A session over the bounds: 429, its upstream session closed.
fn too_many(over: Over, id: Option<&RawValue>) -> Response<ProxyBody> {
    let message = match over {
        Over::Sessions => "Too many sessions: try again later",
        Over::SessionsPerCaller => "Too many sessions: close one first",
    };
    own(StatusCode::TOO_MANY_REQUESTS, id, -32600, message)
}

/// Whether an upstream answer ends the request's session: a `DELETE` it
/// accepted, or a session it no longer knows.
fn ends(deleting: bool, status: StatusCode) -> bool {
    (deleting && status.is_success()) || status == StatusCode::NOT_FOUND
}

/// The proxy's own answer.
fn own(status: StatusCode, id: Option<&RawValue>, code: i64, message: &str) -> Response<ProxyBody> {
    answer::response(status, answer::jsonrpc_error(id, code, message))
}

/// The request's `Mcp-Session-Id`, when it carries one (the first, if
/// several: the upstream reads the same).
fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(MCP_SESSION_ID)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Removes the headers of one connection.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
}

/// Why a body was not read.
enum Unread {
    TooLarge,
    Failed,
}

/// The body's first frame (its whole data, within `max` bytes, when
/// `whole`), and the body after it.
async fn read<B>(mut body: B, whole: bool, max: usize) -> Result<(Option<Frame<Bytes>>, B), Unread>
where
    B: Body<Data = Bytes> + Unpin,
{
    if body.is_end_stream() {
        return Ok((None, body));
    }
    let first = match body.frame().await {
        None => return Ok((None, body)),
        Some(Ok(frame)) => frame,
        Some(Err(_)) => return Err(Unread::Failed),
    };
    if !whole || body.is_end_stream() || !first.is_data() {
        return Ok((Some(first), body));
    }
    let mut data = bytes::BytesMut::from(first.into_data().unwrap_or_default());
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Unread::Failed)?;
        if let Some(chunk) = frame.data_ref() {
            if data.len() + chunk.len() > max {
                return Err(Unread::TooLarge);
            }
            data.extend_from_slice(chunk);
        }
    }
    Ok((Some(Frame::data(data.freeze())), body))
}

pin_project_lite::pin_project! {
    /// A body whose first frame was read: that frame, then the rest.
    struct Prefixed<B> {
        first: Option<Frame<Bytes>>,
        #[pin]
        rest: B,
    }
}

impl<B> Body for Prefixed<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        if let Some(frame) = this.first.take() {
            return Poll::Ready(Some(Ok(frame)));
        }
        this.rest
            .poll_frame(cx)
            .map(|frame| frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let first = self
            .first
            .as_ref()
            .and_then(Frame::data_ref)
            .map_or(0, |d| d.len() as u64);
        let rest = self.rest.size_hint();
        let mut hint = http_body::SizeHint::new();
        hint.set_lower(rest.lower() + first);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + first);
        }
        hint
    }
}

/// The connections to the upstream: HTTP/1.1 in a pool of connections
/// each driven by its request ([`Pool`]), or h2c over hyper's pooled
/// client (one multiplexed connection, in a task of its own).
#[derive(Clone)]
enum Client {
    Http1(Pool),
    Http2(Box<hyper_util::client::legacy::Client<HttpConnector, UpstreamBody>>),
}

impl Client {
    fn new(config: &Config, authority: &str) -> Self {
        if !config.upstream_http2 {
            let port = config.upstream.port_u16().unwrap_or(80);
            let host = config.upstream.host().expect("checked");
            let address = match authority.contains(':') {
                true => authority.to_owned(),
                false => format!("{host}:{port}"),
            };
            return Self::Http1(Pool::new(address, config.connect_timeout()));
        }
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(config.connect_timeout()));
        connector.set_nodelay(true);
        let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
            .http2_only(true)
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Self::Http2(Box::new(client))
    }

    /// Sends `request`: its answer's head, its body streaming.
    async fn send(
        &self,
        mut request: Request<UpstreamBody>,
    ) -> Result<Response<ProxyBody>, String> {
        match self {
            Client::Http1(pool) => {
                // HTTP/1.1 to a server: the origin form (`/mcp`), with `Host`.
                let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
                *request.uri_mut() = Uri::try_from(path).map_err(|e| e.to_string())?;
                match pool.send(request).await {
                    Ok(answer) => Ok(answer.map(|body| ProxyBody::Pooled { body })),
                    Err(failure) => Err(failure.to_string()),
                }
            }
            Client::Http2(client) => match client.request(request).await {
                Ok(answer) => Ok(answer.map(|body| ProxyBody::Upstream { body })),
                Err(error) => Err(error.to_string()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("transfer-encoding", "chunked"),
            ("te", "trailers"),
            ("upgrade", "h2c"),
            ("proxy-authorization", "Basic x"),
            ("content-type", "application/json"),
            ("mcp-session-id", "s"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["content-type", "mcp-session-id"]);
    }
}
