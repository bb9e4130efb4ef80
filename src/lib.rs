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
//! ```
//! use mcp_edge::{EdgeLayer, Principal, ServerProfile};
//! use tower::{service_fn, ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let profile = ServerProfile::builder()
//!     .base_capabilities(serde_json::json!({"tools": {}, "resources": {}}))
//!     .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
//!         let signed_in = caller.is_some();
//!         std::future::ready(uris.iter().map(|u| signed_in || u.starts_with("demo://public/")).collect())
//!     })
//!     .build()?;
//!
//! // Auth and compression go outside; the edge sits next to the server.
//! let server = service_fn(|_| async { Ok::<_, std::convert::Infallible>(http::Response::new(String::new())) });
//! let edge = ServiceBuilder::new().layer(EdgeLayer::new(profile)).service(server);
//! let listen = http::Request::post("/mcp").header("content-type", "application/json")
//!     .body(r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":"yes"}}}"#.to_owned())?;
//! let response = edge.oneshot(listen).await?;
//! // A malformed filter never reaches the server.
//! assert_eq!(response.status(), 400);
//! # Ok(())
//! # }
//! ```
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
pub mod hub;
pub mod jsonrpc;
pub mod listen_filter;
mod macros;
mod profile;
mod rejection;
#[cfg(feature = "hub")]
mod sync;
#[cfg(test)]
mod testing;

pub use self::advertise::Era;
pub use self::capabilities::{Capabilities, CapabilitiesLayer};
pub use self::edge::{Edge, EdgeLayer};
pub use self::filter::{honour, HonouredFilter, Kind, Kinds, ListChanged, ListenError, Topic};
pub use self::hooks::{
    CapabilityNarrowing, ExtensionPrincipal, HookFuture, Principal, PrincipalLookup,
    ResourceAccess, SubscriptionHook, TaskDirectory,
};
pub use self::http::RequestBody;
pub use self::listen_filter::{ListenFilter, ListenFilterLayer};
pub use self::profile::{BuildError, Limits, ServerProfile, ServerProfileBuilder, UnreadableUris};
pub use self::rejection::Rejection;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
