use super::{ListenFilterLayer, ResponseBody};
use crate::http::reply::response_future;

response_future! {
    /// Response future for [`ListenFilter`](super::ListenFilter).
    pub struct ResponseFuture, rules: ListenFilterLayer, body: ResponseBody
}
