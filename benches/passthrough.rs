//! Benchmark 1: pass-through of a modern `tools/call` through both layers
//! stacked, the combined layer, each layer alone, and the bare inner service.
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
    let Stacks {
        mut both,
        mut edge,
        mut caps,
        mut listen,
    } = stacks(&p, &inner);
    // Both layers, neither scanning other bodies for a second method.
    let mut unscanned = ServiceBuilder::new()
        .layer(CapabilitiesLayer::new(p.clone()).scan_pass_through(false))
        .layer(ListenFilterLayer::new(p.clone()).scan_pass_through(false))
        .service(inner.clone());

    let cases = cases();
    // Sanity: every variant sees and answers the whole request.
    for case in &cases {
        let a = call(&mut bare, &case.chunks);
        assert_eq!(a, call(&mut both, &case.chunks), "{}", case.label);
        assert_eq!(a, call(&mut edge, &case.chunks), "{}", case.label);
        assert_eq!(a, call(&mut unscanned, &case.chunks), "{}", case.label);
    }

    for case in &cases {
        let group = format!("passthrough_{}", case.label);
        let mut g = c.benchmark_group(&group);
        let bytes: u64 = case.chunks.iter().map(|b| b.len() as u64).sum();
        g.throughput(criterion::Throughput::Bytes(bytes));
        let ch = &case.chunks;
        compare(
            g,
            &group,
            &mut [
                ("bare", &mut || {
                    black_box(call(&mut bare, ch));
                }),
                ("both", &mut || {
                    black_box(call(&mut both, ch));
                }),
                ("edge", &mut || {
                    black_box(call(&mut edge, ch));
                }),
                ("caps_only", &mut || {
                    black_box(call(&mut caps, ch));
                }),
                ("listen_only", &mut || {
                    black_box(call(&mut listen, ch));
                }),
                ("both_unscanned", &mut || {
                    black_box(call(&mut unscanned, ch));
                }),
            ],
            21,
            20,
        );
    }
    c.final_summary();
}
