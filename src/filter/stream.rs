//! What every listen stream says, whoever serves it (the inner service
//! behind the stream guard, or the listen hub): the subscription tag, the
//! acknowledgment, the listen's own end, and the sub-resource rule that
//! decides which updates a stream hears.

use std::any::Any;

use bytes::{Bytes, BytesMut};
use http::{header, HeaderValue, Response};

use super::HonouredFilter;
use crate::codec::sse::{write_event, EventFields};
use crate::metrics::{self, Ended};

/// The mark of a listen stream served by the listen hub, in its response's
/// extensions. It vouches for the hub's body, not for the response: a layer
/// between the guard and the hub may keep the parts and put another body
/// in. So the mark carries the hub's own test of a body, and the guard
/// passes unread only the body that this test finds to be the hub's stream
/// for its very filter (by type, through [`Any`]). Any other body with the
/// mark, the hub's wrapped on its way by a trace or a map among them, is
/// guarded as usual. Only this crate can make one.
#[derive(Clone, Copy)]
pub(crate) struct Served {
    is_stream: BodyTest,
}

/// The hub's test of a body: is it the hub's stream for this filter?
pub(crate) type BodyTest = fn(&dyn Any, &HonouredFilter) -> bool;

impl Served {
    #[cfg(feature = "hub")]
    pub(crate) fn new(is_stream: BodyTest) -> Self {
        Self { is_stream }
    }

    /// True when `body` is the hub's stream for `filter` itself (not for
    /// an equal one).
    pub(crate) fn vouches(&self, body: &dyn Any, filter: &HonouredFilter) -> bool {
        (self.is_stream)(body, filter)
    }
}

/// The `_meta` key that tags every message of a listen stream.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The method of a listen's acknowledgment.
pub(crate) const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The acknowledgment of `notifications` (JSON text), tagged with the
/// subscription of `filter`.
pub(crate) fn acknowledgment(filter: &HonouredFilter, notifications: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","method":"{ACKNOWLEDGED}","params":{{"notifications":{notifications},"_meta":{{"{SUBSCRIPTION_ID}":{}}}}}}}"#,
        filter.subscription_id().get()
    )
}

/// The listen's own successful answer (JSON text), which ends its stream.
pub(crate) fn completed(filter: &HonouredFilter) -> String {
    let id = filter.subscription_id().get();
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"resultType":"complete","_meta":{{"{SUBSCRIPTION_ID}":{id}}}}}}}"#
    )
}

/// The whole answer to a listen that honours nothing (see
/// [`HonouredFilter::is_empty`]): its acknowledgment, then its own answer,
/// in one event stream that ends there. Counted as a stream ended `empty`.
pub(crate) fn ended_at_once(filter: &HonouredFilter) -> Response<Bytes> {
    metrics::listen_ended(Ended::Empty);
    tracing::info!("listen: nothing honoured, ended at once");
    let mut body = BytesMut::new();
    for data in [
        acknowledgment(filter, filter.ack().get()),
        completed(filter),
    ] {
        let event = EventFields {
            data: &data,
            ..Default::default()
        };
        write_event(&event, &mut body);
    }
    event_stream(body.freeze())
}

/// A response carrying `body` as an event stream, with the headers of one.
pub(crate) fn event_stream<B>(body: B) -> Response<B> {
    let mut response = Response::new(body);
    // Room for these two and the `Transfer-Encoding` hyper adds, no more:
    // hyper keeps a connection's last response headers for its next
    // answer, so a held stream's map lives as long as the stream.
    let headers = response.headers_mut();
    headers.reserve(3);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The sub-resource rule, by which a listen stream honouring a URI hears
/// the updates of the URIs below it: `honoured` covers itself and every URI
/// below it by path (`file:///logs` covers `file:///logs/today`, not
/// `file:///logs2`). A URI that a client could read as another path (a
/// `\`, an ASCII control character, or a `.` or `..` segment in any
/// spelling) is covered only by itself: `…/alice/notes/../../bob/notes` is
/// not below `…/alice/notes`. A [`ResourceAccess`](crate::ResourceAccess)
/// hook that grants by prefix should use the same rule.
///
/// ```
/// use mcp_edge::covers;
///
/// assert!(covers("demo://users/alice/", "demo://users/alice/notes"));
/// assert!(covers("demo://users/alice", "demo://users/alice/notes"));
/// assert!(!covers("demo://users/al", "demo://users/alice/notes"));
/// assert!(!covers("demo://users/alice/", "demo://users/alice/../bob/notes"));
/// assert!(!covers("demo://users/alice/", "demo://users/alice/%2e%2e?/bob"));
/// ```
pub fn covers(honoured: &str, uri: &str) -> bool {
    covers_bytes(honoured.as_bytes(), uri.as_bytes())
}

/// [`covers`], over bytes.
pub(crate) fn covers_bytes(honoured: &[u8], uri: &[u8]) -> bool {
    match uri.strip_prefix(honoured) {
        Some([]) => true,
        Some(rest) => {
            (honoured.ends_with(b"/") || rest.starts_with(b"/")) && !resolves_elsewhere(uri)
        }
        None => false,
    }
}

/// True when a client could read `uri` as another path than it spells, so
/// that no prefix may vouch for it. A WHATWG URL parser (browsers, Node's
/// `new URL`) takes `\` for `/` in special schemes and removes TAB, LF and
/// CR anywhere; RFC 3986 allows no control character at all. So: a `\`,
/// any ASCII control character (below 0x20, and 0x7F), or a `.` or `..`
/// path segment, each dot raw or `%2e` / `%2E`, the segment ended by `/`,
/// `?`, `#` or the end (RFC 3986 §3.3 and the WHATWG path state end a
/// segment at each: `file:///public/..?x` reads as `file:///?x`). (A dot
/// segment that only the removal of TAB, LF or CR makes holds one of them:
/// it is caught too.)
pub(crate) fn resolves_elsewhere(uri: &[u8]) -> bool {
    // Every byte is looked at (no early exit), so the loops vectorize; a
    // dot segment is looked for only where a segment starts with `.` or `%`.
    let odd = uri.iter().fold(false, |odd, &b| {
        odd | (b < 0x20) | (b == b'\\') | (b == 0x7F)
    });
    let dotted = |b: u8| (b == b'.') | (b == b'%');
    let may_be_dotted = uri.first().is_some_and(|&b| dotted(b))
        || uri
            .iter()
            .zip(uri.get(1..).unwrap_or_default())
            .fold(false, |may, (&a, &b)| may | ((a == b'/') & dotted(b)));
    odd || (may_be_dotted && has_dot_segment(uri))
}

/// The URIs that cover `uri` by the sub-resource rule, each once, shortest
/// first: every prefix of it that ends before or after a `/`, and `uri`
/// itself, that [`covers_bytes`] it. (A prefix ending there covers `uri` unless
/// a client could resolve `uri` elsewhere: then only `uri` covers it.)
#[cfg(feature = "hub")]
pub(crate) fn coverers(uri: &str) -> impl Iterator<Item = &str> {
    let below = !resolves_elsewhere(uri.as_bytes());
    let ends = memchr::memchr_iter(b'/', uri.as_bytes())
        .filter(move |_| below)
        .flat_map(|at| [at, at + 1]);
    let mut last = None;
    ends.chain([uri.len()])
        // Two slashes in a row, or one at the end, give one end twice.
        .filter(move |end| last.replace(*end) != Some(*end))
        .filter_map(move |end| uri.get(..end))
}

/// True when a segment of `uri`, begun after a `/` (or at the start) and
/// ended by `/`, `?`, `#` or the end, is `.` or `..`, each dot raw or as
/// `%2e` / `%2E`.
fn has_dot_segment(uri: &[u8]) -> bool {
    // A dot segment starts with `.` or `%` right after a `/` (or at the
    // start): only those places are looked at.
    memchr::memchr2_iter(b'.', b'%', uri).any(|at| {
        if at > 0 && uri[at - 1] != b'/' {
            return false;
        }
        let end = memchr::memchr3(b'/', b'?', b'#', &uri[at..]).map_or(uri.len(), |len| at + len);
        is_dot_segment(&uri[at..end])
    })
}

/// True when `segment` is `.` or `..`, each dot raw or `%2e` / `%2E`.
fn is_dot_segment(segment: &[u8]) -> bool {
    let mut dots = 0;
    let mut rest = segment;
    while !rest.is_empty() && dots < 3 {
        if rest[0] == b'.' {
            rest = &rest[1..];
        } else if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"%2e") {
            rest = &rest[3..];
        } else {
            return false;
        }
        dots += 1;
    }
    rest.is_empty() && (1..=2).contains(&dots)
}

/// URI spellings below `file:///public/` by their bytes, each with the URI
/// a WHATWG URL parser reads in it (Node's `new URL(..).href`): only the
/// plain ones may be covered by a prefix.
#[cfg(test)]
pub(crate) const SPELLINGS: &[(&str, &str)] = &[
    ("file:///public/..\\home\\x", "file:///home/x"),
    ("file:///public/.\t./home/x", "file:///home/x"),
    ("file:///public/%2e\n%2e/home/x", "file:///home/x"),
    ("file:///public/%2E%2E/home/x", "file:///home/x"),
    ("file:///public/.%2e/home/x", "file:///home/x"),
    ("file:///public/\r../home/x", "file:///home/x"),
    ("file:///public/\\..\\..\\home", "file:///home"),
    ("file:///public/x/.%2E", "file:///public/"),
    ("file:///public/.\u{7f}./home", "file:///public/.%7F./home"),
    ("file:///public/x\u{0}y", "file:///public/x%00y"),
    // A segment ends at `?` and `#` too.
    ("file:///public/..?/home/alice/x", "file:///?/home/alice/x"),
    (
        "file:///public/%2e%2e#/home/alice/x",
        "file:///#/home/alice/x",
    ),
    ("file:///public/%2E.?/home/x", "file:///?/home/x"),
    ("file:///public/..#x", "file:///#x"),
    ("file:///public/.?x", "file:///public/?x"),
    // Plain: read as spelled.
    ("file:///public/..%5Chome", "file:///public/..%5Chome"),
    ("file:///public/a/b", "file:///public/a/b"),
    ("file:///public/...", "file:///public/..."),
    ("file:///public/.hidden", "file:///public/.hidden"),
    ("file:///public/..%3F/x", "file:///public/..%3F/x"),
];

/// The prefix [`SPELLINGS`] are below.
#[cfg(test)]
pub(crate) const SPELLED_BELOW: &str = "file:///public/";

#[cfg(test)]
mod spelling_tests {
    use super::{
        covers_bytes as covers, has_dot_segment, resolves_elsewhere, SPELLED_BELOW, SPELLINGS,
    };

    /// Every string of up to 6 bytes over the bytes that make dot
    /// segments: `has_dot_segment` agrees with a plain split on `/`.
    #[test]
    fn dot_segments_are_found_as_a_split_finds_them() {
        fn by_split(uri: &[u8]) -> bool {
            // A segment begins after a `/`; it ends at `?` or `#` too.
            uri.split(|&b| b == b'/').any(|segment| {
                let segment = segment.split(|&b| b == b'?' || b == b'#').next().unwrap();
                let text = String::from_utf8_lossy(segment).to_ascii_lowercase();
                let dots = text.replace("%2e", ".");
                matches!(dots.as_str(), "." | "..")
            })
        }
        let alphabet = b"./%2eEa?#";
        let mut uri = Vec::new();
        for len in 0..=6u32 {
            for n in 0..alphabet.len().pow(len) {
                uri.clear();
                let mut n = n;
                for _ in 0..len {
                    uri.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                assert_eq!(
                    has_dot_segment(&uri),
                    by_split(&uri),
                    "{:?}",
                    String::from_utf8_lossy(&uri)
                );
            }
        }
    }

    /// A prefix covers a spelling only when it is plain, and then what a
    /// client reads in it is below the prefix too; its own spelling always
    /// covers it.
    #[test]
    fn a_uri_a_client_reads_elsewhere_is_covered_only_by_itself() {
        let mut plain = 0;
        for (spelling, read) in SPELLINGS {
            let covered = covers(SPELLED_BELOW.as_bytes(), spelling.as_bytes());
            assert_eq!(
                covered,
                !resolves_elsewhere(spelling.as_bytes()),
                "{spelling:?}"
            );
            if covered {
                plain += 1;
                assert!(read.starts_with(SPELLED_BELOW), "{spelling:?} reads {read}");
            }
            assert!(
                covers(spelling.as_bytes(), spelling.as_bytes()),
                "{spelling:?}"
            );
        }
        assert_eq!(plain, 5);
        for odd in [
            "a\\b", "a\u{1f}", "a\u{7f}", "a/./b", "a/%2e%2E", "a/..?", "a/.#", "a/%2E.?b",
        ] {
            assert!(resolves_elsewhere(odd.as_bytes()), "{odd:?}");
        }
    }
}

#[cfg(all(test, feature = "hub"))]
mod tests {
    use super::{coverers, covers_bytes as covers};

    /// `coverers` yields exactly the prefixes of a URI that `covers` it,
    /// shortest first, each once.
    #[test]
    fn coverers_are_the_prefixes_that_cover() {
        let uris = [
            "file:///project/src/main.rs",
            "file:///project/src/",
            "file:///a//b///c",
            "file:///a/./b",
            "file:///a/%2E%2e/b",
            "file:///a/..b/c",
            "file:///a/..?b/c",
            "file:///a/b?/../c",
            "file:///a/%2e#/c",
            "file:///a/..\\b/c",
            "file:///a/.\t./c",
            "/a/b",
            "db://x",
            "weird:no-slash",
            "file:///π/ü/",
            "",
        ];
        for uri in uris {
            let expected: Vec<&str> = (0..=uri.len())
                .filter_map(|end| uri.get(..end))
                .filter(|prefix| covers(prefix.as_bytes(), uri.as_bytes()))
                .collect();
            let found: Vec<&str> = coverers(uri).collect();
            assert_eq!(found, expected, "{uri}");
        }
    }
}
