//! Tower plumbing the layers share and that knows none of them: which
//! requests are looked into ([`classify`]), reading a body as far as needed
//! ([`peek`]), handing it on ([`rewind`], [`watch`], [`RequestBody`]),
//! ruling an event stream event by event ([`event_stream`]), and the call
//! and future every layer runs over its rules ([`intercept`]).

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
