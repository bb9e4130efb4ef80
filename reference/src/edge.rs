//! The two outermost middlewares: DNS-rebinding protection and bearer auth.
//!
//! Both answer a rejected request themselves, with a JSON-RPC error body
//! whose `id` is `null` (the body was never read, so the id is unknown).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::uri::Authority;
use http::{HeaderMap, HeaderValue, StatusCode, Uri};
use mcp_edge::{Principal, Rejection};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
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
    state: Arc<Mutex<Bound>>,
    /// Most sessions in all, and per caller (the anonymous ones share one
    /// count).
    total: usize,
    per_caller: usize,
    /// The sessions the inner service still holds, to forget the others.
    live: Option<Arc<LocalSessionManager>>,
}

/// The bound sessions, and the openings under way (admitted, not answered).
#[derive(Default)]
struct Bound {
    owners: HashMap<HeaderValue, Option<Principal>>,
    opening: Vec<Option<Principal>>,
}

impl Bound {
    /// Sessions of `caller`, bound or being opened.
    fn held_by(&self, caller: &Option<Principal>) -> usize {
        self.owners
            .values()
            .filter(|owner| *owner == caller)
            .count()
            + self.opening.iter().filter(|owner| *owner == caller).count()
    }

    /// Ends one opening by `caller`.
    fn opened(&mut self, caller: &Option<Principal>) {
        if let Some(at) = self.opening.iter().position(|owner| owner == caller) {
            self.opening.swap_remove(at);
        }
    }
}

impl Sessions {
    /// Bindings for at most `total` sessions, `per_caller` per caller;
    /// `live`, when given, says which sessions have not expired.
    pub fn new(total: usize, per_caller: usize, live: Option<Arc<LocalSessionManager>>) -> Self {
        Self {
            state: Arc::default(),
            total,
            per_caller,
            live,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bound> {
        self.state.lock().expect("sessions lock")
    }

    /// Forgets the sessions the inner service let expire.
    async fn forget_expired(&self) {
        let Some(live) = &self.live else { return };
        let live = live.sessions.read().await;
        self.lock().owners.retain(|id, _| {
            id.to_str()
                .is_ok_and(|id| live.keys().any(|live| &**live == id))
        });
    }

    /// Admits one more session for `caller`, counted until the [`Opening`]
    /// is dropped; `None` when the bounds are reached.
    fn admit(&self, caller: &Option<Principal>) -> Option<Opening> {
        let mut bound = self.lock();
        let held = bound.owners.len() + bound.opening.len();
        if held >= self.total || bound.held_by(caller) >= self.per_caller {
            return None;
        }
        bound.opening.push(caller.clone());
        Some(Opening {
            sessions: self.clone(),
            caller: caller.clone(),
        })
    }
}

/// A session being opened, counted against the bounds until it is bound
/// or its request ends (answered, failed or dropped).
struct Opening {
    sessions: Sessions,
    caller: Option<Principal>,
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.sessions.lock().opened(&self.caller);
    }
}

/// A request that may open a legacy session: a `POST` without a session
/// id, unless it names the 2026-07-28 protocol (whose requests open none).
fn may_open_a_session(request: &Request) -> bool {
    request.method() == http::Method::POST
        && !request.headers().contains_key(MCP_SESSION_ID)
        && request
            .headers()
            .get(MCP_PROTOCOL_VERSION)
            .is_none_or(|version| version != "2026-07-28")
}

/// Binds a legacy-era session (`Mcp-Session-Id`) to the caller that opened
/// it: another caller presenting the id is answered 404, as for an unknown
/// session, so a leaked id does not let it hear the session's stream. A
/// binding is removed once the inner service accepted the session's
/// `DELETE` (2xx) or answered that it no longer knows the session (404),
/// and when the inner service let the session expire. A request that could
/// open a session beyond the bounds is answered 429.
pub async fn bind_sessions(
    State(sessions): State<Sessions>,
    request: Request,
    next: Next,
) -> Response {
    let caller = request.extensions().get::<Principal>().cloned();
    let presented = request.headers().get(MCP_SESSION_ID).cloned();
    if let Some(id) = &presented {
        let owner = sessions.lock().owners.get(id).cloned();
        if owner.is_some_and(|owner| owner != caller) {
            return rejection(StatusCode::NOT_FOUND, -32600, "Session not found");
        }
    }
    let mut opening = None;
    if may_open_a_session(&request) {
        sessions.forget_expired().await;
        opening = sessions.admit(&caller);
        if opening.is_none() {
            return rejection(
                StatusCode::TOO_MANY_REQUESTS,
                -32600,
                "Too many sessions: close one first",
            );
        }
    }
    let deleting = request.method() == http::Method::DELETE;
    let response = next.run(request).await;
    let status = response.status();
    // A 404 the mcp-edge layer wrote (it carries a `Rejection`) says nothing
    // about the session; rmcp's says it no longer knows it.
    let from_rmcp = response.extensions().get::<Rejection>().is_none();
    let forgotten =
        (deleting && status.is_success()) || (from_rmcp && status == StatusCode::NOT_FOUND);
    match &presented {
        Some(id) if forgotten => {
            sessions.lock().owners.remove(id);
        }
        Some(_) => {}
        None => {
            if let Some(id) = response.headers().get(MCP_SESSION_ID) {
                sessions.lock().owners.insert(id.clone(), caller);
            }
        }
    }
    // Bound now, or never: the opening no longer counts.
    drop(opening);
    response
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
