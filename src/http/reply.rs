//! [`Reply`]: what a layer's response body is made of (each layer's own
//! body and future are newtypes around it: `crate::macros`).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::event_stream::{EventRule, EventStream, Screen, Verbatim};
use super::once::Once;
use super::rewind::{poll_bytes, Rewind};

pin_project! {
    /// A response as a layer hands it back: the inner service's body
    /// untouched, a body the layer wrote (a rewrite, or its own answer), a
    /// body it read and replays, an SSE stream ruled event by event, or one
    /// only screened. The last three are boxed: they are rare next to the
    /// first, and every response is moved a few times on its way out.
    #[project = ReplyProj]
    pub(crate) enum Reply<B, E, S>
    where
        B: Body,
    {
        PassThrough {
            #[pin]
            body: B,
        },
        // What the layer wrote, then the trailers the inner's body ended with.
        Full {
            body: Once,
            trailers: Option<Box<HeaderMap>>,
        },
        Rewound {
            body: Pin<Box<Rewind<B>>>,
        },
        Events {
            body: Pin<Box<EventStream<B, E, S>>>,
        },
        Screened {
            body: Pin<Box<EventStream<B, Verbatim, S>>>,
        },
    }
}

impl<B: Body, E, S> Reply<B, E, S> {
    /// A body the layer wrote, with the trailers the inner's body ended with.
    pub(crate) fn full(data: Bytes, trailers: Option<HeaderMap>) -> Self {
        Self::Full {
            body: Once::new(data),
            trailers: trailers.map(Box::new),
        }
    }

    /// The inner's body read in part, replayed whole.
    pub(crate) fn rewound(body: Pin<Box<Rewind<B>>>) -> Self {
        Self::Rewound { body }
    }

    /// The inner's event stream, screened by `screen` and ruled by `rule`.
    pub(crate) fn events(body: B, rule: E, screen: Option<S>) -> Self {
        Self::Events {
            body: Box::pin(EventStream::screened(body, rule, screen)),
        }
    }

    /// The inner's event stream, screened by `screen` and passed as parsed.
    pub(crate) fn screened(body: B, screen: S) -> Self {
        Self::Screened {
            body: Box::pin(EventStream::screened(body, Verbatim, Some(screen))),
        }
    }

    /// The variant's name, for `Debug`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::PassThrough { .. } => "PassThrough",
            Self::Full { .. } => "Full",
            Self::Rewound { .. } => "Rewound",
            Self::Events { .. } => "Events",
            Self::Screened { .. } => "Screened",
        }
    }
}

impl<B: Body, E, S> From<Bytes> for Reply<B, E, S> {
    fn from(data: Bytes) -> Self {
        Self::full(data, None)
    }
}

impl<B: Body, E: EventRule, S: Screen> Body for Reply<B, E, S> {
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project() {
            ReplyProj::PassThrough { body } => poll_bytes(body, cx),
            ReplyProj::Full { body, trailers } => Poll::Ready(
                body.next_frame()
                    .or_else(|| trailers.take().map(|trailers| Frame::trailers(*trailers)))
                    .map(Ok),
            ),
            ReplyProj::Rewound { body } => body.as_mut().poll_frame(cx),
            ReplyProj::Events { body } => body.as_mut().poll_frame(cx),
            ReplyProj::Screened { body } => body.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::PassThrough { body } => body.is_end_stream(),
            Self::Full { body, trailers } => body.is_end_stream() && trailers.is_none(),
            Self::Rewound { body } => body.is_end_stream(),
            Self::Events { body } => body.is_end_stream(),
            Self::Screened { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::PassThrough { body } => body.size_hint(),
            Self::Full { body, .. } => body.size_hint(),
            Self::Rewound { body } => body.size_hint(),
            Self::Events { .. } | Self::Screened { .. } => SizeHint::default(),
        }
    }
}

/// Asserts that a layer's response body made from bytes (the layer's own
/// answers) is exactly those bytes, with an exact size hint.
#[cfg(test)]
pub(crate) async fn assert_made_from_bytes<B>()
where
    B: From<bytes::Bytes> + http_body::Body,
    B::Error: std::fmt::Debug,
{
    use http_body_util::BodyExt;

    let data = bytes::Bytes::from_static(b"{\"jsonrpc\":\"2.0\"}");
    let body = B::from(data.clone());
    assert_eq!(body.size_hint().exact(), Some(data.len() as u64));
    assert_eq!(body.collect().await.unwrap().to_bytes(), data);
}
