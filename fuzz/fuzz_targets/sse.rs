//! The SSE codec: any split of any input gives the same events and tail, the
//! raw bytes plus the tail are the input, and what the writer writes parses
//! back to the fields written.
//!
//! Input: byte 0 = number of cut points (low 3 bits), then that many bytes
//! placing the cuts, then the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/oracles/sse_oracle.rs"]
mod sse_oracle;

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else {
        return;
    };
    let cuts = usize::from(header & 7).min(rest.len());
    let (cut_bytes, input) = rest.split_at(cuts);
    let mut points: Vec<usize> = cut_bytes
        .iter()
        .map(|&b| usize::from(b) * (input.len() + 1) / 256)
        .collect();
    points.sort_unstable();
    let mut chunks: Vec<&[u8]> = Vec::new();
    let mut at = 0;
    for p in points {
        chunks.push(&input[at..p]);
        at = p;
    }
    chunks.push(&input[at..]);

    sse_oracle::check(input, &chunks, header);
});
