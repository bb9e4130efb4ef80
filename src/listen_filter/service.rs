use std::task::{Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response};
use http_body::Body;
use tower_service::Service;

use super::body::ResponseBody;
use super::future::ResponseFuture;
use super::guard::ListenAnswer;
use super::layer::ListenFilterLayer;
use super::request::InterceptedRequest;
use super::updates::Updates;
use crate::codec::scan::{Method, Outcome};
use crate::filter::honour_at;
use crate::filter::stream::ended_at_once;
use crate::filter::HonouredFilter;
use crate::http::body::RequestBody;
use crate::http::classify::{Classified, Head, Interest, Shape};
use crate::http::intercept::{self, Decision, Later, Refusal, Rules, Settings, Take};
use crate::http::peek::Peek;
use crate::metrics;
use crate::profile::ServerProfile;
use crate::rejection::Rejection;

/// Middleware that turns the `notifications` filter of every
/// `subscriptions/listen` request into the honoured filter for its caller.
///
/// See the [module docs](crate::listen_filter) for an example.
#[derive(Debug, Clone)]
pub struct ListenFilter<S> {
    inner: S,
    layer: ListenFilterLayer,
}

impl<S> ListenFilter<S> {
    /// Wraps `inner`, honouring listen filters by `profile`.
    pub fn new(inner: S, profile: ServerProfile) -> Self {
        Self::from_layer(inner, ListenFilterLayer::new(profile))
    }

    /// Whether to guard the listen response stream (default `true`).
    pub fn guard_stream(mut self, guard: bool) -> Self {
        self.layer = self.layer.guard_stream(guard);
        self
    }

    /// Whether to keep scanning other JSON request bodies for a second
    /// `method` (default `true`); see
    /// [`ListenFilterLayer::scan_pass_through`].
    pub fn scan_pass_through(mut self, scan: bool) -> Self {
        self.layer = self.layer.scan_pass_through(scan);
        self
    }

    /// Whether to drop resource updates the caller may not read from the
    /// event streams that are not listens (default `true`); see
    /// [`ListenFilterLayer::check_updates`].
    pub fn check_updates(mut self, check: bool) -> Self {
        self.layer = self.layer.check_updates(check);
        self
    }

    pub(super) fn from_layer(inner: S, layer: ListenFilterLayer) -> Self {
        Self { inner, layer }
    }

    /// Returns a new [`Layer`](tower_layer::Layer) that wraps services with [`ListenFilter`].
    pub fn layer(profile: ServerProfile) -> ListenFilterLayer {
        ListenFilterLayer::new(profile)
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

/// `subscriptions/listen`, and the legacy era's `resources/subscribe`.
pub(super) const INTEREST: Interest = Interest::of(&[Method::Listen, Method::Subscribe]);

/// What a request is read whole for.
pub(crate) enum Whole {
    /// A listen, to honour its filter.
    Listen,
    /// A `resources/subscribe`, to check its URI.
    Subscribe,
}

/// A request the listen filter took.
pub(crate) enum Taken {
    /// A listen: the rule of its answer, when guarded.
    Listen(Option<ListenAnswer>),
    /// A listen that honours nothing: answered by the layer, at once.
    AtOnce(HonouredFilter),
    /// A `resources/subscribe` it checked.
    Subscribe,
}

/// The listen filter takes over `subscriptions/listen` requests, answers
/// every request that could hide one, and guards the listen stream.
impl Rules for ListenFilterLayer {
    type Take = Taken;
    type Whole = Whole;
    type Screen = Updates;

    fn settings(&self) -> Settings {
        self.settings
    }

    fn check_head(&self, head: &Head) -> Result<(), Rejection> {
        let limit = self.settings.limits.listen;
        if head.named == Some(Method::Listen) && head.longer_than(limit) {
            return Err(Rejection::BodyTooLarge { limit });
        }
        Ok(())
    }

    fn decide<B: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        _: &Peek<B>,
        _: &Parts,
    ) -> Decision<Self> {
        let named = head.named;
        let ours = |method: Option<Method>| method.is_some_and(|m| INTEREST.contains(m));
        let refuse = Decision::Refuse;
        match classified.shape {
            Shape::Decided(Outcome::Method(method)) if INTEREST.contains(method) => {
                let (whole, limit) = match method {
                    Method::Listen => (Whole::Listen, self.settings.limits.listen),
                    _ => (Whole::Subscribe, self.settings.limits.method),
                };
                if named.is_some_and(|named| named != method) {
                    refuse(Rejection::HeaderMismatch)
                } else if head.longer_than(limit) {
                    refuse(Rejection::BodyTooLarge { limit })
                } else {
                    Decision::Whole { whole, limit }
                }
            }
            // The method must be named within the limit: past it, a listen could hide.
            Shape::TooLarge => refuse(Rejection::BodyTooLarge {
                limit: self.settings.limits.for_first(classified.first),
            }),
            Shape::Unreadable if ours(named) || ours(classified.first) => {
                refuse(Rejection::BodyUnreadable)
            }
            _ if ours(named) => refuse(Rejection::HeaderMismatch),
            // Another method, or a batch (looked into whole by the plumbing).
            Shape::Decided(_) | Shape::Unreadable => Decision::Pass,
        }
    }

    fn whole<T, F>(&self, whole: Whole, parts: Parts, body: Bytes, take: F) -> Later<T>
    where
        F: FnOnce(Self::Take) -> T + Send + 'static,
    {
        match whole {
            Whole::Listen => {
                let honoured = honour_listen(self.profile.clone(), parts, body);
                let limit = self.profile.limits().max_rewritten_response;
                let live = self.guard_stream.then(|| self.live.clone());
                Box::pin(async move {
                    let (parts, body, filter) = honoured.await?;
                    if filter.is_empty() {
                        return Ok((parts, body, take(Taken::AtOnce(filter))));
                    }
                    let Some(live) = live else {
                        return Ok((parts, body, take(Taken::Listen(None))));
                    };
                    let id = || Some(filter.subscription_id().to_owned());
                    let claim = live
                        .claim(&filter)
                        .map_err(|error| (Rejection::Listen(error), id()))?;
                    let answer = ListenAnswer::new(filter, limit, claim);
                    Ok((parts, body, take(Taken::Listen(Some(answer)))))
                })
            }
            Whole::Subscribe => {
                let checked = check_subscribe(self.profile.clone(), parts, body);
                Box::pin(async move {
                    let (parts, body) = checked.await?;
                    Ok((parts, body, take(Taken::Subscribe)))
                })
            }
        }
    }

    fn screen(&self, parts: &Parts) -> Option<Updates> {
        let checks = self.check_updates && self.profile.resource_access().is_some();
        checks.then(|| Updates::new(self.profile.clone(), self.profile.principal(parts)))
    }

    fn in_batch(&self, method: Method) -> &'static str {
        match method {
            Method::Subscribe => "a batch must not contain a `resources/subscribe` request",
            _ => "a batch must not contain a listen request",
        }
    }
}

impl Take for Taken {
    type Answer = ListenAnswer;

    fn into_answer(self) -> Option<ListenAnswer> {
        match self {
            Taken::Listen(answer) => answer,
            Taken::AtOnce(_) | Taken::Subscribe => None,
        }
    }

    fn answer_alone(&mut self) -> Option<Response<Bytes>> {
        match self {
            Taken::AtOnce(filter) => Some(ended_at_once(filter)),
            Taken::Listen(_) | Taken::Subscribe => None,
        }
    }

    /// A listen's stream is the guard's (or, unguarded, the inner's);
    /// the answer to a `resources/subscribe` is screened like any other.
    fn screens(&self) -> bool {
        matches!(self, Taken::Subscribe)
    }
}

/// Checks a legacy `resources/subscribe` read whole: its `params.uri` must
/// be readable by the caller and accepted by the subscription hook (one of
/// the 2026-07-28 era, which removed the method, is answered 404, -32601). A URI
/// the caller may not read and one that does not exist are answered alike.
/// The request is handed on as it came.
async fn check_subscribe(
    profile: ServerProfile,
    parts: Parts,
    body: Bytes,
) -> Result<(Parts, Bytes), Refusal> {
    let request = InterceptedRequest::parse(&body, Method::Subscribe)?;
    let refuse = |rejection| (rejection, Some(request.id()));
    if request.is_modern(&parts) {
        // Removed by 2026-07-28: a lenient inner service must not serve it.
        return Err(refuse(Rejection::MethodRemoved));
    }
    let uri = request
        .uri()
        .map_err(|message| refuse(Rejection::InvalidParams(message)))?;
    let uris = [&*uri];
    if let Some(access) = profile.resource_access() {
        let caller = profile.principal(&parts);
        let asked = access.readable(caller.as_ref(), &uris);
        let readable = metrics::access_hook(asked).await.first() == Some(&true);
        // The stream that will carry its updates need not ask again.
        let now = std::time::Instant::now();
        profile
            .decisions()
            .put(caller.as_ref(), &uri, readable, now);
        if !readable {
            return Err(refuse(Rejection::ResourceNotFound));
        }
    }
    if let Some(hook) = profile.subscription_hook() {
        if hook.accepts(&uris).await.first() != Some(&true) {
            return Err(refuse(Rejection::SubscriptionRefused));
        }
    }
    tracing::debug!("resources/subscribe accepted");
    Ok((parts, body))
}

/// Honours a listen read whole: the request to hand on (its body rewritten
/// to the honoured ack, the [`HonouredFilter`] in its extensions) and the
/// filter, or the refusal.
async fn honour_listen(
    profile: ServerProfile,
    mut parts: Parts,
    body: Bytes,
) -> Result<(Parts, Bytes, HonouredFilter), Refusal> {
    let listen = InterceptedRequest::parse(&body, Method::Listen)?;
    let (filter, notifications) =
        match honour_at(&profile, &parts, listen.id(), listen.params).await {
            Ok(honoured) => honoured,
            Err(error) => return Err((Rejection::Listen(error), Some(listen.id()))),
        };
    let body = listen.with_ack(notifications, filter.ack());
    tracing::info!(
        kinds = ?filter.kinds(),
        requested_uris = filter.requested_uris(),
        honoured_uris = filter.resource_uris().count(),
        requested_task_ids = filter.requested_task_ids(),
        honoured_task_ids = filter.task_ids().count(),
        principal = filter.principal().is_some(),
        "listen honoured"
    );
    parts.extensions.insert(filter.clone());
    Ok((parts, body.into(), filter))
}
