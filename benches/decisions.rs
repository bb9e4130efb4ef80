//! Benchmark 8b: the decision cache's own cost per operation. The cache
//! before (two `HashMap`s under a `Mutex`, every decision forgotten when it
//! is full) against the profile's (`quick_cache`, the least used evicted
//! first), each holding 10 000 decisions (100 callers, 100 URIs): a kept
//! decision looked up, one not kept looked up, a kept one renewed, and new
//! ones put past the bound of 65 536.
//!
//! `cargo bench --bench decisions -- --warm-up-time 1 --measurement-time 3 --sample-size 20`
//!
//! Ir per operation: callgrind on one row (`--bench 'decisions/<row>$'
//! --profile-time 1`), `Bencher::iter`'s inclusive Ir over its calls and
//! [`OPS`].

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::Criterion;
use mcp_edge::fuzzing::Decisions;
use mcp_edge::Principal;

/// Operations per iteration.
const OPS: usize = 1000;
const CALLERS: usize = 100;
const URIS: usize = 100;
const TTL: Duration = Duration::from_secs(30);
/// The bound both caches keep.
const MAX_DECISIONS: usize = 65_536;

/// What both caches answer.
trait Cache {
    fn get(&self, caller: Option<&Principal>, uri: &str, now: Instant) -> Option<bool>;
    fn put(&self, caller: Option<&Principal>, uri: &str, readable: bool, now: Instant);
}

impl Cache for Decisions {
    fn get(&self, caller: Option<&Principal>, uri: &str, now: Instant) -> Option<bool> {
        Decisions::get(self, caller, uri, now)
    }

    fn put(&self, caller: Option<&Principal>, uri: &str, readable: bool, now: Instant) {
        Decisions::put(self, caller, uri, readable, now);
    }
}

/// The cache before `quick_cache` (`src/access.rs` until then): per
/// caller a map of URIs, under one lock; when full, the expired decisions
/// are forgotten, and all of them if none had expired.
#[derive(Default)]
struct Forgetful {
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_caller: HashMap<Option<Principal>, HashMap<Box<str>, Decision>>,
    len: usize,
    bytes: usize,
}

#[derive(Clone, Copy)]
struct Decision {
    readable: bool,
    at: Instant,
}

const MAX_URI_BYTES: usize = 8 * 1024 * 1024;

fn fresh(at: Instant, now: Instant) -> bool {
    now.saturating_duration_since(at) < TTL
}

impl Cache for Forgetful {
    fn get(&self, caller: Option<&Principal>, uri: &str, now: Instant) -> Option<bool> {
        let entries = self.entries.lock().unwrap();
        let decision = *entries.by_caller.get(&caller.cloned())?.get(uri)?;
        fresh(decision.at, now).then_some(decision.readable)
    }

    fn put(&self, caller: Option<&Principal>, uri: &str, readable: bool, now: Instant) {
        let mut entries = self.entries.lock().unwrap();
        if entries.len >= MAX_DECISIONS || entries.bytes + uri.len() > MAX_URI_BYTES {
            let (mut len, mut bytes) = (0, 0);
            entries.by_caller.retain(|_, uris| {
                uris.retain(|_, decision| fresh(decision.at, now));
                len += uris.len();
                bytes += uris.keys().map(|uri| uri.len()).sum::<usize>();
                !uris.is_empty()
            });
            (entries.len, entries.bytes) = (len, bytes);
            if len >= MAX_DECISIONS || bytes + uri.len() > MAX_URI_BYTES {
                *entries = Entries::default();
            }
        }
        let uris = entries.by_caller.entry(caller.cloned()).or_default();
        let decision = Decision { readable, at: now };
        if uris.insert(uri.into(), decision).is_none() {
            entries.len += 1;
            entries.bytes += uri.len();
        }
    }
}

/// The callers and URIs of the kept decisions, and URIs never decided.
struct Keys {
    callers: Vec<Principal>,
    uris: Vec<String>,
    unknown: Vec<String>,
    /// One-off URIs, four times the bound: one comes back long after it went.
    once: Vec<String>,
}

impl Keys {
    fn new() -> Self {
        let uri = |i| format!("file:///project/src/module_{i}.rs");
        Self {
            callers: (0..CALLERS)
                .map(|i| Principal::new(format!("caller-{i}")))
                .collect(),
            uris: (0..URIS).map(uri).collect(),
            unknown: (0..URIS)
                .map(|i| format!("file:///project/src/unknown_{i}.rs"))
                .collect(),
            once: (0..4 * MAX_DECISIONS).map(|i| uri(URIS + i)).collect(),
        }
    }

    /// The `i`th kept (caller, URI) pair, spread over both.
    fn pair(&self, i: usize) -> (&Principal, &str) {
        (
            &self.callers[i % CALLERS],
            &self.uris[(i / CALLERS + i) % URIS],
        )
    }
}

/// A cache holding every (caller, URI) pair of `keys`.
fn filled<C: Cache>(make: fn() -> C, keys: &Keys, now: Instant) -> C {
    let cache = make();
    for caller in &keys.callers {
        for uri in &keys.uris {
            cache.put(Some(caller), uri, true, now);
        }
    }
    assert_eq!(
        cache.get(Some(&keys.callers[0]), &keys.uris[0], now),
        Some(true)
    );
    cache
}

fn rows<C: Cache>(c: &mut Criterion, name: &str, make: fn() -> C, keys: &Keys) {
    let now = Instant::now();
    let mut group = c.benchmark_group("decisions");
    group.throughput(criterion::Throughput::Elements(OPS as u64));
    let cache = filled(make, keys, now);
    group.bench_function(format!("get_kept/{name}"), |b| {
        b.iter(|| {
            for i in 0..OPS {
                let (caller, uri) = keys.pair(i);
                black_box(cache.get(Some(caller), uri, now));
            }
        })
    });
    group.bench_function(format!("get_unknown/{name}"), |b| {
        b.iter(|| {
            for i in 0..OPS {
                let caller = &keys.callers[i % CALLERS];
                black_box(cache.get(Some(caller), &keys.unknown[i % URIS], now));
            }
        })
    });
    group.bench_function(format!("put_kept/{name}"), |b| {
        b.iter(|| {
            for i in 0..OPS {
                let (caller, uri) = keys.pair(i);
                cache.put(Some(caller), uri, true, now);
            }
        })
    });
    let full = filled(make, keys, now);
    let mut next = 0;
    for _ in 0..MAX_DECISIONS {
        full.put(None, &keys.once[next], true, now);
        next += 1;
    }
    group.bench_function(format!("put_past_the_bound/{name}"), |b| {
        b.iter(|| {
            for _ in 0..OPS {
                full.put(None, &keys.once[next], true, now);
                next = (next + 1) % keys.once.len();
            }
        })
    });
    group.finish();
}

fn main() {
    let keys = Keys::new();
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    rows(&mut c, "before", Forgetful::default, &keys);
    rows(&mut c, "quick_cache", || Decisions::new(TTL), &keys);
    c.final_summary();
}
