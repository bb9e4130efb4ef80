use crate::capabilities::layer::CapabilitiesLayer;
use crate::listen_filter::layer::ListenFilterLayer;
use crate::macros::response_body;

response_body! {
    /// Response body of [`Edge`](super::Edge).
    ///
    /// The inner service's body untouched, an answer the layer rewrote or
    /// wrote itself, or an SSE stream ruled event by event: the result event
    /// of an `initialize` or `server/discover` rewritten, a listen stream
    /// kept within its honoured filter.
    pub struct ResponseBody, rules: (CapabilitiesLayer, ListenFilterLayer)
}
