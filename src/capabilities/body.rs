use super::layer::CapabilitiesLayer;
use crate::macros::response_body;

response_body! {
    /// Response body of [`Capabilities`](super::Capabilities).
    ///
    /// The inner service's body untouched, an answer the layer rewrote or
    /// wrote itself, or an SSE stream whose result event is rewritten.
    pub struct ResponseBody, rules: CapabilitiesLayer
}
