//! What the edge counts, through the [`metrics`](https://docs.rs/metrics)
//! facade (the `metrics` feature): the application installs the recorder,
//! and with it the exporter, it wants. docs/operations.md lists every
//! metric, its labels and what to alert on.
//!
//! Names are fixed and label values come from the small enums below, never
//! from a request: no URI, caller or task id reaches a recorder. Every key
//! is static, so a count with no recorder installed costs a look for one
//! and nothing else. Without the feature each function here is empty.

#[cfg(all(feature = "metrics", feature = "hub"))]
use ::metrics::gauge;
#[cfg(feature = "metrics")]
use ::metrics::{counter, histogram};

use crate::codec::scan::Method;
use crate::hooks::HookFuture;

/// Every counter: its name, what it counts, and its label with the
/// label's values (none for a counter without labels).
#[cfg(feature = "metrics")]
const COUNTERS: &[(&str, &str, &str, &[&str])] = &[
    (
        "mcp_edge_requests_intercepted_total",
        "Requests a layer took to check or rewrite.",
        "method",
        &[
            "initialize",
            "server/discover",
            "subscriptions/listen",
            "resources/subscribe",
        ],
    ),
    (
        "mcp_edge_requests_refused_total",
        "Requests a layer answered itself, by reason.",
        "reason",
        &[
            "header_mismatch",
            "parse",
            "invalid_request",
            "body_too_large",
            "body_unreadable",
            "encoded",
            "invalid_listen",
            "missing_tasks_capability",
            "unreadable_resource",
            "invalid_params",
            "resource_not_found",
            "subscription_refused",
            "method_removed",
            "subscription_id_in_use",
        ],
    ),
    (
        "mcp_edge_answers_replaced_total",
        "Inner answers the edge could not vouch for, replaced by an error.",
        "reason",
        &[
            "compressed",
            "unreadable",
            "foreign",
            "malformed",
            "truncated",
        ],
    ),
    (
        "mcp_edge_events_dropped_total",
        "Events left out on their way to a client, by where.",
        "reason",
        &[
            "guard",
            "screen",
            "send_time",
            "backlog",
            "bus",
            "capabilities",
        ],
    ),
    (
        "mcp_edge_listen_streams_ended_total",
        "Listens ended, by reason.",
        "reason",
        &[
            "client_gone",
            "backlog",
            "shutdown",
            "cap",
            "empty",
            "duplicate",
        ],
    ),
    (
        "mcp_edge_listen_refused_total",
        "Listens the hub refused over a cap.",
        "limit",
        &["streams", "streams_per_caller"],
    ),
    (
        "mcp_edge_hub_deliveries_total",
        "Events the hub queued on its streams, one per stream per change.",
        "",
        &[],
    ),
    (
        "mcp_edge_bus_messages_dropped_total",
        "Messages heard on the Redis bus and dropped, by reason.",
        "reason",
        &["malformed", "queue_full", "duplicate"],
    ),
    (
        "mcp_edge_bus_channels_moved_total",
        "Channels whose Redis Cluster slot moved while subscribed.",
        "",
        &[],
    ),
    (
        "mcp_edge_access_decisions_total",
        "Look-ups in the decision cache of the ResourceAccess hook.",
        "result",
        &["hit", "miss"],
    ),
];

/// Whether [`describe`] was called, and so a recorder is installed: the
/// operation histogram, whose labels are built per request, is recorded
/// from then on.
#[cfg(feature = "metrics")]
static DESCRIBED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether each request's operation is counted: once [`describe`] was
/// called (never without the feature).
#[inline]
pub(crate) fn operations_counted() -> bool {
    #[cfg(feature = "metrics")]
    return DESCRIBED.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(feature = "metrics"))]
    false
}

/// Describes every metric the edge records to the installed recorder, and
/// records each counter at 0 for each of its label values and the open
/// listen streams at 0: a scrape before any traffic lists every metric
/// (the Redis bus's `mcp_edge_bus_connected` comes with the bus). Call it
/// once, after installing the recorder: from then on the operation
/// histogram, `mcp.server.operation.duration`, is recorded too (its labels
/// are built per request, so not before a recorder is there to read them).
#[cfg(feature = "metrics")]
pub fn describe() {
    DESCRIBED.store(true, std::sync::atomic::Ordering::Relaxed);
    use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    for &(name, help, key, values) in COUNTERS {
        describe_counter!(name, help);
        if values.is_empty() {
            counter!(name).increment(0);
        }
        for &value in values {
            counter!(name, key => value).increment(0);
        }
    }
    describe_gauge!(
        "mcp_edge_listen_streams",
        "Listen streams the hub serves now."
    );
    describe_gauge!(
        "mcp_edge_bus_connected",
        "1 while the Redis bus is connected, 0 while it is not."
    );
    #[cfg(feature = "hub")]
    gauge!("mcp_edge_listen_streams").set(0.0);
    describe_histogram!(
        "mcp_edge_access_hook_seconds",
        Unit::Seconds,
        "How long the ResourceAccess hook took to answer."
    );
    describe_histogram!(
        "mcp_edge_listen_stream_duration_seconds",
        Unit::Seconds,
        "How long each hub listen stream was open."
    );
    describe_histogram!(
        "mcp.server.operation.duration",
        Unit::Seconds,
        "MCP request or notification duration as observed on the receiver from the time it was \
         received until the result or ack is sent."
    );
    for name in [
        "mcp_edge_access_hook_seconds",
        "mcp_edge_listen_stream_duration_seconds",
        "mcp.server.operation.duration",
    ] {
        // Registered, so that the exporter lists it.
        let _ = histogram!(name);
    }
}

/// Why the layer put an error in the place of the inner service's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replaced {
    /// The answer is compressed: compression belongs outside the layer.
    Compressed,
    /// The answer is too long, or not UTF-8.
    Unreadable,
    /// The answer is not the request's own.
    Foreign,
    /// The answer is not one well-formed JSON-RPC response.
    Malformed,
    /// The stream ended inside an event.
    Truncated,
}

/// Where events on their way to a client were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dropped {
    /// The stream guard: outside the honoured filter, or not well formed.
    Guard,
    /// The legacy update screen: a URI the caller may not read.
    Screen,
    /// The hub's send-time check: the caller may no longer read the URI.
    #[cfg(feature = "hub")]
    SendTime,
    /// A hub stream fell behind: its backlog and the event that did not fit.
    #[cfg(feature = "hub")]
    Backlog,
    /// A change that did not reach the other instances over the bus.
    #[cfg(feature = "hub")]
    Bus,
    /// The capabilities rewrite: a second answer, or one to another request.
    Capabilities,
}

/// Why a layer answered a request itself: the label of each rejection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    HeaderMismatch,
    Parse,
    InvalidRequest,
    BodyTooLarge,
    BodyUnreadable,
    Encoded,
    InvalidListen,
    MissingTasksCapability,
    UnreadableResource,
    InvalidParams,
    ResourceNotFound,
    SubscriptionRefused,
    MethodRemoved,
    SubscriptionIdInUse,
}

/// Why a message heard on the bus was dropped.
#[cfg(feature = "redis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BusDropped {
    /// Not a message of the bus's format, or too long.
    Malformed,
    /// The delivery queue was full.
    QueueFull,
    /// The same bytes were heard among the recent messages.
    Duplicate,
}

/// The hub's cap a listen was refused over.
#[cfg(feature = "hub")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// Open streams in all.
    Streams,
    /// Open streams of one caller.
    StreamsPerCaller,
}

/// How a listen ended: the reason a hub stream closed, or why the edge
/// answered the listen at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The client went away (the stream was dropped).
    #[cfg(feature = "hub")]
    ClientGone,
    /// The stream fell behind its backlog.
    #[cfg(feature = "hub")]
    Backlog,
    /// The hub shut down.
    #[cfg(feature = "hub")]
    Shutdown,
    /// Refused over a cap of the hub.
    #[cfg(feature = "hub")]
    Cap,
    /// Nothing honoured: acknowledged and ended at once.
    Empty,
    /// Refused: its caller has a live listen under the same subscription id.
    Duplicate,
}

/// A listen ended, for `reason`.
#[inline]
pub(crate) fn listen_ended(reason: Ended) {
    #[cfg(feature = "metrics")]
    {
        match reason {
            #[cfg(feature = "hub")]
            Ended::ClientGone => {
                counter!("mcp_edge_listen_streams_ended_total", "reason" => "client_gone")
            }
            #[cfg(feature = "hub")]
            Ended::Backlog => {
                counter!("mcp_edge_listen_streams_ended_total", "reason" => "backlog")
            }
            #[cfg(feature = "hub")]
            Ended::Shutdown => {
                counter!("mcp_edge_listen_streams_ended_total", "reason" => "shutdown")
            }
            #[cfg(feature = "hub")]
            Ended::Cap => counter!("mcp_edge_listen_streams_ended_total", "reason" => "cap"),
            Ended::Empty => counter!("mcp_edge_listen_streams_ended_total", "reason" => "empty"),
            Ended::Duplicate => {
                counter!("mcp_edge_listen_streams_ended_total", "reason" => "duplicate")
            }
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A hub stream closed after `lifetime` open.
#[cfg(feature = "hub")]
#[inline]
pub(crate) fn listen_lifetime(lifetime: std::time::Duration) {
    #[cfg(feature = "metrics")]
    histogram!("mcp_edge_listen_stream_duration_seconds").record(lifetime);
    #[cfg(not(feature = "metrics"))]
    let _ = lifetime;
}

/// A layer took a request with `method` to check or rewrite.
#[inline]
pub(crate) fn intercepted(method: Method) {
    #[cfg(feature = "metrics")]
    {
        match method {
            Method::Initialize => {
                counter!("mcp_edge_requests_intercepted_total", "method" => "initialize")
            }
            Method::Discover => {
                counter!("mcp_edge_requests_intercepted_total", "method" => "server/discover")
            }
            Method::Listen => {
                counter!("mcp_edge_requests_intercepted_total", "method" => "subscriptions/listen")
            }
            Method::Subscribe => {
                counter!("mcp_edge_requests_intercepted_total", "method" => "resources/subscribe")
            }
            Method::Other => return,
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = method;
}

/// A layer answered a request itself, for `reason`.
#[inline]
pub(crate) fn refused(reason: Refusal) {
    #[cfg(feature = "metrics")]
    {
        match reason {
            Refusal::HeaderMismatch => {
                counter!("mcp_edge_requests_refused_total", "reason" => "header_mismatch")
            }
            Refusal::Parse => counter!("mcp_edge_requests_refused_total", "reason" => "parse"),
            Refusal::InvalidRequest => {
                counter!("mcp_edge_requests_refused_total", "reason" => "invalid_request")
            }
            Refusal::BodyTooLarge => {
                counter!("mcp_edge_requests_refused_total", "reason" => "body_too_large")
            }
            Refusal::BodyUnreadable => {
                counter!("mcp_edge_requests_refused_total", "reason" => "body_unreadable")
            }
            Refusal::Encoded => {
                counter!("mcp_edge_requests_refused_total", "reason" => "encoded")
            }
            Refusal::InvalidListen => {
                counter!("mcp_edge_requests_refused_total", "reason" => "invalid_listen")
            }
            Refusal::MissingTasksCapability => {
                counter!("mcp_edge_requests_refused_total", "reason" => "missing_tasks_capability")
            }
            Refusal::UnreadableResource => {
                counter!("mcp_edge_requests_refused_total", "reason" => "unreadable_resource")
            }
            Refusal::InvalidParams => {
                counter!("mcp_edge_requests_refused_total", "reason" => "invalid_params")
            }
            Refusal::ResourceNotFound => {
                counter!("mcp_edge_requests_refused_total", "reason" => "resource_not_found")
            }
            Refusal::SubscriptionRefused => {
                counter!("mcp_edge_requests_refused_total", "reason" => "subscription_refused")
            }
            Refusal::MethodRemoved => {
                counter!("mcp_edge_requests_refused_total", "reason" => "method_removed")
            }
            Refusal::SubscriptionIdInUse => {
                counter!("mcp_edge_requests_refused_total", "reason" => "subscription_id_in_use")
            }
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A layer replaced an answer by an error, for `reason`.
#[inline]
pub(crate) fn answer_replaced(reason: Replaced) {
    #[cfg(feature = "metrics")]
    {
        match reason {
            Replaced::Compressed => {
                counter!("mcp_edge_answers_replaced_total", "reason" => "compressed")
            }
            Replaced::Unreadable => {
                counter!("mcp_edge_answers_replaced_total", "reason" => "unreadable")
            }
            Replaced::Foreign => counter!("mcp_edge_answers_replaced_total", "reason" => "foreign"),
            Replaced::Malformed => {
                counter!("mcp_edge_answers_replaced_total", "reason" => "malformed")
            }
            Replaced::Truncated => {
                counter!("mcp_edge_answers_replaced_total", "reason" => "truncated")
            }
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// `events` events were dropped, for `reason`.
#[inline]
pub(crate) fn events_dropped(reason: Dropped, events: u64) {
    #[cfg(feature = "metrics")]
    {
        match reason {
            Dropped::Guard => counter!("mcp_edge_events_dropped_total", "reason" => "guard"),
            Dropped::Screen => counter!("mcp_edge_events_dropped_total", "reason" => "screen"),
            #[cfg(feature = "hub")]
            Dropped::SendTime => counter!("mcp_edge_events_dropped_total", "reason" => "send_time"),
            #[cfg(feature = "hub")]
            Dropped::Backlog => counter!("mcp_edge_events_dropped_total", "reason" => "backlog"),
            #[cfg(feature = "hub")]
            Dropped::Bus => counter!("mcp_edge_events_dropped_total", "reason" => "bus"),
            Dropped::Capabilities => {
                counter!("mcp_edge_events_dropped_total", "reason" => "capabilities")
            }
        }
        .increment(events);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (reason, events);
}

/// A hub stream opened (`true`) or closed.
#[cfg(feature = "hub")]
#[inline]
pub(crate) fn listen_stream(opened: bool) {
    #[cfg(feature = "metrics")]
    {
        let streams = gauge!("mcp_edge_listen_streams");
        match opened {
            true => streams.increment(1.0),
            false => streams.decrement(1.0),
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = opened;
}

/// The hub refused a listen over `limit`.
#[cfg(feature = "hub")]
#[inline]
pub(crate) fn listen_refused(limit: Limit) {
    #[cfg(feature = "metrics")]
    {
        match limit {
            Limit::Streams => counter!("mcp_edge_listen_refused_total", "limit" => "streams"),
            Limit::StreamsPerCaller => {
                counter!("mcp_edge_listen_refused_total", "limit" => "streams_per_caller")
            }
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = limit;
}

/// The hub queued one event on each of `streams` streams.
#[cfg(feature = "hub")]
#[inline]
pub(crate) fn hub_deliveries(streams: u64) {
    #[cfg(feature = "metrics")]
    counter!("mcp_edge_hub_deliveries_total").increment(streams);
    #[cfg(not(feature = "metrics"))]
    let _ = streams;
}

/// The bus is connected, or not.
#[cfg(feature = "redis")]
#[inline]
pub(crate) fn bus_connected(connected: bool) {
    #[cfg(feature = "metrics")]
    gauge!("mcp_edge_bus_connected").set(f64::from(u8::from(connected)));
    #[cfg(not(feature = "metrics"))]
    let _ = connected;
}

/// A message heard on the bus was dropped, for `reason`.
#[cfg(feature = "redis")]
#[inline]
pub(crate) fn bus_message_dropped(reason: BusDropped) {
    #[cfg(feature = "metrics")]
    {
        match reason {
            BusDropped::Malformed => {
                counter!("mcp_edge_bus_messages_dropped_total", "reason" => "malformed")
            }
            BusDropped::QueueFull => {
                counter!("mcp_edge_bus_messages_dropped_total", "reason" => "queue_full")
            }
            BusDropped::Duplicate => {
                counter!("mcp_edge_bus_messages_dropped_total", "reason" => "duplicate")
            }
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// A channel the bus listens on left its shard with its slot, and was
/// subscribed again on the new one.
#[cfg(feature = "redis")]
#[inline]
pub(crate) fn bus_channel_moved() {
    #[cfg(feature = "metrics")]
    counter!("mcp_edge_bus_channels_moved_total").increment(1);
}

/// The decision cache had a decision `hits` times, and none `misses` times.
#[inline]
pub(crate) fn access_decisions(hits: u64, misses: u64) {
    #[cfg(feature = "metrics")]
    {
        if hits > 0 {
            counter!("mcp_edge_access_decisions_total", "result" => "hit").increment(hits);
        }
        if misses > 0 {
            counter!("mcp_edge_access_decisions_total", "result" => "miss").increment(misses);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (hits, misses);
}

/// The access hook's answer, timed into `mcp_edge_access_hook_seconds`
/// from its first poll to the answer.
#[inline]
pub(crate) fn access_hook(answer: HookFuture) -> Timed {
    #[cfg(feature = "metrics")]
    return Timed {
        answer,
        asked: None,
    };
    #[cfg(not(feature = "metrics"))]
    answer
}

/// A hook's answer being timed: the answer itself without the feature.
#[cfg(not(feature = "metrics"))]
pub(crate) type Timed = HookFuture;

/// A hook's answer being timed.
#[cfg(feature = "metrics")]
pub(crate) struct Timed {
    answer: HookFuture,
    /// When it was first polled.
    asked: Option<std::time::Instant>,
}

#[cfg(feature = "metrics")]
impl std::future::Future for Timed {
    type Output = Vec<bool>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Vec<bool>> {
        let asked = *self.asked.get_or_insert_with(std::time::Instant::now);
        let answer = std::task::ready!(self.answer.as_mut().poll(cx));
        histogram!("mcp_edge_access_hook_seconds").record(asked.elapsed());
        std::task::Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    /// Every metric name and label value recorded here is in
    /// docs/operations.md, as code.
    #[test]
    fn the_operations_page_lists_every_name_and_label_value() {
        let page = include_str!("../docs/operations.md");
        let code = include_str!("metrics.rs");
        let code = &code[..code.find("#[cfg(test)]\nmod tests").unwrap()];
        let quoted = |line: &str, after: &str| -> Option<String> {
            let rest = &line[line.rfind(after)? + after.len()..];
            let start = rest.find('"')? + 1;
            let end = start + rest[start..].find('"')?;
            Some(rest[start..end].to_owned())
        };
        let mut checked = std::collections::BTreeSet::new();
        for line in code.lines() {
            let named = ["counter!(", "gauge!(", "histogram!("].map(|macro_| quoted(line, macro_));
            for word in named.into_iter().chain([quoted(line, "=> ")]).flatten() {
                assert!(
                    page.contains(&format!("`{word}`")),
                    "`{word}` is not in docs/operations.md"
                );
                checked.insert(word);
            }
        }
        // Fourteen metrics; 42 label values, `malformed`, `backlog` and
        // `duplicate` in two sets each.
        assert_eq!(checked.len(), 14 + 39);
    }

    /// What [`super::describe`] registers is what the code records.
    #[cfg(feature = "metrics")]
    #[test]
    fn every_counter_and_label_value_is_registered() {
        let code = include_str!("metrics.rs");
        let recording = &code[code.find("/// A listen ended, for `reason`.").unwrap()..];
        let recording = &recording[..recording.find("#[cfg(test)]\nmod tests").unwrap()];
        for &(name, _, key, values) in super::COUNTERS {
            assert!(
                recording.contains(&format!("counter!(\"{name}\"")),
                "{name}"
            );
            for value in values {
                assert!(
                    recording.contains(&format!("\"{key}\" => \"{value}\"")),
                    "{name} {value}"
                );
            }
        }
        let registered = super::COUNTERS.iter().map(|c| c.0).collect::<Vec<_>>();
        for line in recording.lines() {
            if let Some(at) = line.find("counter!(\"") {
                let name = line[at + 10..].split('"').next().unwrap();
                assert!(registered.contains(&name), "{name} is not registered");
            }
        }
    }
}
