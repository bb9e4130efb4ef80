//! Byte searches over JSON text, shared by the method scanner and the JSON
//! walker: whitespace, and the few bytes that end a run of string bytes.
//!
//! The searches test eight bytes at a time in a `u64` (SWAR): strings in
//! JSON-RPC are mostly short, where that beats the set-up of a `memchr`
//! call; past a few words a string is long and `memchr` takes over.

use memchr::memchr2;

/// JSON whitespace (and nothing else: no BOM, no form feed).
#[inline]
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The index of the first byte at or after `at` that is not JSON whitespace.
#[inline(always)]
pub(crate) fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    // Most JSON on the wire has no whitespace between tokens.
    while let Some(&b) = bytes.get(at) {
        if b > b' ' || !is_ws(b) {
            break;
        }
        at += 1;
    }
    at
}

/// Index of the first `"` or `\` in `bytes`: the only bytes that matter in a
/// string of text known to be valid.
#[inline(always)]
pub(crate) fn quote_or_backslash(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        let hits = zero_bytes(word ^ splat(b'"')) | zero_bytes(word ^ splat(b'\\'));
        if hits != 0 {
            return Some(offset + first_byte(hits));
        }
        offset += 8;
        rest = tail;
        if offset == 32 {
            return memchr2(b'"', b'\\', rest).map(|at| offset + at);
        }
    }
    rest.iter()
        .position(|&c| c == b'"' || c == b'\\')
        .map(|at| offset + at)
}

/// Index of the first byte that ends a run of plain string bytes in text
/// that is being checked: the quote, a backslash, or a control character
/// JSON does not allow in a string.
#[inline(always)]
pub(crate) fn string_stop(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        // `x ^ 2` is below 0x21 exactly for the quote (0x22) and the bytes
        // below 0x20: one test for both.
        let hits = bytes_below(word ^ splat(0x02), 0x21) | zero_bytes(word ^ splat(b'\\'));
        if hits != 0 {
            return Some(offset + first_byte(hits));
        }
        offset += 8;
        rest = tail;
    }
    rest.iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .map(|at| offset + at)
}

/// Index of the first `"`, `{`, `[`, `}` or `]` in `bytes`: the only bytes that matter
/// inside a nested value outside its strings.
///
/// Dense JSON has such a byte every few bytes, best found one byte at a time; long
/// stretches without one (numbers, whitespace) are tested eight bytes at a time (SWAR).
#[inline]
pub(crate) fn structural(bytes: &[u8]) -> Option<usize> {
    let (head, mut rest) = bytes.split_at(bytes.len().min(8));
    if let Some(at) = head.iter().position(|&b| STRUCTURAL[usize::from(b)]) {
        return Some(at);
    }
    let mut offset = head.len();
    while let Some((word, tail)) = rest.split_first_chunk::<8>() {
        let word = u64::from_le_bytes(*word);
        // Setting bit 5 folds `[` onto `{` and `]` onto `}`; no other byte lands there.
        let folded = word | splat(0x20);
        let hits = zero_bytes(word ^ splat(b'"'))
            | zero_bytes(folded ^ splat(b'{'))
            | zero_bytes(folded ^ splat(b'}'));
        if hits != 0 {
            return Some(offset + first_byte(hits));
        }
        offset += 8;
        rest = tail;
    }
    rest.iter()
        .position(|&b| STRUCTURAL[usize::from(b)])
        .map(|at| offset + at)
}

/// The bytes that matter inside a nested value outside its strings.
static STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'[' as usize] = true;
    table[b'}' as usize] = true;
    table[b']' as usize] = true;
    table
};

/// `b` in every byte of a word.
#[inline]
const fn splat(b: u8) -> u64 {
    u64::from_le_bytes([b; 8])
}

/// The high bit set in each byte of `v` that is zero, and possibly in bytes
/// above such a byte (borrows only propagate upwards), so the lowest set bit
/// is always exact.
#[inline]
fn zero_bytes(v: u64) -> u64 {
    v.wrapping_sub(splat(0x01)) & !v & splat(0x80)
}

/// The high bit set in each byte of `v` below `n` (`n` at most 0x80), with
/// the same exactness as [`zero_bytes`]: the lowest set bit is always right.
#[inline]
fn bytes_below(v: u64, n: u8) -> u64 {
    v.wrapping_sub(splat(n)) & !v & splat(0x80)
}

/// The index of the lowest byte flagged in a mask of a little-endian word.
#[inline]
fn first_byte(hits: u64) -> usize {
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

    #[test]
    fn searches_match_a_byte_loop() {
        // Every byte value at every alignment and distance.
        let all: Vec<u8> = (0..=255).chain((0..=255).rev()).collect();
        let naive = |bytes: &[u8], stop: &dyn Fn(u8) -> bool| bytes.iter().position(|&b| stop(b));
        let quote = |b: u8| b == b'"' || b == b'\\';
        let stop = |b: u8| quote(b) || b < 0x20;
        for start in 0..all.len() {
            for len in [0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 40, 64, 100, 300] {
                let bytes = &all[start..all.len().min(start + len)];
                assert_eq!(quote_or_backslash(bytes), naive(bytes, &quote));
                assert_eq!(string_stop(bytes), naive(bytes, &stop));
            }
        }
        // Targets after long runs of every other byte.
        for target in [b'"', b'\\', 0, 0x1f] {
            for filler in (0x20..=255).filter(|&b| !quote(b)) {
                for at in [0, 5, 8, 13, 31, 32, 33, 70] {
                    let mut bytes = vec![filler; at];
                    bytes.push(target);
                    bytes.extend([filler; 9]);
                    assert_eq!(string_stop(&bytes), Some(at));
                    assert_eq!(quote_or_backslash(&bytes), quote(target).then_some(at));
                }
            }
        }
    }

    #[test]
    fn the_structural_finder_matches_a_byte_loop() {
        // Every byte value at every alignment and distance, so no byte (0x80 and up, or
        // `[`/`]` next to `{`/`}`) is mistaken for a target and none is missed.
        let all: Vec<u8> = (0..=255).chain((0..=255).rev()).collect();
        let naive = |bytes: &[u8], targets: &[u8]| bytes.iter().position(|b| targets.contains(b));
        for start in 0..all.len() {
            for len in [0, 1, 7, 8, 9, 15, 16, 31, 32, 33, 40, 64, 100, 300] {
                let bytes = &all[start..all.len().min(start + len)];
                assert_eq!(structural(bytes), naive(bytes, b"\"{[]}"));
            }
        }
        // Targets after long runs of every other byte.
        for target in [b'"', b'\\', b'{', b'[', b']', b'}'] {
            for filler in (0..=255).filter(|b| !b"\"\\{[]}".contains(b)) {
                for at in [0, 5, 8, 13, 31, 32, 33, 70] {
                    let mut bytes = vec![filler; at];
                    bytes.push(target);
                    bytes.extend([filler; 9]);
                    let expected = (target != b'\\').then_some(at);
                    assert_eq!(structural(&bytes), expected);
                }
            }
        }
    }

    #[test]
    fn whitespace() {
        assert_eq!(skip_space(b" \t\r\nx", 0), 4);
        assert_eq!(skip_space(b"  ", 1), 2);
        assert_eq!(skip_space(b"x", 3), 3);
        assert!(!is_ws(0x0c), "form feed is not JSON whitespace");
    }
}
