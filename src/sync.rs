//! The one way this crate takes a lock.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, poisoned or not. Every change this crate makes under a
/// lock is one insert, removal or swap, or leaves what it guards consistent
/// at each step, so a panic elsewhere leaves nothing half done.
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
