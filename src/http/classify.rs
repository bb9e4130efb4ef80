//! Which requests the layers look into, and what a request turned out to be.
//!
//! Every layer classifies a request the same way, in two steps: its head
//! ([`Head`], the few headers that matter, decoded once) decides whether the
//! body is read at all; the body's top-level `method`, read by the peek,
//! decides the rest ([`Classified`]). Each layer keeps its own rules on top
//! (what it refuses, what it takes over), but none decides differently what
//! a request is.

use base64::Engine;
use http::header::{self, HeaderMap, HeaderName};
use http::request::Parts;

use serde_json::value::RawValue;

use crate::codec::json;
use crate::codec::scan::{Method, Outcome};
use crate::rejection::Rejection;

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
            Method::Subscribe => 8,
            Method::Other => 0,
        }
    }

    /// No method.
    pub(crate) const NONE: Self = Self(0);
    /// Every intercepted method.
    pub(crate) const ALL: Self = Self::of(&[
        Method::Initialize,
        Method::Discover,
        Method::Listen,
        Method::Subscribe,
    ]);

    /// Both interests.
    pub(crate) const fn and(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// True when `method` is one of the methods.
    pub(crate) fn contains(self, method: Method) -> bool {
        self.0 & Self::bit(method) != 0
    }
}

/// The parts of a request's head the layers read, decoded once.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    post: bool,
    /// The method the `Mcp-Method` header names, if it is present once and
    /// decodes.
    pub(crate) named: Option<Method>,
    /// The intercepted methods a repeated or undecodable `Mcp-Method` could
    /// name: every one, for a value that does not decode.
    unclear: Interest,
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
            named: None,
            unclear: Interest::NONE,
            length: None,
            encoded: false,
        };
        if parts.method != http::Method::POST {
            return head;
        }
        head.post = true;
        let (mut measured, mut names) = (false, 0);
        for (name, value) in &parts.headers {
            let value = value.as_bytes();
            if name == header::CONTENT_LENGTH {
                if !measured {
                    measured = true;
                    head.length = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
                }
            } else if name == header::CONTENT_ENCODING {
                head.encoded |= is_coding(value);
            } else if name == MCP_METHOD {
                names += 1;
                let decoded = decode_method(value);
                head.unclear.0 |= match decoded {
                    Some(method) => Interest::bit(method),
                    None => Interest::ALL.0,
                };
                if names == 1 {
                    head.named = decoded;
                }
            }
        }
        if names == 1 && head.named.is_some() {
            head.unclear = Interest::NONE;
        } else if names > 1 {
            head.named = None;
        }
        head
    }

    /// The one rule for what is inspected: every `POST`, whatever its
    /// `Content-Type`: a lenient inner service parses any body.
    pub(crate) fn inspected(&self) -> bool {
        self.post
    }

    /// True when the `Mcp-Method` header is repeated or does not decode,
    /// and one of its values could name a method of `interest`.
    pub(crate) fn unclear(&self, interest: Interest) -> bool {
        self.unclear.0 & interest.0 != 0
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

/// The method an `Mcp-Method` value names, decoded as the 2026-07-28
/// transport says: `=?base64?{Base64 of UTF-8}?=` is decoded first. `None`
/// for a value that looks encoded (`=?` first) but is not exactly that form.
fn decode_method(value: &[u8]) -> Option<Method> {
    if !value.starts_with(b"=?") {
        return Some(Method::from_name(value));
    }
    let encoded = value
        .get(..9)
        .filter(|label| label.eq_ignore_ascii_case(b"=?base64?"))
        .and_then(|_| value[9..].strip_suffix(b"?="))?;
    let decoded = BASE64.decode(encoded).ok()?;
    std::str::from_utf8(&decoded).ok()?;
    Some(Method::from_name(&decoded))
}

/// Standard Base64, padded or not.
const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

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
    /// What every layer refuses, whatever it intercepts: a body that cannot
    /// be read as JSON as far as the scan read it (a lenient parser behind
    /// the layer could still find a method in it), and one with more than
    /// one top-level `method` (parsers disagree on which one is meant).
    pub(crate) fn refusal(&self) -> Option<Rejection> {
        match self.shape {
            Shape::Decided(Outcome::Invalid) => Some(Rejection::Parse),
            Shape::Decided(Outcome::DuplicateMethod) => Some(Rejection::InvalidRequest(
                "the request has more than one `method`",
            )),
            _ => None,
        }
    }

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

/// The first method of `interest` a JSON-RPC batch names, under any
/// `method` key of any of its requests; `Err(())` when `body` is not a JSON
/// array.
pub(crate) fn batch_names(body: &[u8], interest: Interest) -> Result<Option<Method>, ()> {
    let items = serde_json::from_slice::<Vec<&RawValue>>(body).map_err(|_| ())?;
    let named = items
        .iter()
        .filter_map(|item| json::members(item.get()))
        .flat_map(|members| members.into_iter())
        .filter(|(key, _)| key == "method")
        .filter_map(|(_, value)| json::string(value))
        .map(|method| Method::from_name(method.as_bytes()))
        .find(|method| interest.contains(*method));
    Ok(named)
}

/// ASCII case-insensitive equality, with the common all-lowercase spelling
/// matched byte for byte first.
fn same_media(media: &[u8], lowercase: &[u8]) -> bool {
    media == lowercase || media.eq_ignore_ascii_case(lowercase)
}

/// A response body is `text/event-stream`, parameters ignored.
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    // A response has a few headers: looking through them costs less than
    // hashing the name.
    let value = match headers.len() <= 8 {
        true => headers
            .iter()
            .find_map(|(name, value)| (name == header::CONTENT_TYPE).then_some(value)),
        false => headers.get(header::CONTENT_TYPE),
    };
    value.is_some_and(|value| is_media(value.as_bytes(), b"text/event-stream"))
}

/// Whether the media type of a `Content-Type` value, parameters and the
/// space around it ignored, is `lowercase`.
fn is_media(value: &[u8], lowercase: &[u8]) -> bool {
    let Some((media, rest)) = value.trim_ascii_start().split_at_checked(lowercase.len()) else {
        return false;
    };
    same_media(media, lowercase) && matches!(rest.trim_ascii_start().first(), None | Some(b';'))
}

/// True when a body carries a content coding other than `identity`.
pub(crate) fn is_encoded(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::CONTENT_ENCODING)
        .iter()
        .any(|value| is_coding(value.as_bytes()))
}

/// A `Content-Encoding` value that names a coding other than `identity`;
/// an empty value names none.
fn is_coding(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    !value.is_empty() && !value.eq_ignore_ascii_case(b"identity")
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
    fn event_stream_types() {
        let mut headers = HeaderMap::new();
        for (value, events) in [
            ("text/event-stream", true),
            ("Text/Event-Stream ; charset=utf-8", true),
            ("text/event-streams", false),
            (" text/event-stream;x", true),
            ("text/event-stream  ", true),
            ("text/event-stream x", false),
            ("application/json", false),
            ("text/event", false),
            ("", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_event_stream(&headers), events, "{value}");
        }
    }

    #[test]
    fn every_post_is_inspected_whatever_its_type() {
        for content_type in [
            &b"application/json"[..],
            b"text/plain",
            b"application/x-www-form-urlencoded",
            b"",
        ] {
            let typed = head(http::Method::POST, &[("content-type", content_type)]);
            assert!(typed.inspected(), "{content_type:?}");
        }
        assert!(head(http::Method::POST, &[]).inspected());
        let json: &[(&str, &[u8])] = &[("content-type", b"application/json")];
        assert!(!head(http::Method::GET, json).inspected());
        assert!(!head(http::Method::DELETE, json).inspected());
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
        assert!(!is_encoded(&headers));
        headers.append(header::CONTENT_ENCODING, HeaderValue::from_static(""));
        assert!(!is_encoded(&headers), "an empty coding is identity");
        headers.append(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        assert!(is_encoded(&headers));
    }

    #[test]
    fn an_empty_content_encoding_is_identity() {
        for (value, encoded) in [
            (&b""[..], false),
            (b" ", false),
            (b"Identity", false),
            (b"gzip", true),
            (b"identity, gzip", true),
        ] {
            let head = head(http::Method::POST, &[("content-encoding", value)]);
            assert_eq!(head.encoded, encoded, "{value:?}");
        }
    }

    #[test]
    fn mcp_method_is_decoded_as_the_transport_says() {
        let named = |value: &'static [u8]| head(http::Method::POST, &[("mcp-method", value)]);
        // "subscriptions/listen", padded and not.
        let encoded = named(b"=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4=?=");
        assert_eq!(encoded.named, Some(Method::Listen));
        assert!(!encoded.unclear(Interest::ALL));
        assert_eq!(
            named(b"=?BASE64?c2VydmVyL2Rpc2NvdmVy?=").named,
            Some(Method::Discover)
        );
        assert_eq!(
            named(b"=?base64?dG9vbHMvY2FsbA==?=").named,
            Some(Method::Other)
        );
        for malformed in [
            &b"=?base64?c3Vic2NyaXB0aW9ucy9saXN0ZW4"[..],
            b"=?base64?!!!!?=",
            b"=?utf-8?b?aW5pdGlhbGl6ZQ==?=",
            b"=?",
            // Not UTF-8 once decoded.
            b"=?base64?/w==?=",
        ] {
            let head = head(http::Method::POST, &[("mcp-method", malformed)]);
            assert_eq!(head.named, None, "{malformed:?}");
            assert!(
                head.unclear(LISTEN) && head.unclear(CAPABILITIES),
                "{malformed:?}"
            );
        }
        // A literal name is a name.
        assert_eq!(named(b"initialize").named, Some(Method::Initialize));
        assert!(!named(b"tools/call").unclear(Interest::ALL));
    }

    #[test]
    fn a_repeated_mcp_method_is_unclear_when_it_could_name_an_intercepted_method() {
        let twice = |a: &'static [u8], b: &'static [u8]| {
            head(http::Method::POST, &[("mcp-method", a), ("mcp-method", b)])
        };
        let listen = twice(b"tools/call", b"subscriptions/listen");
        assert!(listen.unclear(LISTEN));
        assert!(!listen.unclear(CAPABILITIES));
        assert_eq!(listen.named, None);
        assert!(twice(b"initialize", b"initialize").unclear(CAPABILITIES));
        assert!(twice(b"tools/call", b"=?base64?x?=").unclear(CAPABILITIES));
        let calls = twice(b"tools/call", b"tools/list");
        assert!(!calls.unclear(Interest::ALL));
        assert_eq!(calls.named, None);
    }

    #[test]
    fn batches_name_the_first_intercepted_method() {
        let names = |body: &str, interest| batch_names(body.as_bytes(), interest);
        let listen_last =
            r#"[{"id":1,"method":"tools/list"},{"id":2,"method":"subscriptions\/listen"}]"#;
        assert_eq!(names(listen_last, LISTEN), Ok(Some(Method::Listen)));
        assert_eq!(names(listen_last, CAPABILITIES), Ok(None));
        let hidden = r#"[{"id":1,"method":"tools/list","method":"server/discover"}]"#;
        assert_eq!(names(hidden, CAPABILITIES), Ok(Some(Method::Discover)));
        assert_eq!(
            names(r#"[{"method":"initialize"}]"#, Interest::ALL),
            Ok(Some(Method::Initialize))
        );
        assert_eq!(
            names(r#"[{"id":1,"method":"tools/list"}]"#, Interest::ALL),
            Ok(None)
        );
        assert_eq!(names("[1, 2", Interest::ALL), Err(()));
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
