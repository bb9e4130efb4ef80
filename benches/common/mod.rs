//! Shared pieces of the mcp-edge benches: request bodies delivered the way
//! hyper would (frames of at most 16 KiB), a draining inner service, a
//! no-op-waker executor (every future here is ready at once), and an
//! interleaved timer that reports layered/bare ratios measured in one run.
#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Body, Frame};
use http_body_util::combinators::Collect;
use http_body_util::{BodyExt, Full};
use mcp_edge::{
    Capabilities, CapabilitiesLayer, Edge, EdgeLayer, ListenFilter, ListenFilterLayer, Principal,
    ServerProfile,
};
use tower::{Service, ServiceBuilder, ServiceExt};

/// Most bytes of one frame, as hyper delivers an HTTP/1 body.
pub const FRAME: usize = 16 * 1024;

/// The request (and SSE response) body type: pre-built frames, delivered
/// one per poll. Like hyper's `Incoming` for a body of known length, it
/// reports its exact remaining size and the end of the stream as soon as
/// the last frame was taken.
pub struct ChunkBody {
    frames: std::vec::IntoIter<Bytes>,
    remaining: u64,
}

impl Body for ChunkBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let frame = self.frames.next();
        if let Some(chunk) = &frame {
            self.remaining -= chunk.len() as u64;
        }
        Poll::Ready(frame.map(|chunk| Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.frames.len() == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}

/// A body over `chunks` (cloned: a refcount each, plus the Vec).
// The body owns a `Vec` of the chunks, as `vec::IntoIter` is its named type.
#[allow(clippy::unnecessary_to_owned)]
pub fn chunk_body(chunks: &[Bytes]) -> ChunkBody {
    ChunkBody {
        remaining: chunks.iter().map(|c| c.len() as u64).sum(),
        frames: chunks.to_vec().into_iter(),
    }
}

/// Splits `body` into frames of at most 16 KiB.
pub fn split(body: &[u8]) -> Vec<Bytes> {
    body.chunks(FRAME).map(Bytes::copy_from_slice).collect()
}

/// Runs a future that never waits for I/O. Never inlined: the callgrind
/// rows count its calls (benches/ir.sh).
#[inline(never)]
pub fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

pub const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

/// A modern `tools/call echo` of about `size` bytes, `method` first or last.
pub fn tools_call(size: usize, method_last: bool) -> Vec<u8> {
    let head = r#"{"jsonrpc":"2.0","id":1,"#;
    let method = r#""method":"tools/call""#;
    let params_head =
        r#""params":{"name":"echo","#.to_string() + META + r#","arguments":{"text":""#;
    let tail = r#""}}"#;
    let fixed = head.len() + method.len() + 1 + params_head.len() + tail.len() + 1;
    let words = b"lorem ipsum dolor sit amet, consectetur adipiscing elit; ";
    let n = size.saturating_sub(fixed);
    let text: Vec<u8> = words.iter().copied().cycle().take(n).collect();
    let text = String::from_utf8(text).unwrap();
    let params = format!("{params_head}{text}{tail}");
    let body = if method_last {
        format!("{head}{params},{method}}}")
    } else {
        format!("{head}{method},{params}}}")
    };
    debug_assert!(serde_json::from_str::<serde_json::Value>(&body).is_ok());
    body.into_bytes()
}

/// A modern `tools/call` whose arguments are many small members (worst case
/// for the body scanner: no long strings to skip with memchr).
pub fn tools_call_structured(size: usize) -> Vec<u8> {
    let mut body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo",{META},"arguments":{{"rows":["#
    );
    let mut i = 0u32;
    while body.len() + 40 < size {
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(r#"{{"k":{i},"v":"r{i}","f":[1,2.5,true]}}"#));
        i += 1;
    }
    body.push_str("]}}}");
    debug_assert!(serde_json::from_str::<serde_json::Value>(&body).is_ok());
    body.into_bytes()
}

/// A POST as the 2026-07-28 HTTP transport sends it.
pub fn post(method: &str, name: Option<&str>, body: ChunkBody) -> Request<ChunkBody> {
    let mut b = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        b = b.header("mcp-name", name);
    }
    b.body(body).unwrap()
}

pub const SMALL_RESULT: &[u8] =
    br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}"#;

/// What the inner service answers.
#[derive(Clone)]
pub enum Answer {
    /// A JSON body.
    Json(Bytes),
    /// An SSE body, one frame per pre-built chunk.
    Sse(std::sync::Arc<Vec<Bytes>>),
}

/// Inner service: drains the request body (`BodyExt::collect`), then answers.
#[derive(Clone)]
pub struct Inner {
    pub answer: Answer,
}

impl Inner {
    pub fn json(body: &[u8]) -> Self {
        Self {
            answer: Answer::Json(Bytes::copy_from_slice(body)),
        }
    }
}

pub enum InnerBody {
    Full(Full<Bytes>),
    Chunks(ChunkBody),
}

impl Body for InnerBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            InnerBody::Full(b) => Pin::new(b).poll_frame(cx),
            InnerBody::Chunks(b) => Pin::new(b).poll_frame(cx),
        }
    }
}

pub struct InnerFuture<B: Body> {
    collect: Collect<B>,
    answer: Option<Answer>,
}

impl<B> Future for InnerFuture<B>
where
    B: Body + Unpin,
{
    type Output = Result<Response<InnerBody>, Infallible>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let collected = match std::task::ready!(Pin::new(&mut self.collect).poll(cx)) {
            Ok(c) => c.to_bytes().len(),
            Err(_) => 0,
        };
        std::hint::black_box(collected);
        let response = match self.answer.take().expect("polled once") {
            Answer::Json(b) => Response::builder()
                .header("content-type", "application/json")
                .body(InnerBody::Full(Full::new(b))),
            Answer::Sse(chunks) => Response::builder()
                .header("content-type", "text/event-stream")
                .body(InnerBody::Chunks(chunk_body(&chunks))),
        };
        Poll::Ready(Ok(response.unwrap()))
    }
}

impl<B> Service<Request<B>> for Inner
where
    B: Body + Unpin,
{
    type Response = Response<InnerBody>;
    type Error = Infallible;
    type Future = InnerFuture<B>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, request: Request<B>) -> Self::Future {
        InnerFuture {
            collect: request.into_body().collect(),
            answer: Some(self.answer.clone()),
        }
    }
}

/// One request through `svc`, response body drained; returns its length.
pub fn roundtrip<S, RB>(svc: &mut S, request: Request<ChunkBody>) -> usize
where
    S: Service<Request<ChunkBody>, Response = Response<RB>>,
    S::Error: std::fmt::Debug,
    RB: Body,
    RB::Error: std::fmt::Debug,
{
    block_on(async {
        let svc = svc.ready().await.unwrap();
        let response = svc.call(request).await.unwrap();
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .len()
    })
}

/// Like [`roundtrip`], but counts the response body's data frames.
pub fn count_frames<S, RB>(svc: &mut S, request: Request<ChunkBody>) -> usize
where
    S: Service<Request<ChunkBody>, Response = Response<RB>>,
    S::Error: std::fmt::Debug,
    RB: Body + Unpin,
    RB::Error: std::fmt::Debug,
{
    block_on(async {
        let svc = svc.ready().await.unwrap();
        let mut body = svc.call(request).await.unwrap().into_body();
        let mut n = 0;
        while let Some(frame) = body.frame().await {
            if frame.unwrap().is_data() {
                n += 1;
            }
        }
        n
    })
}

/// A profile with the default capabilities and trivial hooks.
pub fn profile() -> ServerProfile {
    ServerProfile::builder()
        .resource_access(|_: Option<&Principal>, uris: &[&str]| {
            std::future::ready(vec![true; uris.len()])
        })
        .subscription_hook(|uris: &[&str]| std::future::ready(vec![true; uris.len()]))
        .task_directory(|_: &Principal, ids: &[&str]| std::future::ready(vec![true; ids.len()]))
        .tasks(true)
        .build()
        .expect("profile builds")
}

/// Times every variant of `group` with criterion and, unless in quick mode,
/// prints criterion's ratios and times the variants interleaved (`rounds` of
/// `slice_ms` each): `Some(rows)`, the first variant being the baseline.
pub fn compare(
    mut group: criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    variants: &mut [(&str, &mut dyn FnMut())],
    rounds: usize,
    slice_ms: u64,
) -> Option<Vec<(String, f64, f64)>> {
    for (id, run) in variants.iter_mut() {
        group.bench_function(*id, |b| b.iter(&mut **run));
    }
    group.finish();
    if quick_mode() {
        return None;
    }
    let ids: Vec<&str> = variants.iter().map(|(id, _)| *id).collect();
    print_criterion_ratios(name, &ids);
    let rows = interleaved(variants, rounds, slice_ms);
    print_table(name, &rows);
    Some(rows)
}

/// The stacks the pass-through benches compare with `inner`.
pub struct Stacks {
    /// Both promises, the two layers stacked.
    pub both: Capabilities<ListenFilter<Inner>>,
    /// Both promises, the combined layer.
    pub edge: Edge<Inner>,
    /// The capabilities layer alone.
    pub caps: Capabilities<Inner>,
    /// The listen filter alone.
    pub listen: ListenFilter<Inner>,
}

/// Every stack over `inner`.
pub fn stacks(p: &ServerProfile, inner: &Inner) -> Stacks {
    Stacks {
        both: ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(p.clone()))
            .layer(ListenFilterLayer::new(p.clone()))
            .service(inner.clone()),
        edge: ServiceBuilder::new()
            .layer(EdgeLayer::new(p.clone()))
            .service(inner.clone()),
        caps: ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(p.clone()))
            .service(inner.clone()),
        listen: ServiceBuilder::new()
            .layer(ListenFilterLayer::new(p.clone()))
            .service(inner.clone()),
    }
}

/// True when the bench binary runs under `--profile-time` or criterion's
/// `--list`/test mode: then the interleaved ratios are skipped.
pub fn quick_mode() -> bool {
    std::env::args().any(|a| a == "--profile-time" || a == "--list" || a == "--test")
        || std::env::var_os("NO_RATIOS").is_some()
}

/// Interleaved timing: `rounds` rounds, each timing every case for about
/// `slice_ms`, in rotating order; returns the median ns/op of each case and
/// the median over rounds of each case's time divided by case 0's.
pub fn interleaved(
    cases: &mut [(&str, &mut dyn FnMut())],
    rounds: usize,
    slice_ms: u64,
) -> Vec<(String, f64, f64)> {
    // Calibrate: iterations per slice for each case.
    let mut iters = Vec::new();
    for (_, f) in cases.iter_mut() {
        for _ in 0..3 {
            f();
        }
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed().as_millis() < 50 {
            f();
            n += 1;
        }
        let per = t.elapsed().as_nanos() as f64 / n as f64;
        iters.push(((slice_ms as f64 * 1e6 / per).ceil() as u64).max(1));
    }
    let k = cases.len();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); k];
    for r in 0..rounds {
        for j in 0..k {
            let i = (j + r) % k;
            let f = &mut cases[i].1;
            let t = Instant::now();
            for _ in 0..iters[i] {
                f();
            }
            times[i].push(t.elapsed().as_nanos() as f64 / iters[i] as f64);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    (0..k)
        .map(|i| {
            let ratios: Vec<f64> = (0..rounds).map(|r| times[i][r] / times[0][r]).collect();
            (
                cases[i].0.to_string(),
                median(times[i].clone()),
                median(ratios),
            )
        })
        .collect()
}

/// Prints an interleaved result as a table, ratios against case 0.
pub fn print_table(title: &str, rows: &[(String, f64, f64)]) {
    println!("\n== {title} (interleaved, median of rounds) ==");
    println!("{:<40} {:>14} {:>10}", "case", "ns/op", "ratio");
    for (name, ns, ratio) in rows {
        println!("{name:<40} {ns:>14.1} {ratio:>10.3}");
        println!("RATIO\t{title}\t{name}\t{ns:.1}\t{ratio:.4}");
    }
}

/// The point estimate of criterion's median for `group/id`, when it wrote one.
pub fn criterion_median(group: &str, id: &str) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("CARGO_TARGET_DIR")
                .map(|d| std::path::PathBuf::from(d).join("criterion"))
        })
        .unwrap_or_else(|| "target/criterion".into());
    let clean = |s: &str| s.replace(['/', '\\', '?', '"', '*', '<', '>', ':', '|'], "_");
    let path = home
        .join(clean(group))
        .join(clean(id))
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}

/// Prints criterion's medians of `ids` in `group`, as ratios to the first.
pub fn print_criterion_ratios(group: &str, ids: &[&str]) {
    let Some(base) = criterion_median(group, ids[0]) else {
        return;
    };
    println!("\n== {group} (criterion medians) ==");
    for id in ids {
        if let Some(m) = criterion_median(group, id) {
            println!("{id:<40} {m:>14.1} {:>10.3}", m / base);
            println!("CRIT\t{group}\t{id}\t{m:.1}\t{:.4}", m / base);
        }
    }
}

/// A listen request of `caller` (subscription id `id`) for updates of
/// `uri`, carrying the filter `profile` honours for it: what
/// `ListenFilterLayer` hands the listen hub.
pub fn honoured_listen(
    profile: &ServerProfile,
    caller: Principal,
    id: usize,
    uri: &str,
) -> Request<()> {
    let params = format!(r#"{{"notifications":{{"resourceSubscriptions":["{uri}"]}}}}"#);
    let params = serde_json::value::RawValue::from_string(params).unwrap();
    let id = serde_json::value::RawValue::from_string(id.to_string()).unwrap();
    let mut request = Request::new(());
    request.extensions_mut().insert(caller);
    let (parts, ()) = request.into_parts();
    let filter = block_on(mcp_edge::honour(profile, &parts, &id, Some(&params))).unwrap();
    let mut request = Request::from_parts(parts, ());
    request.extensions_mut().insert(filter);
    request
}
