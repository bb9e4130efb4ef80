//! The proxy assembled from its configuration: the profile, the stack in
//! front of the forwarding service, and, with `[hub]`, the hub and its
//! publish endpoint.
//!
//! The stack, outermost first: the request body's read timeout, the
//! `Origin` check, the caller ([`callers`](crate::callers)), then
//! mcp-edge's `EdgeLayer` (both promises, one read of each body), the hub's
//! layer with `[hub]`, and the forwarding service.

use std::error::Error;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use mcp_edge::hub::{Bus, ListenHub};
use mcp_edge::{EdgeLayer, Principal, ServerProfile};
use serde_json::Value;
use tower::{Layer, ServiceBuilder};
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::admit::{AdmitLayer, Allowed};
use crate::allow::Allows;
use crate::callers::Callers;
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
    let allowed = Allowed {
        hosts: config.allowed_hosts.clone(),
        origins: config.allowed_origins.clone(),
    };
    let mcp = mcp
        .layer(AdmitLayer::new(allowed, callers))
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
