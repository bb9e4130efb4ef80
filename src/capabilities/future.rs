use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::{header, request, response, Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use tower_service::Service;

use super::rewrite::{ResultRewrite, Target};
use crate::body::{ResponseBody, Rule};
use crate::era::Era;
use crate::peek::{is_encoded, is_event_stream, is_json, Peek, Peeked};
use crate::replay::ReplayBody;
use crate::scan::{Method, Outcome};
use crate::{json, Rejection, ServerProfile};

pin_project! {
    /// Response future for [`Capabilities`](super::Capabilities).
    pub struct ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReplayBody<ReqBody>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        #[pin]
        state: State<S, ReqBody, ResBody>,
        profile: ServerProfile,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, ReqBody, ResBody>
    where
        S: Service<Request<ReplayBody<ReqBody>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        Peeking {
            peek: Option<Peek<ReqBody>>,
            parts: Option<request::Parts>,
            service: Option<S>,
            stage: Stage,
            // The `Mcp-Method` header's method.
            named: Option<Method>,
        },
        Calling {
            #[pin]
            future: S::Future,
            target: Option<Target>,
        },
        Reading {
            peek: Option<Peek<ResBody>>,
            parts: Option<response::Parts>,
            target: Option<Target>,
        },
        Rejected {
            rejection: Option<Rejection>,
        },
        Done,
    }
}

#[derive(Clone, Copy)]
enum Stage {
    /// Reading until the body's method is known.
    Classify,
    /// Reading the body for its id, to answer a disguised request.
    Mismatch,
}

impl<S, ReqBody, ResBody> ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReplayBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body + Unpin,
    ResBody: Body + Unpin,
{
    pub(super) fn calling(future: S::Future, profile: ServerProfile) -> Self {
        Self {
            state: State::Calling {
                future,
                target: None,
            },
            profile,
        }
    }

    pub(super) fn rejected(rejection: Rejection, profile: ServerProfile) -> Self {
        Self {
            state: State::Rejected {
                rejection: Some(rejection),
            },
            profile,
        }
    }

    pub(super) fn peeking(
        service: S,
        parts: request::Parts,
        peek: Peek<ReqBody>,
        named: Option<Method>,
        profile: ServerProfile,
    ) -> Self {
        Self {
            state: State::Peeking {
                peek: Some(peek),
                parts: Some(parts),
                service: Some(service),
                stage: Stage::Classify,
                named,
            },
            profile,
        }
    }
}

fn era_of(method: Method) -> Option<Era> {
    match method {
        Method::Initialize => Some(Era::Legacy),
        Method::Discover => Some(Era::Modern),
        Method::Listen | Method::Other => None,
    }
}

/// True when the `Mcp-Method` header and the body disagree about an
/// `initialize` or `server/discover` request.
fn disguised(named: Option<Method>, body: Option<Method>) -> bool {
    match named {
        Some(named) => {
            Some(named) != body && (era_of(named).is_some() || body.and_then(era_of).is_some())
        }
        None => false,
    }
}

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReplayBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body + Unpin,
    ResBody: Body + Unpin,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let this = self.as_mut().project();
            let profile = this.profile;
            let next = match this.state.project() {
                StateProj::Peeking {
                    peek,
                    parts,
                    service,
                    stage,
                    named,
                } => {
                    let reader = peek
                        .as_mut()
                        .expect("peek taken only when leaving the state");
                    let target = match *stage {
                        Stage::Classify => {
                            let peeked = ready!(reader.poll_classify(cx));
                            let method = match peeked {
                                Peeked::Decided(Outcome::Method(method)) => Some(method),
                                Peeked::TooLarge(method) => method,
                                _ => None,
                            };
                            if disguised(*named, method) {
                                *stage = Stage::Mismatch;
                                continue;
                            }
                            if matches!(peeked, Peeked::TooLarge(Some(m)) if era_of(m).is_some()) {
                                // Never fail open: an oversized discover is refused, not passed
                                // on unrewritten. A body that names no method within the limit
                                // cannot be classified and passes on.
                                let limit = profile.limits().max_listen_body;
                                self.as_mut().project().state.set(State::Done);
                                return Poll::Ready(Ok(
                                    Rejection::BodyTooLarge { limit }.into_response(None)
                                ));
                            }
                            // An intercepted method is decided once the whole request is
                            // in the peek (at its closing brace, or at its end when the
                            // rest after the method is plain), and its id with it.
                            method.and_then(era_of).and_then(|era| {
                                let id = reader.scanned_id().or_else(|| {
                                    json::request_id(&reader.buffered()).map(Box::<str>::from)
                                })?;
                                // The caller matters only to a profile that narrows per caller.
                                let caller = profile
                                    .narrows_per_caller()
                                    .then(|| {
                                        profile.principal(parts.as_ref().expect("parts are here"))
                                    })
                                    .flatten();
                                Some(Target::new(id, era, profile.clone(), caller.as_ref()))
                            })
                        }
                        Stage::Mismatch => {
                            let _ = ready!(reader.poll_buffer(cx));
                            let id = json::request_id(&reader.buffered());
                            self.as_mut().project().state.set(State::Done);
                            return Poll::Ready(Ok(
                                Rejection::HeaderMismatch.into_response(id.as_deref())
                            ));
                        }
                    };
                    let body = peek.take().expect("peek is here").into_replay();
                    let request = Request::from_parts(parts.take().expect("parts are here"), body);
                    let future = service.take().expect("service is here").call(request);
                    State::Calling { future, target }
                }
                StateProj::Calling { future, target } => {
                    let response = ready!(future.poll(cx))?;
                    let Some(target) = target.take() else {
                        self.as_mut().project().state.set(State::Done);
                        return Poll::Ready(Ok(response.map(ResponseBody::pass_through)));
                    };
                    let headers = response.headers();
                    if is_encoded(headers) {
                        tracing::debug!(
                            "capabilities: response has a content encoding; passed through"
                        );
                    } else if is_event_stream(headers) {
                        let (mut parts, body) = response.into_parts();
                        parts.headers.remove(header::CONTENT_LENGTH);
                        self.as_mut().project().state.set(State::Done);
                        let body =
                            ResponseBody::events(body, Rule::Result(ResultRewrite::new(target)));
                        return Poll::Ready(Ok(Response::from_parts(parts, body)));
                    } else if is_json(headers) {
                        let (parts, body) = response.into_parts();
                        let peek = Peek::new(body, profile.limits().max_listen_body);
                        self.as_mut().project().state.set(State::Reading {
                            peek: Some(peek),
                            parts: Some(parts),
                            target: Some(target),
                        });
                        continue;
                    } else {
                        tracing::debug!(
                            "capabilities: response is neither JSON nor SSE; passed through"
                        );
                    }
                    self.as_mut().project().state.set(State::Done);
                    return Poll::Ready(Ok(response.map(ResponseBody::pass_through)));
                }
                StateProj::Reading {
                    peek,
                    parts,
                    target,
                } => {
                    let reader = peek
                        .as_mut()
                        .expect("peek taken only when leaving the state");
                    let read = ready!(reader.poll_buffer(cx));
                    let mut parts = parts.take().expect("parts are here");
                    let rewritten = match read {
                        Ok(()) => {
                            let body = reader.buffered();
                            std::str::from_utf8(&body)
                                .map_err(|_| "the response body is not UTF-8")
                                .and_then(|text| {
                                    target.as_ref().expect("target is here").rewrite(text)
                                })
                        }
                        Err(_) => Err("the response body was not read whole"),
                    };
                    let body = match rewritten {
                        Ok(data) => {
                            parts
                                .headers
                                .insert(header::CONTENT_LENGTH, data.len().into());
                            ResponseBody::full_with_trailers(data.into(), reader.take_trailers())
                        }
                        Err(reason) => {
                            tracing::debug!(reason, "capabilities: response passed through");
                            ResponseBody::replay(peek.take().expect("peek is here").into_replay())
                        }
                    };
                    self.as_mut().project().state.set(State::Done);
                    return Poll::Ready(Ok(Response::from_parts(parts, body)));
                }
                StateProj::Rejected { rejection } => {
                    let rejection = rejection
                        .take()
                        .expect("ResponseFuture polled after completion");
                    return Poll::Ready(Ok(rejection.into_response(None)));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            };
            self.as_mut().project().state.set(next);
        }
    }
}
