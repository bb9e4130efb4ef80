//! [`ListenHubLayer`]: the listens that carry a [`HonouredFilter`] are the
//! hub's; every other request is the inner service's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{header, HeaderValue, Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::registry::{Admission, Opener};
use super::shared::Shared;
use super::stream::ListenStream;
use crate::filter::stream::{ended_at_once, event_stream, Served};
use crate::filter::{HonouredFilter, ListenError};
use crate::http::once::Once;
use crate::http::rewind::poll_bytes;
use crate::jsonrpc::{JsonRpcError, RESOURCE_EXHAUSTED};
use crate::metrics::{self, Ended};

/// How long a client refused for a cap is asked to wait, in seconds: the
/// `Retry-After` header and the error's `data.retryAfter`.
const RETRY_AFTER_SECS: u32 = 5;

/// Layer that serves the listens of a [`ListenHub`](super::ListenHub); see
/// the [module docs](super).
#[derive(Clone)]
pub struct ListenHubLayer {
    shared: Arc<Shared>,
}

impl ListenHubLayer {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }
}

impl std::fmt::Debug for ListenHubLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenHubLayer").finish_non_exhaustive()
    }
}

impl<S> Layer<S> for ListenHubLayer {
    type Service = ListenHubService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ListenHubService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// Middleware that answers every honoured listen with a hub stream.
#[derive(Clone)]
pub struct ListenHubService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> ListenHubService<S> {
    /// Gets a reference to the inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// Consumes `self`, returning the inner service.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S> std::fmt::Debug for ListenHubService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenHubService").finish_non_exhaustive()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for ListenHubService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Body + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let Some(filter) = request.extensions().get::<HonouredFilter>().cloned() else {
            return ResponseFuture::inner(self.inner.call(request));
        };
        if filter.is_empty() {
            // Nothing to hear: no slot, no stream held.
            return ResponseFuture::ready(ended_at_once(&filter).map(ResponseBody::from));
        }
        let (parts, _) = request.into_parts();
        let bucket = self.shared.key(&parts).into();
        let opener = Opener::Stream {
            filter: &filter,
            bucket,
            caps: self.shared.config.caps,
        };
        let admission = self.shared.registry().open(opener, &*self.shared.bus);
        let response = match admission {
            Admission::Open(id, queue) => stream(ListenStream::new(
                self.shared.clone(),
                Some(id),
                queue,
                filter,
            )),
            Admission::Closed(queue) => {
                stream(ListenStream::new(self.shared.clone(), None, queue, filter))
            }
            Admission::Full { cap, max } => {
                metrics::listen_refused(cap.into());
                metrics::listen_ended(Ended::Cap);
                let limit = cap.name();
                tracing::info!(limit, max, "listen hub: a listen over a cap was refused");
                let error = JsonRpcError::new(
                    RESOURCE_EXHAUSTED,
                    format!("too many open listen streams: at most {max} ({limit})"),
                )
                .with_status(StatusCode::TOO_MANY_REQUESTS)
                .with_data(serde_json::json!({
                    "limit": limit,
                    "max": max,
                    "retryAfter": RETRY_AFTER_SECS,
                }));
                let mut response: Response<ResponseBody<Bytes>> =
                    error.to_response(Some(filter.subscription_id()));
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
                response
            }
            Admission::Duplicate => {
                metrics::listen_ended(Ended::Duplicate);
                let error = ListenError::SubscriptionIdInUse.to_jsonrpc();
                error.to_response(Some(filter.subscription_id()))
            }
        };
        ResponseFuture::ready(response)
    }
}

/// The response of a listen stream (marked as the hub's once its body has
/// its final type: see [`ResponseFuture`]).
fn stream(stream: ListenStream) -> Response<ResponseBody<Bytes>> {
    event_stream(ResponseBody::of(BodyKind::Stream { stream }))
}

pin_project! {
    /// Response future of [`ListenHubService`].
    pub struct ResponseFuture<F> {
        #[pin]
        kind: FutureKind<F>,
    }
}

pin_project! {
    #[project = FutureProj]
    enum FutureKind<F> {
        // The inner service answers.
        Inner {
            #[pin]
            future: F,
        },
        // The hub answered.
        Ready {
            response: Option<Response<ResponseBody<Bytes>>>,
        },
    }
}

impl<F> ResponseFuture<F> {
    fn inner(future: F) -> Self {
        Self {
            kind: FutureKind::Inner { future },
        }
    }

    fn ready(response: Response<ResponseBody<Bytes>>) -> Self {
        Self {
            kind: FutureKind::Ready {
                response: Some(response),
            },
        }
    }
}

// `B` is `'static` so that the mark can test a body's type.
impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Body + 'static,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            FutureProj::Inner { future } => future.poll(cx).map(|result| {
                result
                    .map(|response| response.map(|body| ResponseBody::of(BodyKind::Inner { body })))
            }),
            FutureProj::Ready { response } => {
                let mut response = response
                    .take()
                    .expect("ResponseFuture polled after completion")
                    .map(ResponseBody::<B>::retyped);
                if let BodyKind::Stream { .. } = response.body().kind {
                    let served = Served::new(ResponseBody::<B>::is_stream_of);
                    response.extensions_mut().insert(served);
                }
                Poll::Ready(Ok(response))
            }
        }
    }
}

pin_project! {
    /// Response body of [`ListenHubService`]: the inner service's body, a
    /// hub stream, or the hub's own answer.
    pub struct ResponseBody<B> {
        #[pin]
        kind: BodyKind<B>,
    }
}

pin_project! {
    #[project = BodyProj]
    enum BodyKind<B> {
        // The inner service's body, untouched.
        Inner {
            #[pin]
            body: B,
        },
        // A listen stream.
        Stream {
            stream: ListenStream,
        },
        // An answer the hub wrote.
        Full {
            body: Once,
        },
    }
}

impl<B> ResponseBody<B> {
    fn of(kind: BodyKind<B>) -> Self {
        Self { kind }
    }

    /// True when `body` is this type's stream for `filter` itself: the
    /// test of the hub's mark ([`Served`]).
    fn is_stream_of(body: &dyn std::any::Any, filter: &HonouredFilter) -> bool
    where
        B: 'static,
    {
        match body.downcast_ref::<Self>().map(|body| &body.kind) {
            Some(BodyKind::Stream { stream }) => stream.filter().is(filter),
            _ => false,
        }
    }

    /// The hub's own answer, whatever the inner body type.
    fn retyped<C>(body: ResponseBody<C>) -> Self {
        Self::of(match body.kind {
            BodyKind::Stream { stream } => BodyKind::Stream { stream },
            BodyKind::Full { body } => BodyKind::Full { body },
            BodyKind::Inner { .. } => BodyKind::Full {
                body: Once::default(),
            },
        })
    }
}

impl<B> From<Bytes> for ResponseBody<B> {
    fn from(data: Bytes) -> Self {
        Self::of(BodyKind::Full {
            body: Once::new(data),
        })
    }
}

impl<B: Body> Body for ResponseBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            BodyProj::Inner { body } => poll_bytes(body, cx),
            BodyProj::Stream { stream } => Pin::new(stream)
                .poll_frame(cx)
                .map(|frame| frame.map(|frame| frame.map_err(|never| match never {}))),
            BodyProj::Full { body } => Poll::Ready(body.next_frame().map(Ok)),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            BodyKind::Inner { body } => body.is_end_stream(),
            BodyKind::Stream { stream } => stream.is_end_stream(),
            BodyKind::Full { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Inner { body } => body.size_hint(),
            BodyKind::Stream { .. } => SizeHint::default(),
            BodyKind::Full { body } => body.size_hint(),
        }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.kind {
            BodyKind::Inner { .. } => "Inner",
            BodyKind::Stream { .. } => "Stream",
            BodyKind::Full { .. } => "Full",
        };
        f.debug_struct("ResponseBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
