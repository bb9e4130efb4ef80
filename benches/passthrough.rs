//! Benchmark 1: pass-through of a modern `tools/call` through both layers,
//! each layer alone, and the bare inner service.
//!
//! `cargo bench --bench passthrough -- --warm-up-time 1 --measurement-time 3 --sample-size 20`

mod common;

use std::hint::black_box;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use criterion::Criterion;
use mcp_edge::{CapabilitiesLayer, ListenFilterLayer};
use tower::ServiceBuilder;

struct Case {
    label: &'static str,
    chunks: Vec<Bytes>,
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (size, sname) in [
        (1024, "1KiB"),
        (64 * 1024, "64KiB"),
        (4 * 1024 * 1024, "4MiB"),
    ] {
        v.push(Case {
            label: leak(format!("{sname}_first")),
            chunks: split(&tools_call(size, false)),
        });
        // Method last past the 1 MiB limit is refused with 413 by design (a listen could hide there).
        if size <= 1024 * 1024 {
            v.push(Case {
                label: leak(format!("{sname}_last")),
                chunks: split(&tools_call(size, true)),
            });
        }
    }
    v.push(Case {
        label: "4MiB_structured",
        chunks: split(&tools_call_structured(4 * 1024 * 1024)),
    });
    v
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// One `tools/call echo` round trip of `chunks` through `svc`.
fn call<S, RB>(svc: &mut S, chunks: &[Bytes]) -> usize
where
    S: tower::Service<http::Request<ChunkBody>, Response = http::Response<RB>>,
    S::Error: std::fmt::Debug,
    RB: http_body::Body,
    RB::Error: std::fmt::Debug,
{
    roundtrip(svc, post("tools/call", Some("echo"), chunk_body(chunks)))
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    let p = profile();
    let inner = Inner::json(SMALL_RESULT);
    let mut bare = inner.clone();
    let mut both = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(p.clone()))
        .layer(ListenFilterLayer::new(p.clone()))
        .service(inner.clone());
    let mut caps = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(p.clone()))
        .service(inner.clone());
    let mut listen = ServiceBuilder::new()
        .layer(ListenFilterLayer::new(p.clone()))
        .service(inner.clone());
    // Both layers, the listen filter not scanning other bodies for a second method.
    let mut unscanned = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(p.clone()))
        .layer(ListenFilterLayer::new(p.clone()).scan_pass_through(false))
        .service(inner.clone());

    let cases = cases();
    // Sanity: every variant sees and answers the whole request.
    for case in &cases {
        let a = call(&mut bare, &case.chunks);
        assert_eq!(a, call(&mut both, &case.chunks), "{}", case.label);
        assert_eq!(a, call(&mut unscanned, &case.chunks), "{}", case.label);
    }

    let names = ["bare", "both", "caps_only", "listen_only", "both_unscanned"];
    for case in &cases {
        let group = format!("passthrough_{}", case.label);
        let mut g = c.benchmark_group(&group);
        let bytes: u64 = case.chunks.iter().map(|b| b.len() as u64).sum();
        g.throughput(criterion::Throughput::Bytes(bytes));
        let ch = &case.chunks;
        let mut variants: [(&str, &mut dyn FnMut()); 5] = [
            (names[0], &mut || {
                black_box(call(&mut bare, ch));
            }),
            (names[1], &mut || {
                black_box(call(&mut both, ch));
            }),
            (names[2], &mut || {
                black_box(call(&mut caps, ch));
            }),
            (names[3], &mut || {
                black_box(call(&mut listen, ch));
            }),
            (names[4], &mut || {
                black_box(call(&mut unscanned, ch));
            }),
        ];
        for (name, run) in variants.iter_mut() {
            g.bench_function(*name, |b| b.iter(&mut **run));
        }
        g.finish();
        if !quick_mode() {
            print_criterion_ratios(&group, &names);
            let rows = interleaved(&mut variants, 21, 20);
            print_table(&group, &rows);
        }
    }
    c.final_summary();
}
