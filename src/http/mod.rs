//! Tower plumbing the layers share and that knows none of them: which
//! requests are looked into ([`classify`]), reading a body as far as needed
//! ([`peek`]), handing it on ([`rewind`], [`watch`], [`RequestBody`]),
//! ruling an event stream event by event ([`event_stream`]), and the call
//! and future every layer runs over its rules ([`intercept`]).
//!
//! Files: `classify.rs` (the head and the body's shape), `peek.rs`,
//! `rewind.rs`, `watch.rs`, `body.rs` (the request body a layer hands on),
//! `once.rs` (the one-shot body of a layer's own answers), `ready.rs` (bodies
//! whose frames are at hand, for the fuzz targets), `event_stream.rs`,
//! `reply.rs` (the answer a layer hands back), and `intercept/`, the engine.

pub(crate) mod body;
pub(crate) mod classify;
pub(crate) mod event_stream;
pub(crate) mod intercept;
pub(crate) mod once;
pub(crate) mod peek;
#[cfg(feature = "fuzzing")]
pub(crate) mod ready;
pub(crate) mod reply;
pub(crate) mod rewind;
mod watch;
