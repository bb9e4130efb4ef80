//! What every listen stream says, whoever serves it (the inner service
//! behind the stream guard, or the listen hub): the subscription tag, the
//! acknowledgment, the listen's own end, and the sub-resource rule that
//! decides which updates a stream hears.

use std::any::Any;

use super::HonouredFilter;

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

/// The sub-resource rule: an honoured URI covers itself and every URI below
/// it by path (`file:///logs` covers `file:///logs/today`, not `file:///logs2`).
/// A URI with a `.` or `..` path segment, raw or percent-encoded, is covered
/// only by itself: `…/alice/notes/../../bob/notes` is not below
/// `…/alice/notes`.
pub(crate) fn covers(honoured: &[u8], uri: &[u8]) -> bool {
    match uri.strip_prefix(honoured) {
        Some([]) => true,
        Some(rest) => (honoured.ends_with(b"/") || rest.starts_with(b"/")) && !has_dot_segment(uri),
        None => false,
    }
}

/// The URIs that cover `uri` by the sub-resource rule, each once, shortest
/// first: every prefix of it that ends before or after a `/`, and `uri`
/// itself, that [`covers`] it. (A prefix ending there covers `uri` unless
/// `uri` has a dot segment, which only `uri` itself covers.)
#[cfg(feature = "hub")]
pub(crate) fn coverers(uri: &str) -> impl Iterator<Item = &str> {
    let below = !has_dot_segment(uri.as_bytes());
    let ends = memchr::memchr_iter(b'/', uri.as_bytes())
        .filter(move |_| below)
        .flat_map(|at| [at, at + 1]);
    let mut last = None;
    ends.chain([uri.len()])
        // Two slashes in a row, or one at the end, give one end twice.
        .filter(move |end| last.replace(*end) != Some(*end))
        .filter_map(move |end| uri.get(..end))
}

/// True when a `/`-separated segment of `uri` is `.` or `..`, each dot raw
/// or as `%2e` / `%2E`.
fn has_dot_segment(uri: &[u8]) -> bool {
    uri.split(|&b| b == b'/').any(|segment| {
        let mut dots = 0;
        let mut rest = segment;
        while !rest.is_empty() {
            if rest[0] == b'.' {
                rest = &rest[1..];
            } else if rest.len() >= 3 && rest[..3].eq_ignore_ascii_case(b"%2e") {
                rest = &rest[3..];
            } else {
                return false;
            }
            dots += 1;
        }
        (1..=2).contains(&dots)
    })
}

#[cfg(all(test, feature = "hub"))]
mod tests {
    use super::{coverers, covers};

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
