//! Benchmark 2: the capabilities rewrite of a 2 KiB `server/discover` (JSON
//! and SSE) and `initialize` (JSON) response, CapabilitiesLayer vs the bare
//! inner service vs the floor (parse the response as a `Value` and serialize it).
//!
//! `cargo bench --bench discover -- --warm-up-time 1 --measurement-time 3 --sample-size 20`

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use criterion::Criterion;
use mcp_edge::CapabilitiesLayer;
use tower::ServiceBuilder;

fn pad(json: String, size: usize) -> String {
    // `json` ends with `"instructions":""}}`: grow the instructions to reach `size`.
    let n = size.saturating_sub(json.len());
    let words = "Use the echo tool to repeat text; resources live under demo://. ";
    let text: String = words.chars().cycle().take(n).collect();
    let out = json.replacen(
        r#""instructions":"""#,
        &format!(r#""instructions":"{text}""#),
        1,
    );
    debug_assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    out
}

pub fn discover_response() -> String {
    pad(
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18"],"capabilities":{"tools":{"listChanged":false},"resources":{"subscribe":false},"prompts":{},"completions":{},"experimental":{"com.example/trace":{"level":"info"}},"extensions":{"com.example/ui":{"theme":"dark"}}},"_meta":{"serverInfo":{"name":"bench-server","title":"Bench Server","version":"1.4.2","websiteUrl":"https://example.com"}},"ttlMs":300000,"cacheScope":"public","instructions":""}}"#.to_string(),
        2048,
    )
}

fn initialize_response() -> String {
    pad(
        r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{},"logging":{},"experimental":{"com.example/trace":{}}},"serverInfo":{"name":"bench-server","title":"Bench Server","version":"1.4.2"},"instructions":""}}"#.to_string(),
        2048,
    )
}

fn main() {
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
        .configure_from_args();
    let p = profile();
    let discover_req = split(
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{{{META}}}}}"#)
            .as_bytes(),
    );
    let init_req = split(
        br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"bench","version":"1"}}}"#,
    );
    let discover = discover_response();
    let init = initialize_response();
    let sse = format!("event: message\nid: 1\ndata: {discover}\n\n");
    println!(
        "discover response {} B, initialize response {} B",
        discover.len(),
        init.len()
    );

    let cases: Vec<(&str, &str, Vec<Bytes>, Answer, Bytes)> = vec![
        (
            "discover_json",
            "server/discover",
            discover_req.clone(),
            Answer::Json(Bytes::from(discover.clone())),
            Bytes::from(discover.clone()),
        ),
        (
            "discover_sse",
            "server/discover",
            discover_req.clone(),
            Answer::Sse(Arc::new(vec![Bytes::from(sse)])),
            Bytes::from(discover.clone()),
        ),
        (
            "initialize_json",
            "initialize",
            init_req,
            Answer::Json(Bytes::from(init.clone())),
            Bytes::from(init),
        ),
    ];

    for (label, method, req, answer, floor_body) in cases {
        let inner = Inner { answer };
        let mut bare = inner.clone();
        let mut caps = ServiceBuilder::new()
            .layer(CapabilitiesLayer::new(p.clone()))
            .service(inner);
        // Sanity: the layer rewrites.
        let a = roundtrip(&mut bare, post(method, None, chunk_body(&req)));
        let b = roundtrip(&mut caps, post(method, None, chunk_body(&req)));
        assert_ne!(a, b, "{label}: the layer must rewrite the capabilities");
        let group = format!("rewrite_{label}");
        let g = c.benchmark_group(&group);
        let floor = |body: &Bytes| {
            let v: serde_json::Value = serde_json::from_slice(body).unwrap();
            serde_json::to_vec(&v).unwrap().len()
        };
        let rows = compare(
            g,
            &group,
            &mut [
                ("bare", &mut || {
                    black_box(roundtrip(&mut bare, post(method, None, chunk_body(&req))));
                }),
                ("caps", &mut || {
                    black_box(roundtrip(&mut caps, post(method, None, chunk_body(&req))));
                }),
                ("floor", &mut || {
                    black_box(floor(black_box(&floor_body)));
                }),
            ],
            21,
            20,
        );
        if let Some(rows) = rows {
            let (bare_ns, caps_ns, floor_ns) = (rows[0].1, rows[1].1, rows[2].1);
            println!(
                "SUMMARY\t{group}\tcaps/bare={:.3}\t(caps-bare)/floor={:.3}\tcaps/floor={:.3}",
                caps_ns / bare_ns,
                (caps_ns - bare_ns) / floor_ns,
                caps_ns / floor_ns
            );
        }
    }
    c.final_summary();
}
