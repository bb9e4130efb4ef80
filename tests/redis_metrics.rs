//! What the Redis bus counts (the `metrics` feature), read back through
//! the Prometheus exporter: whether it is connected, the messages it
//! dropped, and the changes that did not reach the other instances, on a
//! real `redis-server` stopped and started again, and over a full delivery
//! queue. Alone in its own test binary, the tests taking turns: the
//! recorder and the gauge are the process's.

use std::sync::OnceLock;
use std::time::Duration;

use mcp_edge::hub::Channel;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::json;

mod bus;

use bus::{eventually, overflow, profile, subscribed, Instance, Redis};

const LOGS: &str = "demo://public/logs";

/// One test at a time: the gauge is the process's.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn exporter() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
}

fn sample(exporter: &PrometheusHandle, series: &str) -> f64 {
    exporter
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bus_reports_its_connection_and_what_it_dropped() {
    let _turn = TURN.lock().await;
    let exporter = exporter();
    let connected = || sample(exporter, "mcp_edge_bus_connected");
    let malformed = r#"mcp_edge_bus_messages_dropped_total{reason="malformed"}"#;
    let unsent = r#"mcp_edge_events_dropped_total{reason="bus"}"#;

    let mut redis = Redis::start();
    let b = Instance::with(&redis.url(), "app", profile());
    let mut stream = b
        .listen("alice", 1, json!({"resourceSubscriptions": [LOGS]}))
        .await;
    let channel = subscribed(&redis, &b, Channel::Resource(LOGS)).await;
    eventually("the gauge says connected", || async { connected() == 1.0 }).await;

    redis.publish(&channel, "not json").await;
    eventually("the malformed message counted", || async {
        sample(exporter, malformed) == 1.0
    })
    .await;
    stream.silent(Duration::from_millis(200)).await;

    // The same bytes twice: the copy is dropped and counted.
    let duplicate = r#"mcp_edge_bus_messages_dropped_total{reason="duplicate"}"#;
    let message = r#"{"v":1,"from":"p","seq":1,"id":"00","change":{"type":"resource_updated","uri":"demo://public/logs"}}"#;
    for _ in 0..2 {
        redis.publish(&channel, message).await;
    }
    assert_eq!(stream.message().await["params"]["uri"], LOGS);
    eventually("the copy counted", || async {
        sample(exporter, duplicate) == 1.0
    })
    .await;
    stream.silent(Duration::from_millis(200)).await;

    redis.stop();
    eventually("the gauge says disconnected", || async {
        connected() == 0.0
    })
    .await;
    let published = b.hub.publisher().resource_updated(LOGS).await;
    assert!(published.remote.is_err(), "{:?}", published.remote);
    assert_eq!(sample(exporter, unsent), 1.0);
    assert_eq!(
        stream.message().await["params"]["uri"],
        LOGS,
        "delivered here"
    );

    redis.run();
    eventually("the gauge says connected again", || async {
        connected() == 1.0
    })
    .await;
    assert_eq!(sample(exporter, malformed), 1.0);
    let published = b.hub.publisher().resource_updated(LOGS).await;
    assert!(published.remote.is_ok(), "{:?}", published.remote);
    assert_eq!(sample(exporter, unsent), 1.0);
}

/// The delivery queue full behind a slow hook: the 76 messages over it
/// are counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_a_full_queue_are_counted() {
    let _turn = TURN.lock().await;
    let full = r#"mcp_edge_bus_messages_dropped_total{reason="queue_full"}"#;
    let before = sample(exporter(), full);
    let redis = Redis::start();
    let _overflowed = overflow(&redis).await;
    assert_eq!(sample(exporter(), full) - before, 76.0);
}
