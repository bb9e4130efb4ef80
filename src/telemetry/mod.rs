//! Each request the edge classifies as an operation in OpenTelemetry's MCP
//! semantic conventions (the `open-telemetry/semantic-conventions-genai`
//! text of `docs/gen-ai/mcp.md`, Development status, for protocol
//! revisions up to 2026-07-28): a `tracing` span named and attributed as
//! the server span, and with the `metrics` feature the
//! `mcp.server.operation.duration` histogram. docs/operations.md lists
//! every name and attribute.
//!
//! Nothing is looked at unless someone listens: before a `tracing`
//! subscriber was set or `describe_metrics()` was called, an operation is
//! one load of two flags. A request that an outer layer of the edge
//! already observes is not observed again.
//!
//! Files: this one (the operation), `names.rs` (the bounded values),
//! `context.rs` (`params._meta` trace context, feature `opentelemetry`).

use std::borrow::Cow;
#[cfg(feature = "metrics")]
use std::time::Instant;

use bytes::Bytes;
use http::request::Parts;
use http::{Response, Version};
use serde::Deserialize;
use tracing::field::Empty;
use tracing::Span;

use crate::jsonrpc::Answered;
use crate::metrics;

#[cfg(feature = "opentelemetry")]
mod context;
mod names;

#[cfg(feature = "metrics")]
pub use names::OPERATION_SECONDS;

/// The most of a request's body read for its tool, prompt, resource and
/// trace context: a larger body keeps only its method.
const PROBE_MAX: usize = 64 * 1024;

/// The mark an observed request carries, so that a second layer of the
/// edge on its way does not observe it again.
#[derive(Debug, Clone, Copy)]
struct Observed;

/// One request the edge classified, from its method to its answer's head.
pub(crate) struct Operation(Option<Box<Active>>);

struct Active {
    span: Span,
    #[cfg(feature = "metrics")]
    started: Instant,
    /// The metric's labels, once the metrics were described.
    #[cfg(feature = "metrics")]
    labels: Option<Vec<::metrics::Label>>,
}

/// What the edge reads of a request's `params` for its operation.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    uri: Option<Cow<'a, str>>,
    #[cfg(feature = "opentelemetry")]
    #[serde(rename = "_meta", borrow)]
    meta: Option<Meta<'a>>,
}

/// The trace context in `params._meta` (SEP-414).
#[cfg(feature = "opentelemetry")]
#[derive(Deserialize)]
pub(crate) struct Meta<'a> {
    #[serde(borrow)]
    pub(crate) traceparent: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub(crate) tracestate: Option<Cow<'a, str>>,
}

impl Operation {
    /// An operation nobody observes.
    pub(crate) const OFF: Self = Self(None);

    /// Whether anyone may observe an operation: once the metrics were
    /// described to a recorder (`describe_metrics`), or a `tracing`
    /// subscriber was set. Before, no span is made (nor the `log` crate's
    /// fallback of a disabled one).
    #[inline]
    pub(crate) fn wanted() -> bool {
        metrics::operations_counted() || tracing::dispatcher::has_been_set()
    }

    /// The span of a request's operation, when anyone observes it and no
    /// outer layer of the edge does already; then the request is marked.
    pub(crate) fn begin(parts: &mut Parts) -> Option<Begun> {
        if !Self::wanted() || parts.extensions.get::<Observed>().is_some() {
            return None;
        }
        let span = tracing::info_span!(
            target: "mcp_edge",
            "mcp.server",
            otel.name = Empty,
            otel.kind = "server",
            otel.status_code = Empty,
            otel.status_description = Empty,
            mcp.method.name = Empty,
            jsonrpc.request.id = Empty,
            mcp.protocol.version = Empty,
            mcp.session.id = Empty,
            mcp.resource.uri = Empty,
            gen_ai.tool.name = Empty,
            gen_ai.prompt.name = Empty,
            gen_ai.operation.name = Empty,
            network.transport = Empty,
            network.protocol.name = "http",
            network.protocol.version = Empty,
            error.type = Empty,
            rpc.response.status_code = Empty,
        );
        if span.is_disabled() && !metrics::operations_counted() {
            return None;
        }
        parts.extensions.insert(Observed);
        Some(Begun(span))
    }

    /// The operation's span, to enter while the request is worked on.
    pub(crate) fn span(&self) -> Option<&Span> {
        self.0.as_ref().map(|active| &active.span)
    }

    /// Ends the operation with its answer's head (or the inner service's
    /// error): the error it carries recorded, the duration counted.
    #[inline]
    pub(crate) fn finish<B, E>(&mut self, answer: Result<&Response<B>, &E>) {
        if let Some(active) = self.0.take() {
            active.finish(answer);
        }
    }
}

impl Active {
    /// Records how the operation ended and counts its duration.
    fn finish<B, E>(self, answer: Result<&Response<B>, &E>) {
        let active = self;
        let error = Failure::of(answer);
        let span = &active.span;
        if let Some(code) = error.code.filter(|_| !span.is_disabled()) {
            // A string, as the conventions type it.
            span.record("rpc.response.status_code", code.to_string().as_str());
        }
        if let Some(kind) = &error.kind {
            span.record("error.type", kind.as_ref());
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", error.message.as_ref());
        }
        #[cfg(feature = "metrics")]
        {
            let Some(mut labels) = active.labels else {
                return;
            };
            if let Some(code) = error.code {
                labels.push(::metrics::Label::new(
                    "rpc.response.status_code",
                    code.to_string(),
                ));
            }
            if let Some(kind) = error.kind {
                labels.push(::metrics::Label::new("error.type", kind.into_owned()));
            }
            ::metrics::histogram!(names::OPERATION_DURATION, labels)
                .record(active.started.elapsed());
        }
    }
}

/// An operation observed, before its request is read.
pub(crate) struct Begun(Span);

impl Begun {
    /// The operation of the request: `name` is its method's name (`None`
    /// when the scan did not keep it); `read(max)` gives what was read of
    /// the request, when it is at most `max` bytes.
    pub(crate) fn classify(
        self,
        parts: &Parts,
        name: Option<&[u8]>,
        read: impl FnOnce(usize) -> Option<Bytes>,
    ) -> Operation {
        let span = self.0;
        let method = name.map_or(names::OTHER, names::method);
        let key = match method {
            "tools/call" => Some("gen_ai.tool.name"),
            "prompts/get" => Some("gen_ai.prompt.name"),
            _ => None,
        };
        // The tool or prompt from `Mcp-Name` (2026-07-28), else from the
        // body, which is parsed only when someone reads what it gives.
        let header = key
            .and(parts.headers.get(names::MCP_NAME))
            .and_then(|value| value.to_str().ok())
            .filter(|name| names::is_plain(name));
        let parse = !span.is_disabled() || (key.is_some() && header.is_none());
        let body = parse.then(|| read(PROBE_MAX)).flatten();
        let probe = body
            .as_deref()
            .and_then(|body| serde_json::from_slice::<Probe<'_>>(body).ok())
            .and_then(|probe| probe.params);
        let from_body = probe
            .as_ref()
            .and_then(|params| params.name.as_deref())
            .filter(|name| names::is_plain(name));
        let target = key.zip(header.or(from_body));
        let version = names::protocol_version(parts);
        let (transport, http) = match parts.version {
            Version::HTTP_3 => ("quic", "3"),
            Version::HTTP_2 => ("tcp", "2"),
            Version::HTTP_10 => ("tcp", "1.0"),
            _ => ("tcp", "1.1"),
        };
        if !span.is_disabled() {
            match target {
                Some((_, target)) => span.record("otel.name", format!("{method} {target}")),
                None => span.record("otel.name", method),
            };
            span.record("mcp.method.name", method);
            span.record("network.transport", transport);
            span.record("network.protocol.version", http);
            if let Some(version) = version {
                span.record("mcp.protocol.version", version);
            }
            if let Some((key, target)) = target {
                span.record(key, target);
            }
            if method == "tools/call" {
                span.record("gen_ai.operation.name", "execute_tool");
            }
            describe_span(&span, parts, body.as_deref(), probe.as_ref(), version);
        }
        Operation(Some(Box::new(Active {
            #[cfg(feature = "metrics")]
            labels: metrics::operations_counted()
                .then(|| names::labels(method, version, transport, http, target)),
            #[cfg(feature = "metrics")]
            started: Instant::now(),
            span,
        })))
    }
}

/// The span's attributes that no metric carries: the request's id, its
/// resource, its legacy session, and its parent from `params._meta`.
fn describe_span(
    span: &Span,
    parts: &Parts,
    body: Option<&[u8]>,
    params: Option<&Params<'_>>,
    version: Option<&str>,
) {
    if let Some(id) = body.and_then(crate::codec::json::request_id) {
        let id = id.get();
        match serde_json::from_str::<Cow<'_, str>>(id) {
            Ok(text) => span.record("jsonrpc.request.id", text.as_ref()),
            // A number, as it was written; `null` is not an id.
            Err(_) if id != "null" => span.record("jsonrpc.request.id", id),
            Err(_) => span,
        };
    }
    if let Some(uri) = params.and_then(|params| params.uri.as_deref()) {
        span.record("mcp.resource.uri", uri);
    }
    // 2026-07-28 has no sessions: the attribute is for older revisions.
    if version != Some("2026-07-28") {
        if let Some(session) = parts
            .headers
            .get(names::MCP_SESSION_ID)
            .and_then(|value| value.to_str().ok())
        {
            span.record("mcp.session.id", session);
        }
    }
    #[cfg(feature = "opentelemetry")]
    if let Some(meta) = params.and_then(|params| params.meta.as_ref()) {
        context::adopt(span, meta);
    }
}

/// How an operation failed, in the conventions' terms.
struct Failure {
    /// The JSON-RPC error code of the edge's own answer.
    code: Option<i64>,
    /// `error.type`: an error code that classifies as an error on a
    /// server, the status of a server error (5xx) the edge passed on, or
    /// `_OTHER` for the inner service's failure.
    kind: Option<Cow<'static, str>>,
    message: Cow<'static, str>,
}

impl Failure {
    fn of<B, E>(answer: Result<&Response<B>, &E>) -> Self {
        let mut failure = Failure {
            code: None,
            kind: None,
            message: Cow::Borrowed(""),
        };
        let response = match answer {
            Ok(response) => response,
            Err(_) => {
                failure.kind = Some(Cow::Borrowed(names::OTHER));
                failure.message = Cow::Borrowed("the inner service failed");
                return failure;
            }
        };
        if let Some(answered) = response.extensions().get::<Answered>() {
            failure.code = Some(answered.code);
            failure.message = answered.message.clone();
        } else if response.status().is_server_error() {
            let status = response.status();
            failure.kind = Some(Cow::Owned(status.as_str().to_owned()));
            failure.message = Cow::Borrowed(status.canonical_reason().unwrap_or(""));
            return failure;
        }
        failure.kind = failure
            .code
            .filter(|code| names::is_error(*code))
            .map(|code| Cow::Owned(code.to_string()));
        failure
    }
}
