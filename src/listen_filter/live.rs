//! The subscription ids of the open listens the guard watches, per
//! identified caller: a caller's second listen under an id still open is
//! refused, since the messages of both streams would carry the same tag.
//! Anonymous callers cannot be told apart, so their listens are not
//! checked (one anonymous client could otherwise refuse another's).
//!
//! A listen is held by a 64-bit digest of its caller and id, keyed per
//! layer by the process's random SipHash keys: a claim and its release
//! hash once and allocate nothing. Two different pairs share a digest
//! with a chance of about one in 2^64 per pair of open listens.

use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::filter::{HonouredFilter, ListenError};
use crate::metrics::{self, Ended};

/// The digests of the open listens of one layer and its clones.
#[derive(Default)]
pub(crate) struct Live {
    keys: RandomState,
    open: Mutex<HashSet<u64, BuildHasherDefault<Digest>>>,
}

/// A digest is its own hash.
#[derive(Default)]
struct Digest(u64);

impl Hasher for Digest {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, digest: u64) {
        self.0 = digest;
    }
}

/// A listen's hold on its subscription id, given back when dropped (when
/// the guarded answer ends or is dropped).
pub(crate) struct Claim {
    live: Arc<Live>,
    digest: u64,
}

impl Live {
    fn lock(&self) -> MutexGuard<'_, HashSet<u64, BuildHasherDefault<Digest>>> {
        // A set of digests: consistent after any panic.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
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
        let mut hasher = self.keys.build_hasher();
        hasher.write(caller.as_str().as_bytes());
        // The caller's name ends here, so no pair reads as another.
        hasher.write_u8(0xff);
        hasher.write(filter.subscription_id().get().as_bytes());
        let digest = hasher.finish();
        if !self.lock().insert(digest) {
            metrics::listen_ended(Ended::Duplicate);
            return Err(ListenError::SubscriptionIdInUse);
        }
        Ok(Some(Claim {
            live: self.clone(),
            digest,
        }))
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.live.lock().remove(&self.digest);
    }
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live")
            .field("open", &self.lock().len())
            .finish()
    }
}
