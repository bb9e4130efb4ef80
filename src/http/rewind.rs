//! [`Rewind`]: a body read in part, then handed on whole.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// Chunks in order, with their total length. Most bodies are read in one
/// chunk, which is kept inline: no allocation.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    first: Option<Bytes>,
    more: Vec<Bytes>,
    // How many of `more` were taken.
    taken: usize,
    len: usize,
}

impl Chunks {
    /// Appends a chunk.
    pub(crate) fn push_back(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        if self.first.is_none() && self.more.is_empty() {
            self.first = Some(chunk);
        } else {
            self.more.push(chunk);
        }
    }

    /// Takes the first chunk.
    fn pop_front(&mut self) -> Option<Bytes> {
        let chunk = match self.first.take() {
            Some(chunk) => chunk,
            None => {
                let chunk = std::mem::take(self.more.get_mut(self.taken)?);
                self.taken += 1;
                chunk
            }
        };
        self.len -= chunk.len();
        Some(chunk)
    }

    /// The chunks not taken, first to last.
    fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(&self.more[self.taken..])
    }

    /// The chunk, when there is exactly one.
    pub(crate) fn only(&self) -> Option<&Bytes> {
        self.first.as_ref().filter(|_| self.more.is_empty())
    }

    /// The first chunk.
    pub(crate) fn front(&self) -> Option<&Bytes> {
        self.iter().next()
    }

    /// The last chunk.
    pub(crate) fn back(&self) -> Option<&Bytes> {
        self.more[self.taken..].last().or(self.first.as_ref())
    }

    /// Bytes in all the chunks.
    pub(crate) fn byte_len(&self) -> usize {
        self.len
    }

    fn is_empty(&self) -> bool {
        self.first.is_none() && self.taken == self.more.len()
    }

    /// All the chunks as one buffer, copied only if there are several.
    fn concat(&self) -> Bytes {
        let mut chunks = self.iter();
        match (chunks.next(), chunks.next()) {
            (None, _) => Bytes::new(),
            (Some(only), None) => only.clone(),
            _ => {
                let mut all = bytes::BytesMut::with_capacity(self.len);
                self.iter().for_each(|chunk| all.extend_from_slice(chunk));
                all.freeze()
            }
        }
    }
}

/// A chunk as `Bytes`: no copy when it already is one.
pub(crate) fn to_bytes<D: Buf>(mut data: D) -> Bytes {
    data.copy_to_bytes(data.remaining())
}

/// Polls `body` for its next frame, with the data as `Bytes`.
#[inline]
pub(crate) fn poll_bytes<B: Body>(
    body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
    body.poll_frame(cx)
        .map(|frame| frame.map(|frame| frame.map(|frame| frame.map_data(to_bytes))))
}

/// How a body ended while it was being read: what it still owes the reader
/// after the chunks.
enum End<E> {
    Trailers(Box<HeaderMap>),
    Error(E),
}

/// Why a body could not be read whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// The body is longer than the limit.
    TooLarge,
    /// The body returned an error.
    Failed,
}

pin_project! {
    /// A body that a layer reads in part, keeping what it read, then hands
    /// on whole: the chunks read (the original chunks, not copies), what the
    /// body ended with while being read (trailers or an error), then
    /// whatever the body still holds.
    pub(crate) struct Rewind<B: Body> {
        prefix: Chunks,
        end: Option<End<B::Error>>,
        // `None` once the body ended while it was being read.
        #[pin]
        rest: Option<B>,
    }
}

impl<B: Body> Rewind<B> {
    /// `body`, nothing read yet.
    pub(crate) fn new(body: B) -> Self {
        Self {
            prefix: Chunks::default(),
            end: None,
            rest: Some(body),
        }
    }

    /// The chunks read so far.
    pub(crate) fn prefix(&self) -> &Chunks {
        &self.prefix
    }

    /// True when the body ended with the chunks read, without an error.
    pub(crate) fn ended(&self) -> bool {
        !self.failed() && self.rest.as_ref().is_none_or(|rest| rest.is_end_stream())
    }

    /// True when the body returned an error while being read.
    pub(crate) fn failed(&self) -> bool {
        matches!(self.end, Some(End::Error(_)))
    }

    /// Reads one more data frame into the prefix; `false` once the body
    /// ended or failed.
    pub(crate) fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut this = self.project();
        while let Some(rest) = this.rest.as_mut().as_pin_mut() {
            match ready!(rest.poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let chunk = to_bytes(data);
                        if chunk.is_empty() {
                            continue;
                        }
                        this.prefix.push_back(chunk);
                        return Poll::Ready(true);
                    }
                    Err(frame) => {
                        *this.end = frame
                            .into_trailers()
                            .ok()
                            .map(|t| End::Trailers(Box::new(t)));
                        this.rest.set(None);
                    }
                },
                Some(Err(error)) => {
                    *this.end = Some(End::Error(error));
                    this.rest.set(None);
                }
                None => this.rest.set(None),
            }
        }
        Poll::Ready(false)
    }

    /// Reads the rest of the body into the prefix, at most `limit` bytes in all.
    pub(crate) fn poll_whole(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        limit: usize,
    ) -> Poll<Result<(), ReadError>> {
        loop {
            if self.prefix.byte_len() > limit {
                return Poll::Ready(Err(ReadError::TooLarge));
            }
            if !ready!(self.as_mut().poll_read(cx)) {
                return Poll::Ready(match self.failed() {
                    true => Err(ReadError::Failed),
                    false => Ok(()),
                });
            }
        }
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        self.prefix.concat()
    }

    /// The trailers, if the body ended with some while being read.
    pub(crate) fn take_trailers(self: Pin<&mut Self>) -> Option<HeaderMap> {
        let end = self.project().end;
        match end.take() {
            Some(End::Trailers(trailers)) => Some(*trailers),
            other => {
                *end = other;
                None
            }
        }
    }
}

impl<B: Body> Body for Rewind<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
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
    use http_body_util::{BodyExt, Full, StreamBody};
    use std::future::poll_fn;

    type Frames = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

    fn stream(frames: Vec<Result<Frame<Bytes>, std::io::Error>>) -> Frames {
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn data(chunk: &'static [u8]) -> Result<Frame<Bytes>, std::io::Error> {
        Ok(Frame::data(Bytes::from_static(chunk)))
    }

    /// `body` with its first `reads` data frames read.
    async fn read<B: Body>(body: B, reads: usize) -> Pin<Box<Rewind<B>>> {
        let mut rewind = Box::pin(Rewind::new(body));
        for _ in 0..reads {
            poll_fn(|cx| rewind.as_mut().poll_read(cx)).await;
        }
        rewind
    }

    #[tokio::test]
    async fn yields_what_was_read_then_the_rest_and_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "1".parse().unwrap());
        let body = stream(vec![
            data(b"a"),
            data(b"b"),
            data(b"cd"),
            Ok(Frame::trailers(trailers.clone())),
        ]);
        let rewind = read(body, 2).await;
        assert_eq!(rewind.buffered(), "ab");
        let collected = rewind.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(&collected.to_bytes()[..], b"abcd");
    }

    #[tokio::test]
    async fn what_the_body_ended_with_is_kept() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "2".parse().unwrap());
        let body = stream(vec![data(b"x"), Ok(Frame::trailers(trailers.clone()))]);
        let mut rewind = read(body, 1).await;
        assert!(!poll_fn(|cx| rewind.as_mut().poll_read(cx)).await);
        assert!(rewind.ended());
        let collected = rewind.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        let body = stream(vec![data(b"x"), Err(std::io::Error::other("broken"))]);
        let mut rewind = read(body, 1).await;
        assert_eq!(
            poll_fn(|cx| rewind.as_mut().poll_whole(cx, 100)).await,
            Err(ReadError::Failed)
        );
        assert!(rewind.failed() && !rewind.ended());
        assert_eq!(
            rewind.frame().await.unwrap().unwrap().into_data().unwrap(),
            "x"
        );
        assert!(rewind.frame().await.unwrap().is_err());
    }

    #[tokio::test]
    async fn whole_stops_past_the_limit() {
        let body = stream(vec![data(b"0123"), data(b"4567"), data(b"89")]);
        let mut rewind = read(body, 0).await;
        assert_eq!(
            poll_fn(|cx| rewind.as_mut().poll_whole(cx, 5)).await,
            Err(ReadError::TooLarge)
        );
        assert_eq!(rewind.buffered(), "01234567");
        assert_eq!(
            &rewind.collect().await.unwrap().to_bytes()[..],
            b"0123456789"
        );
    }

    #[tokio::test]
    async fn size_hint_and_end_stream_are_exact() {
        let rewind = read(Full::new(Bytes::from_static(b"12345")), 0).await;
        assert_eq!(rewind.size_hint().exact(), Some(5));
        assert!(!rewind.is_end_stream());
        let mut rewind = read(Full::new(Bytes::from_static(b"12345")), 1).await;
        assert_eq!(rewind.size_hint().exact(), Some(5));
        assert_eq!(
            rewind.frame().await.unwrap().unwrap().into_data().unwrap(),
            "12345"
        );
        assert!(rewind.is_end_stream());
        assert_eq!(rewind.size_hint().exact(), Some(0));
    }
}
