//! Middleware that makes every listen stream carry only what its caller may see.
//!
//! [`ListenFilterLayer`](crate::ListenFilterLayer) recognizes a `subscriptions/listen` request by the
//! JSON-RPC `method` in its body, buffers it within the profile's body
//! limit, and honours its `notifications` filter for the caller (see
//! [`honour`](crate::honour)). On success it rewrites the body so that
//! `params.notifications` is exactly the honoured ack, inserts the
//! [`HonouredFilter`](crate::HonouredFilter) into the request extensions and
//! calls the inner service; an inner service that ignores the extension
//! still sees only the honoured subset. Errors are answered by the layer
//! itself; the inner service is not called.
//!
//! The `Mcp-Method` header is a hint only: a request whose header and body
//! disagree, where either is `subscriptions/listen`, is answered with
//! -32020. Other requests pass through, read only as far as their `method`.
//!
//! The legacy era's `resources/subscribe` is intercepted the same way: its
//! `params.uri` must be a string (else -32602), readable by the caller
//! (else -32002, alike for a URI that does not exist) and accepted by the
//! subscription hook (else -32602); an accepted one reaches the inner
//! service byte for byte. One of the 2026-07-28 era, which removed the
//! method, is answered 404 with -32601.
//!
//! The guard (on by default, [`ListenFilterLayer::guard_stream`](crate::ListenFilterLayer::guard_stream)) rules
//! every answer to an honoured listen, whatever its `Content-Type` or
//! `Content-Encoding`. The listen reaches the inner service without
//! `Accept-Encoding`; an answer compressed anyway is replaced by a JSON-RPC
//! error (-32603) for the listen id, and one that is not an event stream
//! passes only as the listen's own answer (an error status whose body holds
//! no JSON-RPC `result` passes as it came, with its status). On an event
//! stream only these pass, each re-checked against the honoured filter: the
//! acknowledgment, rebuilt as the honoured ack narrowed to the inner's and
//! the subscription tag (sent first if the inner did not); the honoured
//! list-changed kinds; `notifications/resources/updated` for a covered URI;
//! `notifications/tasks` for an honoured task; the listen's own answer (its
//! error, or its `result` reduced to `_meta` and `resultType`); comments.
//! Everything else is dropped and counted: other methods, requests, answers
//! to other ids, batches, data that is not one JSON value, ambiguous or
//! foreign subscription tags, an unterminated last block. An event whose
//! bytes hold anything the guard did not parse is written anew from its
//! parsed fields.
//!
//! Every other event stream (a legacy session's GET stream, the SSE answer
//! of a `POST`) is screened whenever the profile has a
//! [`ResourceAccess`](crate::ResourceAccess) hook: a
//! `notifications/resources/updated` for a URI the caller may not read, or
//! without one clear URI, is dropped; the hook is asked through the
//! profile's per-(caller, URI) decision cache
//! ([`access_ttl`](crate::ServerProfileBuilder::access_ttl)); everything
//! else passes as parsed ([`ListenFilterLayer::check_updates`](crate::ListenFilterLayer::check_updates)).
//!
//! A request with another method is read only as far as needed and replayed;
//! it keeps being scanned as the inner service reads it, and a body with a
//! second top-level `method` is cut short, so a parser that keeps the last
//! of duplicate keys never sees a listen the layer did not honour (a body
//! already read whole whose rest spells neither `method` nor a backslash
//! needs no scan; [`ListenFilterLayer::scan_pass_through`](crate::ListenFilterLayer::scan_pass_through) switches the scan
//! off for inner services that refuse duplicate members themselves). What
//! is looked into is the one rule every mcp-edge layer follows: every
//! `POST`, whatever its `Content-Type` (a lenient inner service parses any
//! body); one that cannot be read as JSON up to its `method` is answered
//! with -32700, a batch naming a listen and a listen without an `id` with
//! -32600, and an `Mcp-Method` that does not decode (`=?base64?…?=` is
//! decoded first) or is repeated with -32020. The body is read in the
//! chunks it comes in; one whose method is not known once more than the profile's
//! [`max_peek`](crate::Limits::max_peek) was read (a listen: more than its
//! [`max_listen_body`](crate::Limits::max_listen_body)) is answered with
//! 413, and a compressed one is refused with 415: place the layer inside
//! request decompression. A `notifications/resources/updated` is honoured for an
//! honoured URI and for every URI below it by path (`file:///logs` covers
//! `file:///logs/today`, not `file:///logs2`); a URI with a `.` or `..`
//! path segment, raw or as `%2e`, only by itself.
//!
//! To keep both promises, [`EdgeLayer`](crate::EdgeLayer) applies this layer
//! and [`CapabilitiesLayer`](crate::CapabilitiesLayer) with one read of each
//! body.
//!
//! # Example
//!
//! ```
//! use axum::{routing::post, Extension, Router};
//! use http_body_util::BodyExt;
//! use mcp_edge::{HonouredFilter, ListenFilterLayer, Principal, ServerProfile};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let profile = ServerProfile::builder()
//!     .resource_access(|caller: Option<&Principal>, uris: &[&str]| {
//!         let anonymous = caller.is_none();
//!         std::future::ready(uris.iter().map(|uri| !anonymous || uri.starts_with("demo://public/")).collect())
//!     })
//!     .build()
//!     .unwrap();
//!
//! // The inner handler sees the honoured filter, in the body and as an
//! // extension, and acknowledges it on the listen's event stream.
//! let app = Router::new()
//!     .route("/mcp", post(|Extension(filter): Extension<HonouredFilter>| async move {
//!         let ack = format!(
//!             r#"data: {{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{{"notifications":{}}}}}"#,
//!             filter.ack().get()
//!         );
//!         ([("content-type", "text/event-stream")], ack + "\n\n")
//!     }))
//!     .layer(ListenFilterLayer::new(profile));
//!
//! let request = http::Request::post("/mcp")
//!     .header("content-type", "application/json")
//!     .body(axum::body::Body::from(r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen",
//!         "params":{"notifications":{"toolsListChanged":true,
//!         "resourceSubscriptions":["demo://public/readme","demo://users/alice/notes"]}}}"#))
//!     .unwrap();
//! let response = app.oneshot(request).await.unwrap();
//! let stream = response.into_body().collect().await.unwrap().to_bytes();
//! let event = std::str::from_utf8(&stream).unwrap();
//! assert_eq!(
//!     event,
//!     "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":\
//!      {\"notifications\":{\"toolsListChanged\":true,\"resourceSubscriptions\":[\"demo://public/readme\"]},\
//!      \"_meta\":{\"io.modelcontextprotocol/subscriptionId\":1}}}\n\n"
//! );
//! # }
//! ```
//!
//! # Files
//!
//! `layer.rs` ([`ListenFilterLayer`](crate::ListenFilterLayer)),
//! `service.rs` ([`ListenFilter`](crate::ListenFilter), its `Service` and its
//! rules for the engine in `http/intercept`), `future.rs` and `body.rs` (its
//! [`ResponseFuture`] and [`ResponseBody`]), `request.rs` (a listen and a
//! legacy `resources/subscribe`, honoured or refused), `guard.rs` (the stream
//! guard of a listen's answer), `live.rs` (the subscription ids of the open
//! listens it guards), `updates.rs` (the screen of every other event
//! stream), `tests/` (one file per concern).

mod body;
mod future;
mod guard;
pub(crate) mod layer;
mod live;
mod request;
pub(crate) mod service;
mod updates;

pub use self::body::ResponseBody;
pub use self::future::ResponseFuture;

#[cfg(test)]
mod tests;

/// What leaves the stream guard of `filter` for the listen stream `chunks`
/// (one stream, delivered in these chunks): its bytes. For the fuzz targets
/// and property tests; only with the private feature `fuzzing`, not part of
/// the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_guard(filter: &crate::filter::HonouredFilter, chunks: &[&[u8]]) -> Vec<u8> {
    crate::http::ready::ruled(chunks, guard::Guard::new(filter.clone(), None))
}
