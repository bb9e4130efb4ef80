//! Runtime-free codecs: the JSON walker, the method scanner and the SSE
//! codec. They know nothing of HTTP or tower, so each can be read, tested
//! and fuzzed on its own.
//!
//! Files: `json.rs` (one JSON walker in two modes), `scan.rs` (the method
//! scanner: a fast path over a first chunk, and a byte-wise grammar that
//! resumes across chunks), `sse.rs` (the SSE codec), `text.rs` (byte
//! searches).

pub(crate) mod json;
pub(crate) mod scan;
pub(crate) mod sse;
mod text;
