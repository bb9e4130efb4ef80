//! The values an operation's attributes take, each from a bounded set: a
//! method the MCP schema defines or `_OTHER`, a protocol revision the edge
//! knows, the error codes a server counts as errors, and, for the metric,
//! at most [`MAX_TARGETS`] tool and prompt names.

use http::request::Parts;
use http::HeaderName;

/// The headers an operation reads.
pub(super) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub(super) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

/// The fallback of a value outside its set, as the conventions spell it.
pub(super) const OTHER: &str = "_OTHER";

/// The histogram of every operation's duration, in seconds.
#[cfg(feature = "metrics")]
pub(super) const OPERATION_DURATION: &str = "mcp.server.operation.duration";

/// The bucket bounds the conventions advise for
/// `mcp.server.operation.duration`, in seconds, for an exporter to set
/// (metrics-exporter-prometheus: `set_buckets_for_metric`).
#[cfg(feature = "metrics")]
pub const OPERATION_SECONDS: &[f64] = &[
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The methods a client sends a server, in every revision up to
/// 2026-07-28 (requests and notifications).
const METHODS: &[&str] = &[
    "completion/complete",
    "initialize",
    "logging/setLevel",
    "notifications/cancelled",
    "notifications/initialized",
    "notifications/progress",
    "notifications/roots/list_changed",
    "ping",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/subscribe",
    "resources/templates/list",
    "resources/unsubscribe",
    "server/discover",
    "subscriptions/listen",
    "tasks/cancel",
    "tasks/get",
    "tasks/list",
    "tasks/result",
    "tools/call",
    "tools/list",
];

/// The protocol revisions a client may name in `MCP-Protocol-Version`.
const VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// How many distinct tool and prompt names the metric carries; later
/// ones are `_OTHER`, so that no client can grow the label set.
#[cfg(feature = "metrics")]
pub(super) const MAX_TARGETS: usize = 256;

/// `mcp.method.name`: the method, if the schema defines it.
pub(super) fn method(name: &[u8]) -> &'static str {
    METHODS
        .iter()
        .find(|known| known.as_bytes() == name)
        .copied()
        .unwrap_or(OTHER)
}

/// `mcp.protocol.version`: the revision the request's header names, if
/// the edge knows it.
pub(super) fn protocol_version(parts: &Parts) -> Option<&'static str> {
    let value = parts.headers.get(MCP_PROTOCOL_VERSION)?.as_bytes();
    VERSIONS
        .iter()
        .find(|known| known.as_bytes() == value)
        .copied()
}

/// Whether a tool or prompt name may name a span and label a metric: 1 to
/// 128 characters of those the schema allows in a tool name.
pub(super) fn is_plain(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// Whether a server counts a JSON-RPC error code as an error: all but
/// those of a request it could not serve (parse error, invalid request,
/// method not found, invalid params, resource not found).
pub(super) fn is_error(code: i64) -> bool {
    !matches!(code, -32700 | -32600 | -32601 | -32602 | -32002)
}

/// The metric's labels known when the operation starts.
#[cfg(feature = "metrics")]
pub(super) fn labels(
    method: &'static str,
    version: Option<&'static str>,
    transport: &'static str,
    http: &'static str,
    target: Option<(&'static str, &str)>,
) -> Vec<::metrics::Label> {
    use ::metrics::Label;
    let mut labels = Vec::with_capacity(8);
    labels.push(Label::new("mcp.method.name", method));
    if let Some(version) = version {
        labels.push(Label::new("mcp.protocol.version", version));
    }
    labels.push(Label::new("network.transport", transport));
    labels.push(Label::new("network.protocol.name", "http"));
    labels.push(Label::new("network.protocol.version", http));
    if let Some((key, name)) = target {
        labels.push(Label::new(key, bounded(name)));
    }
    if method == "tools/call" {
        labels.push(Label::new("gen_ai.operation.name", "execute_tool"));
    }
    labels
}

/// `name` if it is among the first [`MAX_TARGETS`] names seen, else
/// `_OTHER`.
#[cfg(feature = "metrics")]
fn bounded(name: &str) -> String {
    use std::collections::HashSet;
    use std::sync::{LazyLock, Mutex};

    static SEEN: LazyLock<Mutex<HashSet<Box<str>>>> = LazyLock::new(Default::default);
    // A set of names: consistent after any panic.
    let mut seen = SEEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.contains(name) {
        return name.to_owned();
    }
    if seen.len() < MAX_TARGETS {
        seen.insert(name.into());
        return name.to_owned();
    }
    OTHER.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_method_outside_the_schema_is_other() {
        assert_eq!(method(b"tools/call"), "tools/call");
        assert_eq!(method(b"subscriptions/listen"), "subscriptions/listen");
        assert_eq!(method(b"tools/Call"), OTHER);
        assert_eq!(method(b"x/y"), OTHER);
    }

    #[test]
    fn a_name_that_could_carry_anything_is_not_plain() {
        assert!(is_plain("get-weather"));
        assert!(is_plain("admin.tools/list_files"));
        assert!(!is_plain(""));
        assert!(!is_plain("a b"));
        assert!(!is_plain("demo://users/alice"));
        assert!(!is_plain(&"x".repeat(129)));
    }

    #[test]
    fn the_codes_of_a_request_a_server_could_not_serve_are_not_errors() {
        for code in [-32700, -32600, -32601, -32602, -32002] {
            assert!(!is_error(code), "{code}");
        }
        for code in [-32603, -32013, -32000] {
            assert!(is_error(code), "{code}");
        }
    }

    #[test]
    fn an_unknown_protocol_version_is_not_a_label() {
        let request = http::Request::builder()
            .header("mcp-protocol-version", "2026-07-28")
            .body(())
            .unwrap();
        assert_eq!(
            protocol_version(&request.into_parts().0),
            Some("2026-07-28")
        );
        let request = http::Request::builder()
            .header("mcp-protocol-version", "1999-01-01")
            .body(())
            .unwrap();
        assert_eq!(protocol_version(&request.into_parts().0), None);
    }

    #[cfg(feature = "metrics")]
    #[test]
    fn past_the_bound_a_name_is_other() {
        let taken: Vec<String> = (0..MAX_TARGETS)
            .map(|i| bounded(&format!("t{i}")))
            .collect();
        // Other tests may have named some first: every name kept is itself.
        assert!(taken
            .iter()
            .enumerate()
            .all(|(i, name)| name == &format!("t{i}") || name == OTHER));
        assert_eq!(bounded("one-more-than-the-bound"), OTHER);
        assert_eq!(bounded("t0"), taken[0]);
    }
}
