//! The service call and the future every layer runs, over the layer's
//! [`Rules`].
//!
//! A layer says what it intercepts and what it does with it; this module
//! does the rest, the same way for every layer: read the [`Head`], peek the
//! body until its method decides it, let the rules decide, read the body
//! whole if they ask, call the inner service with the body handed on
//! (rewound, watched, or rewritten), and pass the response through the
//! rules. Two layers' rules combine into one (`(A, B)`), which keeps both
//! promises with one peek and one watch of the body.

use std::any::Any;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use bytes::Bytes;
use http::request::Parts;
use http::{header, response, Request, Response, StatusCode};
use http_body::Body;
use pin_project_lite::pin_project;
use serde_json::value::RawValue;
use tower_service::Service;

use super::body::RequestBody;
use super::classify::{
    batch_names, is_encoded, is_event_stream, Classified, Head, Interest, Shape,
};
use super::event_stream::{EventRule, Screen};
use super::peek::{Peek, PeekLimits, Scan};
use super::reply::Reply;
use super::rewind::{ReadError, Rewind};
use crate::codec::json;
use crate::codec::scan::{Method, Outcome};
use crate::codec::sse::Event;
use crate::jsonrpc::{JsonRpcError, INTERNAL_ERROR};
use crate::metrics::{self, Replaced};
use crate::Rejection;

/// One of two things, for the rules of two layers in one.
pub(crate) enum Either<A, B> {
    Left(A),
    Right(B),
}

/// What the engine does with a request, by its head alone.
enum Gate {
    /// Not a request the layer looks into: it reaches the inner service as it came.
    Skip,
    /// The body is read until its method decides it.
    Peek,
    /// Answered by the layer at once.
    Refuse(Rejection),
}

/// What a layer does with a request once the peek classified its body.
pub(crate) enum Decision<R: Rules> {
    /// Handed on, rewound and watched as the layer set up the peek.
    Pass,
    /// Handed on the same way; the response goes through the take's
    /// [`Take::into_answer`].
    Take(R::Take),
    /// Read whole first, at most `limit` bytes, then [`Rules::whole`] decides.
    Whole { whole: R::Whole, limit: usize },
    /// Answered by the layer, with the request's id when the body, read
    /// whole within the limit, has one.
    Refuse(Rejection),
}

/// A rejection with the request id to echo.
pub(crate) type Refusal = (Rejection, Option<Box<RawValue>>);

/// The request a layer hands on after its own asynchronous work on a body
/// read whole (its hooks): the head and body to call the inner service with,
/// and what the response needs (`T`, as the caller of [`Rules::whole`] asked
/// for it). Boxed once: it runs once per such request, off the hot path.
pub(crate) type Later<T> =
    Pin<Box<dyn Future<Output = Result<(Parts, Bytes, T), Refusal>> + Send + 'static>>;

/// The error that takes the place of an answer a layer cannot vouch for:
/// counted by `kind`, logged with `reason`.
pub(crate) fn replaced(kind: Replaced, reason: &'static str) -> JsonRpcError {
    metrics::answer_replaced(kind);
    tracing::warn!(
        reason,
        "the inner service's answer was replaced by an error"
    );
    JsonRpcError::new(INTERNAL_ERROR, "the server's answer could not be checked")
}

/// The error response in place of the answer to request `id` (JSON text).
pub(crate) fn replacement<B: From<Bytes>>(
    kind: Replaced,
    reason: &'static str,
    id: &str,
) -> Response<B> {
    let id = RawValue::from_string(id.to_owned()).ok();
    replaced(kind, reason).to_response(id.as_deref())
}

/// How a layer checks the answer to a request it took. The plumbing routes
/// the answer, whatever its `Content-Type`: a compressed one is replaced by
/// an error for the request's id (the request went without its
/// `Accept-Encoding`), an event stream is ruled event by event, and any other
/// body is read whole, within the rule's limit, and rewritten when it could
/// carry what the rule checks: an error status whose body holds no JSON-RPC
/// `result` (plain text, a JSON-RPC error) is the inner's own answer and
/// passes as it came.
pub(crate) trait AnswerRule {
    /// The rule of an event stream.
    type Events: EventRule;

    /// Most bytes read of an answer that is not a stream.
    fn limit(&self) -> usize;

    /// The request's id, as JSON text, for an error in the answer's place.
    fn id(&self) -> &str;

    /// What becomes of an answer read whole, `text`, that could carry what
    /// the rule checks: a success that is not blank, or an answer of any
    /// status in which a client could read a JSON-RPC `result`. Any other
    /// passes as it came (its status, headers and body), and one too long,
    /// failed or not UTF-8 is replaced.
    fn rewrite(&self, text: &str) -> Rewritten;

    /// The rule of the answer, an event stream.
    fn into_events(self) -> Self::Events;

    /// True when the answer's head vouches that its body, which it may
    /// test by type, needs no check.
    fn vouched(&self, _answer: &response::Parts, _body: &dyn Any) -> bool {
        false
    }
}

/// What an [`AnswerRule`] makes of an answer read whole.
pub(crate) enum Rewritten {
    /// Passes as it came.
    Kept,
    /// Its body rewritten, the head kept.
    Body(String),
    /// Replaced by an error for the request's id: counted by its kind,
    /// logged with the reason.
    Replaced(Replaced, &'static str),
}

/// What a layer intercepts and how far it reads: the same for every
/// request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// The methods the layer intercepts.
    pub(crate) interest: Interest,
    /// How far the peek reads.
    pub(crate) limits: PeekLimits,
    /// How far the peek scans a body with another method.
    pub(crate) scan: Scan,
}

impl Settings {
    /// A layer's settings: what it intercepts, and the peek's limits; the
    /// peek watches every other body (see [`Scan::Watching`]).
    pub(crate) fn new(interest: Interest, limits: PeekLimits) -> Self {
        Self {
            interest,
            limits,
            scan: Scan::Watching,
        }
    }

    /// The settings of two layers in one: both interests, the lower
    /// limits, and the further scan.
    #[inline]
    fn and(self, other: Self) -> Self {
        Self {
            interest: self.interest.and(other.interest),
            limits: PeekLimits {
                method: self.limits.method.min(other.limits.method),
                listen: self.limits.listen.min(other.limits.listen),
            },
            scan: match (self.scan, other.scan) {
                (Scan::UntilDecided, Scan::UntilDecided) => Scan::UntilDecided,
                _ => Scan::Watching,
            },
        }
    }
}

/// What the response to a request a layer took needs.
pub(crate) trait Take: Send + 'static {
    /// The check of the answer.
    type Answer: AnswerRule;

    /// The check of the answer; `None` passes it untouched.
    fn into_answer(self) -> Option<Self::Answer>;

    /// Whether the answer is screened too (an answer whose every event the
    /// layer vouches for itself is not).
    fn screens(&self) -> bool;
}

/// The check of the answers to a layer's taken requests.
pub(crate) type Answer<R> = <<R as Rules>::Take as Take>::Answer;

/// The rule of the event streams answering a layer's taken requests.
pub(crate) type Events<R> = <Answer<R> as AnswerRule>::Events;

/// What a layer intercepts and what it does with it. The engine skips a
/// request whose head says it is not one a layer looks into
/// ([`Head::inspected`]) and refuses a compressed one; the rules decide the
/// rest.
pub(crate) trait Rules: Clone {
    /// What the response to a taken request needs.
    type Take: Take;
    /// What a body is read whole for.
    type Whole;
    /// Which events of any event stream may reach the caller.
    type Screen: Screen;

    /// What the layer intercepts and how far it reads.
    fn settings(&self) -> Settings;

    /// The refusal of a request by its head alone, if any (a request the
    /// engine peeks, not compressed).
    fn check_head(&self, head: &Head) -> Result<(), Rejection>;

    /// The decision once the peek classified the body.
    fn decide<B: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        peek: &Peek<B>,
        parts: &Parts,
    ) -> Decision<Self>;

    /// The decision on a body read whole; what the response needs is handed
    /// back through `take`, so that a pair of rules wraps it without a
    /// second box.
    fn whole<T, F>(&self, whole: Self::Whole, parts: Parts, body: Bytes, take: F) -> Later<T>
    where
        F: FnOnce(Self::Take) -> T + Send + 'static;

    /// The screen of the event streams answering this request, `None` when
    /// they are not screened. Asked for every request, before anything else.
    fn screen(&self, parts: &Parts) -> Option<Self::Screen>;
}

/// Calls `inner` through `rules`. `inner` must have been readied by
/// `poll_ready`.
pub(crate) fn call<R, S, ReqBody, ResBody>(
    rules: &R,
    inner: &mut S,
    request: Request<ReqBody>,
) -> ResponseFuture<R, S, ReqBody, ResBody>
where
    R: Rules,
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>> + Clone,
    ReqBody: Body,
    ResBody: Body,
{
    let (parts, body) = request.into_parts();
    let head = Head::read(&parts);
    let screen = rules.screen(&parts);
    match gate(rules, &head) {
        Gate::Skip => {
            let request = Request::from_parts(parts, RequestBody::pass_through(body));
            ResponseFuture::Calling {
                future: inner.call(request),
                take: None,
                screen,
            }
        }
        Gate::Refuse(rejection) => ResponseFuture::Refused { rejection },
        Gate::Peek => {
            let settings = rules.settings();
            let mut peek = Peek::new(body, settings.limits, settings.scan);
            // A body whose first frames are at hand (hyper's, once the
            // request arrived; one from a buffer) is classified here, and a
            // request handed on is handed on at once. A body that is not
            // registers the real waker when the future polls it.
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(classified) = peek.poll_classify(&mut cx) {
                let decision = decide(rules, &settings, &head, &classified, &peek, &parts);
                return match next(&settings, decision, &classified, peek, parts) {
                    Next::Call(request, take) => ResponseFuture::Calling {
                        future: inner.call(request),
                        take,
                        screen,
                    },
                    Next::Read(read) => ResponseFuture::Reading {
                        read,
                        service: readied(inner),
                        rules: rules.clone(),
                        screen,
                    },
                };
            }
            ResponseFuture::Peeking {
                peek,
                head,
                parts,
                service: readied(inner),
                rules: rules.clone(),
                screen,
            }
        }
    }
}

/// What every layer does with a request by its head: one it does not look
/// into passes, and a compressed one is refused (its body cannot be looked
/// into, and a method the layer intercepts could hide behind it from an
/// inner service that ignores the coding: the layers sit inside
/// decompression); then the layer's own check.
fn gate<R: Rules>(rules: &R, head: &Head) -> Gate {
    if !head.inspected() {
        return Gate::Skip;
    }
    if head.encoded {
        return Gate::Refuse(Rejection::Encoded);
    }
    match rules.check_head(head) {
        Ok(()) => Gate::Peek,
        Err(rejection) => Gate::Refuse(rejection),
    }
}

/// The service `poll_ready` readied, for the future to call later: whether
/// and how it is called is decided only once the body was read. A clone is
/// left in its place.
fn readied<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// Where a decision on a classified request leads.
enum Next<R: Rules, B: Body> {
    /// The request to hand on, and what its response needs.
    Call(Request<RequestBody<B>>, Option<R::Take>),
    /// The body to read whole first.
    Read(Whole<R, B>),
}

/// A request being read whole, and what for.
pub(crate) struct Whole<R: Rules, B: Body> {
    peek: Peek<B>,
    parts: Parts,
    then: Then<R::Whole>,
    limit: usize,
}

/// The decision on a classified request: what every layer refuses first,
/// then the layer's own rules.
fn decide<R: Rules, B: Body>(
    rules: &R,
    settings: &Settings,
    head: &Head,
    classified: &Classified,
    peek: &Peek<B>,
    parts: &Parts,
) -> Decision<R> {
    if let Some(rejection) = classified.refusal() {
        return Decision::Refuse(rejection);
    }
    // A repeated or undecodable `Mcp-Method` could name what the layer
    // intercepts to a server that reads it otherwise.
    if head.unclear(settings.interest) {
        return Decision::Refuse(Rejection::HeaderMismatch);
    }
    rules.decide(head, classified, peek, parts)
}

/// Where `decision` leads.
fn next<R: Rules, B: Body>(
    settings: &Settings,
    decision: Decision<R>,
    classified: &Classified,
    peek: Peek<B>,
    mut parts: Parts,
) -> Next<R, B> {
    let (then, limit) = match decision {
        // A batch could hold what the layer intercepts: it is read whole to see.
        Decision::Pass if classified.shape == Shape::Decided(Outcome::Batch) => {
            (Then::Batch, settings.limits.method)
        }
        Decision::Pass => return Next::Call(Request::from_parts(parts, peek.into_body()), None),
        Decision::Take(take) => {
            taken(&mut parts, classified);
            return Next::Call(Request::from_parts(parts, peek.into_body()), Some(take));
        }
        Decision::Whole { whole, limit } => {
            taken(&mut parts, classified);
            (Then::Whole(whole), limit)
        }
        // Read what fits, for the id.
        Decision::Refuse(rejection) => (
            Then::Refuse(rejection),
            settings.limits.for_first(classified.first),
        ),
    };
    Next::Read(Whole {
        peek,
        parts,
        then,
        limit,
    })
}

/// The head of a request a layer takes, as the inner service gets it: the
/// answer is inspected, so it must come back uncompressed (it is small).
/// Counted by its method.
fn taken(parts: &mut Parts, classified: &Classified) {
    metrics::intercepted(classified.method().unwrap_or(Method::Other));
    parts.headers.remove(header::ACCEPT_ENCODING);
}

/// What a body is read whole for.
pub(crate) enum Then<W> {
    /// The layer's own purpose.
    Whole(W),
    /// A batch, to look for a method the layer intercepts in it.
    Batch,
    /// The request's id, to answer with this rejection.
    Refuse(Rejection),
}

pin_project! {
    /// Response future of every layer: a state machine from the peek to the
    /// response.
    #[project = StateProj]
    #[project_replace = StateOwn]
    pub(crate) enum ResponseFuture<R, S, ReqBody, ResBody>
    where
        R: Rules,
        S: Service<Request<RequestBody<ReqBody>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        // Reading the request body until its method decides it.
        Peeking {
            peek: Peek<ReqBody>,
            head: Head,
            parts: Parts,
            service: S,
            rules: R,
            screen: Option<R::Screen>,
        },
        // Reading the request body whole.
        Reading {
            read: Whole<R, ReqBody>,
            service: S,
            rules: R,
            screen: Option<R::Screen>,
        },
        // The layer's asynchronous work on a body read whole.
        Preparing {
            future: Later<R::Take>,
            service: S,
            screen: Option<R::Screen>,
        },
        // The inner service is answering.
        Calling {
            #[pin]
            future: S::Future,
            // What the response needs; `None` passes it untouched.
            take: Option<R::Take>,
            // The screen of an event stream answering it.
            screen: Option<R::Screen>,
        },
        // Reading a response whole to rewrite it.
        Rewriting {
            read: Pin<Box<Rewind<ResBody>>>,
            parts: response::Parts,
            json: Answer<R>,
        },
        // Answered by the layer from the head alone.
        Refused {
            rejection: Rejection,
        },
        Done,
    }
}

type Output<R, ResBody, E> = Result<Response<Reply<ResBody, Events<R>, <R as Rules>::Screen>>, E>;

impl<R, S, ReqBody, ResBody> ResponseFuture<R, S, ReqBody, ResBody>
where
    R: Rules,
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body,
    ResBody: Body,
{
    /// Leaves the future done, with what the state held.
    fn finish(self: Pin<&mut Self>) -> StateOwn<R, S, ReqBody, ResBody> {
        self.project_replace(Self::Done)
    }

    /// Calls the inner service.
    fn call(
        self: Pin<&mut Self>,
        mut service: S,
        request: Request<RequestBody<ReqBody>>,
        take: Option<R::Take>,
        screen: Option<R::Screen>,
    ) {
        let future = service.call(request);
        self.project_replace(Self::Calling {
            future,
            take,
            screen,
        });
    }
}

/// Why a batch naming `method` is refused.
fn in_batch(method: Method) -> &'static str {
    match method {
        Method::Initialize => "a batch must not contain an `initialize` request",
        Method::Discover => "a batch must not contain a `server/discover` request",
        Method::Listen => "a batch must not contain a listen request",
        Method::Subscribe => "a batch must not contain a `resources/subscribe` request",
        Method::Other => "a batch must not contain a request the layer intercepts",
    }
}

/// Whether an answer read whole, `text` with `status`, could carry what a
/// layer checks, and so is checked: any success that is not blank, and any
/// other answer in which a lenient client could read a JSON-RPC `result`.
/// Any other (an error status with plain text, a JSON-RPC error) is the
/// inner's own answer, and keeps its status: a client may act on it. A NUL
/// byte counts as a `result`: a reader may take the text for UTF-16 or
/// UTF-32, where no byte search finds one.
fn could_carry(status: StatusCode, text: &str) -> bool {
    if text.trim_ascii().is_empty() {
        return false;
    }
    status.is_success() || text.contains('\0') || json::may_hold_key(text, "result")
}

/// The layer's answer to a request, with `rejection` in the extensions.
fn refused<B: Body, E, Sc>(
    rejection: Rejection,
    id: Option<&RawValue>,
) -> Response<Reply<B, E, Sc>> {
    metrics::refused(&rejection);
    tracing::debug!(%rejection, "request answered by the layer");
    rejection.into_response(id)
}

/// A response to a request no layer took: passed untouched, unless it is an
/// event stream and `screen` is set. A compressed stream cannot be screened:
/// it is replaced by an error (it answers no request id the layer knows).
fn screened<B: Body, E, Sc>(
    response: Response<B>,
    screen: Option<Sc>,
) -> Response<Reply<B, E, Sc>> {
    match screen {
        Some(screen) if is_event_stream(response.headers()) => {
            if is_encoded(response.headers()) {
                let reason =
                    "the event stream is compressed: compression belongs outside the layer";
                return replacement(Replaced::Compressed, reason, "null");
            }
            let (mut parts, body) = response.into_parts();
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Reply::screened(body, screen))
        }
        _ => response.map(|body| Reply::PassThrough { body }),
    }
}

// The answer's body is `'static` (as hyper and axum ask of every body)
// so that a rule may test its type.
impl<R, S, ReqBody, ResBody> Future for ResponseFuture<R, S, ReqBody, ResBody>
where
    R: Rules,
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body,
    ResBody: Body + 'static,
{
    type Output = Output<R, ResBody, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &*self {
            Self::Peeking { .. } => self.peeking(cx),
            Self::Reading { .. } => self.reading(cx),
            Self::Preparing { .. } => self.preparing(cx),
            Self::Calling { .. } => self.calling(cx),
            Self::Rewriting { .. } => self.rewriting(cx),
            Self::Refused { .. } => Poll::Ready(self.refusing()),
            Self::Done => panic!("ResponseFuture polled after completion"),
        }
    }
}

/// One function per state, as hyper's `ChunkedState::step` and its
/// `read_*`: each polls what its state waits on and, once that is ready,
/// puts the next state in place and polls it at once. The states follow one
/// order (peeking, reading, preparing, calling, rewriting), so the chain ends.
impl<R, S, ReqBody, ResBody> ResponseFuture<R, S, ReqBody, ResBody>
where
    R: Rules,
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body,
    ResBody: Body + 'static,
{
    /// Peeking: once the method is known, the rules decide whether the
    /// request is called at once or read whole first.
    fn peeking(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        let StateProj::Peeking {
            peek,
            head,
            parts,
            rules,
            ..
        } = self.as_mut().project()
        else {
            unreachable!("the future is peeking")
        };
        let classified = ready!(peek.poll_classify(cx));
        let settings = rules.settings();
        let decision = decide(rules, &settings, head, &classified, peek, parts);
        let StateOwn::Peeking {
            peek,
            parts,
            service,
            rules,
            screen,
            ..
        } = self.as_mut().finish()
        else {
            unreachable!("the future was peeking")
        };
        match next(&settings, decision, &classified, peek, parts) {
            Next::Call(request, take) => {
                self.as_mut().call(service, request, take, screen);
                self.calling(cx)
            }
            Next::Read(read) => {
                self.as_mut().project_replace(Self::Reading {
                    read,
                    service,
                    rules,
                    screen,
                });
                self.reading(cx)
            }
        }
    }

    /// Reading the body whole: then the rules prepare the request, or a
    /// batch is looked into, or the request is refused.
    fn reading(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        let StateProj::Reading { read, .. } = self.as_mut().project() else {
            unreachable!("the future is reading")
        };
        let done = ready!(read.peek.poll_whole(cx, read.limit));
        let StateOwn::Reading {
            read,
            service,
            rules,
            screen,
        } = self.as_mut().finish()
        else {
            unreachable!("the future was reading")
        };
        let Whole {
            peek,
            parts,
            then,
            limit,
        } = read;
        let refuse = |rejection, id: Option<Box<RawValue>>| {
            Poll::Ready(Ok(refused(rejection, id.as_deref())))
        };
        let whole = match (then, done) {
            (Then::Refuse(rejection), read) => {
                return refuse(rejection, read.ok().and_then(|()| peek.request_id()));
            }
            (Then::Whole(_) | Then::Batch, Err(error)) => {
                let rejection = match error {
                    ReadError::TooLarge => Rejection::BodyTooLarge { limit },
                    ReadError::Failed => Rejection::BodyUnreadable,
                };
                return refuse(rejection, None);
            }
            (Then::Batch, Ok(())) => {
                return match batch_names(&peek.buffered(), rules.settings().interest) {
                    Ok(None) => {
                        let request = Request::from_parts(parts, peek.into_body());
                        self.as_mut().call(service, request, None, screen);
                        self.calling(cx)
                    }
                    Ok(Some(method)) => refuse(Rejection::InvalidRequest(in_batch(method)), None),
                    Err(()) => refuse(Rejection::Parse, None),
                };
            }
            (Then::Whole(whole), Ok(())) => whole,
        };
        let future = rules.whole(whole, parts, peek.buffered(), |take| take);
        self.as_mut().project_replace(Self::Preparing {
            future,
            service,
            screen,
        });
        self.preparing(cx)
    }

    /// Preparing: the rules' work on the body read whole (a hook, say); the
    /// request goes on rewritten, or is refused.
    fn preparing(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        let StateProj::Preparing { future, .. } = self.as_mut().project() else {
            unreachable!("the future is preparing")
        };
        let prepared = ready!(future.as_mut().poll(cx));
        let StateOwn::Preparing {
            service, screen, ..
        } = self.as_mut().finish()
        else {
            unreachable!("the future was preparing")
        };
        match prepared {
            Ok((mut parts, body, take)) => {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, body.len().into());
                parts.headers.remove(header::TRANSFER_ENCODING);
                let request = Request::from_parts(parts, RequestBody::full(body));
                self.as_mut().call(service, request, Some(take), screen);
                self.calling(cx)
            }
            Err((rejection, id)) => Poll::Ready(Ok(refused(rejection, id.as_deref()))),
        }
    }

    /// Calling the inner service: its answer passes (screened), is vouched
    /// for, or is ruled as a stream or read whole by the take's rule.
    fn calling(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        let StateProj::Calling {
            future,
            take,
            screen,
        } = self.as_mut().project()
        else {
            unreachable!("the future is calling")
        };
        let response = match ready!(future.poll(cx)) {
            Ok(response) => response,
            Err(error) => {
                self.finish();
                return Poll::Ready(Err(error));
            }
        };
        let screen = screen
            .take()
            .filter(|_| take.as_ref().is_none_or(Take::screens));
        let Some(rule) = take.take().and_then(Take::into_answer) else {
            self.finish();
            return Poll::Ready(Ok(screened(response, screen)));
        };
        let (mut parts, body) = response.into_parts();
        if rule.vouched(&parts, &body) {
            self.finish();
            let body = Reply::PassThrough { body };
            return Poll::Ready(Ok(Response::from_parts(parts, body)));
        }
        if is_encoded(&parts.headers) {
            self.finish();
            let reason = "the answer is compressed: compression belongs outside the layer";
            return Poll::Ready(Ok(replacement(Replaced::Compressed, reason, rule.id())));
        }
        if !is_event_stream(&parts.headers) {
            // JSON, any other type or none: a lenient client reads any body.
            self.as_mut().project_replace(Self::Rewriting {
                read: Box::pin(Rewind::new(body)),
                parts,
                json: rule,
            });
            return self.rewriting(cx);
        }
        parts.headers.remove(header::CONTENT_LENGTH);
        self.finish();
        let body = Reply::events(body, rule.into_events(), screen);
        Poll::Ready(Ok(Response::from_parts(parts, body)))
    }

    /// Rewriting an answer read whole, or replacing it.
    fn rewriting(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        let StateProj::Rewriting { read, json, .. } = self.as_mut().project() else {
            unreachable!("the future is rewriting")
        };
        let done = ready!(read.as_mut().poll_whole(cx, json.limit()));
        let StateOwn::Rewriting {
            mut read,
            mut parts,
            json,
        } = self.finish()
        else {
            unreachable!("the future was rewriting")
        };
        let buffered = read.buffered();
        let text = done.ok().and_then(|()| std::str::from_utf8(&buffered).ok());
        let rewritten = match text {
            None => {
                Rewritten::Replaced(Replaced::Unreadable, "the answer is too long or not UTF-8")
            }
            Some(text) if !could_carry(parts.status, text) => Rewritten::Kept,
            Some(text) => json.rewrite(text),
        };
        let body = match rewritten {
            Rewritten::Body(data) => {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, data.len().into());
                Reply::full(data.into(), read.as_mut().take_trailers())
            }
            Rewritten::Kept => Reply::rewound(read),
            Rewritten::Replaced(kind, reason) => {
                return Poll::Ready(Ok(replacement(kind, reason, json.id())));
            }
        };
        Poll::Ready(Ok(Response::from_parts(parts, body)))
    }

    /// Refused from the head alone.
    fn refusing(self: Pin<&mut Self>) -> Output<R, ResBody, S::Error> {
        let StateOwn::Refused { rejection } = self.finish() else {
            unreachable!("the future was refused")
        };
        Ok(refused(rejection, None))
    }
}

/// Two layers' rules in one: the first is the outer layer of the two
/// stacked. Their interests must not overlap, so a request is taken by one
/// of them at most; either may refuse it, the first before the second.
impl<A: Rules, B: Rules> Rules for (A, B) {
    type Take = Either<A::Take, B::Take>;
    type Whole = Either<A::Whole, B::Whole>;
    type Screen = Either<A::Screen, B::Screen>;

    fn settings(&self) -> Settings {
        self.0.settings().and(self.1.settings())
    }

    fn check_head(&self, head: &Head) -> Result<(), Rejection> {
        self.0.check_head(head)?;
        self.1.check_head(head)
    }

    fn decide<Bd: Body>(
        &self,
        head: &Head,
        classified: &Classified,
        peek: &Peek<Bd>,
        parts: &Parts,
    ) -> Decision<Self> {
        let a = self.0.decide(head, classified, peek, parts);
        if let Decision::Refuse(rejection) = a {
            return Decision::Refuse(rejection);
        }
        let b = self.1.decide(head, classified, peek, parts);
        match (a, b) {
            (_, Decision::Refuse(rejection)) => Decision::Refuse(rejection),
            (Decision::Take(a), b) => {
                debug_assert!(matches!(b, Decision::Pass), "both layers took a request");
                Decision::Take(Either::Left(a))
            }
            (Decision::Whole { whole, limit }, b) => {
                debug_assert!(matches!(b, Decision::Pass), "both layers took a request");
                let whole = Either::Left(whole);
                Decision::Whole { whole, limit }
            }
            (_, Decision::Take(b)) => Decision::Take(Either::Right(b)),
            (_, Decision::Whole { whole, limit }) => {
                let whole = Either::Right(whole);
                Decision::Whole { whole, limit }
            }
            _ => Decision::Pass,
        }
    }

    fn whole<T, F>(&self, whole: Self::Whole, parts: Parts, body: Bytes, take: F) -> Later<T>
    where
        F: FnOnce(Self::Take) -> T + Send + 'static,
    {
        match whole {
            Either::Left(whole) => self.0.whole(whole, parts, body, |t| take(Either::Left(t))),
            Either::Right(whole) => self.1.whole(whole, parts, body, |t| take(Either::Right(t))),
        }
    }

    /// The first layer's screen, or else the second's: one layer screens.
    fn screen(&self, parts: &Parts) -> Option<Self::Screen> {
        let first = self.0.screen(parts).map(Either::Left);
        first.or_else(|| self.1.screen(parts).map(Either::Right))
    }
}

impl<A: Take, B: Take> Take for Either<A, B> {
    type Answer = Either<A::Answer, B::Answer>;

    fn into_answer(self) -> Option<Self::Answer> {
        match self {
            Either::Left(take) => take.into_answer().map(Either::Left),
            Either::Right(take) => take.into_answer().map(Either::Right),
        }
    }

    fn screens(&self) -> bool {
        match self {
            Either::Left(take) => take.screens(),
            Either::Right(take) => take.screens(),
        }
    }
}

impl<A: Screen, B: Screen> Screen for Either<A, B> {
    fn poll_admits(&mut self, cx: &mut Context<'_>, event: &Event) -> Poll<bool> {
        match self {
            Either::Left(screen) => screen.poll_admits(cx, event),
            Either::Right(screen) => screen.poll_admits(cx, event),
        }
    }
}

impl<A: EventRule, B: EventRule> EventRule for Either<A, B> {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        match self {
            Either::Left(rule) => rule.on_event(event, out),
            Either::Right(rule) => rule.on_event(event, out),
        }
    }

    fn passes_rest(&self) -> bool {
        match self {
            Either::Left(rule) => rule.passes_rest(),
            Either::Right(rule) => rule.passes_rest(),
        }
    }

    fn on_unterminated(&mut self, tail: Bytes, out: &mut VecDeque<Bytes>) {
        match self {
            Either::Left(rule) => rule.on_unterminated(tail, out),
            Either::Right(rule) => rule.on_unterminated(tail, out),
        }
    }
}

impl<A: AnswerRule, B: AnswerRule> AnswerRule for Either<A, B> {
    type Events = Either<A::Events, B::Events>;

    fn limit(&self) -> usize {
        match self {
            Either::Left(rule) => rule.limit(),
            Either::Right(rule) => rule.limit(),
        }
    }

    fn id(&self) -> &str {
        match self {
            Either::Left(rule) => rule.id(),
            Either::Right(rule) => rule.id(),
        }
    }

    fn rewrite(&self, text: &str) -> Rewritten {
        match self {
            Either::Left(rule) => rule.rewrite(text),
            Either::Right(rule) => rule.rewrite(text),
        }
    }

    fn into_events(self) -> Self::Events {
        match self {
            Either::Left(rule) => Either::Left(rule.into_events()),
            Either::Right(rule) => Either::Right(rule.into_events()),
        }
    }

    fn vouched(&self, answer: &response::Parts, body: &dyn Any) -> bool {
        match self {
            Either::Left(rule) => rule.vouched(answer, body),
            Either::Right(rule) => rule.vouched(answer, body),
        }
    }
}
