use super::layer::ListenFilterLayer;
use crate::macros::response_body;

response_body! {
    /// Response body of [`ListenFilter`](super::ListenFilter).
    ///
    /// The inner service's body untouched, an answer the layer wrote itself,
    /// or a listen stream kept within the honoured filter event by event.
    pub struct ResponseBody, rules: ListenFilterLayer
}
