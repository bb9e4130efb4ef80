//! Middleware that keeps both promises with one read of each body.
//!
//! [`EdgeLayer`](crate::EdgeLayer) is [`CapabilitiesLayer`](crate::CapabilitiesLayer) and
//! [`ListenFilterLayer`](crate::ListenFilterLayer) in one: every
//! `initialize` and `server/discover` answer advertises exactly the
//! profile's capabilities, and every listen stream carries only what its
//! caller may see. It answers every request exactly as the two layers
//! stacked would (capabilities outside), but its head is read once, its body
//! peeked and scanned once, and a body it hands on is watched for a second
//! `method` once. Use it whenever both promises are wanted; the two layers
//! stay for a deployment that wants one only.
//!
//! # Example
//!
//! ```
//! use axum::{routing::post, Router};
//! use http_body_util::BodyExt;
//! use mcp_edge::{EdgeLayer, ServerProfile};
//! use serde_json::{json, Value};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let profile = ServerProfile::builder()
//!     .base_capabilities(json!({"tools": {}}))
//!     .build()
//!     .unwrap();
//!
//! // An inner server that advertises more than it serves.
//! let app = Router::new()
//!     .route("/mcp", post(|| async {
//!         axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {
//!             "resultType": "complete", "capabilities": {"tools": {}, "prompts": {}}
//!         }}))
//!     }))
//!     .layer(EdgeLayer::new(profile));
//!
//! let discover = http::Request::post("/mcp")
//!     .header("content-type", "application/json")
//!     .body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#))
//!     .unwrap();
//! let response = app.clone().oneshot(discover).await.unwrap();
//! let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
//! assert_eq!(body["result"]["capabilities"], json!({"tools": {"listChanged": true}, "logging": {}}));
//!
//! // A listen in disguise never reaches it.
//! let disguised = http::Request::post("/mcp")
//!     .header("content-type", "application/json")
//!     .body(axum::body::Body::from(r#"{"id":2,"method":"tools/list","method":"subscriptions/listen"}"#))
//!     .unwrap();
//! assert_eq!(app.oneshot(disguised).await.unwrap().status(), 400);
//! # }
//! ```
//!
//! # Files
//!
//! `layer.rs` ([`EdgeLayer`](crate::EdgeLayer): the two layers' rules as a
//! pair), `service.rs` ([`Edge`](crate::Edge)), `future.rs` and `body.rs` (its
//! [`ResponseFuture`] and [`ResponseBody`]), `tests.rs`.

mod body;
mod future;
pub(crate) mod layer;
pub(crate) mod service;
#[cfg(test)]
mod tests;

pub use self::body::ResponseBody;
pub use self::future::ResponseFuture;
