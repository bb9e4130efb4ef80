//! What the [`ResourceAccess`](crate::ResourceAccess) hook answered, kept
//! for a while per (caller, URI): the checks made while a stream is open
//! ask the hook once per decision lifetime, not once per event.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::Principal;

/// Most decisions kept at once. Past it, expired ones are forgotten first,
/// and all of them if none had expired.
const MAX_DECISIONS: usize = 65_536;
/// Most bytes of URIs kept at once, the same way: the URIs come from
/// updates (a bus message's among them), up to 64 KiB each.
const MAX_URI_BYTES: usize = 8 * 1024 * 1024;

/// The decision cache: one per profile, shared by its clones.
pub(crate) struct Decisions {
    ttl: Duration,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_caller: HashMap<Option<Principal>, HashMap<Box<str>, Decision>>,
    len: usize,
    /// The bytes of the URIs kept.
    bytes: usize,
}

/// One answer of the hook, and when it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decision {
    pub(crate) readable: bool,
    pub(crate) at: Instant,
}

impl Decisions {
    /// A cache whose decisions hold for `ttl` (zero: nothing is kept).
    pub(crate) fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// How long a decision holds.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    fn entries(&self) -> MutexGuard<'_, Entries> {
        crate::sync::lock(&self.entries)
    }

    /// Whether `decision` still holds at `now`.
    pub(crate) fn fresh(&self, decision: &Decision, now: Instant) -> bool {
        now.saturating_duration_since(decision.at) < self.ttl
    }

    /// May `caller` read `uri`: the decision made less than the TTL before `now`.
    pub(crate) fn get(
        &self,
        caller: Option<&Principal>,
        uri: &str,
        now: Instant,
    ) -> Option<Decision> {
        let entries = self.entries();
        let decision = *entries.by_caller.get(&caller.cloned())?.get(uri)?;
        self.fresh(&decision, now).then_some(decision)
    }

    /// Keeps that `caller` may (or may not) read `uri`, decided at `now`.
    pub(crate) fn put(&self, caller: Option<&Principal>, uri: &str, readable: bool, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let mut entries = self.entries();
        if entries.len >= MAX_DECISIONS || entries.bytes + uri.len() > MAX_URI_BYTES {
            let (mut len, mut bytes) = (0, 0);
            entries.by_caller.retain(|_, uris| {
                uris.retain(|_, decision| self.fresh(decision, now));
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
        let added = uris
            .insert(uri.into(), Decision { readable, at: now })
            .is_none();
        if added {
            entries.len += 1;
            entries.bytes += uri.len();
        }
    }

    /// How many decisions are kept (expired ones included).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries().len
    }

    /// The bytes of the URIs kept.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.entries().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(
        decisions: &Decisions,
        caller: Option<&Principal>,
        uri: &str,
        now: Instant,
    ) -> Option<bool> {
        decisions.get(caller, uri, now).map(|d| d.readable)
    }

    #[test]
    fn decisions_hold_for_the_ttl_per_caller_and_uri() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let (alice, bob) = (Principal::new("alice"), Principal::new("bob"));
        let t0 = Instant::now();
        decisions.put(Some(&alice), "demo://a", true, t0);
        decisions.put(None, "demo://a", false, t0);
        assert_eq!(
            readable(&decisions, Some(&alice), "demo://a", t0),
            Some(true)
        );
        assert_eq!(readable(&decisions, None, "demo://a", t0), Some(false));
        assert_eq!(readable(&decisions, Some(&bob), "demo://a", t0), None);
        assert_eq!(readable(&decisions, Some(&alice), "demo://b", t0), None);
        let later = t0 + Duration::from_secs(29);
        assert_eq!(
            readable(&decisions, Some(&alice), "demo://a", later),
            Some(true)
        );
        let expired = t0 + Duration::from_secs(30);
        assert_eq!(
            readable(&decisions, Some(&alice), "demo://a", expired),
            None
        );
        // A new decision replaces the old one.
        decisions.put(Some(&alice), "demo://a", false, expired);
        assert_eq!(
            readable(&decisions, Some(&alice), "demo://a", expired),
            Some(false)
        );
        assert_eq!(decisions.len(), 2);
    }

    #[test]
    fn a_zero_ttl_keeps_nothing() {
        let decisions = Decisions::new(Duration::ZERO);
        let now = Instant::now();
        decisions.put(None, "demo://a", true, now);
        assert_eq!(readable(&decisions, None, "demo://a", now), None);
        assert_eq!(decisions.len(), 0);
    }

    #[test]
    fn a_full_cache_forgets_expired_decisions_first_then_all() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let t0 = Instant::now();
        for i in 0..MAX_DECISIONS {
            decisions.put(None, &format!("demo://{i}"), true, t0);
        }
        assert_eq!(decisions.len(), MAX_DECISIONS);
        // Nothing expired: all are forgotten for the new one.
        decisions.put(None, "demo://new", true, t0);
        assert_eq!(decisions.len(), 1);
        assert_eq!(readable(&decisions, None, "demo://0", t0), None);
        assert_eq!(readable(&decisions, None, "demo://new", t0), Some(true));

        let t1 = t0 + Duration::from_secs(20);
        for i in 1..MAX_DECISIONS {
            decisions.put(None, &format!("demo://{i}"), true, t1);
        }
        // "demo://new" (from t0) expired at t0 + 30 s: only it goes.
        let t2 = t0 + Duration::from_secs(31);
        decisions.put(None, "demo://newer", true, t2);
        assert_eq!(decisions.len(), MAX_DECISIONS);
        assert_eq!(readable(&decisions, None, "demo://new", t2), None);
        assert_eq!(readable(&decisions, None, "demo://1", t2), Some(true));
        assert_eq!(readable(&decisions, None, "demo://newer", t2), Some(true));
    }

    #[test]
    fn long_uris_are_kept_within_a_bound_in_bytes() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let now = Instant::now();
        let long = "x".repeat(64 * 1024);
        for i in 0..1000 {
            decisions.put(None, &format!("demo://{i}/{long}"), true, now);
            assert!(decisions.bytes() <= MAX_URI_BYTES);
        }
        // Everything was forgotten at least once, and the newest is kept.
        assert!(decisions.len() < 1000);
        assert_eq!(
            readable(&decisions, None, &format!("demo://999/{long}"), now),
            Some(true)
        );
    }
}
