//! Byte tests eight bytes at a time in a `u64` (SWAR), for the scanners that
//! look for a few special bytes in JSON text.

/// `b` in every byte of a word.
pub(crate) const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// The high bit set in each byte of `v` that is zero, and possibly in bytes above such a
/// byte (borrows only propagate upwards), so the lowest set bit is always exact.
pub(crate) fn zero_bytes(v: u64) -> u64 {
    v.wrapping_sub(splat(0x01)) & !v & splat(0x80)
}

/// The high bit set in each byte of `v` below `n` (`n` at most 0x80), with the same
/// exactness as [`zero_bytes`]: the lowest set bit is always right.
pub(crate) fn bytes_below(v: u64, n: u8) -> u64 {
    v.wrapping_sub(splat(n)) & !v & splat(0x80)
}

/// The index of the lowest byte flagged in a mask of a little-endian word.
pub(crate) fn first_byte(hits: u64) -> usize {
    (hits.trailing_zeros() / 8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_flag_is_exact_for_every_byte_pair() {
        // Two bytes in every position pair cover the borrow cases.
        for low in 0..=255u8 {
            for high in [0u8, 1, 0x1F, 0x20, b'"', 0x7F, 0x80, 0xFF] {
                for at in 0..7 {
                    let mut bytes = [b'a'; 8];
                    bytes[at] = low;
                    bytes[at + 1] = high;
                    let v = u64::from_le_bytes(bytes);
                    let zero = bytes.iter().position(|&b| b == 0);
                    let below = bytes.iter().position(|&b| b < 0x20);
                    let first = |hits: u64| (hits != 0).then(|| first_byte(hits));
                    assert_eq!(first(zero_bytes(v)), zero, "{bytes:?}");
                    assert_eq!(first(bytes_below(v, 0x20)), below, "{bytes:?}");
                }
            }
        }
    }
}
