//! The listen filter (`honour`): never panics, and every result satisfies the
//! invariants and the model in `tests/oracles/filter_oracle.rs`.
//!
//! Input: two bytes picking the profile and caller (see `setup`), then the
//! `params` JSON text.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/oracles/filter_oracle.rs"]
mod oracle;

fuzz_target!(|data: &[u8]| {
    let Some((config, text)) = data.split_first_chunk::<2>() else {
        return;
    };
    let config = u16::from_le_bytes(*config);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if serde_json::from_str::<&serde_json::value::RawValue>(text).is_err() {
        // Not JSON: the layer answers -32700 before honour runs.
        return;
    }
    oracle::check(config, text);
});
