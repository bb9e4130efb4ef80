//! `--otlp-endpoint` as a collector receives it: the reference stack served
//! in-process, its spans and metrics exported (`mcp_edge_reference::
//! telemetry`) to an OTLP/HTTP receiver on a loopback port that decodes the
//! official protobuf definitions (`opentelemetry-proto`). Alone in its own
//! test binary: the subscriber and the recorder are the process's.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use mcp_edge_reference::{app, metrics, telemetry::Otlp};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric, HistogramDataPoint};
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, Span};
use prost::Message;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

mod common;

use common::Served;

/// The client's trace: its id and the span the requests carry as parent.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// What the receiver decoded, request by request.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    histograms: Vec<(String, String, Vec<HistogramDataPoint>)>,
    requests: usize,
}

type Shared = Arc<Mutex<Received>>;

/// `POST /v1/traces`: an `ExportTraceServiceRequest`, kept.
async fn traces(State(received): State<Shared>, body: Bytes) -> &'static str {
    let request = ExportTraceServiceRequest::decode(body).expect("an OTLP trace export");
    let mut received = received.lock().unwrap();
    received.requests += 1;
    let spans = request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans);
    received.spans.extend(spans.flat_map(|scope| scope.spans));
    ""
}

/// `POST /v1/metrics`: an `ExportMetricsServiceRequest`, its histograms kept.
async fn metrics_export(State(received): State<Shared>, body: Bytes) -> &'static str {
    let request = ExportMetricsServiceRequest::decode(body).expect("an OTLP metrics export");
    let mut received = received.lock().unwrap();
    received.requests += 1;
    let metrics = request
        .resource_metrics
        .into_iter()
        .flat_map(|r| r.scope_metrics)
        .flat_map(|scope| scope.metrics);
    for metric in metrics {
        if let Some(metric::Data::Histogram(histogram)) = metric.data {
            received
                .histograms
                .push((metric.name, metric.unit, histogram.data_points));
        }
    }
    ""
}

/// An attribute's value as text (strings, and integers as they read).
fn attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?;
    match value.value.as_ref()? {
        any_value::Value::StringValue(text) => Some(text.clone()),
        other => Some(format!("{other:?}")),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A 2026-07-28 POST of `method` with `params` as alice, read to its end.
async fn post_mcp(port: u16, id: u32, method: &str, name: &str, params: &str) -> String {
    let meta = format!(
        r#""_meta":{{"traceparent":"00-{TRACE}-{PARENT}-01","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}"#
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{{meta},{params}}}}}"#
    );
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer alice-token\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Connection: close\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = common::exchange(port, &request).await;
    answer
}

/// Waits (10 s at most) until `done` holds of what was received, sending
/// what the exporters hold every 100 ms.
async fn receives(otlp: &Arc<Otlp>, received: &Shared, done: impl Fn(&Received) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let flushing = otlp.clone();
        tokio::task::spawn_blocking(move || flushing.flush())
            .await
            .unwrap();
        if done(&received.lock().unwrap()) {
            return;
        }
        assert!(Instant::now() < deadline, "not received within 10 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collector_receives_the_operations_spans_and_durations() {
    let received = Shared::default();
    let receiver = Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/metrics", post(metrics_export))
        .with_state(received.clone());
    let receiver = Served::start(move |_| receiver).await;

    let otlp = Otlp::new(Some(&format!("http://127.0.0.1:{}/", receiver.port)))
        .unwrap()
        .expect("an endpoint was given");
    let otlp = Arc::new(otlp);
    let targets =
        tracing_subscriber::filter::Targets::new().with_target("mcp_edge", tracing::Level::DEBUG);
    tracing_subscriber::registry()
        .with(otlp.layer().with_filter(targets))
        .init();
    metrics::install(Some(otlp.recorder())).unwrap();

    let mut stop_rmcp = None;
    let server = Served::start(|port| {
        let app = app::build_with(port, false, app::Bounds::default()).unwrap();
        stop_rmcp = Some(app.stop_rmcp);
        app.router
    })
    .await;
    let port = server.port;

    let touched = post_mcp(
        port,
        7,
        "tools/call",
        "Mcp-Name: touch_resource\r\n",
        r#""name":"touch_resource","arguments":{"uri":"demo://users/alice/notes"}"#,
    )
    .await;
    assert!(touched.contains(r#""isError":false"#), "{touched}");
    // A listen whose filter is malformed: refused by the edge, -32602.
    let refused = post_mcp(
        port,
        8,
        "subscriptions/listen",
        "",
        r#""notifications":{"resourceSubscriptions":"demo://users/alice/notes"}"#,
    )
    .await;
    assert!(refused.contains("-32602"), "{refused}");

    receives(&otlp, &received, |received| {
        let named = |name: &str| received.spans.iter().any(|span| span.name == name);
        named("tools/call touch_resource")
            && named("subscriptions/listen")
            && named("notifications/resources/updated")
            && received
                .histograms
                .iter()
                .any(|(name, ..)| name == "mcp.server.operation.duration")
    })
    .await;

    check(&received.lock().unwrap());

    if let Some(stop) = stop_rmcp {
        stop();
    }
    server.stop().await;
    let exporting = otlp.clone();
    tokio::task::spawn_blocking(move || exporting.shutdown())
        .await
        .unwrap();
    receiver.stop().await;
}

/// What the collector must have received of the two requests.
fn check(received: &Received) {
    let span = |name: &str| {
        received
            .spans
            .iter()
            .find(|span| span.name == name)
            .unwrap_or_else(|| panic!("no span {name}"))
    };
    // The tool call: a SERVER span, child of the client's, attributed as
    // the conventions say.
    let call = span("tools/call touch_resource");
    assert_eq!(call.kind, SpanKind::Server as i32);
    assert_eq!(hex(&call.trace_id), TRACE);
    assert_eq!(hex(&call.parent_span_id), PARENT);
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "touch_resource"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "7"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
        ("network.protocol.name", "http"),
        ("network.protocol.version", "1.1"),
    ] {
        assert_eq!(
            attribute(&call.attributes, key).as_deref(),
            Some(value),
            "{key}"
        );
    }
    assert_eq!(attribute(&call.attributes, "error.type"), None);
    assert_eq!(attribute(&call.attributes, "mcp.session.id"), None);
    // The hub's delivery of the change the tool made: a CLIENT span.
    let delivery = span("notifications/resources/updated");
    assert_eq!(delivery.kind, SpanKind::Client as i32);
    assert_eq!(
        attribute(&delivery.attributes, "mcp.method.name").as_deref(),
        Some("notifications/resources/updated")
    );
    // The refused listen: its code, not an error on a server's side, and
    // the refusal as an event of its span.
    let listen = span("subscriptions/listen");
    assert_eq!(hex(&listen.parent_span_id), PARENT);
    assert_eq!(
        attribute(&listen.attributes, "rpc.response.status_code").as_deref(),
        Some("-32602")
    );
    assert_eq!(attribute(&listen.attributes, "error.type"), None);
    assert!(
        listen
            .events
            .iter()
            .any(|event| event.name == "request answered by the layer"),
        "{:?}",
        listen.events
    );

    // The duration histogram: seconds, the conventions' buckets, one point
    // per operation with its attributes and no URI, caller or id.
    let (_, unit, points) = received
        .histograms
        .iter()
        .rev()
        .find(|(name, ..)| name == "mcp.server.operation.duration")
        .unwrap();
    assert_eq!(unit, "s");
    let call = points
        .iter()
        .find(|point| {
            attribute(&point.attributes, "mcp.method.name").as_deref() == Some("tools/call")
        })
        .expect("a tools/call point");
    assert_eq!(call.explicit_bounds, mcp_edge::OPERATION_SECONDS);
    assert!(call.count >= 1);
    for (key, value) in [
        ("gen_ai.tool.name", "touch_resource"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2026-07-28"),
        ("network.transport", "tcp"),
    ] {
        assert_eq!(
            attribute(&call.attributes, key).as_deref(),
            Some(value),
            "{key}"
        );
    }
    let listen = points
        .iter()
        .find(|point| {
            attribute(&point.attributes, "mcp.method.name").as_deref()
                == Some("subscriptions/listen")
        })
        .expect("a subscriptions/listen point");
    assert_eq!(
        attribute(&listen.attributes, "rpc.response.status_code").as_deref(),
        Some("-32602")
    );
    for point in points {
        let keys: Vec<&str> = point.attributes.iter().map(|kv| kv.key.as_str()).collect();
        assert!(
            keys.iter().all(|key| !matches!(
                *key,
                "jsonrpc.request.id" | "mcp.resource.uri" | "mcp.session.id"
            )),
            "{keys:?}"
        );
    }
}
