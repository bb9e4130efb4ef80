use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{header, request, HeaderMap, Request, Response};
use http_body::Body;
use pin_project_lite::pin_project;
use serde_json::value::RawValue;
use tower_service::Service;

use super::guard::Guard;
use super::request::{batch_has_listen, ListenRequest, Refusal};
use crate::body::{ResponseBody, Rule};
use crate::filter::honour_at;
use crate::peek::{content_length, is_event_stream, BufferError, Peek, Peeked};
use crate::replay::ReplayBody;
use crate::scan::{Method, Outcome};
use crate::{json, HonouredFilter, Rejection, ServerProfile};

/// What honouring a listen yields: the request to pass on, or a refusal.
type Honoured = Result<(request::Parts, Bytes, HonouredFilter), Refusal>;

pin_project! {
    /// Response future for [`ListenFilter`](super::ListenFilter).
    pub struct ResponseFuture<S, ReqBody, ResBody>
    where
        S: Service<Request<ReplayBody<ReqBody>>>,
        ReqBody: Body,
        ResBody: Body,
    {
        #[pin]
        state: State<S, ReqBody, ResBody>,
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
            profile: ServerProfile,
            guard_stream: bool,
        },
        Honouring {
            // Boxed: it runs the user's async hooks, once per listen, off the hot path.
            future: Pin<Box<dyn Future<Output = Honoured> + Send>>,
            service: Option<S>,
            guard_stream: bool,
        },
        Calling {
            #[pin]
            future: S::Future,
            // The filter to guard the response stream by; the guard is set up
            // only if the response is an event stream.
            guard: Option<HonouredFilter>,
            _body: std::marker::PhantomData<fn() -> ResBody>,
        },
        Rejected {
            refusal: Option<Refusal>,
        },
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Stage {
    /// Reading until the body's method is known.
    Classify,
    /// Reading a listen request whole.
    Listen,
    /// Reading a batch whole, to look for a listen in it.
    Batch,
    /// Reading the body for its id, to answer with this rejection.
    Refuse(Rejection),
}

impl<S, ReqBody, ResBody> ResponseFuture<S, ReqBody, ResBody>
where
    S: Service<Request<ReplayBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body + Unpin,
    ResBody: Body + Unpin,
{
    pub(super) fn calling(future: S::Future, guard: Option<HonouredFilter>) -> Self {
        Self {
            state: State::Calling {
                future,
                guard,
                _body: std::marker::PhantomData,
            },
        }
    }

    pub(super) fn rejected(rejection: Rejection, id: Option<Box<RawValue>>) -> Self {
        Self {
            state: State::Rejected {
                refusal: Some((rejection, id)),
            },
        }
    }

    pub(super) fn peeking(
        service: S,
        parts: request::Parts,
        peek: Peek<ReqBody>,
        named: Option<Method>,
        profile: ServerProfile,
        guard_stream: bool,
    ) -> Self {
        Self {
            state: State::Peeking {
                peek: Some(peek),
                parts: Some(parts),
                service: Some(service),
                stage: Stage::Classify,
                named,
                profile,
                guard_stream,
            },
        }
    }
}

/// The next stage once the body's method is known, by the header rules;
/// `None` passes the request on. `first` is the body's first top-level
/// method, when it was read.
fn classify(
    peeked: Peeked,
    first: Option<Method>,
    named: Option<Method>,
    headers: &HeaderMap,
    limit: usize,
) -> Option<Stage> {
    let refuse = |rejection| Some(Stage::Refuse(rejection));
    match peeked {
        Peeked::Decided(Outcome::Method(Method::Listen)) => {
            if named.is_some_and(|named| named != Method::Listen) {
                refuse(Rejection::HeaderMismatch)
            } else if content_length(headers).is_some_and(|n| n > limit as u64) {
                refuse(Rejection::BodyTooLarge { limit })
            } else {
                Some(Stage::Listen)
            }
        }
        Peeked::Decided(Outcome::DuplicateMethod) => refuse(Rejection::InvalidRequest(
            "the request has more than one `method`",
        )),
        // The method must be named within the limit: past it, a listen could hide.
        Peeked::TooLarge(_) => refuse(Rejection::BodyTooLarge { limit }),
        // Not JSON to this layer: a lenient parser behind it could still find a listen.
        Peeked::Decided(Outcome::Invalid) => refuse(Rejection::Parse),
        Peeked::BodyError if named == Some(Method::Listen) || first == Some(Method::Listen) => {
            refuse(Rejection::BodyUnreadable)
        }
        _ if named == Some(Method::Listen) => refuse(Rejection::HeaderMismatch),
        Peeked::Decided(Outcome::Batch) => Some(Stage::Batch),
        Peeked::Decided(_) | Peeked::BodyError => None,
    }
}

async fn honour_listen(profile: ServerProfile, parts: request::Parts, body: Bytes) -> Honoured {
    let listen = ListenRequest::parse(&body)?;
    let id = || Some(listen.id.to_owned());
    let (filter, notifications) = match honour_at(&profile, &parts, listen.id, listen.params).await
    {
        Ok(honoured) => honoured,
        Err(error) => return Err((Rejection::Listen(error), id())),
    };
    let body = listen.with_ack(notifications, filter.ack()).ok_or((
        Rejection::InvalidRequest("`params.notifications` is required"),
        id(),
    ))?;
    let uris = filter.resource_uris().count();
    let task_ids = filter.task_ids().count();
    tracing::info!(
        kinds = ?filter.kinds(),
        requested_uris = filter.requested_uris(),
        honoured_uris = uris,
        requested_task_ids = filter.requested_task_ids(),
        honoured_task_ids = task_ids,
        principal = filter.principal().is_some(),
        "listen honoured"
    );
    Ok((parts, body.into(), filter))
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
            let next = match self.as_mut().project().state.project() {
                StateProj::Peeking {
                    peek,
                    parts,
                    service,
                    stage,
                    named,
                    profile,
                    guard_stream,
                } => {
                    let reader = peek
                        .as_mut()
                        .expect("peek taken only when leaving the state");
                    let limit = profile.limits().max_listen_body;
                    match stage.clone() {
                        Stage::Classify => {
                            let peeked = ready!(reader.poll_classify(cx));
                            let headers = &parts.as_ref().expect("parts are here").headers;
                            match classify(peeked, reader.method(), *named, headers, limit) {
                                Some(next) => {
                                    *stage = next;
                                    continue;
                                }
                                None => pass_on(peek, parts, service),
                            }
                        }
                        Stage::Listen => match ready!(reader.poll_buffer(cx)) {
                            Ok(()) => {
                                let body = reader.buffered();
                                let parts = parts.take().expect("parts are here");
                                State::Honouring {
                                    future: Box::pin(honour_listen(profile.clone(), parts, body)),
                                    service: service.take(),
                                    guard_stream: *guard_stream,
                                }
                            }
                            Err(error) => {
                                *stage = Stage::Refuse(refusal_for(error, limit));
                                continue;
                            }
                        },
                        Stage::Batch => match ready!(reader.poll_buffer(cx)) {
                            Ok(()) => match batch_has_listen(&reader.buffered()) {
                                Some(false) => pass_on(peek, parts, service),
                                Some(true) => State::Rejected {
                                    refusal: Some((
                                        Rejection::InvalidRequest(
                                            "a batch must not contain a listen request",
                                        ),
                                        None,
                                    )),
                                },
                                None => State::Rejected {
                                    refusal: Some((Rejection::Parse, None)),
                                },
                            },
                            Err(error) => State::Rejected {
                                refusal: Some((refusal_for(error, limit), None)),
                            },
                        },
                        Stage::Refuse(rejection) => {
                            // Read what fits, for the id; a rejection past the limit echoes none.
                            let read = ready!(reader.poll_buffer(cx));
                            let id = read
                                .ok()
                                .and_then(|()| json::request_id(&reader.buffered()));
                            State::Rejected {
                                refusal: Some((rejection, id)),
                            }
                        }
                    }
                }
                StateProj::Honouring {
                    future,
                    service,
                    guard_stream,
                } => match ready!(future.as_mut().poll(cx)) {
                    Ok((mut parts, body, filter)) => {
                        parts
                            .headers
                            .insert(header::CONTENT_LENGTH, body.len().into());
                        parts.headers.remove(header::TRANSFER_ENCODING);
                        let guard = guard_stream.then(|| filter.clone());
                        parts.extensions.insert(filter);
                        let request = Request::from_parts(parts, ReplayBody::full(body));
                        let future = service.take().expect("service is here").call(request);
                        State::Calling {
                            future,
                            guard,
                            _body: std::marker::PhantomData,
                        }
                    }
                    Err(refusal) => State::Rejected {
                        refusal: Some(refusal),
                    },
                },
                StateProj::Calling { future, guard, .. } => {
                    let response = ready!(future.poll(cx))?;
                    let response = match guard.take() {
                        Some(filter) if is_event_stream(response.headers()) => {
                            let (mut parts, body) = response.into_parts();
                            parts.headers.remove(header::CONTENT_LENGTH);
                            let guard = Rule::Guard(Guard::new(filter));
                            Response::from_parts(parts, ResponseBody::events(body, guard))
                        }
                        _ => response.map(ResponseBody::pass_through),
                    };
                    return Poll::Ready(Ok(response));
                }
                StateProj::Rejected { refusal } => {
                    let (rejection, id) = refusal
                        .take()
                        .expect("ResponseFuture polled after completion");
                    tracing::debug!(%rejection, "listen filter: request answered by the layer");
                    return Poll::Ready(Ok(rejection.into_response(id.as_deref())));
                }
            };
            self.as_mut().project().state.set(next);
        }
    }
}

fn refusal_for(error: BufferError, limit: usize) -> Rejection {
    match error {
        BufferError::TooLarge => Rejection::BodyTooLarge { limit },
        BufferError::BodyError => Rejection::BodyUnreadable,
    }
}

/// Calls the inner service with the request as it came.
fn pass_on<S, ReqBody, ResBody>(
    peek: &mut Option<Peek<ReqBody>>,
    parts: &mut Option<request::Parts>,
    service: &mut Option<S>,
) -> State<S, ReqBody, ResBody>
where
    S: Service<Request<ReplayBody<ReqBody>>, Response = Response<ResBody>>,
    ReqBody: Body + Unpin,
    ResBody: Body + Unpin,
{
    let body = peek.take().expect("peek is here").into_replay();
    let request = Request::from_parts(parts.take().expect("parts are here"), body);
    State::Calling {
        future: service.take().expect("service is here").call(request),
        guard: None,
        _body: std::marker::PhantomData,
    }
}
