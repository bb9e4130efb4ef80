//! [`ReplayBody`]: the request body the inner service sees.

use std::collections::VecDeque;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::scan::{Outcome, Scanner};

pin_project! {
    /// Request body handed to the inner service by the mcp-edge layers.
    ///
    /// It is the original body, the bytes a layer peeked at followed by the
    /// rest of the original body, or a body the layer rewrote. Peeked bytes
    /// are the original chunks, not copies.
    pub struct ReplayBody<B>
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
            prefix: Chunks,
            // Trailers read while peeking, when the body ended inside the peek.
            trailers: Option<Box<HeaderMap>>,
            // An error the body returned while being peeked, yielded after the prefix.
            error: Option<<B as Body>::Error>,
            // Scans the rest for a second top-level `method` (see `Peek::watching`).
            watch: Option<Box<Scanner>>,
            // `None` once the original body ended inside the peek, or was cut short.
            #[pin]
            rest: Option<B>,
        },
        Full {
            data: Option<Bytes>,
        },
    }
}

impl<B: Body> ReplayBody<B> {
    /// The original body, untouched.
    pub(crate) fn pass_through(body: B) -> Self {
        Self {
            kind: Kind::PassThrough { body },
        }
    }

    /// The peeked chunks, then whatever the original body still holds.
    pub(crate) fn replay(
        prefix: Chunks,
        rest: Option<B>,
        trailers: Option<Box<HeaderMap>>,
        error: Option<B::Error>,
        watch: Option<Box<Scanner>>,
    ) -> Self {
        Self {
            kind: Kind::Replay {
                prefix,
                trailers,
                error,
                watch,
                rest,
            },
        }
    }

    /// A body the layer built in full.
    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }
}

/// Peeked chunks in order, with their total length. Most bodies are peeked
/// in one chunk, which is kept inline: no allocation.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    first: Option<Bytes>,
    more: VecDeque<Bytes>,
    len: usize,
}

impl Chunks {
    /// Appends a chunk.
    pub(crate) fn push_back(&mut self, chunk: Bytes) {
        self.len += chunk.len();
        if self.first.is_none() && self.more.is_empty() {
            self.first = Some(chunk);
        } else {
            self.more.push_back(chunk);
        }
    }

    /// Takes the first chunk.
    pub(crate) fn pop_front(&mut self) -> Option<Bytes> {
        let chunk = self.first.take().or_else(|| self.more.pop_front())?;
        self.len -= chunk.len();
        Some(chunk)
    }

    /// The last chunk.
    pub(crate) fn back(&self) -> Option<&Bytes> {
        self.more.back().or(self.first.as_ref())
    }

    /// The chunks, first to last.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Bytes> {
        self.first.iter().chain(&self.more)
    }

    /// Bytes in all the chunks.
    pub(crate) fn byte_len(&self) -> usize {
        self.len
    }

    /// True when no chunk is left.
    pub(crate) fn is_empty(&self) -> bool {
        self.first.is_none() && self.more.is_empty()
    }

    /// All the chunks as one buffer, copied only if there are several.
    pub(crate) fn concat(&self) -> Bytes {
        match (&self.first, self.more.is_empty()) {
            (None, _) => Bytes::new(),
            (Some(first), true) => first.clone(),
            _ => {
                let mut all = bytes::BytesMut::with_capacity(self.len);
                self.iter().for_each(|chunk| all.extend_from_slice(chunk));
                all.freeze()
            }
        }
    }
}

impl FromIterator<Bytes> for Chunks {
    fn from_iter<I: IntoIterator<Item = Bytes>>(chunks: I) -> Self {
        let mut all = Chunks::default();
        chunks.into_iter().for_each(|chunk| all.push_back(chunk));
        all
    }
}

/// A chunk as `Bytes`: no copy when it already is one.
pub(crate) fn to_bytes<D: Buf>(mut data: D) -> Bytes {
    data.copy_to_bytes(data.remaining())
}

/// Polls `body` for its next frame, with the data as `Bytes`.
pub(crate) fn poll_bytes<B: Body>(
    body: Pin<&mut B>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
    body.poll_frame(cx)
        .map(|frame| frame.map(|frame| frame.map(|frame| frame.map_data(to_bytes))))
}

impl<B: Body> Body for ReplayBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::PassThrough { body } => poll_bytes(body, cx),
            KindProj::Replay {
                prefix,
                trailers,
                error,
                watch,
                mut rest,
            } => {
                if !prefix.is_empty() {
                    return Poll::Ready(prefix.pop_front().map(|chunk| Ok(Frame::data(chunk))));
                }
                if let Some(error) = error.take() {
                    return Poll::Ready(Some(Err(error)));
                }
                if let Some(trailers) = trailers.take() {
                    return Poll::Ready(Some(Ok(Frame::trailers(*trailers))));
                }
                let Some(body) = rest.as_mut().as_pin_mut() else {
                    return Poll::Ready(None);
                };
                let Some(scanner) = watch.as_mut() else {
                    return poll_bytes(body, cx);
                };
                let frame = ready!(poll_bytes(body, cx));
                if let Some(data) = frame.as_ref().and_then(|f| f.as_ref().ok()?.data_ref()) {
                    match scanner.feed(data) {
                        // A second method, or bytes this scan cannot read as JSON
                        // (a lenient parser might): either could hide a listen.
                        Some(Outcome::DuplicateMethod | Outcome::Invalid) => {
                            tracing::debug!("request body has a second top-level `method` or is not JSON; cut short");
                            rest.set(None);
                            *watch = None;
                            return Poll::Ready(None);
                        }
                        Some(_) => *watch = None,
                        None => {}
                    }
                }
                Poll::Ready(frame)
            }
            KindProj::Full { data } => Poll::Ready(data.take().map(|data| Ok(Frame::data(data)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::PassThrough { body } => body.is_end_stream(),
            Kind::Replay {
                prefix,
                trailers,
                error,
                rest,
                ..
            } => {
                prefix.is_empty()
                    && trailers.is_none()
                    && error.is_none()
                    && rest.as_ref().is_none_or(Body::is_end_stream)
            }
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::PassThrough { body } => body.size_hint(),
            Kind::Replay { prefix, rest, .. } => {
                let buffered = prefix.byte_len() as u64;
                let rest = rest
                    .as_ref()
                    .map_or_else(|| SizeHint::with_exact(0), Body::size_hint);
                let mut hint = SizeHint::new();
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + buffered);
                }
                hint.set_lower(rest.lower() + buffered);
                hint
            }
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

impl<B: Body> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::PassThrough { .. } => "PassThrough",
            Kind::Replay { .. } => "Replay",
            Kind::Full { .. } => "Full",
        };
        f.debug_struct("ReplayBody")
            .field("kind", &kind)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};

    type Frames = StreamBody<
        futures_util::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>,
    >;

    fn stream(frames: Vec<Result<Frame<Bytes>, std::io::Error>>) -> Frames {
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[tokio::test]
    async fn replay_yields_prefix_then_rest_and_trailers() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "1".parse().unwrap());
        let rest = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"cd"))),
            Ok(Frame::trailers(trailers.clone())),
        ]);
        let prefix = Chunks::from_iter([Bytes::from_static(b"a"), Bytes::from_static(b"b")]);
        let collected = ReplayBody::replay(prefix, Some(rest), None, None, None)
            .collect()
            .await
            .unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));
        assert_eq!(&collected.to_bytes()[..], b"abcd");
    }

    #[tokio::test]
    async fn replay_after_end_keeps_trailers_and_errors() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-t", "2".parse().unwrap());
        let body = ReplayBody::<Frames>::replay(
            Chunks::from_iter([Bytes::from_static(b"x")]),
            None,
            Some(Box::new(trailers.clone())),
            None,
            None,
        );
        let collected = body.collect().await.unwrap();
        assert_eq!(collected.trailers(), Some(&trailers));

        let error = std::io::Error::other("broken");
        let mut body = ReplayBody::<Frames>::replay(
            Chunks::from_iter([Bytes::from_static(b"x")]),
            None,
            None,
            Some(error),
            None,
        );
        assert_eq!(
            body.frame().await.unwrap().unwrap().into_data().unwrap(),
            "x"
        );
        assert!(body.frame().await.unwrap().is_err());
    }

    #[tokio::test]
    async fn a_second_method_cuts_the_replay_short() {
        let mut scanner = Scanner::whole();
        assert_eq!(scanner.feed(br#"{"method":"tools/call","#), None);
        let rest = stream(vec![
            Ok(Frame::data(Bytes::from_static(b"\"params\":{},"))),
            Ok(Frame::data(Bytes::from_static(
                b"\"method\":\"subscriptions/listen\"}",
            ))),
        ]);
        let prefix = Chunks::from_iter([Bytes::from_static(br#"{"method":"tools/call","#)]);
        let body = ReplayBody::replay(prefix, Some(rest), None, None, Some(Box::new(scanner)));
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(&all[..], br#"{"method":"tools/call","params":{},"#);
    }

    #[test]
    fn size_hint_and_end_stream_are_exact() {
        let full = ReplayBody::<Full<Bytes>>::full(Bytes::from_static(b"abc"));
        assert_eq!(full.size_hint().exact(), Some(3));
        assert!(!full.is_end_stream());
        assert!(ReplayBody::<Full<Bytes>>::full(Bytes::new()).is_end_stream());

        let rest = Full::new(Bytes::from_static(b"12345"));
        let replay = ReplayBody::replay(
            Chunks::from_iter([Bytes::from_static(b"ab")]),
            Some(rest),
            None,
            None,
            None,
        );
        assert_eq!(replay.size_hint().exact(), Some(7));
        assert!(!replay.is_end_stream());

        let done = ReplayBody::<Full<Bytes>>::replay(Chunks::default(), None, None, None, None);
        assert!(done.is_end_stream());
        assert_eq!(done.size_hint().exact(), Some(0));

        let through = ReplayBody::pass_through(Full::new(Bytes::from_static(b"xy")));
        assert_eq!(through.size_hint().exact(), Some(2));
    }

    #[tokio::test]
    async fn pass_through_is_untouched() {
        let body = ReplayBody::pass_through(Full::new(Bytes::from_static(b"hello")));
        assert_eq!(&body.collect().await.unwrap().to_bytes()[..], b"hello");
    }
}
