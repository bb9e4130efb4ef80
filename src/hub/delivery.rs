//! Delivery on this instance: a change is queued on every stream that
//! hears it, under the registry's lock, deciding once per caller whether it
//! may be heard.

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use tracing::Instrument;

use super::bus::Deliver;
use super::change::Change;
use super::queue::{Item, Pushed};
use super::shared::Shared;
use crate::access::Decisions;
use crate::hooks::Principal;
use crate::metrics::{self, Dropped};
use crate::sync::lock;

/// Delivers `change` to this instance's streams; how many it was queued on.
/// The delivery is a span: the notification the hub sends, as the
/// conventions name an operation a server starts (`CLIENT` kind), with the
/// streams that heard it; what it dropped are its events.
pub(crate) async fn deliver(shared: &Shared, change: &Change) -> usize {
    // No subscriber was ever set: no span (nor the `log` crate's fallback
    // of a disabled one).
    if !tracing::dispatcher::has_been_set() {
        return queue_all(shared, change).await;
    }
    let span = tracing::info_span!(
        target: "mcp_edge",
        "mcp.client",
        otel.name = change.method(),
        otel.kind = "client",
        mcp.method.name = change.method(),
        mcp_edge.streams = tracing::field::Empty,
    );
    let queued = queue_all(shared, change).instrument(span.clone()).await;
    span.record("mcp_edge.streams", queued);
    queued
}

/// [`deliver`]'s work: asks the access hook until every caller's answer
/// is known, then queues.
async fn queue_all(shared: &Shared, change: &Change) -> usize {
    let mut readers = Readers::of(shared, change);
    loop {
        match queue(shared, change, readers.as_mut()) {
            Ok(queued) => return queued,
            Err(unknown) => match &mut readers {
                Some(readers) => readers.ask(unknown).await,
                // Only a check of readers leaves callers unknown.
                None => return 0,
            },
        }
    }
}

/// An inbox's delivery: the change of another instance, delivered here.
impl Deliver for Shared {
    fn deliver(&self, change: Change) -> Pin<Box<dyn Future<Output = usize> + Send + '_>> {
        Box::pin(async move { deliver(self, &change).await })
    }
}

/// Queues `change` on every stream that hears it and whose caller may
/// (all of them without `readers`), under the registry's lock; how many it
/// was queued on. When some caller's answer is not known yet, nothing is
/// queued: those callers are the error.
fn queue(
    shared: &Shared,
    change: &Change,
    mut readers: Option<&mut Readers<'_>>,
) -> Result<usize, Vec<Option<Principal>>> {
    // Locks, in the order taken: the registry's, then under it, one at a
    // time, the decision cache's (`decide`), the wakers' (to take their
    // list) and each stream's queue (`push`, which hands over the stream's
    // waker); once the registry's is released, the wakers' again, alone (to
    // give the list back). None of those is ever held while the registry's
    // is taken; the streams are woken, and what was done is counted (the
    // cache's hits and misses when `readers` is dropped), under no lock.
    let mut registry = shared.registry();
    let audience = registry.audience(change);
    let mut heard = Vec::new();
    let mut unheard = 0;
    let mut unknown: Vec<Option<Principal>> = Vec::new();
    for (caller, streams) in audience.iter().flat_map(|streams| streams.callers()) {
        let decision = match readers.as_mut() {
            Some(readers) => readers.decide(caller),
            None => Some(true),
        };
        match decision {
            Some(true) => heard.push(streams),
            Some(false) => unheard += streams.len(),
            None if unknown.iter().any(|known| known.as_ref() == caller) => {}
            None => unknown.push(caller.cloned()),
        }
    }
    if !unknown.is_empty() {
        return Err(unknown);
    }
    if heard.is_empty() {
        drop(audience);
        drop(registry);
        counted(shared, 0, unheard, 0);
        return Ok(0);
    }
    let item = Item::of(change);
    let mut queued = 0;
    let mut lagging = Vec::new();
    let mut wakers = std::mem::take(&mut *lock(&shared.wakers));
    for (id, stream) in heard.into_iter().flatten() {
        match stream.push(&item, shared.config.backlog, &mut wakers) {
            Pushed::Queued => queued += 1,
            Pushed::Ended => {}
            // A stream that falls behind leaves the registry at once.
            Pushed::Lagged => lagging.push(*id),
        }
    }
    drop(audience);
    let lagged = lagging.len();
    for id in lagging {
        registry.close(id, &*shared.bus);
    }
    drop(registry);
    wakers.wake();
    *lock(&shared.wakers) = wakers;
    counted(shared, queued, unheard, lagged);
    Ok(queued)
}

/// Counts what a delivery did, under no lock: `queued` streams heard it,
/// `unheard` were left out at send time, `lagged` fell behind (each its
/// backlog and the event that did not fit lost).
fn counted(shared: &Shared, queued: usize, unheard: usize, lagged: usize) {
    metrics::hub_deliveries(queued as u64);
    if unheard > 0 {
        metrics::events_dropped(Dropped::SendTime, unheard as u64);
        tracing::debug!(
            streams = unheard,
            "listen hub: an update its callers may no longer read was dropped"
        );
    }
    if lagged > 0 {
        let events = lagged * (shared.config.backlog + 1);
        metrics::events_dropped(Dropped::Backlog, events as u64);
    }
}

/// The callers that may hear a resource update under a
/// [`ResourceAccess`](crate::ResourceAccess) hook: those that may read its
/// URI now.
struct Readers<'a> {
    access: &'a dyn crate::hooks::ResourceAccess,
    decisions: &'a Decisions,
    uri: &'a str,
    now: Instant,
    /// The decisions the cache gave this delivery, before the hook was asked.
    cached: Vec<(Option<Principal>, bool)>,
    /// Once the hook was asked: every decision of this delivery, the cache's
    /// and the hook's, so that none changes between the two passes.
    settled: Option<HashMap<Option<Principal>, bool>>,
    /// The cache's hits and misses, counted once the delivery is done.
    hits: Cell<u64>,
    misses: Cell<u64>,
}

impl Drop for Readers<'_> {
    fn drop(&mut self) {
        metrics::access_decisions(self.hits.get(), self.misses.get());
    }
}

impl<'a> Readers<'a> {
    /// The check `change` needs: none but for a resource update under a hook.
    fn of(shared: &'a Shared, change: &'a Change) -> Option<Self> {
        match (change, shared.profile.resource_access()) {
            (Change::ResourceUpdated { uri }, Some(access)) => Some(Self {
                access,
                decisions: shared.profile.decisions(),
                uri,
                now: Instant::now(),
                cached: Vec::new(),
                settled: None,
                hits: Cell::new(0),
                misses: Cell::new(0),
            }),
            _ => None,
        }
    }

    /// May `caller` hear it: `None` when the hook is to be asked. Once it
    /// was asked, a caller this delivery did not decide (its stream opened
    /// meanwhile) is decided by the cache, or may not.
    fn decide(&mut self, caller: Option<&Principal>) -> Option<bool> {
        if let Some(settled) = &self.settled {
            let decided = settled.get(&caller.cloned()).copied();
            return Some(decided.unwrap_or_else(|| self.cache(caller) == Some(true)));
        }
        let readable = self.cache(caller)?;
        self.cached.push((caller.cloned(), readable));
        Some(readable)
    }

    fn cache(&self, caller: Option<&Principal>) -> Option<bool> {
        let decision = self.decisions.get(caller, self.uri, self.now);
        let counted = if decision.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counted.set(counted.get() + 1);
        Some(decision?.readable)
    }

    /// Asks the hook about `callers` (one call each), keeping the answers
    /// in the decision cache and, with the cache's, for this delivery.
    async fn ask(&mut self, callers: Vec<Option<Principal>>) {
        let mut settled: HashMap<_, _> = self.cached.drain(..).collect();
        for caller in callers {
            let asked = self.access.readable(caller.as_ref(), &[self.uri]);
            let answer = metrics::access_hook(asked).await;
            let answer = answer.first() == Some(&true);
            self.decisions
                .put(caller.as_ref(), self.uri, answer, Instant::now());
            settled.insert(caller, answer);
        }
        self.settled = Some(settled);
    }
}
