//! The stream guard: whatever an inner service sends on a listen stream, in
//! whatever chunks, everything that leaves the guard satisfies the honoured
//! filter as the independent model in `tests/oracles/guard_oracle.rs` reads it, and
//! the chunks change nothing.
//!
//! Input: byte 0 = the setup (low 3 bits) and the number of cut points
//! (next 3 bits), then that many bytes placing the cuts, then the stream.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/oracles/guard_oracle.rs"]
mod guard_oracle;

fuzz_target!(|data: &[u8]| {
    let Some((&header, rest)) = data.split_first() else {
        return;
    };
    let cuts = usize::from(header >> 3 & 7).min(rest.len());
    let (cut_bytes, stream) = rest.split_at(cuts);
    let cuts: Vec<usize> = cut_bytes
        .iter()
        .map(|&b| usize::from(b) * (stream.len() + 1) / 256)
        .collect();
    let filter = guard_oracle::setup(header & 7);
    guard_oracle::check(&filter, stream, &cuts);
});
