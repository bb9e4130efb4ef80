//! Reading a request body only as far as its top-level `method`.
//!
//! Both layers classify a request the same way: `POST` with a JSON content
//! type is peeked with the [`Scanner`]; anything else is not inspected. The
//! peeked chunks are kept as they came and replayed to the inner service
//! through [`ReplayBody`].

use std::task::{ready, Context, Poll};

use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, Method as HttpMethod};
use http_body::Body;

use crate::json;
use crate::replay::{to_bytes, Chunks, ReplayBody};
use crate::scan::{self, Method, Outcome, Scanner};

/// The `Mcp-Method` header of the 2026-07-28 HTTP transport.
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");

/// True for requests whose body the layers look into: `POST` with a JSON
/// content type.
pub(crate) fn is_inspected(method: &HttpMethod, headers: &HeaderMap) -> bool {
    method == HttpMethod::POST && is_json(headers)
}

/// The media type of the `Content-Type` header, parameters dropped.
fn essence(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::CONTENT_TYPE)?.as_bytes();
    let media = value.split(|&b| b == b';').next().unwrap_or_default();
    Some(media.trim_ascii())
}

/// ASCII case-insensitive equality, with the common all-lowercase spelling
/// matched byte for byte first.
fn same_media(media: &[u8], lowercase: &[u8]) -> bool {
    media == lowercase || media.eq_ignore_ascii_case(lowercase)
}

/// `text/event-stream`, parameters ignored.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    essence(headers).is_some_and(|e| same_media(e, b"text/event-stream"))
}

/// `application/json` or any `+json` type, parameters ignored.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    essence(headers).is_some_and(|e| {
        same_media(e, b"application/json")
            || e.len() >= 5 && same_media(&e[e.len() - 5..], b"+json")
    })
}

/// True when the body carries a content coding other than `identity`.
pub(crate) fn is_encoded(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"))
}

/// The method the `Mcp-Method` header names, if the header is present.
pub(crate) fn header_method(headers: &HeaderMap) -> Option<Method> {
    headers
        .get(&MCP_METHOD)
        .map(|value| Method::from_name(value.as_bytes()))
}

/// The declared `Content-Length`, if any.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
}

/// How a peek ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peeked {
    /// The scanner's answer.
    Decided(Outcome),
    /// The limit was passed before an answer; the first method, if it was read.
    TooLarge(Option<Method>),
    /// The body returned an error before an answer; it is replayed after the prefix.
    BodyError,
}

/// Why a body could not be buffered whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BufferError {
    /// The body is longer than the limit.
    TooLarge,
    /// The body returned an error.
    BodyError,
}

/// A body being read as far as needed, with what was read kept for replay.
pub(crate) struct Peek<B: Body> {
    body: Option<B>,
    chunks: Chunks,
    trailers: Option<Box<HeaderMap>>,
    error: Option<B::Error>,
    scanner: Scanner,
    /// Whether a body with another method is checked for a second `method`.
    watching: bool,
    limit: usize,
}

impl<B> Peek<B>
where
    B: Body + Unpin,
{
    /// Starts reading `body`: the scan stops at the first `method` unless
    /// it is an intercepted one, and never goes past `limit` bytes.
    pub(crate) fn new(body: B, limit: usize) -> Self {
        Self::with_watch(body, limit, false)
    }

    /// Like [`Peek::new`], but a body with another method keeps being
    /// scanned as it is replayed, and is cut short at a second top-level
    /// `method`: a parser that keeps the last of duplicate keys must never
    /// see a request other than the one classified.
    pub(crate) fn watching(body: B, limit: usize) -> Self {
        Self::with_watch(body, limit, true)
    }

    fn with_watch(body: B, limit: usize, watching: bool) -> Self {
        Self {
            body: Some(body),
            chunks: Chunks::default(),
            trailers: None,
            error: None,
            scanner: Scanner::new(),
            watching,
            limit,
        }
    }

    /// Reads until the top-level `method` decides the request.
    pub(crate) fn poll_classify(&mut self, cx: &mut Context<'_>) -> Poll<Peeked> {
        loop {
            let scanned = self.scanner.consumed();
            if let Some(chunk) = self
                .chunks
                .back()
                .filter(|_| scanned < self.chunks.byte_len())
            {
                // What the last read added; the chunk is in memory already.
                let fresh = &chunk[chunk.len() - (self.chunks.byte_len() - scanned)..];
                let outcome = if self.ended() {
                    self.scanner.feed_last(fresh)
                } else {
                    self.scanner.feed(fresh)
                };
                match outcome {
                    Some(Outcome::Method(Method::Other) | Outcome::NoMethod) if self.watching => {
                        if let Some(peeked) = self.watch() {
                            return Poll::Ready(peeked);
                        }
                    }
                    Some(outcome) => return Poll::Ready(Peeked::Decided(outcome)),
                    None if self.scanner.method() == Some(Method::Other) => {
                        return Poll::Ready(Peeked::Decided(Outcome::Method(Method::Other)))
                    }
                    None => {}
                }
            }
            if self.chunks.byte_len() > self.limit {
                return Poll::Ready(Peeked::TooLarge(self.scanner.method()));
            }
            if !ready!(self.poll_chunk(cx)) {
                if self.error.is_some() {
                    return Poll::Ready(Peeked::BodyError);
                }
                return Poll::Ready(Peeked::Decided(self.scanner.finish()));
            }
        }
    }

    /// A watching peek found another method, or none yet: decides whether
    /// the rest of the body needs the whole-body scan, and starts it over
    /// what was read. `None` while that scan needs more of the body.
    fn watch(&mut self) -> Option<Peeked> {
        self.watching = false;
        if self.scanner.decided() == Some(Outcome::Method(Method::Other)) && self.rest_is_plain() {
            // The body is all here, and its rest cannot spell a second `method`.
            // It is still handed on whole, for the inner service to read to its end.
            return Some(Peeked::Decided(Outcome::Method(Method::Other)));
        }
        let mut scanner = Scanner::whole();
        let decided = self.chunks.iter().find_map(|chunk| scanner.feed(chunk));
        self.scanner = scanner;
        match decided {
            Some(outcome) => Some(Peeked::Decided(outcome)),
            None if self.scanner.method() == Some(Method::Other) => {
                Some(Peeked::Decided(Outcome::Method(Method::Other)))
            }
            None => None,
        }
    }

    /// True when the body ended with the chunks read.
    fn ended(&self) -> bool {
        self.error.is_none() && self.body.as_ref().is_none_or(B::is_end_stream)
    }

    /// True when the body ended with the chunks read and the bytes after
    /// the scanned part are [plain](scan::is_plain).
    fn rest_is_plain(&self) -> bool {
        let Some(last) = self.chunks.back().filter(|_| self.ended()) else {
            return false;
        };
        // The rest must lie in the last chunk; otherwise the whole-body scan decides.
        let Some(start) = self
            .scanner
            .consumed()
            .checked_sub(self.chunks.byte_len() - last.len())
        else {
            return false;
        };
        scan::is_plain(&last[start..])
    }

    /// Reads the rest of the body into memory, at most `limit` bytes in all.
    pub(crate) fn poll_buffer(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BufferError>> {
        loop {
            if self.chunks.byte_len() > self.limit {
                return Poll::Ready(Err(BufferError::TooLarge));
            }
            if !ready!(self.poll_chunk(cx)) {
                return Poll::Ready(match self.error {
                    Some(_) => Err(BufferError::BodyError),
                    None => Ok(()),
                });
            }
        }
    }

    /// Reads one data frame; `false` once the body ended or failed.
    fn poll_chunk(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        while let Some(body) = self.body.as_mut() {
            match ready!(std::pin::Pin::new(&mut *body).poll_frame(cx)) {
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
                        self.trailers = frame.into_trailers().ok().map(Box::new);
                        self.body = None;
                    }
                },
                Some(Err(error)) => {
                    self.error = Some(error);
                    self.body = None;
                }
                None => self.body = None,
            }
        }
        Poll::Ready(false)
    }

    /// The body's first top-level method, once read.
    pub(crate) fn method(&self) -> Option<Method> {
        self.scanner.method()
    }

    /// Bytes read so far.
    #[cfg(test)]
    pub(crate) fn read(&self) -> usize {
        self.chunks.byte_len()
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        self.chunks.concat()
    }

    /// The text of the `id` the one-pass scan read before the method, when
    /// it looks like a string or a number; it is not checked as JSON, so it is
    /// fit to recognize a response by (whose id is checked), not to echo. The
    /// rest of the body is not looked at: a second `id` after the method goes
    /// unnoticed.
    pub(crate) fn scanned_id(&self) -> Option<Box<str>> {
        let (range, body) = (self.scanner.id()?, self.buffered());
        let id = std::str::from_utf8(body.get(range)?).ok()?;
        json::is_usable_id_text(id).then(|| id.into())
    }

    /// The body to hand on: what was read, then the rest.
    pub(crate) fn into_replay(self) -> ReplayBody<B> {
        // Only a watching scan is left undecided after its first method.
        let watch = (self.scanner.method().is_some() && self.scanner.decided().is_none())
            .then(|| Box::new(self.scanner));
        ReplayBody::replay(self.chunks, self.body, self.trailers, self.error, watch)
    }

    /// The trailers, if the body ended with some while being read.
    pub(crate) fn take_trailers(&mut self) -> Option<HeaderMap> {
        self.trailers.take().map(|trailers| *trailers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use http_body::Frame;
    use http_body_util::{BodyExt, StreamBody};
    use std::future::poll_fn;

    fn chunks(parts: &[&[u8]]) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::copy_from_slice(p))))
            .collect();
        StreamBody::new(futures_util::stream::iter(frames))
    }

    #[test]
    fn json_content_types() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, json) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("application/vnd.api+json", true),
            ("application/vnd.api+JSON", true),
            ("text/plain", false),
            ("application/jsonx", false),
            // Bytes beyond visible ASCII in a parameter do not hide the type.
            ("application/json; x=\u{e9}", true),
        ] {
            let value = HeaderValue::from_bytes(value.as_bytes()).unwrap();
            headers.insert(header::CONTENT_TYPE, value.clone());
            assert_eq!(is_json(&headers), json, "{value:?}");
        }
        assert!(is_inspected(&HttpMethod::POST, &headers) == is_json(&headers));
        assert!(!is_inspected(&HttpMethod::GET, &headers));
        for (value, events) in [
            ("text/event-stream", true),
            ("Text/Event-Stream ; charset=utf-8", true),
            ("text/event-streams", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_event_stream(&headers), events, "{value}");
        }
    }

    #[test]
    fn headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(header_method(&headers), None);
        headers.insert("Mcp-Method", "subscriptions/listen".parse().unwrap());
        assert_eq!(header_method(&headers), Some(Method::Listen));
        headers.insert(header::CONTENT_LENGTH, "12".parse().unwrap());
        assert_eq!(content_length(&headers), Some(12));
        assert!(!is_encoded(&headers));
        headers.insert(header::CONTENT_ENCODING, "gzip".parse().unwrap());
        assert!(is_encoded(&headers));
    }

    #[tokio::test]
    async fn classifies_across_chunks_and_replays_everything() {
        let body = chunks(&[
            b"{\"id\":1,\"meth",
            b"od\":\"tools/",
            b"call\",\"params\":{}}",
            b"  ",
        ]);
        let mut peek = Peek::new(body, 1024);
        let peeked = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peeked, Peeked::Decided(Outcome::Method(Method::Other)));
        // Other is decided at the end of its value: the last chunks were not read.
        assert_eq!(peek.read(), 42);
        let all = peek.into_replay().collect().await.unwrap().to_bytes();
        assert_eq!(
            &all[..],
            b"{\"id\":1,\"method\":\"tools/call\",\"params\":{}}  "
        );
    }

    #[tokio::test]
    async fn limit_stops_the_scan() {
        let body = chunks(&[b"{\"params\":\"", &[b'x'; 100], b"\",\"method\":\"x\"}"]);
        let mut peek = Peek::new(body, 50);
        assert_eq!(
            poll_fn(|cx| peek.poll_classify(cx)).await,
            Peeked::TooLarge(None)
        );
        let all = peek.into_replay().collect().await.unwrap().to_bytes();
        assert_eq!(all.len(), 11 + 100 + 15);
    }

    #[tokio::test]
    async fn buffer_reads_to_the_end_within_the_limit() {
        let mut peek = Peek::new(
            chunks(&[b"{\"method\":", b"\"subscriptions/listen\"}"]),
            100,
        );
        assert_eq!(
            poll_fn(|cx| peek.poll_classify(cx)).await,
            Peeked::Decided(Outcome::Method(Method::Listen))
        );
        assert_eq!(poll_fn(|cx| peek.poll_buffer(cx)).await, Ok(()));
        assert_eq!(
            &peek.buffered()[..],
            b"{\"method\":\"subscriptions/listen\"}"
        );

        let mut peek = Peek::new(
            chunks(&[b"{\"method\":\"subscriptions/listen\"}", b"   "]),
            34,
        );
        assert!(matches!(
            poll_fn(|cx| peek.poll_classify(cx)).await,
            Peeked::Decided(_)
        ));
        assert_eq!(
            poll_fn(|cx| peek.poll_buffer(cx)).await,
            Err(BufferError::TooLarge)
        );
    }

    async fn watched(body: &'static [u8]) -> (Peeked, Bytes) {
        let mut peek = Peek::watching(http_body_util::Full::new(Bytes::from_static(body)), 1024);
        let peeked = poll_fn(|cx| peek.poll_classify(cx)).await;
        (
            peeked,
            peek.into_replay().collect().await.unwrap().to_bytes(),
        )
    }

    #[tokio::test]
    async fn a_whole_body_is_watched_only_if_its_rest_could_name_a_method() {
        let other = Peeked::Decided(Outcome::Method(Method::Other));
        // Nothing after the method can spell `method`: no scan, even of bad JSON.
        let plain = b"{\"method\":\"tools/call\",\"params\":{}} trailing";
        assert_eq!(watched(plain).await, (other, Bytes::from_static(plain)));
        // A backslash could: the rest is scanned, and bad JSON cuts the body.
        let escaped = b"{\"method\":\"tools/call\",\"params\":{\"a\":\"\\n\"},,}";
        let (peeked, replayed) = watched(escaped).await;
        assert_eq!(peeked, Peeked::Decided(Outcome::Invalid));
        assert_eq!(replayed, Bytes::from_static(escaped));
        let twice = b"{\"method\":\"tools/call\",\"params\":{\"method\":1},\"method\":\"x\"}";
        assert_eq!(
            watched(twice).await.0,
            Peeked::Decided(Outcome::DuplicateMethod)
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
            Peeked::Decided(Outcome::DuplicateMethod)
        );
    }

    #[tokio::test]
    async fn a_body_still_streaming_is_watched_as_it_is_replayed() {
        let mut peek = Peek::watching(
            chunks(&[
                b"{\"method\":\"tools/call\",\"a\":1",
                b",\"method\":\"x\",\"rest\":1}",
            ]),
            1024,
        );
        let peeked = poll_fn(|cx| peek.poll_classify(cx)).await;
        assert_eq!(peeked, Peeked::Decided(Outcome::Method(Method::Other)));
        let replayed = peek.into_replay().collect().await.unwrap().to_bytes();
        assert_eq!(&replayed[..], b"{\"method\":\"tools/call\",\"a\":1");
    }

    #[tokio::test]
    async fn body_errors_are_kept_for_replay() {
        let frames: Vec<Result<Frame<Bytes>, std::io::Error>> = vec![
            Ok(Frame::data(Bytes::from_static(b"{\"a\":"))),
            Err(std::io::Error::other("reset")),
        ];
        let mut peek = Peek::new(StreamBody::new(futures_util::stream::iter(frames)), 100);
        assert_eq!(
            poll_fn(|cx| peek.poll_classify(cx)).await,
            Peeked::BodyError
        );
        let mut replay = peek.into_replay();
        assert_eq!(
            replay.frame().await.unwrap().unwrap().into_data().unwrap(),
            "{\"a\":"
        );
        assert!(replay.frame().await.unwrap().is_err());
    }
}
