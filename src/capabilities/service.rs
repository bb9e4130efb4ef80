use std::convert::Infallible;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::layer::CapabilitiesLayer;
use super::rewrite::Target;
use crate::advertise::Era;
use crate::codec::scan::Method;
use crate::http::body::RequestBody;
use crate::http::classify::{Classified, Head, Interest, Shape};
use crate::http::event_stream::Unscreened;
use crate::http::intercept::{self, Decision, Later, Rules, Settings, Take};
use crate::http::peek::Peek;
use crate::profile::ServerProfile;
use crate::rejection::Rejection;

/// Middleware that fills in the `capabilities` of every `initialize`
/// (legacy era) and `server/discover` (modern era) result from a
/// [`ServerProfile`].
///
/// See the [module docs](crate::capabilities) for an example.
#[derive(Debug, Clone)]
pub struct Capabilities<S> {
    inner: S,
    layer: CapabilitiesLayer,
}

impl<S> Capabilities<S> {
    /// Wraps `inner`, advertising what `profile` offers.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self::from_layer(inner, CapabilitiesLayer::new(profile))
    }

    /// Whether to keep scanning other request bodies for a second `method`
    /// (default `true`); see [`CapabilitiesLayer::scan_pass_through`].
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.layer = self.layer.scan_pass_through(scan);
        self
    }

    pub(super) fn from_layer(inner: S, layer: CapabilitiesLayer) -> Self {
        Self { inner, layer }
    }

    /// Returns a new [`Layer`](tower_layer::Layer) that wraps services with [`Capabilities`].
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
        ResponseFuture::new(intercept::call(&self.layer, &mut self.inner, request))
    }
}

/// `initialize` and `server/discover`.
pub(super) const INTEREST: Interest = Interest::of(&[Method::Initialize, Method::Discover]);

fn era_of(method: Method) -> Option<Era> {
    match method {
        Method::Initialize => Some(Era::Legacy),
        Method::Discover => Some(Era::Modern),
        Method::Listen | Method::Subscribe | Method::Other => None,
    }
}

/// The capabilities layer takes over `initialize` and `server/discover`
/// requests and rewrites the inner service's answer to them; it passes
/// everything else on.
impl Rules for CapabilitiesLayer {
    type Take = Target;
    type Whole = Infallible;
    type Screen = Unscreened;

    fn settings(&self) -> Settings {
        self.settings
    }

    fn check_head(&self, head: &Head) -> Result<(), Rejection> {
        // Never fail open: an intercepted request too long to read is refused.
        let limit = self.settings.limits.for_first(head.named);
        if head.named.is_some_and(Method::is_intercepted) && head.longer_than(limit) {
            return Err(Rejection::BodyTooLarge { limit });
        }
        Ok(())
    }

    fn decide<B: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        peek: &Peek<B>,
        parts: &Parts,
    ) -> Decision<Self> {
        let method = classified.method();
        if head.disguises(method, INTEREST) {
            return Decision::Refuse(Rejection::HeaderMismatch);
        }
        if classified.shape == Shape::TooLarge && classified.first != Some(Method::Other) {
            // Never fail open: past the limit an `initialize` could hide, and
            // an oversized one is refused, not passed on unrewritten.
            let limit = self.settings.limits.for_first(classified.first);
            return Decision::Refuse(Rejection::BodyTooLarge { limit });
        }
        let Some(era) = method.and_then(era_of) else {
            // Another method, a batch (looked into whole by the plumbing),
            // or none: not the layer's to take.
            return Decision::Pass;
        };
        // An intercepted method is decided once the whole request is in the
        // peek (at its closing brace, or at its end when the rest after the
        // method is plain), and its id with it.
        let Some(id) = peek.id_text() else {
            // A notification, or an id no answer could be matched to: the
            // answer could not be told from another.
            return Decision::Refuse(Rejection::InvalidRequest(match era {
                Era::Legacy => "an `initialize` request must carry one string or number `id`",
                Era::Modern => "a `server/discover` request must carry one string or number `id`",
            }));
        };
        // The caller matters only to a profile that narrows per caller.
        let caller = self
            .profile
            .narrows_per_caller()
            .then(|| self.profile.principal(parts))
            .flatten();
        Decision::Take(Target::new(id, era, self.profile.clone(), caller.as_ref()))
    }

    fn whole<T, F>(&self, whole: Infallible, _: Parts, _: Bytes, _: F) -> Later<T> {
        match whole {}
    }

    fn screen(&self, _: &Parts) -> Option<Unscreened> {
        None
    }

    fn in_batch(&self, method: Method) -> &'static str {
        match method {
            Method::Initialize => "a batch must not contain an `initialize` request",
            _ => "a batch must not contain a `server/discover` request",
        }
    }
}

/// The answer to an `initialize` or `server/discover` is always rewritten;
/// an event stream answering it is screened like any other (by a listen
/// filter the layer is combined with).
impl Take for Target {
    type Answer = Target;

    fn into_answer(self) -> Option<Target> {
        Some(self)
    }

    fn screens(&self) -> bool {
        true
    }
}
