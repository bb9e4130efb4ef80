//! The response future every layer runs: a state machine from the peek to
//! the response, one function per state.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::request::Parts;
use http::{header, response, Request, Response, StatusCode};
use http_body::Body;
use pin_project_lite::pin_project;
use serde_json::value::RawValue;
use tower_service::Service;
use tracing::Span;

use super::call::{decide, next, observe, Next, Then, Whole};
use super::rules::{Answer, AnswerRule, Events, Later, Rewritten, Rules, Take};
use crate::codec::json;
use crate::http::body::RequestBody;
use crate::http::classify::{batch_names, is_encoded, is_event_stream, Head};
use crate::http::peek::Peek;
use crate::http::reply::Reply;
use crate::http::rewind::{ReadError, Rewind};
use crate::jsonrpc::{JsonRpcError, INTERNAL_ERROR};
use crate::metrics::{self, Replaced};
use crate::rejection::Rejection;
use crate::telemetry::Operation;

pin_project! {
    /// Response future of every layer: a state machine from the peek to the
    /// response, and the request's operation, whose span is entered while
    /// the future is polled and which ends with the answer's head.
    pub(crate) struct ResponseFuture<R, S, ReqBody, ResBody>
    where
        R: Rules,
        S: Service<Request<RequestBody<ReqBody>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        #[pin]
        state: State<R, S, ReqBody, ResBody>,
        operation: Operation,
    }
}

pin_project! {
    /// The states of a [`ResponseFuture`].
    #[project = StateProj]
    #[project_replace = StateOwn]
    pub(crate) enum State<R, S, ReqBody, ResBody>
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
    S: Service<Request<RequestBody<ReqBody>>>,
    ReqBody: Body,
    ResBody: Body,
{
    /// The future in `state`, with the request's `operation`.
    #[inline(always)]
    pub(super) fn new(state: State<R, S, ReqBody, ResBody>, operation: Operation) -> Self {
        Self { state, operation }
    }
}

impl<R, S, ReqBody, ResBody> State<R, S, ReqBody, ResBody>
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

/// The error that takes the place of an answer a layer cannot vouch for:
/// counted by `kind`, logged with `reason`.
pub(crate) fn replace_answer(kind: Replaced, reason: &'static str) -> JsonRpcError {
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
    replace_answer(kind, reason).to_response(id.as_deref())
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
pub(super) fn refuse<B: Body, E, Sc>(
    rejection: Rejection,
    id: Option<&RawValue>,
) -> Response<Reply<B, E, Sc>> {
    metrics::refused(rejection.counted());
    tracing::debug!(%rejection, "request answered by the layer");
    rejection.into_response(id)
}

/// A response to a request no layer took: passed untouched, unless it is an
/// event stream and `screen` is set. A compressed stream cannot be screened:
/// it is replaced by an error (it answers no request id the layer knows).
fn screen_answer<B: Body, E, Sc>(
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

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let span = this.operation.span().cloned();
        let _entered = span.as_ref().map(Span::enter);
        // The answer is returned where it was written, never moved: it is
        // large, and every request passes here.
        let poll = this.state.step(cx, this.operation);
        if let Poll::Ready(output) = &poll {
            this.operation.finish(output.as_ref());
        }
        poll
    }
}

/// One function per state, as hyper's `ChunkedState::step` and its
/// `read_*`: each polls what its state waits on and, once that is ready,
/// puts the next state in place and polls it at once. The states follow one
/// order (peeking, reading, preparing, calling, rewriting), so the chain ends.
impl<R, S, ReqBody, ResBody> State<R, S, ReqBody, ResBody>
where
    R: Rules,
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body,
    ResBody: Body + 'static,
{
    /// Polls the state in place; the peek starts `operation` once it read
    /// the method.
    #[inline]
    fn step(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        operation: &mut Operation,
    ) -> Poll<Output<R, ResBody, S::Error>> {
        match &*self {
            Self::Peeking { .. } => self.peeking(cx, operation),
            Self::Reading { .. } => self.reading(cx),
            Self::Preparing { .. } => self.preparing(cx),
            Self::Calling { .. } => self.calling(cx),
            Self::Rewriting { .. } => self.rewriting(cx),
            Self::Refused { .. } => Poll::Ready(self.refusing()),
            Self::Done => panic!("ResponseFuture polled after completion"),
        }
    }

    /// Peeking: once the method is known, the rules decide whether the
    /// request is called at once or read whole first.
    fn peeking(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        operation: &mut Operation,
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
        *operation = observe(parts, &classified, peek);
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
            Poll::Ready(Ok(refuse(rejection, id.as_deref())))
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
                    Ok(Some(method)) => {
                        refuse(Rejection::InvalidRequest(rules.in_batch(method)), None)
                    }
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
            Ok((mut parts, body, mut take)) => {
                if let Some(answer) = take.answer_alone() {
                    return Poll::Ready(Ok(answer.map(|body| Reply::full(body, None))));
                }
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, body.len().into());
                parts.headers.remove(header::TRANSFER_ENCODING);
                let request = Request::from_parts(parts, RequestBody::full(body));
                self.as_mut().call(service, request, Some(take), screen);
                self.calling(cx)
            }
            Err((rejection, id)) => Poll::Ready(Ok(refuse(rejection, id.as_deref()))),
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
            return Poll::Ready(Ok(screen_answer(response, screen)));
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
        Ok(refuse(rejection, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is checked of an answer read whole: any success that is not
    /// blank, and any status whose body a client could read a `result` in.
    #[test]
    fn an_answer_is_checked_when_it_could_carry_a_result() {
        let ok = StatusCode::OK;
        let bad = StatusCode::BAD_REQUEST;
        for (status, text, checked) in [
            (ok, "{}", true),
            (ok, " \n", false),
            (bad, "plain text", false),
            (
                bad,
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#,
                false,
            ),
            (bad, r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, true),
            (bad, r#"{"res\u0075lt":{}}"#, true),
            (bad, "a\0b", true),
        ] {
            assert_eq!(could_carry(status, text), checked, "{status} {text:?}");
        }
    }
}
