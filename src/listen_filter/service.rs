use std::task::{Context, Poll};

use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::ResponseFuture;
use super::ListenFilterLayer;
use crate::peek::{content_length, header_method, is_encoded, is_json, Peek};
use crate::replay::ReplayBody;
use crate::scan::Method;
use crate::{Rejection, ResponseBody, ServerProfile};

/// Middleware that turns the `notifications` filter of every
/// `subscriptions/listen` request into the honoured filter for its caller.
///
/// See the [module docs](crate::listen_filter) for an example.
///
/// Request and response bodies must be `Unpin`, as hyper's, axum's and
/// tonic's are: the future reads a body before handing it on.
#[derive(Debug, Clone)]
pub struct ListenFilter<S> {
    inner: S,
    profile: ServerProfile,
    guard_stream: bool,
    scan_pass_through: bool,
}

impl<S> ListenFilter<S> {
    /// Wraps `inner`, honouring listen filters by `profile`.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self {
            inner,
            profile,
            guard_stream: true,
            scan_pass_through: true,
        }
    }

    /// Returns a new [`Layer`](tower_layer::Layer) that wraps services with a [`ListenFilter`] middleware.
    pub fn layer(profile: ServerProfile) -> ListenFilterLayer {
        ListenFilterLayer::new(profile)
    }

    /// Whether to guard the listen response stream (default `true`).
    pub fn guard_stream(mut self, guard: bool) -> Self {
        self.guard_stream = guard;
        self
    }

    /// Whether to keep scanning other JSON request bodies for a second
    /// `method` (default `true`); see
    /// [`ListenFilterLayer::scan_pass_through`].
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.scan_pass_through = scan;
        self
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ListenFilter<S>
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
        let named = header_method(&parts.headers);
        // A POST without a content type is inspected too: a lenient inner
        // service might read it as JSON.
        let inspected = parts.method == http::Method::POST
            && (is_json(&parts.headers)
                || !parts.headers.contains_key(http::header::CONTENT_TYPE)
                || named == Some(Method::Listen));
        if !inspected {
            let request = Request::from_parts(parts, ReplayBody::pass_through(body));
            return ResponseFuture::calling(self.inner.call(request), None);
        }
        let limit = self.profile.limits().max_listen_body;
        if is_encoded(&parts.headers) {
            return ResponseFuture::rejected(Rejection::Encoded, None);
        }
        if named == Some(Method::Listen)
            && content_length(&parts.headers).is_some_and(|n| n > limit as u64)
        {
            return ResponseFuture::rejected(Rejection::BodyTooLarge { limit }, None);
        }
        // Whether the inner service is called is decided only once the
        // body was read, so the future calls it later. Take the service that
        // `poll_ready` readied and leave a clone in its place.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let peek = match self.scan_pass_through {
            true => Peek::watching(body, limit),
            false => Peek::new(body, limit),
        };
        ResponseFuture::peeking(
            inner,
            parts,
            peek,
            named,
            self.profile.clone(),
            self.guard_stream,
        )
    }
}
