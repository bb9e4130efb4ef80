//! Who may come in, before anything else: one layer for what the proxy
//! checks of every request's head. A request under a name the proxy does
//! not answer to, or from an `Origin` not allowed, is refused 403: a page of
//! another origin that got its name resolved to the proxy (DNS rebinding)
//! gets nothing. Then the caller ([`Callers`]): its [`Principal`](mcp_edge::Principal) goes into
//! the request's extensions (none for an anonymous caller), or a bad
//! `Authorization` is answered 401.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::response::Response;
use http::header::{HOST, ORIGIN};
use http::uri::Authority;
use http::{Request, StatusCode};
use tower::{Layer, Service};

use crate::answer;
use crate::callers::Callers;

/// Layer that applies [`Admit`].
#[derive(Clone)]
pub struct AdmitLayer {
    checks: Arc<(Allowed, Arc<Callers>)>,
}

impl AdmitLayer {
    pub fn new(allowed: Allowed, callers: Arc<Callers>) -> Self {
        Self {
            checks: Arc::new((allowed, callers)),
        }
    }
}

impl<S> Layer<S> for AdmitLayer {
    type Service = Admit<S>;

    fn layer(&self, inner: S) -> Admit<S> {
        Admit {
            checks: self.checks.clone(),
            inner,
        }
    }
}

/// The head checks of [`AdmitLayer`], in front of `S`.
#[derive(Clone)]
pub struct Admit<S> {
    checks: Arc<(Allowed, Arc<Callers>)>,
    inner: S,
}

impl<S> Service<Request<Body>> for Admit<S>
where
    S: Service<Request<Body>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Admitted<S::Future>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let (allowed, callers) = &*self.checks;
        if !allowed.admits(request.headers()) {
            tracing::warn!("a request under another name or origin was refused");
            let message = "Forbidden: Host or Origin not allowed";
            return Admitted::Refused {
                response: Some(answer::error(StatusCode::FORBIDDEN, None, -32600, message)),
            };
        }
        match callers.identify(request.headers()) {
            Ok(Some(principal)) => {
                request.extensions_mut().insert(principal);
            }
            Ok(None) => {}
            Err(refused) => {
                return Admitted::Refused {
                    response: Some(refused.answer()),
                }
            }
        }
        Admitted::Called {
            future: self.inner.call(request),
        }
    }
}

pin_project_lite::pin_project! {
    /// Response future of [`Admit`].
    #[project = AdmittedProj]
    pub enum Admitted<F> {
        Called { #[pin] future: F },
        Refused { response: Option<Response> },
    }
}

impl<F, E> Future for Admitted<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            AdmittedProj::Called { future } => future.poll(cx),
            AdmittedProj::Refused { response } => {
                Poll::Ready(Ok(response.take().expect("polled after completion")))
            }
        }
    }
}

/// The names and origins a request may come under.
pub struct Allowed {
    pub hosts: Vec<String>,
    pub origins: Vec<String>,
}

impl Allowed {
    /// Whether `host` (a `Host` header) names the proxy: an IP address or
    /// `localhost` (no page can get one of those resolved to the proxy), or
    /// a name of `allowed_hosts`; any port.
    fn host(&self, host: &str) -> bool {
        let Ok(authority) = host.parse::<Authority>() else {
            return false;
        };
        let name = authority.host();
        let address = name
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok();
        address
            || name.eq_ignore_ascii_case("localhost")
            || self.hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
    }

    /// Whether `origin` (an `Origin` header) may call the proxy under
    /// `host` (its `Host`, allowed already): one of `allowed_origins`, or
    /// the proxy's own origin (`http` or `https` and that very host: a
    /// page the proxy itself serves, or one behind a TLS terminator).
    fn origin(&self, origin: &[u8], host: &str) -> bool {
        if self.origins.iter().any(|a| a.as_bytes() == origin) {
            return true;
        }
        let origin = std::str::from_utf8(origin).unwrap_or_default();
        let own = |scheme: &str| {
            origin
                .strip_prefix(scheme)
                .and_then(|rest| rest.strip_prefix("://"))
                .is_some_and(|authority| authority.eq_ignore_ascii_case(host))
        };
        own("http") || own("https")
    }
}

impl Allowed {
    /// Whether a request with `headers` comes under a name and origins the
    /// proxy takes: one `Host` (two could name the proxy to one reader and
    /// another name to the next), allowed, and every `Origin` allowed for
    /// it (a request without `Origin`, not from a browser, passes).
    fn admits(&self, headers: &http::HeaderMap) -> bool {
        let mut hosts = headers.get_all(HOST).iter();
        let host = match (hosts.next(), hosts.next()) {
            (Some(host), None) => host.to_str().unwrap_or_default(),
            _ => return false,
        };
        self.host(host)
            && headers
                .get_all(ORIGIN)
                .iter()
                .all(|o| self.origin(o.as_bytes(), host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_addresses_localhost_or_named_and_origins_are_named() {
        let allowed = Allowed {
            hosts: vec!["mcp.example.com".into()],
            origins: vec!["https://app.example.com".into()],
        };
        for host in [
            "127.0.0.1:8080",
            "[::1]:1",
            "10.0.0.7",
            "localhost:8080",
            "MCP.example.com:443",
        ] {
            assert!(allowed.host(host), "{host}");
        }
        for host in ["evil.example:8080", "example.com", "", "a b"] {
            assert!(!allowed.host(host), "{host}");
        }
        let host = "127.0.0.1:8080";
        assert!(allowed.origin(b"https://app.example.com", host));
        assert!(allowed.origin(b"http://127.0.0.1:8080", host));
        assert!(allowed.origin(b"https://127.0.0.1:8080", host));
        assert!(!allowed.origin(b"http://127.0.0.1:8081", host));
        assert!(!allowed.origin(b"https://app.example.com.evil", host));
        assert!(!allowed.origin(b"null", host));
    }
}
