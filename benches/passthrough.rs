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

    let cases = cases();
    // Sanity: every variant sees and answers the whole request.
    for case in &cases {
        let a = roundtrip(
            &mut bare,
            post("tools/call", Some("echo"), chunk_body(&case.chunks)),
        );
        let b = roundtrip(
            &mut both,
            post("tools/call", Some("echo"), chunk_body(&case.chunks)),
        );
        assert_eq!(a, b, "{}", case.label);
    }

    for case in &cases {
        let group = format!("passthrough_{}", case.label);
        let mut g = c.benchmark_group(&group);
        let bytes: u64 = case.chunks.iter().map(|b| b.len() as u64).sum();
        g.throughput(criterion::Throughput::Bytes(bytes));
        let ch = &case.chunks;
        g.bench_function("bare", |b| {
            b.iter(|| {
                black_box(roundtrip(
                    &mut bare,
                    post("tools/call", Some("echo"), chunk_body(ch)),
                ))
            })
        });
        g.bench_function("both", |b| {
            b.iter(|| {
                black_box(roundtrip(
                    &mut both,
                    post("tools/call", Some("echo"), chunk_body(ch)),
                ))
            })
        });
        g.bench_function("caps_only", |b| {
            b.iter(|| {
                black_box(roundtrip(
                    &mut caps,
                    post("tools/call", Some("echo"), chunk_body(ch)),
                ))
            })
        });
        g.bench_function("listen_only", |b| {
            b.iter(|| {
                black_box(roundtrip(
                    &mut listen,
                    post("tools/call", Some("echo"), chunk_body(ch)),
                ))
            })
        });
        g.finish();
        if !quick_mode() {
            print_criterion_ratios(&group, &["bare", "both", "caps_only", "listen_only"]);
            let rows = interleaved(
                &mut [
                    ("bare", &mut || {
                        black_box(roundtrip(
                            &mut bare,
                            post("tools/call", Some("echo"), chunk_body(ch)),
                        ));
                    }),
                    ("both", &mut || {
                        black_box(roundtrip(
                            &mut both,
                            post("tools/call", Some("echo"), chunk_body(ch)),
                        ));
                    }),
                    ("caps_only", &mut || {
                        black_box(roundtrip(
                            &mut caps,
                            post("tools/call", Some("echo"), chunk_body(ch)),
                        ));
                    }),
                    ("listen_only", &mut || {
                        black_box(roundtrip(
                            &mut listen,
                            post("tools/call", Some("echo"), chunk_body(ch)),
                        ));
                    }),
                ],
                21,
                20,
            );
            print_table(&group, &rows);
        }
    }
    c.final_summary();
}
