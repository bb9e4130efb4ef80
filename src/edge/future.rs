use super::ResponseBody;
use crate::macros::response_future;
use crate::{CapabilitiesLayer, ListenFilterLayer};

response_future! {
    /// Response future for [`Edge`](super::Edge).
    pub struct ResponseFuture, rules: (CapabilitiesLayer, ListenFilterLayer), body: ResponseBody
}
