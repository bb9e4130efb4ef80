//! Benchmark 8: the listen hub's fan-out on one instance. 10 000 open
//! streams, 100 of them on one URI; one update of that URI, delivered to
//! the 100 and read off each stream, against the floor of a bare
//! `tokio::sync::broadcast` send of the same bytes to 100 receivers; and
//! against two bodies over such a channel: one that hands out what it
//! receives as a frame, and one that writes the part before the
//! subscription id it receives with its own id, as the hub does, and hands
//! that out.
//!
//! A second hub does the same for 100 streams opened through the
//! `ListenFilterLayer`: the guard does not read what the hub served.
//!
//! `cargo bench --bench hub -- --warm-up-time 1 --measurement-time 3 --sample-size 20`

use std::convert::Infallible;
use std::hint::black_box;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use criterion::Criterion;
use futures_util::FutureExt;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use mcp_edge::hub::ListenHub;
use mcp_edge::{ListenFilterLayer, Principal, ServerProfile};
use tower::{Layer, Service, ServiceExt};

mod common;

const STREAMS: usize = 10_000;
const ON_ONE_URI: usize = 100;
const HOT: &str = "file:///project/src/hot.rs";

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let profile = ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            std::future::ready(vec![true; uris.len()])
        })
        .build()
        .unwrap();
    let hub = ListenHub::builder(profile.clone())
        .max_streams(STREAMS)
        .max_streams_per_caller(STREAMS)
        .keep_alive(Duration::from_secs(3600))
        .build();
    let mut service = hub.layer().layer(tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    }));
    let mut hot = Vec::new();
    let mut cold = Vec::new();
    for i in 0..STREAMS {
        let uri = match i % (STREAMS / ON_ONE_URI) {
            0 => HOT.to_owned(),
            _ => format!("file:///project/src/module_{i}.rs"),
        };
        let caller = Principal::new(format!("caller-{}", i % 100));
        let request = common::honoured_listen(&profile, caller, i, &uri);
        let response =
            runtime.block_on(async { service.ready().await.unwrap().call(request).await.unwrap() });
        let mut body = response.into_body();
        // The acknowledgment.
        next_frame(&mut body).expect("an acknowledgment");
        match uri == HOT {
            true => hot.push(body),
            false => cold.push(body),
        }
    }
    assert_eq!(hot.len(), ON_ONE_URI);
    assert_eq!(hub.open_streams(), STREAMS);
    let publisher = hub.publisher();
    let mut deliver = || {
        let queued = publisher
            .resource_updated(HOT)
            .now_or_never()
            .unwrap()
            .streams;
        assert_eq!(queued, ON_ONE_URI);
        for body in &mut hot {
            black_box(next_frame(body).expect("the update"));
        }
    };
    deliver();

    // The same fan-out on a second hub whose 100 streams on the URI were
    // opened through the listen filter: served straight by the hub, they
    // are not read again by the guard.
    let guarded_hub = ListenHub::builder(profile.clone())
        .max_streams(STREAMS)
        .max_streams_per_caller(STREAMS)
        .keep_alive(Duration::from_secs(3600))
        .build();
    let mut direct = guarded_hub
        .layer()
        .layer(tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }));
    type Filtered = mcp_edge::RequestBody<http_body_util::Full<Bytes>>;
    let mut filtered = ListenFilterLayer::new(profile.clone()).layer(guarded_hub.layer().layer(
        tower::service_fn(|_: Request<Filtered>| async {
            Ok::<_, Infallible>(Response::new(String::new()))
        }),
    ));
    let mut guarded_hot = Vec::new();
    let mut guarded_cold = Vec::new();
    for i in 0..STREAMS {
        let caller = Principal::new(format!("caller-{}", i % 100));
        if i % (STREAMS / ON_ONE_URI) != 0 {
            let uri = format!("file:///project/src/module_{i}.rs");
            let request = common::honoured_listen(&profile, caller, i, &uri);
            let response = runtime
                .block_on(async { direct.ready().await.unwrap().call(request).await.unwrap() });
            guarded_cold.push(response.into_body());
            continue;
        }
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"subscriptions/listen","params":{{"notifications":{{"resourceSubscriptions":["{HOT}"]}}}}}}"#
        );
        let mut request = Request::post("/mcp")
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(http_body_util::Full::new(Bytes::from(body)))
            .unwrap();
        request.extensions_mut().insert(caller);
        let response = runtime
            .block_on(async { filtered.ready().await.unwrap().call(request).await.unwrap() });
        let mut body = response.into_body();
        let treated = format!("{body:?}");
        assert!(treated.contains("PassThrough"), "not read again: {treated}");
        next_frame(&mut body).expect("an acknowledgment");
        guarded_hot.push(body);
    }
    assert_eq!(guarded_hub.open_streams(), STREAMS);
    let guarded_publisher = guarded_hub.publisher();
    let mut deliver_guarded = || {
        let queued = guarded_publisher
            .resource_updated(HOT)
            .now_or_never()
            .unwrap()
            .streams;
        assert_eq!(queued, ON_ONE_URI);
        for body in &mut guarded_hot {
            black_box(next_frame(body).expect("the update"));
        }
    };
    deliver_guarded();

    // The floor: the same bytes through a broadcast channel to 100 receivers.
    let event = Bytes::from(format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{HOT}\",\"_meta\":{{\"io.modelcontextprotocol/subscriptionId\":0}}}}}}\n\n"
    ));
    let (sender, _) = tokio::sync::broadcast::channel::<Bytes>(16);
    let mut receivers: Vec<_> = (0..ON_ONE_URI).map(|_| sender.subscribe()).collect();
    let mut floor = || {
        sender.send(event.clone()).unwrap();
        for receiver in &mut receivers {
            black_box(receiver.try_recv().unwrap());
        }
    };

    // The body floors: the same bytes through the channel, each of 100
    // bodies handing them out as a frame; and the part before the id, each
    // body writing it with its own id (as the hub writes its events).
    let head = Bytes::from(format!(
        "data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{{\"uri\":\"{HOT}\",\"_meta\":{{\"io.modelcontextprotocol/subscriptionId\":"
    ));
    let mut body_floor = floor_of(event.clone(), |_| None);
    let mut tagged_floor = floor_of(head, |i| {
        Some(format!("{}}}}}}}\n\n", i * (STREAMS / ON_ONE_URI)).into_bytes())
    });
    body_floor();
    tagged_floor();

    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    let mut group = c.benchmark_group("hub_fanout_100_of_10k");
    group.throughput(criterion::Throughput::Elements(ON_ONE_URI as u64));
    group.bench_function("hub", |b| b.iter(&mut deliver));
    group.bench_function("hub_behind_listen_filter", |b| b.iter(&mut deliver_guarded));
    group.bench_function("broadcast_floor", |b| b.iter(&mut floor));
    group.bench_function("body_floor", |b| b.iter(&mut body_floor));
    group.bench_function("tagged_body_floor", |b| b.iter(&mut tagged_floor));
    group.finish();
    c.final_summary();
    drop((cold, guarded_cold));
}

/// One send of `sent` to 100 [`Floor`] bodies, each with the tag `tag`
/// makes for its index, and a frame read off each.
fn floor_of(sent: Bytes, tag: impl Fn(usize) -> Option<Vec<u8>>) -> impl FnMut() {
    let (sender, _) = tokio::sync::broadcast::channel::<Bytes>(16);
    let mut bodies: Vec<Floor> = (0..ON_ONE_URI)
        .map(|i| Floor {
            receiver: sender.subscribe(),
            tag: tag(i),
            buffer: BytesMut::new(),
        })
        .collect();
    move || {
        sender.send(sent.clone()).unwrap();
        for body in &mut bodies {
            black_box(next_frame(body).expect("the update"));
        }
    }
}

/// A body over a broadcast receiver: each frame is what it received, or,
/// with a tag (a subscription id and the rest of the event after it), what
/// it received written with the tag into its buffer.
struct Floor {
    receiver: tokio::sync::broadcast::Receiver<Bytes>,
    tag: Option<Vec<u8>>,
    buffer: BytesMut,
}

impl http_body::Body for Floor {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let Ok(received) = this.receiver.try_recv() else {
            return Poll::Pending;
        };
        let Some(tag) = &this.tag else {
            return Poll::Ready(Some(Ok(Frame::data(received))));
        };
        let buffer = &mut this.buffer;
        let len = received.len() + tag.len();
        if buffer.capacity() < len {
            buffer.reserve(len.max(512));
        }
        buffer.extend_from_slice(&received);
        buffer.extend_from_slice(tag);
        Poll::Ready(Some(Ok(Frame::data(buffer.split().freeze()))))
    }
}

/// The next frame of a body that has one ready.
fn next_frame<B>(body: &mut B) -> Option<Bytes>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Debug,
{
    let frame = body.frame().now_or_never()??;
    frame.unwrap().into_data().ok()
}
