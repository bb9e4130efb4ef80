//! Reading a request body only as far as its top-level `method`.
//!
//! [`Peek`] reads a request body with the method [`Scanner`] until the
//! body's `method` decides it, then hands it on as a [`RequestBody`]: the
//! chunks read, then the rest, watched for a second `method` when the scan
//! is left undecided.
//!
//! The body, with what is read of it and the scanner, is pinned in one box
//! when reading starts, and that box is what the inner service reads. A
//! body that was polled cannot be moved again unless it is `Unpin`, and a
//! layer must poll the request body before it knows what to hand on: one
//! allocation per inspected request lets any body through, `Unpin` or not,
//! and nothing read is moved again.

use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http_body::Body;
use serde_json::value::RawValue;

use super::body::RequestBody;
use super::classify::{Classified, Shape};
use super::rewind::{ReadError, Rewind};
use super::watch::Watch;
use crate::codec::json;
use crate::codec::scan::{Method, Outcome, Scanner};

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
    body: Pin<Box<Watch<Rewind<B>>>>,
    limits: PeekLimits,
}

/// How far a [`Peek`] scans a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scan {
    /// Until its top-level `method` decides it: a first `method` that is
    /// not intercepted ends the scan.
    UntilDecided,
    /// To the end of its object, what is in memory at once and the rest as
    /// it is handed on, cut short at a second top-level `method`: a parser
    /// that keeps the last of duplicate keys must never see a request other
    /// than the one classified.
    Watching,
}

impl Scan {
    /// [`Scan::Watching`] when `watch`, else [`Scan::UntilDecided`].
    pub(crate) fn watching(watch: bool) -> Self {
        match watch {
            true => Self::Watching,
            false => Self::UntilDecided,
        }
    }
}

impl<B: Body> Peek<B> {
    /// Starts reading `body`, scanning it as `scan` says.
    pub(crate) fn new(body: B, limits: PeekLimits, scan: Scan) -> Self {
        let scanner = match scan {
            Scan::Watching => Scanner::whole(),
            Scan::UntilDecided => Scanner::new(),
        };
        #[cfg(test)]
        tally::peek();
        Self {
            body: Box::pin(Watch::new(Rewind::new(body), scanner)),
            limits,
        }
    }

    fn rewind(&self) -> &Rewind<B> {
        self.body.body()
    }

    fn scanner(&self) -> &Scanner {
        self.body.scanner()
    }

    /// Reads until the top-level `method` decides the request.
    pub(crate) fn poll_classify(&mut self, cx: &mut Context<'_>) -> Poll<Classified> {
        let (mut rewind, scanner) = self.body.as_mut().parts();
        loop {
            let chunks = rewind.prefix();
            let scanned = scanner.consumed();
            if let Some(chunk) = chunks.back().filter(|_| scanned < chunks.byte_len()) {
                // What the last read added; the chunk is in memory already.
                let fresh = &chunk[chunk.len() - (chunks.byte_len() - scanned)..];
                let ended = rewind.ended();
                #[cfg(test)]
                tally::scan(fresh.len());
                let outcome = match ended {
                    true => scanner.feed_last(fresh),
                    false => scanner.feed(fresh),
                };
                let outcome = match outcome {
                    Some(outcome) => Some(outcome),
                    // A watching scan goes on as the body is handed on.
                    None if scanner.method() == Some(Method::Other) => {
                        Some(Outcome::Method(Method::Other))
                    }
                    None if ended => Some(scanner.finish()),
                    None => None,
                };
                if let Some(outcome) = outcome {
                    return Poll::Ready(classified(scanner, Shape::Decided(outcome)));
                }
            }
            if rewind.prefix().byte_len() > self.limits.for_first(scanner.method()) {
                return Poll::Ready(classified(scanner, Shape::TooLarge));
            }
            if !ready!(rewind.as_mut().poll_read(cx)) {
                let shape = match (rewind.failed(), rewind.prefix().only()) {
                    (true, _) => Shape::Unreadable,
                    (false, Some(only)) => Shape::Decided(scanner.finish_after(only)),
                    (false, None) => Shape::Decided(scanner.finish()),
                };
                return Poll::Ready(classified(scanner, shape));
            }
        }
    }

    /// Reads the rest of the body into memory, at most `limit` bytes in all.
    pub(crate) fn poll_whole(
        &mut self,
        cx: &mut Context<'_>,
        limit: usize,
    ) -> Poll<Result<(), ReadError>> {
        self.body.as_mut().parts().0.poll_whole(cx, limit)
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        self.rewind().buffered()
    }

    /// The name of the body's first method as the scan read it: decoded,
    /// or where the one-pass path found it, in the body's first chunk.
    pub(crate) fn method_name(&self) -> Option<&[u8]> {
        let first = self
            .rewind()
            .prefix()
            .front()
            .map_or(&[][..], |chunk| chunk);
        self.scanner().method_name(first)
    }

    /// The request's id to echo in an error: the `id` of the body read
    /// whole, when it is one object with one usable id.
    pub(crate) fn request_id(&self) -> Option<Box<RawValue>> {
        json::request_id(&self.buffered())
    }

    /// The text of the request's id, valid JSON, to recognize its response
    /// by and to answer with: the one the scan read before the method, else
    /// the body's, when it is one object with one id.
    pub(crate) fn id_text(&self) -> Option<Box<str>> {
        let scanned = self.scanner().id().and_then(|range| {
            let body = self.buffered();
            let id = std::str::from_utf8(body.get(range)?).ok()?;
            // The scan skims scalars: the span is checked as JSON here.
            let valid = json::is_usable_id(id) && serde_json::from_str::<&RawValue>(id).is_ok();
            valid.then(|| id.into())
        });
        scanned.or_else(|| self.request_id().map(|id| id.get().into()))
    }

    /// Bytes read so far.
    pub(crate) fn read_len(&self) -> usize {
        self.rewind().prefix().byte_len()
    }

    /// The body to hand on: what was read, then the rest, watched when a
    /// watching scan is left undecided after its first method.
    pub(crate) fn into_body(mut self) -> RequestBody<B> {
        let scanner = self.scanner();
        if scanner.method().is_some() && scanner.decided().is_none() {
            let seen = self.rewind().prefix().byte_len();
            self.body.as_mut().start(seen);
        }
        RequestBody::rewound(self.body)
    }
}

/// How much the layers read, counted per thread: the peeks begun and the
/// bytes handed to a scanner, for the tests that the combined layer reads
/// each body once.
#[cfg(test)]
pub(crate) mod tally {
    use std::cell::Cell;

    thread_local! {
        static PEEKS: Cell<usize> = const { Cell::new(0) };
        static SCANNED: Cell<usize> = const { Cell::new(0) };
    }

    pub(crate) fn peek() {
        PEEKS.with(|peeks| peeks.set(peeks.get() + 1));
    }

    pub(crate) fn scan(bytes: usize) {
        SCANNED.with(|scanned| scanned.set(scanned.get() + bytes));
    }

    /// The peeks begun and the bytes scanned since the last `take`.
    pub(crate) fn take() -> (usize, usize) {
        (
            PEEKS.with(|peeks| peeks.take()),
            SCANNED.with(|scanned| scanned.take()),
        )
    }
}

fn classified(scanner: &Scanner, shape: Shape) -> Classified {
    Classified {
        first: scanner.method(),
        shape,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::scan::Method;
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
        let mut peek = Peek::new(body, LIMITS, Scan::UntilDecided);
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
        let mut peek = Peek::new(body, limits, Scan::UntilDecided);
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
            let mut peek = Peek::new(chunks(&parts), limits, Scan::Watching);
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
            Scan::UntilDecided,
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
            Scan::UntilDecided,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(
            poll_fn(|cx| peek.poll_whole(cx, 34)).await,
            Err(ReadError::TooLarge)
        );
    }

    async fn watched(body: &'static [u8]) -> (Classified, Bytes) {
        let full = http_body_util::Full::new(Bytes::from_static(body));
        let mut peek = Peek::new(full, LIMITS, Scan::Watching);
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
            Scan::Watching,
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
        let mut peek = Peek::new(body, LIMITS, Scan::UntilDecided);
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
            Scan::UntilDecided,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peek.id_text().as_deref(), Some(r#""a-1""#));
        let mut peek = Peek::new(
            chunks(&[br#"{"method":"server/discover","id":7}"#]),
            LIMITS,
            Scan::UntilDecided,
        );
        poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peek.id_text().as_deref(), Some("7"));
        assert_eq!(peek.request_id().unwrap().get(), "7");
    }
}
