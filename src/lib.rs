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
//! ```
//! use mcp_edge::{CapabilitiesLayer, ListenFilterLayer, Principal, ServerProfile};
//! use tower::ServiceBuilder;
//!
//! let profile = ServerProfile::builder()
//!     .base_capabilities(serde_json::json!({"tools": {}, "resources": {}}))
//!     .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
//!         let signed_in = caller.is_some();
//!         std::future::ready(uris.iter().map(|u| signed_in || u.starts_with("demo://public/")).collect())
//!     })
//!     .build()?;
//!
//! // Auth goes outside (it puts the `Principal` in the request extensions),
//! // compression outside too; the two mcp-edge layers sit next to the server.
//! let stack = ServiceBuilder::new()
//!     .layer(CapabilitiesLayer::new(profile.clone()))
//!     .layer(ListenFilterLayer::new(profile));
//! # let _ = stack;
//! # Ok::<(), mcp_edge::BuildError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod body;
pub mod capabilities;
mod era;
mod event_stream;
mod filter;
#[doc(hidden)]
pub mod fuzzing;
mod hooks;
mod json;
pub mod jsonrpc;
pub mod listen_filter;
mod peek;
mod profile;
mod rejection;
mod replay;
mod scan;
mod sse;
mod swar;

pub use body::ResponseBody;
pub use capabilities::{Capabilities, CapabilitiesLayer};
pub use era::Era;
pub use filter::{honour, HonouredFilter, Kind, Kinds, ListenError, Topic};
pub use hooks::{
    CapabilityNarrowing, ExtensionPrincipal, HookFuture, Principal, PrincipalLookup,
    ResourceAccess, SubscriptionHook, TaskDirectory,
};
pub use listen_filter::{ListenFilter, ListenFilterLayer};
pub use profile::{BuildError, Limits, ServerProfile, ServerProfileBuilder, UnreadableUris};
pub use rejection::Rejection;
pub use replay::ReplayBody;

/// The README's examples, compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
