//! Tower middleware for MCP (Model Context Protocol) servers.
//!
//! Two promises, kept at the HTTP edge in front of any MCP server (an rmcp
//! `StreamableHttpService`, a tower-mcp router, a hand-written axum handler):
//!
//! 1. **What a server advertises is what it serves.** [`CapabilitiesLayer`]
//!    fills in the `capabilities` of every `initialize` (legacy era) and
//!    `server/discover` (2026-07-28) result from one [`ServerProfile`].
//! 2. **A listen stream carries only what its caller may see.**
//!    [`ListenFilterLayer`] turns the `notifications` filter of every
//!    `subscriptions/listen` request into the [`HonouredFilter`]: validated,
//!    authorized per caller, deduplicated, bounded.
//!
//! [`EdgeLayer`] keeps both with one read of each body; the two layers stay
//! for a deployment that wants one promise only.
//!
//! # Quick start
//!
//! Wrap the MCP server in [`EdgeLayer`], built from the [`ServerProfile`]
//! that says what the server offers and who may read which resource:
//!
//! ```
//! use http_body_util::BodyExt;
//! use mcp_edge::{EdgeLayer, HonouredFilter, Principal, ServerProfile};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let profile = ServerProfile::builder()
//!     .base_capabilities(serde_json::json!({"tools": {}, "resources": {}}))
//!     .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
//!         let name = caller.map(|c| format!("demo://users/{}/", c.as_str()));
//!         std::future::ready(uris.iter().map(|u| name.as_ref().is_some_and(|n| u.starts_with(n))).collect())
//!     })
//!     .build()?;
//!
//! // The server: it advertises prompts it does not serve, and acknowledges
//! // a listen with the filter the edge honoured.
//! let server = service_fn(|request: http::Request<mcp_edge::RequestBody<String>>| async move {
//!     let (kind, body) = match request.extensions().get::<HonouredFilter>() {
//!         Some(filter) => ("text/event-stream", format!(r#"data: {{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{}}}}}{}"#, filter.ack().get(), "\n\n")),
//!         None => ("application/json", r#"{"jsonrpc":"2.0","id":1,"result":{"capabilities":{"prompts":{}}}}"#.to_owned()),
//!     };
//!     http::Response::builder().header("content-type", kind).body(body)
//! });
//! let edge = ServiceBuilder::new().layer(EdgeLayer::new(profile)).service(server);
//! let post = |body: &str| http::Request::post("/mcp").header("content-type", "application/json").body(body.to_owned());
//!
//! // A discover carries the profile's capabilities: exactly what is served.
//! let discover = post(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#)?;
//! let answer = edge.clone().oneshot(discover).await?.into_body().collect().await?.to_bytes();
//! let answer: serde_json::Value = serde_json::from_slice(&answer)?;
//! assert_eq!(answer["result"]["capabilities"]["tools"], serde_json::json!({"listChanged": true}));
//! assert!(answer["result"]["capabilities"].get("prompts").is_none());
//!
//! // Alice's listen is honoured for what alice may read (the auth layer
//! // puts her `Principal` in the request's extensions).
//! let mut listen = post(r#"{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":
//!     {"resourceSubscriptions":["demo://users/alice/notes","demo://users/bob/notes"]}}}"#)?;
//! listen.extensions_mut().insert(Principal::new("alice"));
//! let stream = edge.oneshot(listen).await?.into_body().collect().await?.to_bytes();
//! assert!(std::str::from_utf8(&stream)?.contains(r#"{"resourceSubscriptions":["demo://users/alice/notes"]}"#));
//! # Ok(())
//! # }
//! ```
//!
//! The inner service gets each honoured listen with `params.notifications`
//! rewritten to exactly the acknowledged filter, and the [`HonouredFilter`]
//! in its request extensions (`Extension<HonouredFilter>` in axum; in rmcp,
//! through the `http::request::Parts` in a handler's request context).
//!
//! # Ordering
//!
//! Outermost first:
//!
//! 1. Host/Origin validation, then **auth**, which puts the caller into the
//!    request extensions as a [`Principal`] (or set a [`PrincipalLookup`]
//!    on the profile).
//! 2. **Compression and decompression**, so that the edge sees plain JSON
//!    and plain SSE.
//! 3. [`EdgeLayer`] (or [`CapabilitiesLayer`], then [`ListenFilterLayer`]).
//! 4. The listen hub's layer, when the edge serves listens itself.
//! 5. The MCP server.
//!
//! # The listen hub
//!
//! With the feature `hub`, [`hub::ListenHub`] serves every honoured listen
//! itself: the acknowledgment, then each change the server publishes
//! through its [`hub::Publisher`] (`resource_updated`, `list_changed`,
//! `task_status`), to exactly the streams whose filter and caller may hear
//! it, with a bounded backlog, keep-alives, per-caller and global caps and
//! a graceful shutdown. Its layer goes inside [`EdgeLayer`]. Across
//! instances, a [`hub::Bus`] carries every change: with the feature
//! `redis`, `hub::RedisBus` on one Redis node or a Redis Cluster (sharded
//! pub/sub).
//!
//! # Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `hub` | yes | [`hub`]: the listen hub, on tokio's timers (no runtime of its own) |
//! | `redis` | no | `hub::RedisBus`: the hub's bus on Redis or a Redis Cluster (redis-rs, tokio) |
//! | `metrics` | no | counters, gauges and a histogram through the [`metrics`](https://docs.rs/metrics) facade: requests taken and refused, answers replaced, events dropped, the hub's streams and deliveries, the bus, the decision cache and its hook; the application installs the recorder ([docs/operations.md](https://github.com/mcp-edge/mcp-edge/blob/main/docs/operations.md)) |
//!
//! Without default features the layers need no async runtime.
//!
//! # More
//!
//! In the repository: the
//! [README](https://github.com/mcp-edge/mcp-edge#readme) (the hub in full,
//! Redis, the commands), the reference deployment on rmcp
//! ([docs/reference-deployment.md](https://github.com/mcp-edge/mcp-edge/blob/main/docs/reference-deployment.md)),
//! what the edge holds against hostile clients, servers and publishers
//! ([docs/security.md](https://github.com/mcp-edge/mcp-edge/blob/main/docs/security.md)),
//! capacity across instances
//! ([docs/scale-out.md](https://github.com/mcp-edge/mcp-edge/blob/main/docs/scale-out.md)),
//! the metrics and what to alert on
//! ([docs/operations.md](https://github.com/mcp-edge/mcp-edge/blob/main/docs/operations.md)),
//! and the measured costs
//! ([BENCHMARKS.md](https://github.com/mcp-edge/mcp-edge/blob/main/BENCHMARKS.md)).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![doc(test(attr(deny(warnings))))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod advertise;
pub mod capabilities;
mod codec;
pub mod edge;
mod filter;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod hooks;
mod http;
#[cfg(feature = "hub")]
#[cfg_attr(docsrs, doc(cfg(feature = "hub")))]
pub mod hub;
pub mod jsonrpc;
pub mod listen_filter;
mod macros;
mod metrics;
mod profile;
mod rejection;
#[cfg(feature = "hub")]
mod sync;
mod telemetry;
#[cfg(test)]
mod testing;

pub use self::advertise::Era;
pub use self::capabilities::layer::CapabilitiesLayer;
pub use self::capabilities::service::Capabilities;
pub use self::edge::layer::EdgeLayer;
pub use self::edge::service::Edge;
pub use self::filter::stream::covers;
pub use self::filter::{honour, HonouredFilter, Kind, Kinds, ListChanged, ListenError, Topic};
pub use self::hooks::{
    CapabilityNarrowing, ExtensionPrincipal, HookFuture, Principal, PrincipalLookup,
    ResourceAccess, SubscriptionHook, TaskDirectory,
};
pub use self::http::body::RequestBody;
pub use self::listen_filter::layer::ListenFilterLayer;
pub use self::listen_filter::service::ListenFilter;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use self::metrics::describe as describe_metrics;
pub use self::profile::{BuildError, Limits, ServerProfile, ServerProfileBuilder, UnreadableUris};
pub use self::rejection::Rejection;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use self::telemetry::OPERATION_SECONDS;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
