//! Benchmark 5: bytes the layers allocate per pass-through request
//! (layered minus bare), with a counting global allocator; and what the
//! listen hub allocates per delivered event (benchmark 8's fan-out).
//!
//! `cargo bench --bench alloc`

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use common::*;

struct Counting;
static BYTES: AtomicUsize = AtomicUsize::new(0);
static COUNT: AtomicUsize = AtomicUsize::new(0);
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(n: usize) {
    BYTES.fetch_add(n, Relaxed);
    COUNT.fetch_add(1, Relaxed);
    let live = LIVE.fetch_add(n, Relaxed) + n;
    PEAK.fetch_max(live, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grow(l.size());
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_sub(l.size(), Relaxed);
        grow(new);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// (bytes allocated, allocations, peak live bytes above the start) of `f`.
fn measure(mut f: impl FnMut()) -> (usize, usize, usize) {
    f(); // warm: lazily initialised statics, tracing callsites
    let (b0, c0, l0) = (BYTES.load(Relaxed), COUNT.load(Relaxed), LIVE.load(Relaxed));
    PEAK.store(l0, Relaxed);
    f();
    (
        BYTES.load(Relaxed) - b0,
        COUNT.load(Relaxed) - c0,
        PEAK.load(Relaxed) - l0,
    )
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let p = profile();
    let inner = Inner::json(SMALL_RESULT);
    let mut bare = inner.clone();
    let Stacks {
        mut both,
        mut edge,
        mut caps,
        mut listen,
    } = stacks(&p, &inner);
    println!(
        "{:<18} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "case",
        "bare B",
        "both B",
        "Δboth B",
        "Δallocs",
        "Δedge B",
        "Δcaps B",
        "Δlisten B",
        "Δpeak B"
    );
    for (size, sname) in [
        (1024, "1KiB"),
        (64 * 1024, "64KiB"),
        (4 * 1024 * 1024, "4MiB"),
    ] {
        for last in [false, true] {
            if last && size > 1024 * 1024 {
                continue; // refused with 413 by design
            }
            let chunks = split(&tools_call(size, last));
            let req = || post("tools/call", Some("echo"), chunk_body(&chunks));
            let (bb, bc, bp) = measure(|| {
                roundtrip(&mut bare, req());
            });
            let (lb, lc, lp) = measure(|| {
                roundtrip(&mut both, req());
            });
            let (eb, _, _) = measure(|| {
                roundtrip(&mut edge, req());
            });
            let (cb, _, _) = measure(|| {
                roundtrip(&mut caps, req());
            });
            let (fb, _, _) = measure(|| {
                roundtrip(&mut listen, req());
            });
            let label = format!("{sname}_{}", if last { "last" } else { "first" });
            let d = lb as i64 - bb as i64;
            println!(
                "{label:<18} {bb:>12} {lb:>12} {d:>12} {:>12} {:>12} {:>12} {:>12} {:>12}",
                lc as i64 - bc as i64,
                eb as i64 - bb as i64,
                cb as i64 - bb as i64,
                fb as i64 - bb as i64,
                lp as i64 - bp as i64
            );
            println!(
                "ALLOC\t{label}\tdelta_bytes={d}\tdelta_allocs={}\tgoal<=16384\t{}",
                lc as i64 - bc as i64,
                if d <= 16384 { "met" } else { "MISSED" }
            );
        }
    }
    hub_fanout(&p);
}

/// One update delivered to 100 hub streams (of 1 000 open) and read off
/// each: allocations per delivered event.
fn hub_fanout(p: &mcp_edge::ServerProfile) {
    use futures_util::FutureExt;
    use http_body_util::BodyExt;
    use tower::{Layer, Service, ServiceExt};

    const STREAMS: usize = 1_000;
    const HOT: usize = 100;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let hub = mcp_edge::hub::ListenHub::builder(p.clone())
        .max_streams_per_caller(STREAMS)
        .build();
    let mut service = hub
        .layer()
        .layer(tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
        }));
    let mut hot = Vec::new();
    let mut cold = Vec::new();
    for i in 0..STREAMS {
        let uri = match i % (STREAMS / HOT) {
            0 => "file:///hot.rs".to_owned(),
            _ => format!("file:///cold_{i}.rs"),
        };
        let request = honoured_listen(p, mcp_edge::Principal::new("alice"), i, &uri);
        let response =
            runtime.block_on(async { service.ready().await.unwrap().call(request).await.unwrap() });
        let mut body = response.into_body();
        body.frame().now_or_never().unwrap().unwrap().unwrap();
        match i % (STREAMS / HOT) {
            0 => hot.push(body),
            _ => cold.push(body),
        }
    }
    let publisher = hub.publisher();
    let (bytes, allocs, _) = measure(|| {
        let published = publisher
            .resource_updated("file:///hot.rs")
            .now_or_never()
            .unwrap();
        assert_eq!(published.streams, HOT);
        for body in &mut hot {
            let frame = body.frame().now_or_never().unwrap().unwrap().unwrap();
            std::hint::black_box(frame);
        }
    });
    println!(
        "ALLOC\thub_fanout_{HOT}_of_{STREAMS}\tallocs_per_event={:.2}\tbytes_per_event={:.0}",
        allocs as f64 / HOT as f64,
        bytes as f64 / HOT as f64
    );
    drop(cold);
}
