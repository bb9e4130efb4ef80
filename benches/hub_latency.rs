//! Benchmark 9: cross-instance latency through Redis on loopback. Two hubs
//! on one `redis-server` (started here on a free port, stopped at the end);
//! a listen stream on one, 10 000 updates published on the other at 1 000
//! per second; the time from each publish to its delivery on the stream:
//! p50, p99 and the worst.
//!
//! `cargo bench --features redis --bench hub_latency`; with `-- --cluster`,
//! the same on a three-node Redis Cluster (sharded pub/sub), started here
//! on free ports and stopped at the end.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use mcp_edge::hub::{Channel, ListenHub, RedisBus};
use mcp_edge::{Principal, ServerProfile};
use tower::{Layer, Service, ServiceExt};

mod common;
#[path = "../tests/bus/servers.rs"]
mod servers;

const EVENTS: usize = 10_000;
const RATE: Duration = Duration::from_millis(1);
const URI: &str = "file:///project/src/hot.rs";

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (name, mut latencies) = if std::env::args().any(|arg| arg == "--cluster") {
        let cluster = servers::Cluster::start();
        let bus = || RedisBus::cluster(cluster.urls(), "bench").unwrap();
        let subscribers = |channel: &str| cluster.subscribers(channel);
        let latencies = runtime.block_on(measure(bus, subscribers));
        ("hub_latency_redis_cluster", latencies)
    } else {
        let redis = servers::Redis::start();
        let bus = || RedisBus::new(&redis.url(), "bench").unwrap();
        let subscribers = |channel: &str| {
            let out = redis.cli(&["pubsub", "numsub", channel]);
            out.lines().last().unwrap().trim().parse().unwrap()
        };
        (
            "hub_latency_redis",
            runtime.block_on(measure(bus, subscribers)),
        )
    };
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!(
        "SUMMARY\t{name}\tevents={}\tp50={:?}\tp99={:?}\tmax={:?}",
        latencies.len(),
        at(0.50),
        at(0.99),
        latencies[latencies.len() - 1]
    );
}

/// The latencies of `EVENTS` updates from a hub on one `bus()` to a stream
/// on a hub on another, once `subscribers(channel)` counts the second's
/// subscription.
async fn measure(bus: impl Fn() -> RedisBus, subscribers: impl Fn(&str) -> i64) -> Vec<Duration> {
    let profile = ServerProfile::builder().build().unwrap();
    let (a_bus, b_bus) = (bus(), bus());
    let a = ListenHub::builder(profile.clone())
        .bus(a_bus.clone())
        .build();
    let b = ListenHub::builder(profile.clone())
        .bus(b_bus.clone())
        .build();

    let request = common::honoured_listen(&profile, Principal::new("alice"), 1, URI);
    let mut service = b.layer().layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let response = service.ready().await.unwrap().call(request).await.unwrap();
    let mut body = response.into_body();
    body.frame().await.unwrap().unwrap(); // the acknowledgment

    // Wait until both are connected and b is subscribed.
    let channel = b_bus.channel_name(Channel::Resource(URI));
    while subscribers(&channel) != 1 || !a_bus.is_connected() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let (sent_tx, mut sent_rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let publisher = a.publisher();
    let sender = tokio::spawn(async move {
        let mut tick = tokio::time::interval(RATE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        for _ in 0..EVENTS {
            tick.tick().await;
            let _ = sent_tx.send(Instant::now());
            let published = publisher.resource_updated(URI).await;
            assert!(published.remote.is_ok(), "{:?}", published.remote);
        }
    });
    let mut latencies = Vec::with_capacity(EVENTS);
    while latencies.len() < EVENTS {
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("an event within 5 s")
            .unwrap()
            .unwrap();
        let data: Bytes = frame.into_data().unwrap();
        if data.starts_with(b":") {
            continue;
        }
        let received = Instant::now();
        let sent = sent_rx.recv().await.unwrap();
        latencies.push(received - sent);
    }
    sender.await.unwrap();
    latencies
}
