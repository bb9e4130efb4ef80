use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::ResponseFuture;
use super::CapabilitiesLayer;
use crate::peek::{content_length, header_method, is_encoded, is_inspected, Peek};
use crate::replay::ReplayBody;
use crate::scan::Method;
use crate::{Rejection, ResponseBody, ServerProfile};

/// Middleware that fills in the `capabilities` of every `initialize`
/// (legacy era) and `server/discover` (modern era) result from a
/// [`ServerProfile`].
///
/// See the [module docs](crate::capabilities) for an example.
///
/// Request and response bodies must be `Unpin`, as hyper's, axum's and
/// tonic's are: the future reads a body before handing it on.
#[derive(Debug, Clone)]
pub struct Capabilities<S> {
    inner: S,
    profile: ServerProfile,
}

impl<S> Capabilities<S> {
    /// Wraps `inner`, advertising what `profile` offers.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self { inner, profile }
    }

    /// Returns a new [`Layer`](tower_layer::Layer) that wraps services with a [`Capabilities`] middleware.
    pub fn layer(profile: ServerProfile) -> CapabilitiesLayer {
        CapabilitiesLayer::new(profile)
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Capabilities<S>
where
    S: Service<Request<ReplayBody<ReqBody>>, Response = Response<ResBody>> + Clone,
    ReqBody: Body + Unpin,
    ResBody: Body + Unpin,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody, ResBody>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (parts, body) = request.into_parts();
        if !is_inspected(&parts.method, &parts.headers) || is_encoded(&parts.headers) {
            let request = Request::from_parts(parts, ReplayBody::pass_through(body));
            return ResponseFuture::calling(self.inner.call(request), self.profile.clone());
        }
        // The response to this request is decided only once its body was
        // peeked, so the future calls the inner service later. Take the
        // service that `poll_ready` readied and leave a clone in its place.
        let limit = self.profile.limits().max_listen_body;
        let named = header_method(&parts.headers);
        if named.is_some_and(Method::is_intercepted)
            && content_length(&parts.headers).is_some_and(|n| n > limit as u64)
        {
            return ResponseFuture::rejected(
                Rejection::BodyTooLarge { limit },
                self.profile.clone(),
            );
        }
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let peek = Peek::new(body, limit);
        ResponseFuture::peeking(inner, parts, peek, named, self.profile.clone())
    }
}
