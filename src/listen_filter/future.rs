use super::body::ResponseBody;
use super::layer::ListenFilterLayer;
use crate::macros::response_future;

response_future! {
    /// Response future for [`ListenFilter`](super::ListenFilter).
    pub struct ResponseFuture, rules: ListenFilterLayer, body: ResponseBody
}
