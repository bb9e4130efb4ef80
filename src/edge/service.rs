use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::layer::EdgeLayer;
use crate::http::body::RequestBody;
use crate::http::intercept;
use crate::profile::ServerProfile;

/// Middleware that keeps both promises, those of
/// [`Capabilities`](crate::Capabilities) and
/// [`ListenFilter`](crate::ListenFilter), with one read of each body.
///
/// See the [module docs](crate::edge) for an example.
#[derive(Debug, Clone)]
pub struct Edge<S> {
    inner: S,
    layer: EdgeLayer,
}

impl<S> Edge<S> {
    /// Wraps `inner`, advertising what `profile` offers and honouring listen
    /// filters by it.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self::from_layer(inner, EdgeLayer::new(profile))
    }

    pub(super) fn from_layer(inner: S, layer: EdgeLayer) -> Self {
        Self { inner, layer }
    }

    /// Returns a new [`Layer`](tower_layer::Layer) that wraps services with [`Edge`].
    pub fn layer(profile: ServerProfile) -> EdgeLayer {
        EdgeLayer::new(profile)
    }

    /// Gets a reference to the inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Gets a mutable reference to the inner service.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// Consumes `self`, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Edge<S>
where
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>> + Clone,
    ReqBody: Body,
    ResBody: Body + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        ResponseFuture::new(intercept::call(&self.layer.rules, &mut self.inner, request))
    }
}
