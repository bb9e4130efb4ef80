//! Runtime-free codecs: the JSON walker, the method scanner and the SSE
//! codec. They know nothing of HTTP or tower, so each can be read, tested
//! and fuzzed on its own.

pub(crate) mod json;
pub(crate) mod scan;
pub(crate) mod sse;
mod text;
