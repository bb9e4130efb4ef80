use super::body::ResponseBody;
use crate::capabilities::layer::CapabilitiesLayer;
use crate::listen_filter::layer::ListenFilterLayer;
use crate::macros::response_future;

response_future! {
    /// Response future for [`Edge`](super::Edge).
    pub struct ResponseFuture, rules: (CapabilitiesLayer, ListenFilterLayer), body: ResponseBody
}
