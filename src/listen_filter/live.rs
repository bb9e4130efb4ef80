//! The subscription ids of the open listens the guard watches, per
//! identified caller: a caller's second listen under an id still open is
//! refused, since the messages of both streams would carry the same tag.
//! Anonymous callers cannot be told apart, so their listens are not
//! checked (one anonymous client could otherwise refuse another's).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::filter::{HonouredFilter, ListenError};
use crate::hooks::Principal;
use crate::metrics::{self, Ended};

/// A caller and the subscription id of one of its open listens (JSON text).
type Key = (Principal, Box<str>);

/// The open listens of one layer and its clones.
#[derive(Default)]
pub(crate) struct Live(Mutex<HashSet<Key>>);

/// A listen's hold on its subscription id, given back when dropped (when
/// the guarded answer ends or is dropped).
pub(crate) struct Claim {
    live: Arc<Live>,
    key: Key,
}

impl Live {
    fn lock(&self) -> MutexGuard<'_, HashSet<Key>> {
        // A set of keys: consistent after any panic.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims the subscription id of `filter` for its caller: nothing to
    /// claim for an anonymous caller; refused while the caller has an open
    /// listen under that id.
    pub(crate) fn claim(
        self: &Arc<Self>,
        filter: &HonouredFilter,
    ) -> Result<Option<Claim>, ListenError> {
        let Some(caller) = filter.principal() else {
            return Ok(None);
        };
        let key = (caller.clone(), filter.subscription_id().get().into());
        if !self.lock().insert(key.clone()) {
            metrics::listen_ended(Ended::Duplicate);
            return Err(ListenError::SubscriptionIdInUse);
        }
        Ok(Some(Claim {
            live: self.clone(),
            key,
        }))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.live.lock().remove(&self.key);
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("open", &self.lock().len())
            .finish()
    }
}
