//! [`Rewind`]: the bytes a layer read, then the rest of the body.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::peek::{to_bytes, Chunks, End};

pin_project! {
    /// A body read in part, handed on whole: the chunks read (the original
    /// chunks, not copies), what the body ended with while being read
    /// (trailers or an error), then whatever the body still holds.
    pub(crate) struct Rewind<R: Body> {
        prefix: Chunks,
        end: Option<End<R::Error>>,
        // `None` once the body ended while it was being read.
        #[pin]
        rest: Option<R>,
    }
}

impl<R: Body> Rewind<R> {
    pub(crate) fn new(prefix: Chunks, end: Option<End<R::Error>>, rest: Option<R>) -> Self {
        Self { prefix, end, rest }
    }
}

/// Polls `body` for its next frame, with the data as `Bytes`.
pub(crate) fn poll_bytes<B: Body>(
    body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
    body.poll_frame(cx)
        .map(|frame| frame.map(|frame| frame.map(|frame| frame.map_data(to_bytes))))
}

impl<R: Body> Body for Rewind<R> {
    type Data = Bytes;
    type Error = R::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, R::Error>>> {
        let this = self.project();
        if let Some(chunk) = this.prefix.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        match this.end.take() {
            Some(End::Error(error)) => return Poll::Ready(Some(Err(error))),
            Some(End::Trailers(trailers)) => {
                return Poll::Ready(Some(Ok(Frame::trailers(*trailers))))
            }
            None => {}
        }
        match this.rest.as_pin_mut() {
            Some(rest) => poll_bytes(rest, cx),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.prefix.is_empty()
            && self.end.is_none()
            && self.rest.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        let buffered = self.prefix.byte_len() as u64;
        let rest = self
            .rest
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), Body::size_hint);
        let mut hint = SizeHint::new();
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + buffered);
        }
        hint.set_lower(rest.lower() + buffered);
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderMap;
    use http_body_util::{BodyExt, Full, StreamBody};

    type Frames = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

    fn stream(frames: Vec<Result<Frame<Bytes>, std::io::Error>>) -> Frames {
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn prefix(chunks: &[&'static [u8]]) -> Chunks {
        chunks.iter().map(|c| Bytes::from_static(c)).collect()
    }

    #[tokio::test]
    async fn yields_prefix_then_rest_and_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "1".parse().unwrap());
        let rest = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Ok(Frame::trailers(trailers.clone())),
        ]);
        let collected = Rewind::new(prefix(&[b"a", b"b"]), None, Some(rest))
            .collect()
            .await
            .unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(&collected.to_bytes()[..], b"abcd");
    }

    #[tokio::test]
    async fn after_the_end_keeps_trailers_and_errors() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "2".parse().unwrap());
        let end = Some(End::Trailers(Box::new(trailers.clone())));
        let body = Rewind::<Frames>::new(prefix(&[b"x"]), end, None);
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        let end = Some(End::Error(std::io::Error::other("broken")));
        let mut body = Rewind::<Frames>::new(prefix(&[b"x"]), end, None);
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "x"
        );
        assert!(body.frame().await.unwrap().is_err());
    }

    #[test]
    fn size_hint_and_end_stream_are_exact() {
        let rest = Full::new(Bytes::from_static(b"12345"));
        let rewind = Rewind::new(prefix(&[b"ab"]), None, Some(rest));
        assert_eq!(rewind.size_hint().exact(), Some(7));
        assert!(!rewind.is_end_stream());
        let done = Rewind::<Full<Bytes>>::new(Chunks::default(), None, None);
        assert!(done.is_end_stream());
        assert_eq!(done.size_hint().exact(), Some(0));
    }
}
