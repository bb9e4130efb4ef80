//! The method peek (`Scanner`): split-invariance, stickiness, the deciding
//! byte, and agreement with serde_json (first `method` wins; a later one after
//! an intercepted first is `DuplicateMethod`).
//!
//! Input: byte 0 = number of cut points (low 3 bits), then that many bytes
//! placing the cuts, then the body.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/oracles/peek_oracle.rs"]
mod peek_oracle;

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else {
        return;
    };
    let cuts = usize::from(header & 7).min(rest.len());
    let (cut_bytes, body) = rest.split_at(cuts);
    let mut points: Vec<usize> = cut_bytes
        .iter()
        .map(|&b| usize::from(b) * (body.len() + 1) / 256)
        .collect();
    points.sort_unstable();
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    for p in points {
        chunks.push(&body[at..p]);
        at = p;
    }
    chunks.push(&body[at..]);

    peek_oracle::check(body, &chunks);
});
