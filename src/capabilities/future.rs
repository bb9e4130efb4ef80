use super::body::ResponseBody;
use super::layer::CapabilitiesLayer;
use crate::macros::response_future;

response_future! {
    /// Response future for [`Capabilities`](super::Capabilities).
    pub struct ResponseFuture, rules: CapabilitiesLayer, body: ResponseBody
}
