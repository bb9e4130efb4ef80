//! Which requests the layers look into, and what a request turned out to be.
//!
//! Every layer classifies a request the same way, in two steps: its head
//! ([`Head`], the few headers that matter, decoded once) decides whether the
//! body is read at all; the body's top-level `method`, read by the peek,
//! decides the rest ([`Classified`]). Each layer keeps its own rules on top
//! (what it refuses, what it takes over), but none decides differently what
//! a request is.

use http::header::{self, HeaderMap, HeaderName};
use http::request::Parts;

use crate::codec::scan::{Method, Outcome};

/// The `Mcp-Method` header of the 2026-07-28 HTTP transport.
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");

/// The methods a layer intercepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interest(u8);

impl Interest {
    /// The interest in `methods`.
    pub(crate) const fn of(methods: &[Method]) -> Self {
        let mut bits = 0;
        let mut i = 0;
        while i < methods.len() {
            bits |= Self::bit(methods[i]);
            i += 1;
        }
        Self(bits)
    }

    const fn bit(method: Method) -> u8 {
        match method {
            Method::Initialize => 1,
            Method::Discover => 2,
            Method::Listen => 4,
            Method::Other => 0,
        }
    }

    /// True when `method` is one of the methods.
    pub(crate) fn contains(self, method: Method) -> bool {
        self.0 & Self::bit(method) != 0
    }
}

/// What a request's body claims to be, by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Content {
    /// `application/json` or a `+json` type.
    Json,
    /// No `Content-Type`: a lenient inner service may still read JSON.
    Missing,
    /// Anything else.
    Other,
}

/// The parts of a request's head the layers read, decoded once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    post: bool,
    content: Content,
    /// The method the `Mcp-Method` header names, if it is present.
    pub(crate) named: Option<Method>,
    /// The declared `Content-Length`.
    pub(crate) length: Option<u64>,
    /// True when the body carries a content coding other than `identity`.
    pub(crate) encoded: bool,
}

impl Head {
    /// Reads the head of a request, in one pass over its headers; only a
    /// `POST`'s headers are looked at.
    pub(crate) fn read(parts: &Parts) -> Self {
        let mut head = Self {
            post: false,
            content: Content::Missing,
            named: None,
            length: None,
            encoded: false,
        };
        if parts.method != http::Method::POST {
            return head;
        }
        head.post = true;
        let (mut typed, mut named, mut measured) = (false, false, false);
        for (name, value) in &parts.headers {
            let value = value.as_bytes();
            if name == header::CONTENT_TYPE {
                if !typed {
                    typed = true;
                    head.content = match is_json_type(value) {
                        true => Content::Json,
                        false => Content::Other,
                    };
                }
            } else if name == header::CONTENT_LENGTH {
                if !measured {
                    measured = true;
                    head.length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                }
            } else if name == header::CONTENT_ENCODING {
                head.encoded |= is_coding(value);
            } else if name == MCP_METHOD && !named {
                named = true;
                head.named = Some(Method::from_name(value));
            }
        }
        head
    }

    /// The one rule for what is inspected: a `POST` whose body is JSON, has
    /// no type at all, or whose `Mcp-Method` names a method of `interest`.
    pub(crate) fn inspected(&self, interest: Interest) -> bool {
        self.post
            && (self.content != Content::Other
                || self.named.is_some_and(|named| interest.contains(named)))
    }

    /// True when the declared length is over `limit`.
    pub(crate) fn longer_than(&self, limit: usize) -> bool {
        self.length.is_some_and(|length| length > limit as u64)
    }

    /// True when the header and the body disagree about a method of
    /// `interest`: either one names it and the other does not.
    pub(crate) fn disguises(&self, body: Option<Method>, interest: Interest) -> bool {
        self.named.is_some_and(|named| {
            Some(named) != body
                && (interest.contains(named) || body.is_some_and(|body| interest.contains(body)))
        })
    }
}

/// What the peek read of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Classified {
    /// The first top-level `method`, once its value was read.
    pub(crate) first: Option<Method>,
    pub(crate) shape: Shape,
}

/// How the peek ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The scanner's answer.
    Decided(Outcome),
    /// The limit was passed before an answer.
    TooLarge,
    /// The body failed before an answer; the error is handed on after the
    /// bytes read.
    Unreadable,
}

impl Classified {
    /// The body's method as far as a layer that intercepts no `Other`
    /// request cares: the method that decided the scan, the first method of
    /// a body too large to finish, and `Other` as soon as the first method
    /// is another (whatever comes after it is the watch's business).
    pub(crate) fn method(&self) -> Option<Method> {
        match (self.first, self.shape) {
            (Some(Method::Other), _) => Some(Method::Other),
            (_, Shape::Decided(Outcome::Method(method))) => Some(method),
            (first, Shape::TooLarge) => first,
            _ => None,
        }
    }
}

/// The media type of the `Content-Type` header value, parameters dropped,
/// is `application/json` or a `+json` type.
fn is_json_type(value: &[u8]) -> bool {
    let media = essence(value);
    same_media(media, b"application/json")
        || media.len() >= 5 && same_media(&media[media.len() - 5..], b"+json")
}

/// A media type without its parameters.
fn essence(value: &[u8]) -> &[u8] {
    let media = match memchr::memchr(b';', value) {
        Some(at) => &value[..at],
        None => value,
    };
    media.trim_ascii()
}

/// ASCII case-insensitive equality, with the common all-lowercase spelling
/// matched byte for byte first.
fn same_media(media: &[u8], lowercase: &[u8]) -> bool {
    media == lowercase || media.eq_ignore_ascii_case(lowercase)
}

/// A response body is `text/event-stream`, parameters ignored.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| same_media(essence(value.as_bytes()), b"text/event-stream"))
}

/// A response body is `application/json` or a `+json` type.
pub(crate) fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| is_json_type(value.as_bytes()))
}

/// True when a body carries a content coding other than `identity`.
pub(crate) fn is_encoded(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|value| is_coding(value.as_bytes()))
}

/// A `Content-Encoding` value that names a coding other than `identity`.
fn is_coding(value: &[u8]) -> bool {
    !value.eq_ignore_ascii_case(b"identity")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn head(method: http::Method, headers: &[(&str, &[u8])]) -> Head {
        let mut request = http::Request::builder().method(method);
        for (name, value) in headers {
            request = request.header(*name, HeaderValue::from_bytes(value).unwrap());
        }
        let (parts, ()) = request.body(()).unwrap().into_parts();
        Head::read(&parts)
    }

    const LISTEN: Interest = Interest::of(&[Method::Listen]);
    const CAPABILITIES: Interest = Interest::of(&[Method::Initialize, Method::Discover]);

    #[test]
    fn json_content_types() {
        for (value, json) in [
            (&b"application/json"[..], true),
            (b"Application/JSON; charset=utf-8", true),
            (b"application/vnd.api+json", true),
            (b"application/vnd.api+JSON", true),
            (b"text/plain", false),
            (b"application/jsonx", false),
            // Bytes beyond visible ASCII in a parameter do not hide the type.
            ("application/json; x=\u{e9}".as_bytes(), true),
        ] {
            assert_eq!(is_json_type(value), json, "{value:?}");
            let head = head(http::Method::POST, &[("content-type", value)]);
            assert_eq!(head.inspected(LISTEN), json, "{value:?}");
        }
        let mut headers = HeaderMap::new();
        for (value, events) in [
            ("text/event-stream", true),
            ("Text/Event-Stream ; charset=utf-8", true),
            ("text/event-streams", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_event_stream(&headers), events, "{value}");
            assert!(!is_json(&headers));
        }
    }

    #[test]
    fn the_one_rule_for_what_is_inspected() {
        let json: &[(&str, &[u8])] = &[("content-type", b"application/json")];
        assert!(head(http::Method::POST, json).inspected(LISTEN));
        assert!(!head(http::Method::GET, json).inspected(LISTEN));
        assert!(!head(http::Method::DELETE, json).inspected(CAPABILITIES));
        // No content type: a lenient inner service may read the body as JSON.
        assert!(head(http::Method::POST, &[]).inspected(CAPABILITIES));
        // Another type, unless the header names an intercepted method.
        let plain = |named: &'static [u8]| {
            head(
                http::Method::POST,
                &[("content-type", b"text/plain"), ("mcp-method", named)],
            )
        };
        assert!(plain(b"subscriptions/listen").inspected(LISTEN));
        assert!(!plain(b"subscriptions/listen").inspected(CAPABILITIES));
        assert!(plain(b"server/discover").inspected(CAPABILITIES));
        assert!(!plain(b"tools/call").inspected(Interest::of(&[
            Method::Initialize,
            Method::Discover,
            Method::Listen
        ])));
    }

    #[test]
    fn headers_are_read_once() {
        let head = head(
            http::Method::POST,
            &[
                ("mcp-method", b"subscriptions/listen"),
                ("content-length", b"12"),
                ("content-encoding", b"identity"),
            ],
        );
        assert_eq!(head.named, Some(Method::Listen));
        assert_eq!(head.length, Some(12));
        assert!(head.longer_than(11) && !head.longer_than(12));
        assert!(!head.encoded);
        let mut headers = HeaderMap::new();
        headers.append(
            header::CONTENT_ENCODING,
            HeaderValue::from_static("identity"),
        );
        headers.append(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        assert!(is_encoded(&headers));
    }

    #[test]
    fn disguises() {
        let named = |name: &'static [u8]| head(http::Method::POST, &[("mcp-method", name)]);
        let listen = named(b"subscriptions/listen");
        assert!(listen.disguises(Some(Method::Other), LISTEN));
        assert!(listen.disguises(None, LISTEN));
        assert!(!listen.disguises(Some(Method::Listen), LISTEN));
        assert!(!listen.disguises(Some(Method::Discover), Interest::of(&[])));
        let call = named(b"tools/call");
        assert!(call.disguises(Some(Method::Listen), LISTEN));
        assert!(!call.disguises(Some(Method::Other), LISTEN));
        assert!(!call.disguises(None, LISTEN));
        assert!(!head(http::Method::POST, &[]).disguises(Some(Method::Listen), LISTEN));
    }

    #[test]
    fn the_method_a_layer_cares_about() {
        let classified = |first, shape| Classified { first, shape }.method();
        let decided = |outcome| Shape::Decided(outcome);
        let other = Some(Method::Other);
        assert_eq!(classified(other, decided(Outcome::DuplicateMethod)), other);
        assert_eq!(classified(other, decided(Outcome::Invalid)), other);
        assert_eq!(
            classified(Some(Method::Discover), decided(Outcome::Invalid)),
            None
        );
        assert_eq!(
            classified(Some(Method::Listen), Shape::TooLarge),
            Some(Method::Listen)
        );
        assert_eq!(classified(None, decided(Outcome::Batch)), None);
        assert_eq!(
            classified(None, decided(Outcome::Method(Method::Initialize))),
            Some(Method::Initialize)
        );
    }
}
