//! [`ResponseBody`]: the response body both layers return.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::capabilities::ResultRewrite;
use crate::event_stream::{EventRule, EventStream};
use crate::listen_filter::Guard;
use crate::replay::{poll_bytes, ReplayBody};
use crate::sse::Event;

pin_project! {
    /// Response body of [`Capabilities`](crate::Capabilities) and
    /// [`ListenFilter`](crate::ListenFilter).
    ///
    /// The inner service's body untouched, a body the layer rewrote or
    /// answered itself, or an SSE stream filtered event by event.
    pub struct ResponseBody<B>
    where
        B: Body,
    {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B>
    where
        B: Body,
    {
        PassThrough {
            #[pin]
            body: B,
        },
        Replay {
            #[pin]
            body: ReplayBody<B>,
        },
        Full {
            data: Option<Bytes>,
            trailers: Option<HeaderMap>,
        },
        Events {
            #[pin]
            body: EventStream<B, Rule>,
        },
    }
}

/// The per-event rule of a filtered stream.
pub(crate) enum Rule {
    Result(ResultRewrite),
    Guard(Guard),
}

impl EventRule for Rule {
    fn on_event(&mut self, event: Event, out: &mut VecDeque<Bytes>) {
        match self {
            Rule::Result(rule) => rule.on_event(event, out),
            Rule::Guard(rule) => rule.on_event(event, out),
        }
    }

    fn passes_rest(&self) -> bool {
        match self {
            Rule::Result(rule) => rule.passes_rest(),
            Rule::Guard(rule) => rule.passes_rest(),
        }
    }
}

impl<B: Body> ResponseBody<B> {
    pub(crate) fn pass_through(body: B) -> Self {
        Self {
            kind: Kind::PassThrough { body },
        }
    }

    pub(crate) fn replay(body: ReplayBody<B>) -> Self {
        Self {
            kind: Kind::Replay { body },
        }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        Self::full_with_trailers(data, None)
    }

    pub(crate) fn full_with_trailers(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Self {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
                trailers,
            },
        }
    }

    pub(crate) fn events(body: B, rule: Rule) -> Self {
        Self {
            kind: Kind::Events {
                body: EventStream::new(body, rule),
            },
        }
    }
}

/// An empty body, for layers such as tower-http's auth and timeout that
/// answer with a default body.
impl<B: Body> Default for ResponseBody<B> {
    fn default() -> Self {
        Self::full(Bytes::new())
    }
}

impl<B: Body> From<Bytes> for ResponseBody<B> {
    fn from(data: Bytes) -> Self {
        Self::full(data)
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
            KindProj::PassThrough { body } => poll_bytes(body, cx),
            KindProj::Replay { body } => body.poll_frame(cx),
            KindProj::Full { data, trailers } => Poll::Ready(
                data.take()
                    .map(Frame::data)
                    .or_else(|| trailers.take().map(Frame::trailers))
                    .map(Ok),
            ),
            KindProj::Events { body } => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::PassThrough { body } => body.is_end_stream(),
            Kind::Replay { body } => body.is_end_stream(),
            Kind::Full { data, trailers } => data.is_none() && trailers.is_none(),
            Kind::Events { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::PassThrough { body } => body.size_hint(),
            Kind::Replay { body } => body.size_hint(),
            Kind::Full { data, .. } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Events { .. } => SizeHint::default(),
        }
    }
}

impl<B: Body> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::PassThrough { .. } => "PassThrough",
            Kind::Replay { .. } => "Replay",
            Kind::Full { .. } => "Full",
            Kind::Events { .. } => "Events",
        };
        f.debug_struct("ResponseBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}
