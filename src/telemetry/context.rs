//! The trace context of `params._meta` (SEP-414: `traceparent` and
//! `tracestate`, in the W3C Trace Context formats) as the parent of an
//! operation's span, through `tracing-opentelemetry`; the span that was
//! current before (the transport's, say) is kept as a link, as the
//! conventions ask.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::Meta;

/// Makes the context in `meta` the parent of `span`, when it is one.
pub(super) fn adopt(span: &Span, meta: &Meta<'_>) {
    let Some(parent) = meta
        .traceparent
        .as_deref()
        .and_then(|traceparent| remote(traceparent, meta.tracestate.as_deref().unwrap_or("")))
    else {
        return;
    };
    let ambient = Span::current().context().span().span_context().clone();
    let context = opentelemetry::Context::new().with_remote_span_context(parent);
    if span.set_parent(context).is_ok() && ambient.is_valid() {
        span.add_link(ambient);
    }
}

/// The remote span a `traceparent` names (version `00`, or a later one
/// read as `00` is, as the W3C text asks), with its `tracestate`.
pub(super) fn remote(traceparent: &str, tracestate: &str) -> Option<SpanContext> {
    let mut fields = traceparent.trim().split('-');
    let (version, trace, parent, flags) = (
        fields.next()?,
        fields.next()?,
        fields.next()?,
        fields.next()?,
    );
    let sizes = [(version, 2), (trace, 32), (parent, 16), (flags, 2)];
    let lowercase_hex = |field: &str| {
        field
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if sizes
        .iter()
        .any(|&(field, len)| field.len() != len || !lowercase_hex(field))
        || version == "ff"
        || (version == "00" && fields.next().is_some())
    {
        return None;
    }
    let trace = TraceId::from_hex(trace).ok()?;
    let parent = SpanId::from_hex(parent).ok()?;
    if trace == TraceId::INVALID || parent == SpanId::INVALID {
        return None;
    }
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()? & TraceFlags::SAMPLED.to_u8());
    let state = tracestate.parse::<TraceState>().unwrap_or_default();
    Some(SpanContext::new(trace, parent, flags, true, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_w3c_traceparent_names_its_remote_span() {
        let context = remote(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "rojo=00f067aa0ba902b7",
        )
        .unwrap();
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled() && context.is_remote());
        assert_eq!(context.trace_state().get("rojo"), Some("00f067aa0ba902b7"));
    }

    #[test]
    fn a_malformed_traceparent_is_no_parent() {
        for traceparent in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ] {
            assert!(remote(traceparent, "").is_none(), "{traceparent}");
        }
    }
}
