//! The call: what the engine does with a request before the inner service
//! answers it. By its head, a request is passed, refused, or its body
//! peeked; once the peek classified the body, the rules decide whether it
//! is handed on at once or read whole first.

use std::task::{Context, Poll, Waker};

use http::request::Parts;
use http::{header, Request, Response};
use http_body::Body;
use tower_service::Service;

use super::future::{ResponseFuture, State};
use super::rules::{Decision, Rules, Settings};
use crate::codec::scan::{Method, Outcome};
use crate::http::body::RequestBody;
use crate::http::classify::{Classified, Head, Shape};
use crate::http::peek::Peek;
use crate::metrics;
use crate::rejection::Rejection;
use crate::telemetry::Operation;

/// What the engine does with a request, by its head alone.
enum Gate {
    /// Not a request the layer looks into: it reaches the inner service as it came.
    Skip,
    /// The body is read until its method decides it.
    Peek,
    /// Answered by the layer at once.
    Refuse(Rejection),
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
    let (mut parts, body) = request.into_parts();
    let head = Head::read(&parts);
    let screen = rules.screen(&parts);
    match gate(rules, &head) {
        Gate::Skip => {
            let request = Request::from_parts(parts, RequestBody::pass_through(body));
            ResponseFuture::new(
                State::Calling {
                    future: inner.call(request),
                    take: None,
                    screen,
                },
                Operation::OFF,
            )
        }
        Gate::Refuse(rejection) => {
            ResponseFuture::new(State::Refused { rejection }, Operation::OFF)
        }
        Gate::Peek => {
            let settings = rules.settings();
            let mut peek = Peek::new(body, settings.limits, settings.scan);
            // A body whose first frames are at hand (hyper's, once the
            // request arrived; one from a buffer) is classified here, and a
            // request handed on is handed on at once. A body that is not
            // registers the real waker when the future polls it.
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(classified) = peek.poll_classify(&mut cx) {
                let operation = observe(&mut parts, &classified, &peek);
                let decision = decide(rules, &settings, &head, &classified, &peek, &parts);
                // Each future is written where it is returned.
                return match next(&settings, decision, &classified, peek, parts) {
                    Next::Call(request, take) => ResponseFuture::new(
                        State::Calling {
                            future: inner.call(request),
                            take,
                            screen,
                        },
                        operation,
                    ),
                    Next::Read(read) => ResponseFuture::new(
                        State::Reading {
                            read,
                            service: take_ready(inner),
                            rules: rules.clone(),
                            screen,
                        },
                        operation,
                    ),
                };
            }
            ResponseFuture::new(
                State::Peeking {
                    peek,
                    head,
                    parts,
                    service: take_ready(inner),
                    rules: rules.clone(),
                    screen,
                },
                Operation::OFF,
            )
        }
    }
}

/// The operation of a request whose method the peek read (none for one it
/// did not: a batch, a body without a method, one that is not JSON).
#[inline]
pub(super) fn observe<B: Body>(
    parts: &mut Parts,
    classified: &Classified,
    peek: &Peek<B>,
) -> Operation {
    if !Operation::wanted() || classified.method().is_none() {
        return Operation::OFF;
    }
    let Some(begun) = Operation::begin(parts) else {
        return Operation::OFF;
    };
    // What was read, as one buffer, only when asked for and not too long:
    // a body read in several chunks is copied to be one.
    let read = |max: usize| (peek.read_len() <= max).then(|| peek.buffered());
    begun.classify(parts, peek.method_name(), read)
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
fn take_ready<S: Clone>(inner: &mut S) -> S {
    let clone = inner.clone();
    std::mem::replace(inner, clone)
}

/// Where a decision on a classified request leads.
pub(super) enum Next<R: Rules, B: Body> {
    /// The request to hand on, and what its response needs.
    Call(Request<RequestBody<B>>, Option<R::Take>),
    /// The body to read whole first.
    Read(Whole<R, B>),
}

/// A request being read whole, and what for.
pub(super) struct Whole<R: Rules, B: Body> {
    pub(super) peek: Peek<B>,
    pub(super) parts: Parts,
    pub(super) then: Then<R::Whole>,
    pub(super) limit: usize,
}

/// The decision on a classified request: what every layer refuses first,
/// then the layer's own rules.
pub(super) fn decide<R: Rules, B: Body>(
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
pub(super) fn next<R: Rules, B: Body>(
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
            take_request(&mut parts, classified);
            return Next::Call(Request::from_parts(parts, peek.into_body()), Some(take));
        }
        Decision::Whole { whole, limit } => {
            take_request(&mut parts, classified);
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
fn take_request(parts: &mut Parts, classified: &Classified) {
    metrics::intercepted(classified.method().unwrap_or(Method::Other));
    parts.headers.remove(header::ACCEPT_ENCODING);
}

/// What a body is read whole for.
pub(super) enum Then<W> {
    /// The layer's own purpose.
    Whole(W),
    /// A batch, to look for a method the layer intercepts in it.
    Batch,
    /// The request's id, to answer with this rejection.
    Refuse(Rejection),
}
