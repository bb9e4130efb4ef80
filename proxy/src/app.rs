//! The proxy assembled from its configuration: the profile, the stack in
//! front of the forwarding service, and, with `[hub]`, the hub and its
//! publish endpoint.
//!
//! The stack, outermost first: the request body's read timeout, the
//! `Origin` check, the caller ([`callers`](crate::callers)), then
//! mcp-edge's `EdgeLayer` (both promises, one read of each body), the hub's
//! layer with `[hub]`, and the forwarding service.

use std::error::Error;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::Response;
use axum::Router;
use http::header::{HOST, ORIGIN};
use http::uri::Authority;
use http::StatusCode;
use mcp_edge::hub::{Bus, ListenHub};
use mcp_edge::{EdgeLayer, Principal, ServerProfile};
use serde_json::Value;
use tower::{Layer, ServiceBuilder};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::allow::Allows;
use crate::answer;
use crate::callers::{authenticate, Callers};
use crate::config::Config;
use crate::forward::Forward;
use crate::publish;

/// How long a request body may go without a frame.
const BODY_READ: Duration = Duration::from_secs(10);

/// The proxy, ready to serve.
pub struct Proxy {
    /// `/mcp`, behind the whole stack.
    pub mcp: Router,
    /// `POST /publish`, with `[hub]`.
    pub publish: Option<Router>,
    /// The hub, with `[hub]`: [`ListenHub::shutdown`] ends its streams.
    pub hub: Option<ListenHub>,
    /// The forwarding service (its sessions).
    pub forward: Forward,
}

/// The proxy `config` describes, its hub on `bus` (default: this proxy
/// alone, or the Redis `config` names).
pub fn build(config: &Config, bus: Option<Arc<dyn Bus>>) -> Result<Proxy, Box<dyn Error>> {
    let callers = Arc::new(Callers::from_config(config)?);
    let profile = profile(config)?;
    let forward = Forward::new(config, Allows::of(config));
    let edge = EdgeLayer::new(profile.clone());
    let (mcp, hub, publish) = match &config.hub {
        None => (
            Router::new().route_service("/mcp", edge.layer(forward.clone())),
            None,
            None,
        ),
        Some(settings) => {
            let keys = profile.clone();
            let mut hub = ListenHub::builder(profile)
                .keep_alive(Duration::from_secs(settings.keep_alive_secs))
                .max_streams(settings.max_streams)
                .max_streams_per_caller(settings.max_streams_per_caller)
                // Anonymous callers by address: otherwise they all share one count.
                .admission_key(move |parts| admission_key(&keys, parts));
            if let Some(bus) = bus.map(Ok).or_else(|| redis_bus(settings)).transpose()? {
                hub = hub.bus(bus);
            }
            let hub = hub.build();
            let service = ServiceBuilder::new()
                .layer(edge)
                .layer(hub.layer())
                .service(forward.clone());
            let publish = publish::router(hub.publisher(), &settings.publish_token);
            (
                Router::new().route_service("/mcp", service),
                Some(hub),
                Some(publish),
            )
        }
    };
    let allowed = Arc::new(Allowed {
        hosts: config.allowed_hosts.clone(),
        origins: config.allowed_origins.clone(),
    });
    let mcp = mcp
        .layer(from_fn_with_state(callers, authenticate))
        .layer(from_fn_with_state(allowed, check_host_and_origin))
        .layer(RequestBodyTimeoutLayer::new(BODY_READ));
    Ok(Proxy {
        mcp,
        publish,
        hub,
        forward,
    })
}

/// What the upstream offers, and who may read what (the `[[allow]]` rules).
pub fn profile(config: &Config) -> Result<ServerProfile, Box<dyn Error>> {
    let mut base = config.capabilities.clone();
    let completions = base.remove("completions").is_some();
    let logging = base.remove("logging").is_some();
    let has_resources = base.is_empty() || base.contains_key("resources");
    let rules = Allows::of(config);
    let mut builder = ServerProfile::builder()
        .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
            let answers = uris.iter().map(|uri| rules.allows(caller, uri));
            std::future::ready(answers.collect::<Vec<bool>>())
        })
        .completions(completions)
        .legacy_logging(logging);
    if !base.is_empty() {
        builder = builder.base_capabilities(Value::Object(base));
    }
    if has_resources {
        // The upstream decides which URIs it takes subscriptions to.
        builder =
            builder.subscription_hook(|uris: &[&str]| std::future::ready(vec![true; uris.len()]));
    }
    Ok(builder.build()?)
}

/// The hub's admission bucket of a listen: its caller, or an anonymous
/// caller's address.
fn admission_key(profile: &ServerProfile, parts: &http::request::Parts) -> Option<String> {
    if let Some(caller) = profile.principal(parts) {
        return Some(format!("caller:{}", caller.as_str()));
    }
    let peer = parts.extensions.get::<ConnectInfo<SocketAddr>>()?;
    Some(format!("peer:{}", peer.0.ip().to_canonical()))
}

/// The Redis bus `[hub]` names, if any.
fn redis_bus(settings: &crate::config::Hub) -> Option<Result<Arc<dyn Bus>, Box<dyn Error>>> {
    let bus = match (&settings.redis, &settings.redis_cluster) {
        (Some(url), _) => mcp_edge::hub::RedisBus::new(url, &settings.prefix),
        (None, Some(urls)) => mcp_edge::hub::RedisBus::cluster(urls, &settings.prefix),
        (None, None) => return None,
    };
    Some(
        bus.map(|bus| Arc::new(bus) as Arc<dyn Bus>)
            .map_err(Into::into),
    )
}

/// The names and origins a request may come under.
struct Allowed {
    hosts: Vec<String>,
    origins: Vec<String>,
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

/// Refuses, 403, a request under a name the proxy does not answer to, or
/// from an `Origin` not allowed: a page of another origin that got its name
/// resolved to the proxy (DNS rebinding) gets nothing. A request without
/// `Origin` (not from a browser) passes the second check.
async fn check_host_and_origin(
    State(allowed): State<Arc<Allowed>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    // One `Host`: two could name the proxy to one reader and another
    // name to the next.
    let mut hosts = headers.get_all(HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host.to_str().unwrap_or_default(),
        _ => "",
    };
    let host_ok = allowed.host(host);
    let origins_ok = headers
        .get_all(ORIGIN)
        .iter()
        .all(|o| allowed.origin(o.as_bytes(), host));
    if !host_ok || !origins_ok {
        tracing::warn!(
            host_ok,
            origins_ok,
            "a request under another name or origin was refused"
        );
        return answer::error(
            StatusCode::FORBIDDEN,
            None,
            -32600,
            "Forbidden: Host or Origin not allowed",
        );
    }
    next.run(request).await
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
