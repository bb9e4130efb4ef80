//! The bus between instances: what the hub tells it, and what it hands back.
//!
//! A hub on one instance delivers its own publications to its own streams
//! at once; the bus carries them to the other instances, whose hubs deliver
//! them to theirs. The hub tells the bus which channels its streams listen
//! on (the first stream on a channel, and the last one gone), so that an
//! instance subscribes to a channel once, however many local streams hear
//! it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use super::change::{Change, Channel};

/// Why a change did not reach the other instances.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BusError {
    /// The bus is not connected (an outage, or not yet connected).
    Unavailable,
    /// The send failed or timed out; the message says how.
    Failed(String),
}

impl fmt::Display for BusError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BusError::Unavailable => f.write_str("the bus is not connected"),
            BusError::Failed(why) => write!(f, "the bus send failed: {why}"),
        }
    }
}

impl std::error::Error for BusError {}

/// The future of a send to the other instances.
pub type BusFuture = Pin<Box<dyn Future<Output = Result<(), BusError>> + Send + 'static>>;

/// The future of [`Bus::ready`].
pub type BusReady = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A bus between instances. The hub calls `watch` and `unwatch` under its
/// registry lock: they must not block (queue the work).
pub trait Bus: Send + Sync + 'static {
    /// Starts the bus: changes from other instances go to `inbox`.
    fn start(&self, inbox: Inbox);

    /// The first local stream listens on `channel`.
    fn watch(&self, channel: Channel<'_>);

    /// The last local stream on `channel` is gone.
    fn unwatch(&self, channel: Channel<'_>);

    /// Sends `change` to the other instances.
    fn publish(&self, change: &Change) -> BusFuture;

    /// Resolves once the other instances' changes on `channels` reach this
    /// one (the subscriptions are in place), or once waiting is pointless
    /// (the bus is down) or took too long. A new stream is acknowledged
    /// only then, so that what is published after its acknowledgment
    /// reaches it. Default: at once.
    fn ready(&self, _channels: &[Channel<'_>]) -> BusReady {
        Box::pin(std::future::ready(()))
    }
}

/// A shared bus is a bus (one bus object for several hubs, or chosen at
/// run time as `Arc<dyn Bus>`).
impl<B: Bus + ?Sized> Bus for Arc<B> {
    fn start(&self, inbox: Inbox) {
        (**self).start(inbox);
    }

    fn watch(&self, channel: Channel<'_>) {
        (**self).watch(channel);
    }

    fn unwatch(&self, channel: Channel<'_>) {
        (**self).unwatch(channel);
    }

    fn publish(&self, change: &Change) -> BusFuture {
        (**self).publish(change)
    }

    fn ready(&self, channels: &[Channel<'_>]) -> BusReady {
        (**self).ready(channels)
    }
}

/// The bus of a single instance: there is no other instance to tell.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalBus;

impl Bus for LocalBus {
    fn start(&self, _: Inbox) {}

    fn watch(&self, _: Channel<'_>) {}

    fn unwatch(&self, _: Channel<'_>) {}

    fn publish(&self, _: &Change) -> BusFuture {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// Where a bus hands the changes of other instances: the hub's local
/// delivery (send-time authorization included). It holds the hub weakly: a
/// bus outliving its hub delivers nothing.
#[derive(Clone)]
pub struct Inbox {
    hub: Weak<dyn Deliver>,
}

/// The hub's delivery, as an inbox reaches it (`delivery` implements it
/// for the hub's shared state, which holds the bus: the bus knows the
/// delivery only through this).
pub(super) trait Deliver: Send + Sync {
    /// Delivers `change` to this instance's streams; how many it was
    /// queued on.
    fn deliver(&self, change: Change) -> Pin<Box<dyn Future<Output = usize> + Send + '_>>;
}

impl Inbox {
    /// The inbox of the hub `hub`.
    pub(super) fn new(hub: Weak<dyn Deliver>) -> Self {
        Self { hub }
    }

    /// Delivers `change` to this instance's streams; how many it was
    /// queued on.
    pub async fn deliver(&self, change: Change) -> usize {
        let Some(hub) = self.hub.upgrade() else {
            return 0;
        };
        hub.deliver(change).await
    }
}

impl fmt::Debug for Inbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inbox").finish_non_exhaustive()
    }
}

/// The bus of a hub, shared by its parts.
pub(super) type SharedBus = Arc<dyn Bus>;
