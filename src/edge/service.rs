use super::{EdgeLayer, ResponseBody, ResponseFuture};
use crate::http::reply::middleware;
use crate::ServerProfile;

middleware! {
    /// Middleware that keeps both promises, those of
    /// [`Capabilities`](crate::Capabilities) and
    /// [`ListenFilter`](crate::ListenFilter), with one read of each body.
    ///
    /// See the [module docs](crate::edge) for an example.
    pub struct Edge, layer: EdgeLayer, rules: |layer| &layer.rules
}

impl<S> Edge<S> {
    /// Wraps `inner`, advertising what `profile` offers and honouring listen
    /// filters by it.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self::from_layer(inner, EdgeLayer::new(profile))
    }
}
