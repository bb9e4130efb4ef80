//! What the edge counts (the `metrics` feature), read back through the
//! Prometheus exporter an operator would scrape: the requests a layer
//! takes, refuses and answers in the inner service's place, the events
//! dropped on their way, the hub's streams, refusals and deliveries, and
//! the decision cache and its hook. Alone in its own test binary, so its
//! global recorder sees every count; the tests take turns, each reading
//! what its own requests added.

use std::convert::Infallible;
use std::future::ready;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::BodyExt;
use mcp_edge::hub::ListenHub;
use mcp_edge::{CapabilitiesLayer, EdgeLayer, ListenFilterLayer, Principal, ServerProfile};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use serde_json::json;
use tower::{ServiceBuilder, ServiceExt};

mod common;

use common::{ack_event, body_bytes, modern_body, modern_post, SUBSCRIPTION_ID};

/// One test at a time: the counts are the process's.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn exporter() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("mcp_edge_access_hook_seconds".to_owned()),
                &[0.001, 0.01, 0.1, 1.0],
            )
            .unwrap()
            .install_recorder()
            .unwrap()
    })
}

/// The value of the series `series` (its name and labels as rendered); 0
/// when it was never recorded.
fn sample(series: &str) -> f64 {
    exporter()
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// The series of `names`, read now; [`Counts::added`] reads what each
/// gained since.
struct Counts(Vec<(&'static str, f64)>);

impl Counts {
    fn now(names: &[&'static str]) -> Self {
        Self(names.iter().map(|name| (*name, sample(name))).collect())
    }

    fn added(&self) -> Vec<(&'static str, f64)> {
        self.0
            .iter()
            .map(|(name, before)| (*name, sample(name) - before))
            .collect()
    }
}

fn event(data: serde_json::Value) -> String {
    format!("data: {data}\n\n")
}

fn sse(text: String) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from(text))
        .unwrap()
}

fn json_answer(text: &'static str) -> Response<Body> {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(text))
        .unwrap()
}

fn post(method: &str, body: String) -> Request<Body> {
    modern_post("/mcp", method).body(Body::from(body)).unwrap()
}

#[tokio::test]
async fn requests_taken_refused_and_replaced_are_counted() {
    let _turn = TURN.lock().await;
    let counts = Counts::now(&[
        r#"mcp_edge_requests_intercepted_total{method="server/discover"}"#,
        r#"mcp_edge_requests_intercepted_total{method="subscriptions/listen"}"#,
        r#"mcp_edge_requests_refused_total{reason="header_mismatch"}"#,
        r#"mcp_edge_requests_refused_total{reason="invalid_listen"}"#,
        r#"mcp_edge_answers_replaced_total{reason="malformed"}"#,
    ]);
    let profile = ServerProfile::builder().build().unwrap();
    // An inner service whose every answer holds a result that is no object.
    let edge = ServiceBuilder::new()
        .layer(EdgeLayer::new(profile))
        .service_fn(|_: Request<_>| async {
            Ok::<_, Infallible>(json_answer(r#"{"jsonrpc":"2.0","id":1,"result":[]}"#))
        });
    let discover = post(
        "server/discover",
        modern_body("server/discover", json!(1), json!({})),
    );
    let answer = edge.clone().oneshot(discover).await.unwrap();
    assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let disguised = post(
        "tools/call",
        modern_body("server/discover", json!(2), json!({})),
    );
    let answer = edge.clone().oneshot(disguised).await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let malformed = modern_body(
        "subscriptions/listen",
        json!(3),
        json!({"notifications": {"resourceSubscriptions": 5}}),
    );
    let answer = edge
        .oneshot(post("subscriptions/listen", malformed))
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    let added: Vec<f64> = counts.added().into_iter().map(|(_, n)| n).collect();
    assert_eq!(added, [1.0, 1.0, 1.0, 1.0, 1.0], "{:?}", counts.added());
}

#[tokio::test]
async fn events_dropped_are_counted_by_where() {
    let _turn = TURN.lock().await;
    let counts = Counts::now(&[
        r#"mcp_edge_events_dropped_total{reason="guard"}"#,
        r#"mcp_edge_events_dropped_total{reason="screen"}"#,
        r#"mcp_edge_events_dropped_total{reason="capabilities"}"#,
        "mcp_edge_access_hook_seconds_count",
        r#"mcp_edge_access_decisions_total{result="miss"}"#,
    ]);
    let profile = ServerProfile::builder()
        .resource_access(common::public_only)
        .build()
        .unwrap();
    let tools = |id: u32| {
        event(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                     "params": {"_meta": {SUBSCRIPTION_ID: id}}}),
        )
    };
    let updated = |uri: &str| {
        event(
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated",
                     "params": {"uri": uri}}),
        )
    };
    let stream = format!(
        "{}{}{}",
        ack_event(7, r#"{"toolsListChanged":true}"#),
        tools(99),
        tools(7)
    );
    let legacy = updated("demo://private/x") + &updated("demo://public/a");
    let inner = move |request: Request<_>| {
        let (stream, legacy) = (stream.clone(), legacy.clone());
        async move {
            let answer = match request.method() {
                &http::Method::GET => legacy,
                _ => stream,
            };
            Ok::<_, Infallible>(sse(answer))
        }
    };
    let listens = ServiceBuilder::new()
        .layer(ListenFilterLayer::new(profile.clone()))
        .service_fn(inner);
    let listen = modern_body(
        "subscriptions/listen",
        json!(7),
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let answer = listens
        .clone()
        .oneshot(post("subscriptions/listen", listen))
        .await
        .unwrap();
    let text = body_bytes(answer).await;
    assert_eq!(
        text,
        ack_event(7, r#"{"toolsListChanged":true}"#) + &tools(7),
        "the foreign notification is left out"
    );
    let get = Request::get("/mcp")
        .header(header::ACCEPT, "text/event-stream")
        .body(Body::empty())
        .unwrap();
    let text = body_bytes(listens.oneshot(get).await.unwrap()).await;
    assert_eq!(
        text,
        updated("demo://public/a"),
        "the private update is left out"
    );

    // A discover answered twice over SSE: the second answer goes.
    let answer = || event(json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    let twice = answer() + &answer();
    let discover = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(profile))
        .service_fn(move |_: Request<_>| ready(Ok::<_, Infallible>(sse(twice.clone()))));
    let request = post(
        "server/discover",
        modern_body("server/discover", json!(1), json!({})),
    );
    let text = body_bytes(discover.oneshot(request).await.unwrap()).await;
    assert_eq!(String::from_utf8_lossy(&text).matches("data:").count(), 1);

    let added = counts.added();
    assert_eq!(added[0].1, 1.0, "{added:?}");
    assert_eq!(added[1].1, 1.0, "{added:?}");
    assert_eq!(added[2].1, 1.0, "{added:?}");
    assert!(added[3].1 >= 1.0, "the hook was timed: {added:?}");
    assert!(added[4].1 >= 1.0, "the screen missed the cache: {added:?}");
}

type Stream = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// A listen of `caller` on `uri` through the listen filter and `hub`.
async fn listen(
    hub: &ListenHub,
    profile: &ServerProfile,
    caller: &str,
    id: u32,
    uri: &str,
) -> Response<Stream> {
    let body = modern_body(
        "subscriptions/listen",
        json!(id),
        json!({"notifications": {"resourceSubscriptions": [uri]}}),
    );
    let mut request = post("subscriptions/listen", body);
    request.extensions_mut().insert(Principal::new(caller));
    let inner = tower::service_fn(|_: Request<_>| async {
        Ok::<_, Infallible>(Response::new(Body::empty()))
    });
    let answer = ServiceBuilder::new()
        .layer(ListenFilterLayer::new(profile.clone()))
        .layer(hub.layer())
        .service(inner)
        .oneshot(request)
        .await
        .unwrap();
    answer.map(|body| {
        body.map_err(|error| panic!("the stream failed: {error}"))
            .boxed_unsync()
    })
}

/// The next data frame of `stream`, as text.
async fn next(stream: &mut Stream) -> Option<String> {
    let frame = stream.frame().await?.unwrap();
    Some(String::from_utf8(frame.into_data().unwrap().to_vec()).unwrap())
}

#[tokio::test]
async fn the_hub_counts_streams_refusals_deliveries_and_decisions() {
    let _turn = TURN.lock().await;
    let counts = Counts::now(&[
        "mcp_edge_hub_deliveries_total",
        r#"mcp_edge_events_dropped_total{reason="send_time"}"#,
        r#"mcp_edge_listen_refused_total{limit="streams_per_caller"}"#,
        r#"mcp_edge_access_decisions_total{result="miss"}"#,
        r#"mcp_edge_access_decisions_total{result="hit"}"#,
        "mcp_edge_access_hook_seconds_count",
        r#"mcp_edge_events_dropped_total{reason="backlog"}"#,
    ]);
    let streams_before = sample("mcp_edge_listen_streams");
    // Bob may read the URI when he listens, and no longer when it changes.
    let bob_reads = Arc::new(AtomicBool::new(true));
    let profile = {
        let bob_reads = bob_reads.clone();
        ServerProfile::builder()
            .resource_access(move |caller: Option<&Principal>, uris: &[&str]| {
                let bob = caller.is_some_and(|caller| caller.as_str() == "bob");
                let yes = !bob || bob_reads.load(Ordering::SeqCst);
                ready(vec![yes; uris.len()])
            })
            .build()
            .unwrap()
    };
    let hub = ListenHub::builder(profile.clone())
        .max_streams_per_caller(1)
        .backlog(2)
        .build();
    let uri = "demo://notes/today";
    let mut alice = listen(&hub, &profile, "alice", 1, uri).await.into_body();
    let mut bob = listen(&hub, &profile, "bob", 2, uri).await.into_body();
    next(&mut alice).await.expect("alice's acknowledgment");
    next(&mut bob).await.expect("bob's acknowledgment");
    assert_eq!(sample("mcp_edge_listen_streams") - streams_before, 2.0);
    let refused = listen(&hub, &profile, "alice", 3, uri).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);

    bob_reads.store(false, Ordering::SeqCst);
    let publisher = hub.publisher();
    for _ in 0..2 {
        assert_eq!(publisher.resource_updated(uri).await.streams, 1);
        let update = next(&mut alice).await.expect("alice hears the update");
        assert!(update.contains(uri), "{update}");
    }
    drop(bob);
    // Carol reads nothing off her stream: the third update overflows a
    // backlog of two, and her stream ends.
    let mut carol = listen(&hub, &profile, "carol", 4, uri).await.into_body();
    next(&mut carol).await.expect("carol's acknowledgment");
    for queued in [2, 2, 1] {
        assert_eq!(publisher.resource_updated(uri).await.streams, queued);
        next(&mut alice).await.expect("alice hears the update");
    }
    let added: Vec<f64> = counts.added().into_iter().map(|(_, n)| n).collect();
    // Deliveries: alice's five, carol's first two. Send-time drops: bob's
    // two. Decisions: the first update misses for alice and bob, the
    // second hits for both; the third misses for carol and hits for
    // alice, the last two hit for both. The hook: the four listens
    // honoured (the refused one among them) and the three misses.
    assert_eq!(
        added,
        [7.0, 2.0, 1.0, 3.0, 7.0, 7.0, 3.0],
        "{:?}",
        counts.added()
    );
    drop((alice, carol));
    assert_eq!(sample("mcp_edge_listen_streams"), streams_before);
}
