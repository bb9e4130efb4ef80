//! Reading a request body only as far as its top-level `method`.
//!
//! Both layers classify a request the same way: `POST` with a JSON content
//! type is peeked with the [`Scanner`]; anything else is not inspected. The
//! peeked chunks are kept as they came and replayed to the inner service
//! through [`ReplayBody`].

use std::collections::VecDeque;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use http::{header, HeaderMap, HeaderName, Method as HttpMethod};
use http_body::Body;

use crate::replay::{to_bytes, ReplayBody};
use crate::scan::{Method, Outcome, Scanner};

/// The `Mcp-Method` header of the 2026-07-28 HTTP transport.
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");

/// True for requests whose body the layers look into: `POST` with a JSON
/// content type.
pub(crate) fn is_inspected(method: &HttpMethod, headers: &HeaderMap) -> bool {
    method == HttpMethod::POST && is_json(headers)
}

/// The media type of the `Content-Type` header, parameters dropped.
fn essence(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Some(value.split(';').next().unwrap_or("").trim())
}

/// `text/event-stream`, parameters ignored.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    essence(headers).is_some_and(|e| e.eq_ignore_ascii_case("text/event-stream"))
}

/// `application/json` or any `+json` type, parameters ignored.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    let Some(essence) = essence(headers) else {
        return false;
    };
    essence.eq_ignore_ascii_case("application/json")
        || essence
            .rsplit_once('+')
            .is_some_and(|(_, suffix)| suffix.eq_ignore_ascii_case("json"))
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
    chunks: VecDeque<Bytes>,
    trailers: Option<HeaderMap>,
    error: Option<B::Error>,
    scanner: Scanner,
    read: usize,
    limit: usize,
}

impl<B> Peek<B>
where
    B: Body + Unpin,
{
    /// Starts reading `body`: the scan stops at the first `method` unless
    /// it is an intercepted one, and never goes past `limit` bytes.
    pub(crate) fn new(body: B, limit: usize) -> Self {
        Self::with_scanner(body, limit, Scanner::new())
    }

    /// Like [`Peek::new`], but a body with another method keeps being
    /// scanned as it is replayed, and is cut short at a second top-level
    /// `method`: a parser that keeps the last of duplicate keys must never
    /// see a request other than the one classified.
    pub(crate) fn watching(body: B, limit: usize) -> Self {
        Self::with_scanner(body, limit, Scanner::whole())
    }

    fn with_scanner(body: B, limit: usize, scanner: Scanner) -> Self {
        Self {
            body: Some(body),
            chunks: VecDeque::new(),
            trailers: None,
            error: None,
            scanner,
            read: 0,
            limit,
        }
    }

    /// Reads until the top-level `method` decides the request.
    pub(crate) fn poll_classify(&mut self, cx: &mut Context<'_>) -> Poll<Peeked> {
        loop {
            let scanned = self.scanner.consumed();
            if let Some(chunk) = self.chunks.back().filter(|_| scanned < self.read) {
                // What the last read added; the chunk is in memory already.
                let fresh = &chunk[chunk.len() - (self.read - scanned)..];
                if let Some(outcome) = self.scanner.feed(fresh) {
                    return Poll::Ready(Peeked::Decided(outcome));
                }
                if self.scanner.method() == Some(Method::Other) {
                    return Poll::Ready(Peeked::Decided(Outcome::Method(Method::Other)));
                }
            }
            if self.read > self.limit {
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

    /// Reads the rest of the body into memory, at most `limit` bytes in all.
    pub(crate) fn poll_buffer(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BufferError>> {
        loop {
            if self.read > self.limit {
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
                        self.read += chunk.len();
                        self.chunks.push_back(chunk);
                        return Poll::Ready(true);
                    }
                    Err(frame) => {
                        self.trailers = frame.into_trailers().ok();
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
        self.read
    }

    /// Everything read, as one buffer (no copy when it is one chunk).
    pub(crate) fn buffered(&self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks[0].clone(),
            _ => {
                let mut all = BytesMut::with_capacity(self.read);
                for chunk in &self.chunks {
                    all.extend_from_slice(chunk);
                }
                all.freeze()
            }
        }
    }

    /// The body to hand on: what was read, then the rest.
    pub(crate) fn into_replay(self) -> ReplayBody<B> {
        // Only a watching scan is left undecided after its first method.
        let watch = (self.scanner.method().is_some() && self.scanner.decided().is_none())
            .then_some(self.scanner);
        ReplayBody::replay(self.chunks, self.body, self.trailers, self.error, watch)
    }

    /// The trailers, if the body ended with some while being read.
    pub(crate) fn take_trailers(&mut self) -> Option<HeaderMap> {
        self.trailers.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
            ("text/plain", false),
            ("application/jsonx", false),
        ] {
            headers.insert(header::CONTENT_TYPE, value.parse().unwrap());
            assert_eq!(is_json(&headers), json, "{value}");
        }
        assert!(is_inspected(&HttpMethod::POST, &headers) == is_json(&headers));
        assert!(!is_inspected(&HttpMethod::GET, &headers));
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
