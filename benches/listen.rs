//! Benchmarks 3, 4 and 4b: honouring a `subscriptions/listen` filter, the
//! listen stream guard, and the update screen of every other event stream.
//!
//! `cargo bench --bench listen -- --warm-up-time 1 --measurement-time 3 --sample-size 20`

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use criterion::Criterion;
use http::Request;
use mcp_edge::{EdgeLayer, ListenFilterLayer, Principal};
use tower::ServiceBuilder;

fn listen_body(uris: usize, tasks: usize) -> Vec<u8> {
    let uris: Vec<String> = (0..uris)
        .map(|i| format!("\"file:///project/src/module_{i}/file_{i}.rs\""))
        .collect();
    let tasks: Vec<String> = (0..tasks)
        .map(|i| format!("\"task-{i:08x}-4f1c-9a2e\""))
        .collect();
    let mut notifications = String::from(r#"{"toolsListChanged":true,"promptsListChanged":true"#);
    if !uris.is_empty() {
        notifications.push_str(&format!(r#","resourceSubscriptions":[{}]"#, uris.join(",")));
    }
    if !tasks.is_empty() {
        notifications.push_str(&format!(r#","taskIds":[{}]"#, tasks.join(",")));
    }
    notifications.push('}');
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{{"notifications":{notifications},{META}}}}}"#
    );
    debug_assert!(serde_json::from_str::<serde_json::Value>(&body).is_ok());
    body.into_bytes()
}

fn listen_request(chunks: &[Bytes]) -> Request<ChunkBody> {
    let mut r = post("subscriptions/listen", None, chunk_body(chunks));
    r.extensions_mut().insert(Principal::new("alice"));
    r
}

/// An SSE stream: the inner's ack, then `n` notifications for the listen, one event a frame.
fn stream_events(ack: &str, n: usize, uris: usize) -> Vec<Bytes> {
    let tag = r#""_meta":{"io.modelcontextprotocol/subscriptionId":7}"#;
    let mut v = vec![Bytes::from(format!(
        "event: message\ndata: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{{\"notifications\":{ack},{tag}}}}}\n\n"
    ))];
    for i in 0..n {
        let data = match i % 4 {
            0 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{{tag}}}}}"#
            ),
            1 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"file:///project/src/module_{0}/file_{0}.rs",{tag}}}}}"#,
                (i * 7) % uris
            ),
            2 => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{{{tag}}}}}"#
            ),
            _ => format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"file:///project/src/module_{0}/file_{0}.rs",{tag}}}}}"#,
                uris - 1 - (i % uris)
            ),
        };
        v.push(Bytes::from(format!("event: message\ndata: {data}\n\n")));
    }
    v
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    let p = profile();

    // 3. Honouring the filter.
    for (label, uris, tasks) in [
        ("10_uris", 10, 0),
        ("1000_uris", 1000, 0),
        ("1000_tasks", 0, 1000),
        ("1000_uris_1000_tasks", 1000, 1000),
    ] {
        let body = listen_body(uris, tasks);
        let req = split(&body);
        let inner = Inner::json(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#);
        let mut bare = inner.clone();
        let mut layered = ServiceBuilder::new()
            .layer(ListenFilterLayer::new(p.clone()))
            .service(inner);
        let floor_body = Bytes::from(body.clone());
        let floor = |b: &Bytes| {
            let v: serde_json::Value = serde_json::from_slice(b).unwrap();
            serde_json::to_vec(&v).unwrap().len()
        };
        // Sanity: the listen is honoured (inner answers 200 with its JSON).
        let n = roundtrip(&mut layered, listen_request(&req));
        assert_eq!(
            n,
            roundtrip(&mut bare, listen_request(&req)),
            "{label}: the listen must reach the inner service"
        );
        let group = format!("listen_{label}");
        println!("{group}: request body {} B", body.len());
        let g = c.benchmark_group(&group);
        let rows = compare(
            g,
            &group,
            &mut [
                ("bare", &mut || {
                    black_box(roundtrip(&mut bare, listen_request(&req)));
                }),
                ("layered", &mut || {
                    black_box(roundtrip(&mut layered, listen_request(&req)));
                }),
                ("floor", &mut || {
                    black_box(floor(black_box(&floor_body)));
                }),
            ],
            15,
            20,
        );
        if let Some(rows) = rows {
            let (b, l, f) = (rows[0].1, rows[1].1, rows[2].1);
            println!("SUMMARY\t{group}\tlayered/floor={:.3}\t(layered-bare)/floor={:.3}\tlayered/bare={:.3}", l / f, (l - b) / f, l / b);
        }
    }

    // 4. The stream guard: 10 000 notifications on one listen stream.
    const EVENTS: usize = 10_000;
    for uris in [10usize, 1000] {
        let body = listen_body(uris, 0);
        let req = split(&body);
        let ack_uris: Vec<String> = (0..uris)
            .map(|i| format!("\"file:///project/src/module_{i}/file_{i}.rs\""))
            .collect();
        let ack = format!(
            r#"{{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":[{}]}}"#,
            ack_uris.join(",")
        );
        let inner = Inner {
            answer: Answer::Sse(Arc::new(stream_events(&ack, EVENTS, uris))),
        };
        let mut bare = inner.clone();
        let mut guarded = ServiceBuilder::new()
            .layer(ListenFilterLayer::new(p.clone()))
            .service(inner.clone());
        let mut unguarded = ServiceBuilder::new()
            .layer(ListenFilterLayer::new(p.clone()).guard_stream(false))
            .service(inner);
        assert_eq!(
            count_frames(&mut guarded, listen_request(&req)),
            EVENTS + 1,
            "guard keeps every honoured event"
        );
        assert_eq!(
            count_frames(&mut unguarded, listen_request(&req)),
            EVENTS + 1
        );
        let group = format!("guard_{uris}_uris_10k_events");
        let mut g = c.benchmark_group(&group);
        g.throughput(criterion::Throughput::Elements(EVENTS as u64));
        let rows = compare(
            g,
            &group,
            &mut [
                ("bare", &mut || {
                    black_box(count_frames(&mut bare, listen_request(&req)));
                }),
                ("unguarded", &mut || {
                    black_box(count_frames(&mut unguarded, listen_request(&req)));
                }),
                ("guarded", &mut || {
                    black_box(count_frames(&mut guarded, listen_request(&req)));
                }),
            ],
            11,
            40,
        );
        if let Some(rows) = rows {
            let (b, u, gd) = (rows[0].1, rows[1].1, rows[2].1);
            let e = EVENTS as f64;
            println!(
                "SUMMARY\t{group}\tns/event bare={:.1} unguarded={:.1} guarded={:.1}\tguarded/unguarded={:.3}\tguarded/bare={:.3}",
                b / e, u / e, gd / e, gd / u, gd / b
            );
        }
    }

    // 4b. The update screen: 10 000 events on a legacy session's GET stream.
    let events = Arc::new(legacy_events(EVENTS));
    let inner = Inner {
        answer: Answer::Sse(events),
    };
    let mut bare = inner.clone();
    let mut unscreened = ServiceBuilder::new()
        .layer(EdgeLayer::new(p.clone()).check_updates(false))
        .service(inner.clone());
    let mut screened = ServiceBuilder::new()
        .layer(EdgeLayer::new(p.clone()))
        .service(inner);
    assert_eq!(count_frames(&mut screened, get_request()), EVENTS);
    assert_eq!(count_frames(&mut unscreened, get_request()), EVENTS);
    let group = "screen_10k_events";
    let mut g = c.benchmark_group(group);
    g.throughput(criterion::Throughput::Elements(EVENTS as u64));
    let rows = compare(
        g,
        group,
        &mut [
            ("bare", &mut || {
                black_box(count_frames(&mut bare, get_request()));
            }),
            ("unscreened", &mut || {
                black_box(count_frames(&mut unscreened, get_request()));
            }),
            ("screened", &mut || {
                black_box(count_frames(&mut screened, get_request()));
            }),
        ],
        11,
        40,
    );
    if let Some(rows) = rows {
        let (b, u, sc) = (rows[0].1, rows[1].1, rows[2].1);
        let e = EVENTS as f64;
        println!(
            "SUMMARY\t{group}\tns/event bare={:.1} unscreened={:.1} screened={:.1}\tscreened/unscreened={:.3}",
            b / e, u / e, sc / e, sc / u
        );
    }
    c.final_summary();
}

/// A legacy session's GET stream of `n` events, one a frame: tool answers
/// with escaped text, progress and log notifications, and resource updates
/// for 10 URIs the caller may read.
fn legacy_events(n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            let data = match i % 4 {
                0 => format!(
                    r#"{{"jsonrpc":"2.0","id":{i},"result":{{"content":[{{"type":"text","text":"line one\nline two of answer {i}"}}]}}}}"#
                ),
                1 => format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{i},"progress":{i},"total":10000}}}}"#
                ),
                2 => format!(
                    r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"file:///project/src/module_{0}/file_{0}.rs"}}}}"#,
                    i % 10
                ),
                _ => r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}"#.to_owned(),
            };
            Bytes::from(format!("event: message\ndata: {data}\n\n"))
        })
        .collect()
}

/// A legacy session's GET stream request.
fn get_request() -> Request<ChunkBody> {
    let mut r = Request::get("/mcp")
        .header("accept", "text/event-stream")
        .body(chunk_body(&[]))
        .unwrap();
    r.extensions_mut().insert(Principal::new("alice"));
    r
}
