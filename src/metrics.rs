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
use crate::rejection::Rejection;

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

/// Why a message heard on the bus was dropped.
#[cfg(feature = "redis")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BusDropped {
    /// Not a message of the bus's format, or too long.
    Malformed,
    /// The delivery queue was full.
    QueueFull,
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

/// A layer took a request with `method` to check or rewrite.
#[inline]
pub(crate) fn intercepted(method: Method) {
    #[cfg(feature = "metrics")]
    {
        const NAME: &str = "mcp_edge_requests_intercepted_total";
        match method {
            Method::Initialize => counter!(NAME, "method" => "initialize"),
            Method::Discover => counter!(NAME, "method" => "server/discover"),
            Method::Listen => counter!(NAME, "method" => "subscriptions/listen"),
            Method::Subscribe => counter!(NAME, "method" => "resources/subscribe"),
            Method::Other => return,
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = method;
}

/// A layer answered a request itself, for `rejection`.
#[inline]
pub(crate) fn refused(rejection: &Rejection) {
    #[cfg(feature = "metrics")]
    {
        use crate::filter::ListenError;
        const NAME: &str = "mcp_edge_requests_refused_total";
        match rejection {
            Rejection::HeaderMismatch => counter!(NAME, "reason" => "header_mismatch"),
            Rejection::Parse => counter!(NAME, "reason" => "parse"),
            Rejection::InvalidRequest(_) => counter!(NAME, "reason" => "invalid_request"),
            Rejection::BodyTooLarge { .. } => counter!(NAME, "reason" => "body_too_large"),
            Rejection::BodyUnreadable => counter!(NAME, "reason" => "body_unreadable"),
            Rejection::Encoded => counter!(NAME, "reason" => "encoded"),
            Rejection::Listen(ListenError::InvalidParams(_)) => {
                counter!(NAME, "reason" => "invalid_listen")
            }
            Rejection::Listen(ListenError::MissingTasksCapability) => {
                counter!(NAME, "reason" => "missing_tasks_capability")
            }
            Rejection::Listen(ListenError::UnreadableResource) => {
                counter!(NAME, "reason" => "unreadable_resource")
            }
            Rejection::InvalidParams(_) => counter!(NAME, "reason" => "invalid_params"),
            Rejection::ResourceNotFound => counter!(NAME, "reason" => "resource_not_found"),
            Rejection::SubscriptionRefused => counter!(NAME, "reason" => "subscription_refused"),
            Rejection::MethodRemoved => counter!(NAME, "reason" => "method_removed"),
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = rejection;
}

/// A layer replaced an answer by an error, for `reason`.
#[inline]
pub(crate) fn answer_replaced(reason: Replaced) {
    #[cfg(feature = "metrics")]
    {
        const NAME: &str = "mcp_edge_answers_replaced_total";
        match reason {
            Replaced::Compressed => counter!(NAME, "reason" => "compressed"),
            Replaced::Unreadable => counter!(NAME, "reason" => "unreadable"),
            Replaced::Foreign => counter!(NAME, "reason" => "foreign"),
            Replaced::Malformed => counter!(NAME, "reason" => "malformed"),
            Replaced::Truncated => counter!(NAME, "reason" => "truncated"),
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
        const NAME: &str = "mcp_edge_events_dropped_total";
        match reason {
            Dropped::Guard => counter!(NAME, "reason" => "guard"),
            Dropped::Screen => counter!(NAME, "reason" => "screen"),
            #[cfg(feature = "hub")]
            Dropped::SendTime => counter!(NAME, "reason" => "send_time"),
            #[cfg(feature = "hub")]
            Dropped::Backlog => counter!(NAME, "reason" => "backlog"),
            #[cfg(feature = "hub")]
            Dropped::Bus => counter!(NAME, "reason" => "bus"),
            Dropped::Capabilities => counter!(NAME, "reason" => "capabilities"),
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
        const NAME: &str = "mcp_edge_listen_refused_total";
        match limit {
            Limit::Streams => counter!(NAME, "limit" => "streams"),
            Limit::StreamsPerCaller => counter!(NAME, "limit" => "streams_per_caller"),
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
        const NAME: &str = "mcp_edge_bus_messages_dropped_total";
        match reason {
            BusDropped::Malformed => counter!(NAME, "reason" => "malformed"),
            BusDropped::QueueFull => counter!(NAME, "reason" => "queue_full"),
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = reason;
}

/// The decision cache had a decision (`true`) or not.
#[inline]
pub(crate) fn access_decision(hit: bool) {
    #[cfg(feature = "metrics")]
    {
        const NAME: &str = "mcp_edge_access_decisions_total";
        match hit {
            true => counter!(NAME, "result" => "hit"),
            false => counter!(NAME, "result" => "miss"),
        }
        .increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = hit;
}

/// The access hook's answer, timed into `mcp_edge_access_hook_seconds`
/// from the first poll to the answer.
#[inline]
pub(crate) fn access_hook(answer: HookFuture) -> HookFuture {
    #[cfg(feature = "metrics")]
    return Box::pin(async move {
        let asked = std::time::Instant::now();
        let answer = answer.await;
        histogram!("mcp_edge_access_hook_seconds").record(asked.elapsed());
        answer
    });
    #[cfg(not(feature = "metrics"))]
    answer
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
            let rest = &line[line.find(after)? + after.len()..];
            let start = rest.find('"')? + 1;
            let end = start + rest[start..].find('"')?;
            Some(rest[start..end].to_owned())
        };
        let mut checked = 0;
        for line in code.lines() {
            let names = [
                quoted(line, "&str = "),
                quoted(line, "gauge!("),
                quoted(line, "histogram!("),
            ];
            let values = [quoted(line, "=> ")];
            for word in names.into_iter().chain(values).flatten() {
                assert!(
                    page.contains(&format!("`{word}`")),
                    "`{word}` is not in docs/operations.md"
                );
                checked += 1;
            }
            if let Some(name) =
                quoted(line, "counter!(").filter(|name| name.starts_with("mcp_edge_"))
            {
                assert!(
                    page.contains(&format!("`{name}`")),
                    "`{name}` is not in docs/operations.md"
                );
                checked += 1;
            }
        }
        // Eleven metrics; 34 label values.
        assert_eq!(checked, 11 + 34);
    }
}
