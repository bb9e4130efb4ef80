//! What the bus heard last, to deliver each message once.

use std::hash::BuildHasher;

/// How many recent messages are remembered, to deliver each once.
const RECENT: usize = 4096;

/// The keyed hashes of the last [`RECENT`] messages heard, to deliver
/// each once: a ring in the order heard, and an index of the same hashes
/// (open addressing, linear probing, at most half full). Both are
/// allocated once, [`Recent::BYTES`] in all, whatever the messages hold.
pub(super) struct Recent {
    /// Keys drawn at random, unknown to senders: no collision can be aimed.
    keys: std::hash::RandomState,
    ring: Box<[u64]>,
    next: usize,
    index: Box<[u64]>,
}

/// An empty slot of the ring or the index (no hash is kept as 0).
const FREE: u64 = 0;

impl Recent {
    /// What the ring and the index take: 8 bytes a slot, 3 slots a message.
    #[cfg(test)]
    pub(super) const BYTES: usize = 3 * RECENT * std::mem::size_of::<u64>();

    pub(super) fn new() -> Self {
        Self {
            keys: std::hash::RandomState::new(),
            ring: vec![FREE; RECENT].into_boxed_slice(),
            next: 0,
            index: vec![FREE; 2 * RECENT].into_boxed_slice(),
        }
    }

    /// True the first time these bytes are heard among the recent messages.
    pub(super) fn first(&mut self, payload: &[u8]) -> bool {
        let hash = self.keys.hash_one(payload).max(1);
        if self.slot(hash).is_ok() {
            return false;
        }
        let oldest = std::mem::replace(&mut self.ring[self.next], hash);
        self.next = (self.next + 1) % RECENT;
        if oldest != FREE {
            self.remove(oldest);
        }
        // Looked up again: the removal may have moved the free slot.
        if let Err(free) = self.slot(hash) {
            self.index[free] = hash;
        }
        true
    }

    /// Where `hash` is in the index, or the free slot that ends its probe.
    fn slot(&self, hash: u64) -> Result<usize, usize> {
        let mask = self.index.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            match self.index[at] {
                FREE => return Err(at),
                held if held == hash => return Ok(at),
                _ => at = (at + 1) & mask,
            }
        }
    }

    /// Removes `hash` from the index, moving back each later hash whose
    /// probe passed its slot, so that a probe may stop at a free slot.
    fn remove(&mut self, hash: u64) {
        let Ok(mut hole) = self.slot(hash) else {
            return;
        };
        let mask = self.index.len() - 1;
        let mut at = hole;
        loop {
            at = (at + 1) & mask;
            let held = self.index[at];
            if held == FREE {
                break;
            }
            let home = held as usize & mask;
            // The hole lies between `held`'s home and its slot.
            if at.wrapping_sub(home) & mask >= at.wrapping_sub(hole) & mask {
                self.index[hole] = held;
                hole = at;
            }
        }
        self.index[hole] = FREE;
    }

    /// The bytes the ring and the index hold.
    #[cfg(test)]
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.ring) + std::mem::size_of_val(&*self.index)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// A message heard again within the last `RECENT` distinct ones is not
    /// delivered again; one heard after them is (an oracle of the same
    /// window, over payloads that repeat often).
    #[test]
    fn recent_knows_exactly_the_last_messages() {
        let mut recent = Recent::new();
        let (mut window, mut known) = (std::collections::VecDeque::new(), HashSet::new());
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..100_000 {
            // xorshift: payloads drawn from 6 000, more than the window holds.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let payload = format!("message {}", state % 6_000);
            let expected = !known.contains(&payload);
            assert_eq!(recent.first(payload.as_bytes()), expected, "{payload}");
            if expected {
                known.insert(payload.clone());
                window.push_back(payload);
                if window.len() > RECENT {
                    known.remove(&window.pop_front().unwrap());
                }
            }
        }
    }
}
