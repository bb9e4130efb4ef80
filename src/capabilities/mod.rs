//! Middleware that makes a server advertise exactly what it serves.
//!
//! [`CapabilitiesLayer`](crate::CapabilitiesLayer) lets the inner service answer `initialize` (legacy
//! era) and `server/discover` (modern era) requests, then replaces the
//! managed keys of `result.capabilities` in a success response for that
//! request with the [`ServerProfile`](crate::ServerProfile)'s capabilities
//! for the era. Keys the profile does not manage (`experimental`, foreign
//! `extensions` entries) stay as the inner service set them, and every other
//! byte of the response is kept. A result with `capabilities` twice has both
//! replaced, merged from the last one, so a parser that keeps the first of
//! duplicate keys reads what one that keeps the last reads. JSON and SSE
//! responses are both handled; in an SSE response only the event carrying
//! the result is rewritten.
//!
//! Every answer to an intercepted request is inspected, whatever its
//! `Content-Type` (JSON, any `+json`, event stream, another type, none): it
//! reaches the inner service without its `Accept-Encoding`, so it comes
//! back uncompressed. A JSON-RPC error answer and an empty body pass as
//! they came, and so does any answer that cannot carry capabilities: an
//! error status (not 2xx) whose body holds no JSON-RPC `result` (plain text
//! such as rmcp's 400 "Session ID is required", a JSON-RPC error, HTML)
//! keeps its status, headers and body, so that a client may act on it. An
//! error status whose body may hold a `result`, in any spelling a lenient
//! client reads (`Result`, escaped, after other text, or text with a NUL
//! byte, which a reader may take for UTF-16), is checked like a success,
//! and keeps its status when it is rewritten. Anything the layer cannot
//! turn into an answer carrying exactly the profile's managed capabilities
//! is replaced by a JSON-RPC error (-32603, status 500, for the request
//! id): a body that is not one JSON object, an answer for another id, an
//! `id`, `error` or `method` twice (every `result` is rewritten, however
//! many), a result and an error at once, a `result` or `capabilities` that
//! is not an object, an answer longer than `max_rewritten_response`, a
//! compressed answer (logged as a warning: compression belongs outside the
//! layer). On an SSE answer each event is judged: notifications and
//! requests pass, answers to other ids are dropped, the answer is rewritten
//! or replaced, an event whose `data` holds more than one JSON value is
//! replaced, a second answer is dropped, and an unterminated last block is
//! replaced when no answer was sent (dropped otherwise).
//!
//! Every other request
//! reaches the inner service untouched: its body is read only until its
//! top-level `method` is known and then replayed, never buffered whole.
//!
//! What is looked into is the one rule every mcp-edge layer follows: every
//! `POST`, whatever its `Content-Type` (a lenient inner service parses any
//! body). A body that cannot be read as JSON up to its top-level `method`
//! is answered with -32700; one with a second top-level `method`, a batch
//! naming `initialize` or `server/discover`, and either of them without an
//! `id` with -32600. Like [`ListenFilterLayer`](crate::ListenFilterLayer),
//! the layer keeps scanning other bodies as the inner service reads them
//! and cuts them short at a second `method`
//! ([`CapabilitiesLayer::scan_pass_through`](crate::CapabilitiesLayer::scan_pass_through)). `Mcp-Method` is decoded
//! first (`=?base64?…?=`); a request whose header and body `method`
//! disagree, where either is `initialize` or `server/discover`, or whose
//! header does not decode or is repeated, is answered with -32020. The body is
//! read in the chunks it comes in, and an `initialize` or `server/discover`
//! not decided once more than the profile's
//! [`max_peek`](crate::Limits::max_peek) was read is answered with 413, as
//! is one whose `Mcp-Method` names it and whose `Content-Length` is over
//! that limit, and so is a body with more than `max_peek` bytes before its
//! first `method`. A compressed request body is answered with 415.
//!
//! To keep both promises, [`EdgeLayer`](crate::EdgeLayer) applies this layer
//! and [`ListenFilterLayer`](crate::ListenFilterLayer) with one read of
//! each body.
//!
//! # Example
//!
//! ```
//! use axum::{routing::post, Router};
//! use http_body_util::BodyExt;
//! use mcp_edge::{CapabilitiesLayer, ServerProfile};
//! use serde_json::{json, Value};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let profile = ServerProfile::builder()
//!     .base_capabilities(json!({"tools": {"listChanged": false}}))
//!     .build()
//!     .unwrap();
//!
//! // An inner server that advertises more than it serves.
//! let app = Router::new()
//!     .route("/mcp", post(|| async {
//!         axum::Json(json!({"jsonrpc": "2.0", "id": 1, "result": {
//!             "resultType": "complete",
//!             "capabilities": {"tools": {}, "prompts": {}, "experimental": {"x": {}}}
//!         }}))
//!     }))
//!     .layer(CapabilitiesLayer::new(profile));
//!
//! let request = http::Request::post("/mcp")
//!     .header("content-type", "application/json")
//!     .header("mcp-method", "server/discover")
//!     .body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#))
//!     .unwrap();
//! let response = app.oneshot(request).await.unwrap();
//! let body = response.into_body().collect().await.unwrap().to_bytes();
//! let body: Value = serde_json::from_slice(&body).unwrap();
//! assert_eq!(
//!     body["result"]["capabilities"],
//!     json!({"tools": {"listChanged": true}, "logging": {}, "experimental": {"x": {}}})
//! );
//! # }
//! ```
//!
//! # Files
//!
//! `layer.rs` ([`CapabilitiesLayer`](crate::CapabilitiesLayer), its
//! settings), `service.rs` ([`Capabilities`](crate::Capabilities), its
//! `Service` and its rules for the engine in `http/intercept`), `future.rs` and
//! `body.rs` (its [`ResponseFuture`] and [`ResponseBody`]), `rewrite.rs` (what
//! an answer is rewritten with, in JSON and in SSE), `tests/` (one file per
//! concern).

mod body;
mod future;
pub(crate) mod layer;
mod rewrite;
pub(crate) mod service;

pub use self::body::ResponseBody;
pub use self::future::ResponseFuture;

#[cfg(test)]
mod tests;
