//! What the [`ResourceAccess`](crate::ResourceAccess) hook answered, kept
//! for a while per (caller, URI): the checks made while a stream is open
//! ask the hook once per decision lifetime, not once per event.
//!
//! The decisions live in a bounded [`quick_cache`] cache: when it is full,
//! a new decision takes the place of one seldom used (its eviction keeps
//! the decisions that are asked again and lets one-off ones go first), so
//! a flood of new URIs never turns into a burst of hook calls for the
//! callers whose decisions are in use. A decision older than the TTL is
//! treated as absent and removed when it is met.

use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use quick_cache::{Equivalent, OptionsBuilder, Weighter};

use crate::hooks::Principal;

/// Most decisions kept at once.
pub(crate) const MAX_DECISIONS: usize = 65_536;
/// Most bytes of keys kept at once, each decision's URI and its caller's
/// name: the URIs come from updates (a bus message's among them), up to
/// 64 KiB each, and a name is whatever the auth layer made of a token.
const MAX_KEY_BYTES: usize = 8 * 1024 * 1024;
/// The cache's shards, each with its own lock and an eighth of both
/// bounds. A fixed number rather than one per core: the cache keeps no
/// decision weighing more than its shard's share, and an eighth (1 MiB)
/// holds the longest URI a listen can name at the default body limit on
/// any machine.
const SHARDS: usize = 8;

/// The decision cache: one per profile, shared by its clones.
pub(crate) struct Decisions {
    ttl: Duration,
    cache: Cache<Key, Decision, KeyBytes>,
}

/// Who asked about which URI.
#[derive(Clone, PartialEq, Eq)]
struct Key {
    caller: Option<Principal>,
    uri: Box<str>,
}

/// A [`Key`] borrowed: a look-up clones neither the caller nor the URI.
#[derive(Hash, PartialEq, Eq)]
struct Query<'a> {
    caller: Option<&'a Principal>,
    uri: &'a str,
}

impl Key {
    /// The bytes it holds: its URI and its caller's name.
    fn bytes(&self) -> usize {
        self.uri.len()
            + self
                .caller
                .as_ref()
                .map_or(0, |caller| caller.as_str().len())
    }

    fn query(&self) -> Query<'_> {
        Query {
            caller: self.caller.as_ref(),
            uri: &self.uri,
        }
    }
}

// A key hashes as its query does, so that a query finds it.
impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.query().hash(state);
    }
}

impl Equivalent<Key> for Query<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        *self == key.query()
    }
}

/// What a decision weighs: the bytes of its URI and of its caller's name,
/// and at least the average share of the bytes the count allows, so that
/// the one bound in weight keeps both: no more than [`MAX_KEY_BYTES`] of
/// keys, no more than [`MAX_DECISIONS`] decisions. A name is counted in
/// every decision that holds it, shared or not: the bound holds whoever
/// made the [`Principal`]s.
#[derive(Clone)]
struct KeyBytes;

impl KeyBytes {
    const CAPACITY: u64 = MAX_KEY_BYTES as u64;
    const LEAST: u64 = (MAX_KEY_BYTES / MAX_DECISIONS) as u64;
}

impl Weighter<Key, Decision> for KeyBytes {
    fn weight(&self, key: &Key, _: &Decision) -> u64 {
        (key.bytes() as u64).max(Self::LEAST)
    }
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
        let options = OptionsBuilder::new()
            .shards(SHARDS)
            .estimated_items_capacity(MAX_DECISIONS)
            .weight_capacity(KeyBytes::CAPACITY)
            .build()
            .expect("both capacities are set");
        Self {
            ttl,
            cache: Cache::with_options(options, KeyBytes, Default::default(), Default::default()),
        }
    }

    /// How long a decision holds.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
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
        let query = Query { caller, uri };
        let decision = self.cache.get(&query)?;
        if self.fresh(&decision, now) {
            return Some(decision);
        }
        // Unless a fresh decision took its place meanwhile.
        self.cache.remove_if(&query, |kept| !self.fresh(kept, now));
        None
    }

    /// Keeps that `caller` may (or may not) read `uri`, decided at `now`.
    pub(crate) fn put(&self, caller: Option<&Principal>, uri: &str, readable: bool, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let key = Key {
            caller: caller.cloned(),
            uri: uri.into(),
        };
        self.cache.insert(key, Decision { readable, at: now });
    }

    /// How many decisions are kept (expired ones included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }

    /// The bytes of the keys kept: URIs and callers' names.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.cache.iter().map(|(key, _)| key.bytes()).sum()
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
    fn an_expired_decision_is_not_answered_and_goes() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let alice = Principal::new("alice");
        let t0 = Instant::now();
        decisions.put(Some(&alice), "demo://a", true, t0);
        decisions.put(Some(&alice), "demo://b", true, t0 + Duration::from_secs(10));
        let t1 = t0 + Duration::from_secs(31);
        assert_eq!(readable(&decisions, Some(&alice), "demo://a", t1), None);
        assert_eq!(decisions.len(), 1, "the expired decision was removed");
        // Asked again, still absent; the other one still holds.
        assert_eq!(readable(&decisions, Some(&alice), "demo://a", t1), None);
        assert_eq!(
            readable(&decisions, Some(&alice), "demo://b", t1),
            Some(true)
        );
    }

    #[test]
    fn a_full_cache_keeps_its_bound_and_forgets_some_not_all() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let now = Instant::now();
        for i in 0..3 * MAX_DECISIONS {
            decisions.put(None, &format!("demo://{i}"), true, now);
            if i % 4096 == 0 {
                assert!(decisions.len() <= MAX_DECISIONS);
            }
        }
        let kept = decisions.len();
        assert!(kept <= MAX_DECISIONS, "{kept} decisions kept");
        assert!(kept > MAX_DECISIONS * 9 / 10, "{kept} decisions kept");
        let newest = format!("demo://{}", 3 * MAX_DECISIONS - 1);
        assert_eq!(readable(&decisions, None, &newest, now), Some(true));
    }

    #[test]
    fn long_uris_are_kept_within_a_bound_in_bytes() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let now = Instant::now();
        let long = "x".repeat(64 * 1024);
        for i in 0..1000 {
            decisions.put(None, &format!("demo://{i}/{long}"), true, now);
            assert!(decisions.bytes() <= MAX_KEY_BYTES);
        }
        assert!(decisions.len() < 1000);
        assert!(decisions.bytes() > MAX_KEY_BYTES / 2, "some are kept");
        assert_eq!(
            readable(&decisions, None, &format!("demo://999/{long}"), now),
            Some(true)
        );
    }

    /// Callers with long names, each name made anew for each decision (as
    /// an auth layer makes a principal per request): what the decisions
    /// hold stays within the bound, names included.
    #[test]
    fn long_caller_names_are_kept_within_the_bound_in_bytes() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let now = Instant::now();
        let name = "c".repeat(4 * 1024);
        for i in 0..8 * 1024 {
            let caller = Principal::new(format!("{name}{i}"));
            decisions.put(Some(&caller), &format!("demo://{i}"), true, now);
        }
        assert!(
            decisions.bytes() <= MAX_KEY_BYTES,
            "{} bytes",
            decisions.bytes()
        );
        assert!(decisions.bytes() > MAX_KEY_BYTES / 2, "some are kept");
        let last = Principal::new(format!("{name}{}", 8 * 1024 - 1));
        let uri = format!("demo://{}", 8 * 1024 - 1);
        assert_eq!(readable(&decisions, Some(&last), &uri, now), Some(true));
    }

    /// The least used go first: a decision asked about while one-off
    /// decisions flood the full cache outlives them, and one put at the
    /// same time but never asked about again goes.
    #[test]
    fn a_decision_in_use_survives_a_flood_of_one_off_decisions() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let (hot, idle) = (Principal::new("hot"), Principal::new("idle"));
        let now = Instant::now();
        let flood = |from: usize, to: usize| {
            for i in from..to {
                decisions.put(None, &format!("demo://once/{i}"), true, now);
                if i % 100 == 0 {
                    assert_eq!(
                        readable(&decisions, Some(&hot), "demo://hot", now),
                        Some(true)
                    );
                }
            }
        };
        for i in 0..MAX_DECISIONS {
            decisions.put(None, &format!("demo://first/{i}"), true, now);
        }
        decisions.put(Some(&hot), "demo://hot", true, now);
        decisions.put(Some(&idle), "demo://hot", true, now);
        flood(0, 4 * MAX_DECISIONS);
        assert_eq!(
            readable(&decisions, Some(&hot), "demo://hot", now),
            Some(true)
        );
        assert_eq!(readable(&decisions, Some(&idle), "demo://hot", now), None);
        assert!(decisions.len() <= MAX_DECISIONS);
    }

    #[test]
    fn a_lookup_finds_what_was_put_under_every_caller() {
        let decisions = Decisions::new(Duration::from_secs(30));
        let now = Instant::now();
        // A caller named like a URI and a URI named like a caller stay apart.
        let callers = [None, Some(Principal::new("")), Some(Principal::new("a"))];
        for (i, caller) in callers.iter().enumerate() {
            decisions.put(caller.as_ref(), "a", i % 2 == 0, now);
        }
        for (i, caller) in callers.iter().enumerate() {
            assert_eq!(
                readable(&decisions, caller.as_ref(), "a", now),
                Some(i % 2 == 0)
            );
        }
        assert_eq!(
            readable(&decisions, Some(&Principal::new("a")), "", now),
            None
        );
        assert_eq!(decisions.len(), 3);
    }
}
