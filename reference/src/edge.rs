//! The outermost middlewares: DNS-rebinding protection, bearer auth, and
//! the binding of legacy sessions to their caller within the bounds.
//!
//! Each answers a rejected request themselves, with a JSON-RPC error body
//! whose `id` is `null` (the body was never read, so the id is unknown).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use mcp_edge::{Principal, Rejection};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{SessionId, SessionManager};
use serde_json::json;

/// The legacy-era session header.
const MCP_SESSION_ID: &str = "mcp-session-id";
/// The protocol version header.
const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// The bearer tokens this demo knows, and whose they are.
const TOKENS: &[(&str, &str)] = &[("alice-token", "alice"), ("bob-token", "bob")];

/// Rejects with 403 any request whose `Host` or `Origin` is not a loopback
/// name for this server's port: a page on another origin that got its
/// name resolved to 127.0.0.1 (DNS rebinding) cannot reach the server.
pub async fn loopback_only(State(port): State<u16>, request: Request, next: Next) -> Response {
    if let Err(reason) = check_host_and_origin(request.headers(), request.uri(), port) {
        tracing::warn!(reason, "rejected request (possible DNS rebinding)");
        return rejection(
            StatusCode::FORBIDDEN,
            -32600,
            "Forbidden: Host or Origin not allowed",
        );
    }
    next.run(request).await
}

/// Resolves `Authorization: Bearer <token>` to a [`Principal`] in the request
/// extensions. No header: the caller is anonymous, and nothing is inserted
/// (mcp-edge and the handler treat that as "no principal": public resources
/// only, no tasks). Any other value: 401.
pub async fn bearer_auth(mut request: Request, next: Next) -> Response {
    if let Some(value) = request.headers().get(AUTHORIZATION) {
        let Some(principal) = principal_for(value) else {
            let mut response = rejection(
                StatusCode::UNAUTHORIZED,
                -32001,
                "Unauthorized: unknown bearer token",
            );
            response
                .headers_mut()
                .insert(WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        };
        request.extensions_mut().insert(principal);
    }
    next.run(request).await
}

/// Which caller opened each legacy session, with the bounds on how many
/// sessions there may be.
#[derive(Clone)]
pub struct Sessions {
    owners: Arc<Mutex<Owners>>,
    /// Most sessions in all, and per caller (the anonymous ones share one
    /// count).
    total: usize,
    per_caller: usize,
    /// rmcp's sessions: which are still live, and where a session opened
    /// beyond the bounds is closed.
    live: Arc<LocalSessionManager>,
}

/// The caller of each bound session, by its `Mcp-Session-Id`.
type Owners = HashMap<HeaderValue, Option<Principal>>;

impl Sessions {
    /// Bindings for at most `total` sessions, `per_caller` per caller, of
    /// the sessions `live` holds.
    pub fn new(total: usize, per_caller: usize, live: Arc<LocalSessionManager>) -> Self {
        Self {
            owners: Arc::default(),
            total,
            per_caller,
            live,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Owners> {
        // Every change is one insert or removal: a poisoned map is consistent.
        self.owners
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets the sessions the inner service let expire.
    async fn forget_expired(&self) {
        // The read guard is held while the bindings are pruned, so a session
        // rmcp opens meanwhile cannot be bound and then pruned as unknown.
        let live = self.live.sessions.read().await;
        self.lock().retain(|id, _| {
            id.to_str()
                .is_ok_and(|id| live.keys().any(|live| &**live == id))
        });
    }

    /// Whether `caller` may not hold one more session.
    async fn full_for(&self, caller: &Option<Principal>) -> bool {
        self.forget_expired().await;
        self.over_bounds(&self.lock(), caller)
    }

    fn over_bounds(&self, owners: &Owners, caller: &Option<Principal>) -> bool {
        let held = owners.values().filter(|owner| *owner == caller).count();
        owners.len() >= self.total || held >= self.per_caller
    }

    /// Binds session `id` to `caller` within the bounds; false, binding
    /// nothing, when `caller` may not hold one more. An id bound already is
    /// no new session.
    async fn bind(&self, id: &HeaderValue, caller: &Option<Principal>) -> bool {
        self.forget_expired().await;
        let mut owners = self.lock();
        if owners.contains_key(id) {
            return true;
        }
        if self.over_bounds(&owners, caller) {
            return false;
        }
        owners.insert(id.clone(), caller.clone());
        true
    }

    /// Closes session `id` in rmcp, so that a session refused at the edge
    /// does not stay live (it would hold a worker until it expired).
    async fn close(&self, id: &HeaderValue) {
        let id: SessionId = String::from_utf8_lossy(id.as_bytes()).into();
        if let Err(error) = self.live.close_session(&id).await {
            tracing::warn!(%error, "cannot close a session opened beyond the bounds");
        }
    }

    /// `response` when it opens no session, or one `caller` may hold (it is
    /// bound to `caller`); else 429, and rmcp's new session is closed.
    async fn admit(&self, response: Response, caller: &Option<Principal>) -> Response {
        let Some(id) = response.headers().get(MCP_SESSION_ID).cloned() else {
            return response;
        };
        if self.bind(&id, caller).await {
            return response;
        }
        drop(response);
        self.close(&id).await;
        tracing::info!("refused a session opened beyond the bounds");
        too_many_sessions()
    }
}

/// A request that looks like the opening of a legacy session: a `POST`
/// without a session id, unless it names the 2026-07-28 protocol. Only an
/// early refusal, to spare rmcp the work: headers are the client's claim,
/// so what rmcp answers decides ([`Sessions::admit`]).
fn looks_like_an_opening(request: &Request) -> bool {
    request.method() == http::Method::POST
        && !request.headers().contains_key(MCP_SESSION_ID)
        && request
            .headers()
            .get(MCP_PROTOCOL_VERSION)
            .is_none_or(|version| version != "2026-07-28")
}

/// Whether rmcp's answer to a request presenting a session id ends the
/// binding: it accepted the session's `DELETE` (2xx), or it no longer knows
/// the session (its own 404).
fn ends_the_session(deleting: bool, response: &Response) -> bool {
    let status = response.status();
    // A 404 the mcp-edge layer wrote (it carries a `Rejection`) says nothing
    // about the session; rmcp's says it no longer knows it.
    let from_rmcp = response.extensions().get::<Rejection>().is_none();
    (deleting && status.is_success()) || (from_rmcp && status == StatusCode::NOT_FOUND)
}

fn too_many_sessions() -> Response {
    rejection(
        StatusCode::TOO_MANY_REQUESTS,
        -32600,
        "Too many sessions: close one first",
    )
}

/// Binds a legacy-era session (`Mcp-Session-Id`) to the caller that opened
/// it: another caller presenting the id is answered 404, as for an unknown
/// session, so a leaked id does not let it hear the session's stream. A
/// binding is removed once the inner service accepted the session's
/// `DELETE` (2xx) or answered that it no longer knows the session (404),
/// and when the inner service let the session expire.
///
/// The bounds hold on what rmcp answers, whatever the request claimed (a
/// 2026-07-28 header, modern `_meta`, an unreadable session id): an answer
/// that carries a new session id is bound to the caller, or, beyond the
/// bounds, replaced by 429 while the new session is closed.
pub async fn bind_sessions(
    State(sessions): State<Sessions>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Principal>().cloned();
    let presented = request.headers().get(MCP_SESSION_ID).cloned();
    if let Some(id) = &presented {
        let owner = sessions.lock().get(id).cloned();
        if owner.is_some_and(|owner| owner != caller) {
            return rejection(StatusCode::NOT_FOUND, -32600, "Session not found");
        }
    }
    if looks_like_an_opening(&request) && sessions.full_for(&caller).await {
        return too_many_sessions();
    }
    let deleting = request.method() == http::Method::DELETE;
    let response = next.run(request).await;
    if let Some(id) = &presented {
        if ends_the_session(deleting, &response) {
            sessions.lock().remove(id);
        }
    }
    sessions.admit(response, &caller).await
}

fn principal_for(value: &HeaderValue) -> Option<Principal> {
    let (scheme, token) = value.to_str().ok()?.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = token.trim();
    TOKENS
        .iter()
        .find(|(known, _)| *known == token)
        .map(|(_, name)| Principal::new(*name))
}

/// A JSON-RPC error the middleware answers with itself: `"id": null`, as
/// JSON-RPC says for an error whose request id is unknown, so that SDK
/// clients show the message.
pub(crate) fn rejection(status: StatusCode, code: i64, message: &'static str) -> Response {
    let body =
        json!({ "jsonrpc": "2.0", "id": null, "error": { "code": code, "message": message } });
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host == "127.0.0.1" || host == "[::1]"
}

fn check_host_and_origin(headers: &HeaderMap, uri: &Uri, port: u16) -> Result<(), &'static str> {
    let host = match headers.get(HOST) {
        Some(host) => host.to_str().map_err(|_| "Host is not ASCII")?,
        None => uri.authority().map(Authority::as_str).ok_or("no Host")?,
    };
    let host: Authority = host.parse().map_err(|_| "malformed Host")?;
    if !is_loopback(host.host()) || host.port_u16().unwrap_or(80) != port {
        return Err("Host is not this server");
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let origin: Uri = origin
        .to_str()
        .ok()
        .and_then(|origin| origin.parse().ok())
        .ok_or("malformed Origin")?;
    let default_port = match origin.scheme_str() {
        Some("http") => 80,
        Some("https") => 443,
        _ => return Err("Origin is not http(s)"),
    };
    let origin = origin.authority().ok_or("Origin has no host")?;
    if !is_loopback(origin.host()) || origin.port_u16().unwrap_or(default_port) != port {
        return Err("Origin is not this server");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    http::HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn loopback_hosts_for_this_port_pass() {
        let uri = Uri::from_static("/mcp");
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "LOCALHOST:8080",
            "[::1]:8080",
        ] {
            let map: HeaderMap = [(HOST, HeaderValue::from_static(host))]
                .into_iter()
                .collect();
            assert_eq!(check_host_and_origin(&map, &uri, 8080), Ok(()), "{host}");
        }
        let map = headers(&[
            ("host", "localhost:8080"),
            ("origin", "http://127.0.0.1:8080"),
        ]);
        assert_eq!(check_host_and_origin(&map, &uri, 8080), Ok(()));
    }

    #[test]
    fn foreign_hosts_and_origins_fail() {
        let uri = Uri::from_static("/mcp");
        for (host, origin) in [
            ("evil.example.com", None),
            ("evil.example.com:8080", None),
            ("127.0.0.1:9090", None),
            ("localhost", None),
            ("localhost:8080", Some("http://evil.example.com")),
            ("localhost:8080", Some("http://localhost:9090")),
            ("localhost:8080", Some("null")),
        ] {
            let mut map: HeaderMap = [(HOST, HeaderValue::from_static(host))]
                .into_iter()
                .collect();
            if let Some(origin) = origin {
                map.insert(ORIGIN, HeaderValue::from_static(origin));
            }
            assert!(
                check_host_and_origin(&map, &uri, 8080).is_err(),
                "{host} {origin:?}"
            );
        }
    }

    #[test]
    fn bearer_tokens_resolve() {
        let alice = principal_for(&HeaderValue::from_static("Bearer alice-token"));
        assert_eq!(alice, Some(Principal::new("alice")));
        let bob = principal_for(&HeaderValue::from_static("bearer bob-token"));
        assert_eq!(bob, Some(Principal::new("bob")));
        for value in [
            "Bearer mallory-token",
            "Basic YWxpY2U6",
            "alice-token",
            "Bearer",
        ] {
            assert_eq!(
                principal_for(&HeaderValue::from_static(value)),
                None,
                "{value}"
            );
        }
    }
}
