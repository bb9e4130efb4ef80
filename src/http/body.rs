//! [`RequestBody`]: the request body every mcp-edge layer hands on.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::once::Once;
use super::rewind::{poll_bytes, Rewind};
use super::watch::Watch;

pin_project! {
    /// Request body handed to the inner service by the mcp-edge layers.
    ///
    /// It is the original body untouched, the bytes a layer read followed
    /// by the rest of the original body (the original chunks, not copies;
    /// cut short if a second top-level `method` follows), or a body the
    /// layer rewrote.
    pub struct RequestBody<B>
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
        Rewound {
            body: Pin<Box<Watch<Rewind<B>>>>,
        },
        Full {
            body: Once,
        },
    }
}

impl<B: Body> RequestBody<B> {
    /// The original body, untouched.
    pub(crate) fn pass_through(body: B) -> Self {
        Self {
            kind: Kind::PassThrough { body },
        }
    }

    /// A body read in part, handed on whole.
    pub(crate) fn rewound(body: Pin<Box<Watch<Rewind<B>>>>) -> Self {
        Self {
            kind: Kind::Rewound { body },
        }
    }

    /// A body the layer built in full.
    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                body: Once::new(data),
            },
        }
    }
}

impl<B: Body> Body for RequestBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::PassThrough { body } => poll_bytes(body, cx),
            KindProj::Rewound { body } => body.as_mut().poll_frame(cx),
            KindProj::Full { body } => Poll::Ready(body.next_frame().map(Ok)),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::PassThrough { body } => body.is_end_stream(),
            Kind::Rewound { body } => body.is_end_stream(),
            Kind::Full { body } => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::PassThrough { body } => body.size_hint(),
            Kind::Rewound { body } => body.size_hint(),
            Kind::Full { body } => body.size_hint(),
        }
    }
}

impl<B: Body> fmt::Debug for RequestBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::PassThrough { .. } => "PassThrough",
            Kind::Rewound { .. } => "Rewound",
            Kind::Full { .. } => "Full",
        };
        f.debug_struct("RequestBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};

    #[test]
    fn size_hint_and_end_stream_are_exact() {
        let full = RequestBody::<Full<Bytes>>::full(Bytes::from_static(b"abc"));
        assert_eq!(full.size_hint().exact(), Some(3));
        assert!(!full.is_end_stream());
        assert!(RequestBody::<Full<Bytes>>::full(Bytes::new()).is_end_stream());
        let through = RequestBody::pass_through(Full::new(Bytes::from_static(b"xy")));
        assert_eq!(through.size_hint().exact(), Some(2));
    }

    #[tokio::test]
    async fn pass_through_is_untouched() {
        let body = RequestBody::pass_through(Full::new(Bytes::from_static(b"hello")));
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"hello");
    }
}
