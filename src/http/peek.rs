//! Reading a body only as far as needed, keeping what was read for replay.
//!
//! [`Read`] holds a body and the chunks read from it; [`Peek`] reads a
//! request body with the method [`Scanner`] until its top-level `method`
//! decides it, and hands it on as a [`RequestBody`]: the chunks read, then
//! the rest.
//!
//! The body is boxed when reading starts. A body that was polled cannot be
//! moved again unless it is `Unpin`, and a layer must poll the request body
//! before it knows what to hand on, then move it into the request it hands
//! on. One allocation per inspected request lets any body through, `Unpin`
//! or not.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::Body;
use serde_json::value::RawValue;

use super::body::RequestBody;
use super::classify::{Classified, Shape};
use super::rewind::Rewind;
use super::watch::Watch;
use crate::codec::json;
use crate::codec::scan::{self, Method, Outcome, Scanner};

/// Chunks in order, with their total length. Most bodies are read in one
/// chunk, which is kept inline: no allocation.
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
    fn back(&self) -> Option<&Bytes> {
        self.more.back().or(self.first.as_ref())
    }

    /// The chunks, first to last.
    fn iter(&self) -> impl Iterator<Item = &Bytes> {
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
    fn concat(&self) -> Bytes {
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

#[cfg(test)]
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

/// How a body ended while it was being read: what it still owes the reader
/// after the chunks.
#[derive(Debug)]
pub(crate) enum End<E> {
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

/// A body, and the chunks read from it so far.
pub(crate) struct Read<B: Body> {
    /// `None` once the body ended.
    body: Option<Pin<Box<B>>>,
    chunks: Chunks,
    end: Option<End<B::Error>>,
}

impl<B: Body> Read<B> {
    pub(crate) fn new(body: B) -> Self {
        Self {
            body: Some(Box::pin(body)),
            chunks: Chunks::default(),
            end: None,
        }
    }

    /// True when the body ended with the chunks read, without an error.
    fn ended(&self) -> bool {
        !matches!(self.end, Some(End::Error(_)))
            && self.body.as_ref().is_none_or(|body| body.is_end_stream())
    }

    /// True when the body returned an error.
    fn failed(&self) -> bool {
        matches!(self.end, Some(End::Error(_)))
    }

    /// Reads one data frame; `false` once the body ended or failed.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        while let Some(body) = self.body.as_mut() {
            match ready!(body.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let chunk = to_bytes(data);
                        if chunk.is_empty() {
                            continue;
                        }
                        self.chunks.push_back(chunk);
                        return Poll::Ready(true);
                    }
                    Err(frame) => {
                        self.end = frame
                            .into_trailers()
                            .ok()
                            .map(|t| End::Trailers(Box::new(t)));
                        self.body = None;
                    }
                },
                Some(Err(error)) => {
                    self.end = Some(End::Error(error));
                    self.body = None;
                }
                None => self.body = None,
            }
        }
        Poll::Ready(false)
    }

    /// Reads the rest of the body into memory, at most `limit` bytes in all.
    pub(crate) fn poll_whole(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
    ) -> Poll<Result<(), ReadError>> {
        loop {
            if self.chunks.byte_len() > limit {
                return Poll::Ready(Err(ReadError::TooLarge));
            }
            if !ready!(self.poll_chunk(cx)) {
                return Poll::Ready(match self.failed() {
                    true => Err(ReadError::Failed),
                    false => Ok(()),
                });
            }
        }
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        self.chunks.concat()
    }

    /// The trailers, if the body ended with some while being read.
    pub(crate) fn take_trailers(&mut self) -> Option<HeaderMap> {
        match self.end.take() {
            Some(End::Trailers(trailers)) => Some(*trailers),
            other => {
                self.end = other;
                None
            }
        }
    }

    /// The body to hand on: what was read, then the rest.
    pub(crate) fn into_rewind(self) -> Rewind<Pin<Box<B>>> {
        Rewind::new(self.chunks, self.end, self.body)
    }
}

/// How far a peek reads, by what the body turns out to be.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeekLimits {
    /// Until the first method is known, and for any other intercepted request.
    pub(crate) method: usize,
    /// A listen request, read whole.
    pub(crate) listen: usize,
}

impl PeekLimits {
    /// The limit for a body whose first method is `first`.
    pub(crate) fn for_first(&self, first: Option<Method>) -> usize {
        match first {
            Some(Method::Listen) => self.listen,
            _ => self.method,
        }
    }
}

/// A request body being read until its top-level `method` decides it.
pub(crate) struct Peek<B: Body> {
    read: Read<B>,
    scanner: Scanner,
    /// Whether a body with another method is checked for a second `method`.
    watching: bool,
    limits: PeekLimits,
}

impl<B: Body> Peek<B> {
    /// Starts reading `body`. Unless `watching`, the scan stops at a first
    /// `method` that is not intercepted. A watching peek goes on, and hands
    /// the body on watched, cut short at a second top-level `method`: a
    /// parser that keeps the last of duplicate keys must never see a request
    /// other than the one classified.
    pub(crate) fn new(body: B, limits: PeekLimits, watching: bool) -> Self {
        Self {
            read: Read::new(body),
            scanner: Scanner::new(),
            watching,
            limits,
        }
    }

    /// The most bytes read while the body is what it is so far.
    fn limit(&self) -> usize {
        self.limits.for_first(self.scanner.method())
    }

    /// Reads until the top-level `method` decides the request.
    pub(crate) fn poll_classify(&mut self, cx: &mut Context<'_>) -> Poll<Classified> {
        loop {
            let chunks = &self.read.chunks;
            let scanned = self.scanner.consumed();
            if let Some(chunk) = chunks.back().filter(|_| scanned < chunks.byte_len()) {
                // What the last read added; the chunk is in memory already.
                let fresh = &chunk[chunk.len() - (chunks.byte_len() - scanned)..];
                let outcome = if self.read.ended() {
                    self.scanner.feed_last(fresh)
                } else {
                    self.scanner.feed(fresh)
                };
                match outcome {
                    Some(Outcome::Method(Method::Other) | Outcome::NoMethod) if self.watching => {
                        if let Some(outcome) = self.watch() {
                            return Poll::Ready(self.classified(Shape::Decided(outcome)));
                        }
                    }
                    Some(outcome) => return Poll::Ready(self.classified(Shape::Decided(outcome))),
                    None if self.scanner.method() == Some(Method::Other) => {
                        let outcome = Outcome::Method(Method::Other);
                        return Poll::Ready(self.classified(Shape::Decided(outcome)));
                    }
                    None => {}
                }
            }
            if self.read.chunks.byte_len() > self.limit() {
                return Poll::Ready(self.classified(Shape::TooLarge));
            }
            if !ready!(self.read.poll_chunk(cx)) {
                if self.read.failed() {
                    return Poll::Ready(self.classified(Shape::Unreadable));
                }
                let outcome = self.scanner.finish();
                return Poll::Ready(self.classified(Shape::Decided(outcome)));
            }
        }
    }

    fn classified(&self, shape: Shape) -> Classified {
        Classified {
            first: self.scanner.method(),
            shape,
        }
    }

    /// A watching peek found another method, or none yet: decides whether
    /// the rest of the body needs the whole-body scan, and starts it over
    /// what was read. `None` while that scan needs more of the body.
    fn watch(&mut self) -> Option<Outcome> {
        self.watching = false;
        if self.scanner.decided() == Some(Outcome::Method(Method::Other)) && self.rest_is_plain() {
            // The body is all here, and its rest cannot spell a second `method`.
            // It is still handed on whole, for the inner service to read to its end.
            return Some(Outcome::Method(Method::Other));
        }
        let mut scanner = Scanner::whole();
        let decided = self
            .read
            .chunks
            .iter()
            .find_map(|chunk| scanner.feed(chunk));
        self.scanner = scanner;
        match decided {
            Some(outcome) => Some(outcome),
            None if self.scanner.method() == Some(Method::Other) => {
                Some(Outcome::Method(Method::Other))
            }
            None => None,
        }
    }

    /// True when the body ended with the chunks read and the bytes after
    /// the scanned part are [plain](scan::is_plain).
    fn rest_is_plain(&self) -> bool {
        let chunks = &self.read.chunks;
        let Some(last) = chunks.back().filter(|_| self.read.ended()) else {
            return false;
        };
        // The rest must lie in the last chunk; otherwise the whole-body scan decides.
        let Some(start) = self
            .scanner
            .consumed()
            .checked_sub(chunks.byte_len() - last.len())
        else {
            return false;
        };
        scan::is_plain(&last[start..])
    }

    /// Reads the rest of the body into memory, at most `limit` bytes in all.
    pub(crate) fn poll_whole(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
    ) -> Poll<Result<(), ReadError>> {
        self.read.poll_whole(cx, limit)
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        self.read.buffered()
    }

    /// The request's id to echo in an error: the `id` of the body read
    /// whole, when it is one object with one usable id.
    pub(crate) fn request_id(&self) -> Option<Box<RawValue>> {
        json::request_id(&self.buffered())
    }

    /// The text of the request's id, to recognize its response by (whose id
    /// is checked, so this one need not be): the one the scan read before
    /// the method, else the body's, when it is one object with one id.
    pub(crate) fn id_text(&self) -> Option<Box<str>> {
        let scanned = self.scanner.id().and_then(|range| {
            let body = self.buffered();
            let id = std::str::from_utf8(body.get(range)?).ok()?;
            json::is_usable_id(id).then(|| id.into())
        });
        scanned.or_else(|| self.request_id().map(|id| id.get().into()))
    }

    /// Bytes read so far.
    #[cfg(test)]
    pub(crate) fn read_len(&self) -> usize {
        self.read.chunks.byte_len()
    }

    /// The body to hand on: what was read, then the rest, watched when a
    /// watching scan is left undecided after its first method.
    pub(crate) fn into_body(self) -> RequestBody<B> {
        let undecided = self.scanner.method().is_some() && self.scanner.decided().is_none();
        let watch = undecided.then(|| Box::new(self.scanner));
        let Read { body, chunks, end } = self.read;
        RequestBody::rewound(Rewind::new(
            chunks,
            end,
            body.map(|body| Watch::new(body, watch)),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Frame;
    use http_body_util::{BodyExt, StreamBody};
    use std::future::poll_fn;

    const LIMITS: PeekLimits = PeekLimits {
        method: 1024,
        listen: 1024,
    };

    fn chunks(parts: &[&[u8]]) -> impl Body<Data = Bytes, Error = std::io::Error> {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::copy_from_slice(p))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    fn decided(first: Option<Method>, outcome: Outcome) -> Classified {
        Classified {
            first,
            shape: Shape::Decided(outcome),
        }
    }

    const OTHER: Option<Method> = Some(Method::Other);

    #[tokio::test]
    async fn classifies_across_chunks_and_replays_everything() {
        let body = chunks(&[
            b"{\"id\":1,\"meth",
            b"od\":\"tools/",
            b"call\",\"params\":{}}",
            b"  ",
        ]);
        let mut peek = Peek::new(body, LIMITS, false);
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(classified, decided(OTHER, Outcome::Method(Method::Other)));
        // Other is decided at the end of its value: the last chunks were not read.
        assert_eq!(peek.read_len(), 42);
        let all = peek.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            &all[..],
            b"{\"id\":1,\"method\":\"tools/call\",\"params\":{}}  "
        );
    }

    #[tokio::test]
    async fn limit_stops_the_scan() {
        let body = chunks(&[b"{\"params\":\"", &[b'x'; 100], b"\",\"method\":\"x\"}"]);
        let limits = PeekLimits {
            method: 50,
            listen: 1000,
        };
        let mut peek = Peek::new(body, limits, false);
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(classified.shape, Shape::TooLarge);
        assert_eq!(classified.first, None);
        let all = peek.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(all.len(), 11 + 100 + 15);
    }

    #[tokio::test]
    async fn a_listen_is_read_within_its_own_limit() {
        let body = br#"{"method":"subscriptions/listen","params":{"a":"0123456789"}}"#;
        for (listen, shape) in [
            (1000, Shape::Decided(Outcome::Method(Method::Listen))),
            (40, Shape::TooLarge),
        ] {
            let limits = PeekLimits { method: 40, listen };
            let parts = [&body[..30], &body[30..50], &body[50..]];
            let mut peek = Peek::new(chunks(&parts), limits, true);
            let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
            assert_eq!(classified.shape, shape, "listen limit {listen}");
            assert_eq!(classified.first, Some(Method::Listen));
        }
    }

    #[tokio::test]
    async fn whole_reads_to_the_end_within_the_limit() {
        let mut peek = Peek::new(
            chunks(&[b"{\"method\":", b"\"subscriptions/listen\"}"]),
            LIMITS,
            false,
        );
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(classified.first, Some(Method::Listen));
        assert_eq!(poll_fn(|cx| peek.poll_whole(cx, 100)).await, Ok(()));
        assert_eq!(
            &peek.buffered()[..],
            b"{\"method\":\"subscriptions/listen\"}"
        );

        let mut peek = Peek::new(
            chunks(&[b"{\"method\":\"subscriptions/listen\"}", b"   "]),
            LIMITS,
            false,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(
            poll_fn(|cx| peek.poll_whole(cx, 34)).await,
            Err(ReadError::TooLarge)
        );
    }

    async fn watched(body: &'static [u8]) -> (Classified, Bytes) {
        let full = http_body_util::Full::new(Bytes::from_static(body));
        let mut peek = Peek::new(full, LIMITS, true);
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        (
            classified,
            peek.into_body().collect().await.unwrap().to_bytes(),
        )
    }

    #[tokio::test]
    async fn a_whole_body_is_watched_only_if_its_rest_could_name_a_method() {
        let other = decided(OTHER, Outcome::Method(Method::Other));
        // Nothing after the method can spell `method`: no scan, even of bad JSON.
        let plain = b"{\"method\":\"tools/call\",\"params\":{}} trailing";
        assert_eq!(watched(plain).await, (other, Bytes::from_static(plain)));
        // A backslash could: the rest is scanned, and bad JSON cuts the body.
        let escaped = b"{\"method\":\"tools/call\",\"params\":{\"a\":\"\\n\"},,}";
        let (classified, replayed) = watched(escaped).await;
        assert_eq!(classified, decided(OTHER, Outcome::Invalid));
        assert_eq!(replayed, Bytes::from_static(escaped));
        let twice = b"{\"method\":\"tools/call\",\"params\":{\"method\":1},\"method\":\"x\"}";
        assert_eq!(
            watched(twice).await.0,
            decided(OTHER, Outcome::DuplicateMethod)
        );
        let mentioned = b"{\"method\":\"tools/call\",\"params\":{\"method\":1}}";
        assert_eq!(
            watched(mentioned).await,
            (other, Bytes::from_static(mentioned))
        );
        // A method value that is not a string is watched like the whole-body scan does.
        let nested = b"{\"method\":{},\"method\":\"subscriptions/listen\"}";
        assert_eq!(
            watched(nested).await.0,
            decided(OTHER, Outcome::DuplicateMethod)
        );
    }

    #[tokio::test]
    async fn a_body_still_streaming_is_watched_as_it_is_replayed() {
        let mut peek = Peek::new(
            chunks(&[
                b"{\"method\":\"tools/call\",\"a\":1",
                b",\"method\":\"x\",\"rest\":1}",
            ]),
            LIMITS,
            true,
        );
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(classified, decided(OTHER, Outcome::Method(Method::Other)));
        let replayed = peek.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&replayed[..], b"{\"method\":\"tools/call\",\"a\":1");
    }

    #[tokio::test]
    async fn body_errors_are_kept_for_replay() {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"{\"a\":"))),
            Err(std::io::Error::other("reset")),
        ];
        let body = StreamBody::new(futures_util::stream::iter(frames));
        let mut peek = Peek::new(body, LIMITS, false);
        let classified = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(classified.shape, Shape::Unreadable);
        let mut replay = peek.into_body();
        assert_eq!(
            replay.frame().await.unwrap().unwrap().into_data().unwrap(),
            "{\"a\":"
        );
        assert!(replay.frame().await.unwrap().is_err());
    }

    #[tokio::test]
    async fn ids_come_from_the_scan_or_the_whole_body() {
        let mut peek = Peek::new(
            chunks(&[br#"{"id":"a-1","method":"server/discover"}"#]),
            LIMITS,
            false,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peek.id_text().as_deref(), Some(r#""a-1""#));
        let mut peek = Peek::new(
            chunks(&[br#"{"method":"server/discover","id":7}"#]),
            LIMITS,
            false,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peek.id_text().as_deref(), Some("7"));
        assert_eq!(peek.request_id().unwrap().get(), "7");
    }
}
