//! Running a case: through the stacked layers and through `EdgeLayer`, and how the two differ.

use std::convert::Infallible;
use std::fmt::Display;
use std::time::Duration;

use bytes::Bytes;
use http::{response, HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use mcp_edge::{
    CapabilitiesLayer, EdgeLayer, ListenError, ListenFilterLayer, Rejection, ServerProfile,
};
use tower::layer::util::{Identity, Stack};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::corpus::Case;
use crate::{take, Chunked, Drained, Recorder, Seen};

/// All a client and the inner service can tell of one exchange.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Observed {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) hint: (u64, Option<u64>),
    pub(crate) body: Drained,
    pub(crate) rejection: Option<Rejection>,
    pub(crate) calls: Vec<Seen>,
    pub(crate) hooks: Vec<String>,
}

/// Sends `request` through `service`: the response head, its size hint, its body drained.
pub(crate) async fn exchange<S, B>(
    service: S,
    request: Request<Chunked>,
) -> (response::Parts, (u64, Option<u64>), Drained)
where
    S: Service<Request<Chunked>, Response = Response<B>, Error = Infallible>,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let Ok(response) = service.oneshot(request).await;
    let (parts, body) = response.into_parts();
    let hint = body.size_hint();
    (parts, (hint.lower(), hint.upper()), Drained::of(body).await)
}

/// `case` through what `stack` layers around a recorder, with a fresh profile.
pub(crate) async fn observe<L, B>(case: &Case, stack: impl FnOnce(ServerProfile) -> L) -> Observed
where
    L: Layer<Recorder>,
    L::Service: Service<Request<Chunked>, Response = Response<B>, Error = Infallible>,
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let (profile, journal) = case.setup.profile();
    let (inner, log) = Recorder::new(case.answer);
    let exchanged = exchange(stack(profile).layer(inner), case.request());
    let (parts, hint, body) = tokio::time::timeout(Duration::from_secs(20), exchanged)
        .await
        .unwrap_or_else(|_| panic!("{case}: no answer"));
    Observed {
        status: parts.status,
        headers: parts.headers,
        hint,
        body,
        rejection: parts.extensions.get::<Rejection>().cloned(),
        calls: take(&log),
        hooks: take(&journal),
    }
}

/// The two layers `EdgeLayer` stands for, capabilities outside.
type Stacked = ServiceBuilder<Stack<ListenFilterLayer, Stack<CapabilitiesLayer, Identity>>>;

/// The stacked layers over `profile`, with the options of `case`.
pub(crate) fn stacked(case: &Case, profile: ServerProfile) -> Stacked {
    ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile.clone()).scan_pass_through(case.scan))
        .layer(
            ListenFilterLayer::new(profile)
                .guard_stream(case.guard)
                .scan_pass_through(case.scan),
        )
}

/// `case` through the stacked layers and through `EdgeLayer`. A request
/// that breaks a rule of each layer is refused by whichever looks first,
/// which the stacking order decides: where both refuse it without calling
/// the inner service for different reasons, `EdgeLayer`'s answer must be
/// exactly that of one of the two layers alone, and it stands for the
/// stacked one.
pub(crate) async fn both(case: &Case) -> (Observed, Observed) {
    let stacked = observe(case, |profile| stacked(case, profile)).await;
    let combined = observe(case, |profile| {
        EdgeLayer::new(profile)
            .guard_stream(case.guard)
            .scan_pass_through(case.scan)
    })
    .await;
    let refused = |o: &Observed| o.rejection.is_some() && o.calls.is_empty();
    if differences(&stacked, &combined).is_empty() || !refused(&stacked) || !refused(&combined) {
        return (stacked, combined);
    }
    let caps = observe(case, |profile| {
        CapabilitiesLayer::new(profile).scan_pass_through(case.scan)
    })
    .await;
    let listen = observe(case, |profile| {
        ListenFilterLayer::new(profile)
            .guard_stream(case.guard)
            .scan_pass_through(case.scan)
    })
    .await;
    let alone = [caps, listen]
        .into_iter()
        .any(|alone| differences(&alone, &combined).is_empty());
    (if alone { combined.clone() } else { stacked }, combined)
}

/// The fields in which two observations differ, by name.
pub(crate) fn differences(a: &Observed, b: &Observed) -> Vec<&'static str> {
    let fields = [
        ("status", a.status == b.status),
        ("headers", a.headers == b.headers),
        ("size hint", a.hint == b.hint),
        ("body", a.body == b.body),
        ("rejection", a.rejection == b.rejection),
        ("inner calls", a.calls == b.calls),
        ("hook calls", a.hooks == b.hooks),
    ];
    fields
        .into_iter()
        .filter(|(_, same)| !same)
        .map(|(name, _)| name)
        .collect()
}

/// What happened in an exchange, for the corpus' coverage.
pub(crate) fn kinds(case: &Case, observed: &Observed) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    if observed.body.error.is_some() {
        kinds.push("the client read the inner's error");
    }
    if let Some(rejection) = &observed.rejection {
        kinds.push(match rejection {
            Rejection::HeaderMismatch => "-32020",
            Rejection::Parse => "-32700",
            Rejection::InvalidRequest(_) => "-32600",
            Rejection::BodyTooLarge { .. } => "413",
            Rejection::BodyUnreadable => "unreadable",
            Rejection::Encoded => "415",
            Rejection::Listen(ListenError::MissingTasksCapability) => "-32021",
            Rejection::Listen(_) => "-32602",
            _ => "another rejection",
        });
    }
    for seen in &observed.calls {
        let changed = observed.body.data != seen.answered;
        kinds.push(match (&seen.filter, changed) {
            (Some(_), true) => "listen stream guarded",
            (Some(_), false) => "listen honoured, answer untouched",
            (None, true) => "capabilities rewritten",
            (None, false) => "answer untouched",
        });
        if seen.body.error.is_some() {
            kinds.push("the inner read the body's error");
        } else if seen.body.data.len() < case.sample.bytes.len() && seen.filter.is_none() {
            kinds.push("body cut short");
        }
        if seen.body.trailers.is_some() {
            kinds.push("the inner read the trailers");
        }
    }
    kinds
}
