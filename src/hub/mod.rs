//! The listen hub: the edge serves every honoured listen itself.
//!
//! [`ListenHubLayer`] sits inside [`ListenFilterLayer`](crate::ListenFilterLayer)
//! (or [`EdgeLayer`](crate::EdgeLayer)): every request that carries a
//! [`HonouredFilter`](crate::HonouredFilter) is answered with the listen's SSE stream — the
//! acknowledgment first, then every change published under the stream's
//! topics, tagged with the subscription id — and every other request goes
//! to the inner service untouched. The inner server never serves a listen:
//! it publishes what changed through a [`Publisher`].
//!
//! - **Delivery** follows the honoured topics: a resource update reaches the
//!   streams whose honoured URIs cover its URI (the guard's sub-resource
//!   rule), a list change the streams that honour its kind, a task's status
//!   only the streams of the task's owner that honour the task.
//! - **Send-time authorization.** Before a resource update is queued, the
//!   stream's caller is checked again with the profile's
//!   [`ResourceAccess`](crate::ResourceAccess) hook, through the profile's
//!   per-(caller, URI) decision cache
//!   ([`access_ttl`](crate::ServerProfileBuilder::access_ttl)), one hook call
//!   per caller and update: a revoked reader stops hearing updates within
//!   the TTL.
//! - **Backlog.** Each stream holds at most
//!   [`backlog`](ListenHubBuilder::backlog) undelivered events; a list change
//!   already pending is not queued twice. A stream that falls further behind
//!   ends with a JSON-RPC error for its listen id (-32013, `data.limit`
//!   `"backlog"`).
//! - **Keep-alive.** An idle stream sends an SSE comment every
//!   [`keep_alive`](ListenHubBuilder::keep_alive).
//! - **Admission.** At most [`max_streams`](ListenHubBuilder::max_streams)
//!   streams are open, and
//!   [`max_streams_per_caller`](ListenHubBuilder::max_streams_per_caller)
//!   per caller (anonymous callers share one count unless an
//!   [`admission_key`](ListenHubBuilder::admission_key) says otherwise). A
//!   listen over a cap is answered with HTTP 429, `Retry-After` and a
//!   JSON-RPC error for its id: -32013, `data` naming the limit and its
//!   value. A stream's slot is freed as soon as it is dropped.
//! - **Across instances** (a [`Bus`], such as `RedisBus` with the `redis`
//!   feature): a listen is acknowledged once its instance hears the other
//!   instances on its channels (bounded: 500 ms for `RedisBus`), so what
//!   is published after the acknowledgment reaches it while the bus is up.
//! - **Graceful shutdown.** [`ListenHub::shutdown`] ends every stream with
//!   the listen's own successful response (a `result` of standard fields
//!   only), as the 2026-07-28 subscriptions page asks; a listen after it is
//!   acknowledged and ended the same way.
//!
//! Streams and deliveries are logged with `tracing` (opened, closed and
//! why, updates dropped by the send-time check, lagging streams), never
//! with a URI or a task id at info level.
//!
//! # Files
//!
//! From the ground up, each importing only those before it: `change.rs`
//! (the vocabulary: a [`Change`], a [`Channel`], the channels a stream is
//! heard through), `bus.rs` (the [`Bus`] trait, [`LocalBus`], the
//! [`Inbox`]), `queue.rs` (a stream's id and its queue), `registry.rs` (the
//! streams by channel and caller, admission), `shared.rs` (what the hub's
//! parts share), `delivery.rs` (queuing a change on the streams that hear
//! it), `stream.rs` (a stream's SSE body, and [`Watch`]), `layer.rs`
//! ([`ListenHubLayer`]), `redis/` (`RedisBus`, feature `redis`), and this
//! file ([`ListenHub`], its builder, the [`Publisher`]); `tests.rs`.

mod bus;
mod change;
mod delivery;
mod layer;
mod queue;
#[cfg(feature = "redis")]
mod redis;
mod registry;
mod shared;
mod stream;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http::request::Parts;
use serde_json::{Map, Value};

pub use self::bus::{Bus, BusError, BusFuture, BusReady, Inbox, LocalBus};
pub use self::change::{Change, Channel};
pub use self::layer::{ListenHubLayer, ListenHubService, ResponseBody, ResponseFuture};
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub use self::redis::{RedisBus, RedisBusError};
pub use self::stream::Watch;

use self::bus::{Deliver, SharedBus};
use self::delivery::deliver;
use self::queue::{End, Queue, Wakers};
use self::registry::{Admission, Caps, Opener, Registry};
use self::shared::{AdmissionKey, Config, Shared};
use crate::filter::{ListChanged, Topic};
use crate::hooks::Principal;
use crate::metrics::{self, Dropped};
use crate::profile::ServerProfile;

/// Default of [`ListenHubBuilder::keep_alive`].
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Default of [`ListenHubBuilder::backlog`].
const BACKLOG: usize = 256;
/// Default of [`ListenHubBuilder::max_streams`].
const MAX_STREAMS: usize = 10_000;
/// Default of [`ListenHubBuilder::max_streams_per_caller`].
const MAX_STREAMS_PER_CALLER: usize = 64;

/// Serves listen streams at the edge and delivers what is published to them.
///
/// Cloning is an `Arc` clone: the layer, the publishers and the hub share
/// one registry of streams.
///
/// ```
/// use mcp_edge::hub::ListenHub;
/// use mcp_edge::{EdgeLayer, ServerProfile};
/// use tower::ServiceBuilder;
///
/// let profile = ServerProfile::builder().build().unwrap();
/// let hub = ListenHub::new(profile.clone());
/// let publisher = hub.publisher();
/// let service = ServiceBuilder::new()
///     .layer(EdgeLayer::new(profile))
///     .layer(hub.layer())
///     .service_fn(|_: http::Request<mcp_edge::RequestBody<String>>| async {
///         Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
///     });
/// # let _ = (service, publisher);
/// ```
#[derive(Clone)]
pub struct ListenHub {
    shared: Arc<Shared>,
}

/// Builder for [`ListenHub`].
pub struct ListenHubBuilder {
    profile: ServerProfile,
    config: Config,
    key: Option<AdmissionKey>,
    bus: SharedBus,
}

impl ListenHubBuilder {
    /// How long a stream may stay silent before it sends a keep-alive
    /// comment (default 15 s).
    pub fn keep_alive(mut self, every: Duration) -> Self {
        self.config.keep_alive = every;
        self
    }

    /// Most undelivered events a stream holds (default 256); a stream that
    /// falls further behind ends with an error.
    pub fn backlog(mut self, events: usize) -> Self {
        self.config.backlog = events.max(1);
        self
    }

    /// Most streams open at once (default 10 000).
    pub fn max_streams(mut self, streams: usize) -> Self {
        self.config.caps.streams = streams;
        self
    }

    /// Most streams open at once per caller (default 64).
    pub fn max_streams_per_caller(mut self, streams: usize) -> Self {
        self.config.caps.per_caller = streams;
        self
    }

    /// The admission bucket of a listen request (default: the caller's
    /// name, one bucket for all anonymous callers). `None` is the shared
    /// bucket; a key function can tell anonymous callers apart (by address,
    /// say).
    pub fn admission_key(
        mut self,
        key: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.key = Some(Box::new(key));
        self
    }

    /// The bus to the other instances (default [`LocalBus`]: none).
    pub fn bus(mut self, bus: impl Bus) -> Self {
        self.bus = Arc::new(bus);
        self
    }

    /// The hub; its bus is started.
    pub fn build(self) -> ListenHub {
        let shared = Arc::new(Shared {
            profile: self.profile,
            config: self.config,
            key: self.key,
            registry: Mutex::new(Registry::default()),
            wakers: Mutex::default(),
            bus: self.bus,
        });
        let hub: Weak<dyn Deliver> = Arc::downgrade(&shared) as Weak<Shared>;
        shared.bus.start(Inbox::new(hub));
        ListenHub { shared }
    }
}

impl ListenHub {
    /// A hub with the default settings, authorizing by `profile`.
    pub fn new(profile: ServerProfile) -> Self {
        Self::builder(profile).build()
    }

    /// Starts a hub authorizing by `profile`.
    pub fn builder(profile: ServerProfile) -> ListenHubBuilder {
        ListenHubBuilder {
            profile,
            config: Config {
                keep_alive: KEEP_ALIVE,
                backlog: BACKLOG,
                caps: Caps {
                    streams: MAX_STREAMS,
                    per_caller: MAX_STREAMS_PER_CALLER,
                },
            },
            key: None,
            bus: Arc::new(LocalBus),
        }
    }

    /// The layer that serves this hub's streams.
    pub fn layer(&self) -> ListenHubLayer {
        ListenHubLayer::new(self.shared.clone())
    }

    /// A handle to publish changes with.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            shared: self.shared.clone(),
        }
    }

    /// Ends every open stream with the listen's own successful response;
    /// listens after it are acknowledged and ended the same way.
    pub fn shutdown(&self) {
        let mut wakers = Wakers::default();
        let streams = self.shared.registry().shut(&mut wakers);
        wakers.wake();
        tracing::info!(streams, "listen hub: shutting down, every stream ends");
    }

    /// Hears the changes under `topics` as a stream of `caller` would,
    /// for a server that delivers them itself (see [`Watch`]). Not a
    /// listen stream: no cap applies, and [`open_streams`](Self::open_streams)
    /// does not count it.
    pub fn watch(
        &self,
        caller: Option<Principal>,
        topics: impl IntoIterator<Item = Topic>,
    ) -> Watch {
        let opener = Opener::Watch {
            topics: topics.into_iter().collect(),
            caller,
        };
        let admission = self.shared.registry().open(opener, &*self.shared.bus);
        let (id, queue) = match admission {
            Admission::Open(id, queue) => (Some(id), queue),
            // After shutdown: a watch that has ended.
            Admission::Closed(queue) => (None, queue),
            // Neither a cap nor a subscription id applies to a watch.
            Admission::Full { .. } | Admission::Duplicate => (None, Queue::ended(End::Shutdown)),
        };
        Watch::new(self.shared.clone(), id, queue)
    }

    /// How many streams are open.
    pub fn open_streams(&self) -> usize {
        self.shared.registry().len()
    }
}

impl fmt::Debug for ListenHub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ListenHub")
            .field("config", &self.shared.config)
            .field("open_streams", &self.open_streams())
            .finish_non_exhaustive()
    }
}

/// Publishes changes to the hub's streams: this instance's at once, the
/// other instances' through the bus. Cloneable; every clone feeds the same
/// hub.
#[derive(Clone)]
pub struct Publisher {
    shared: Arc<Shared>,
}

/// What became of one publication.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "`remote` says whether the other instances were told"]
pub struct Published {
    /// How many of this instance's streams it was queued on.
    pub streams: usize,
    /// Whether the bus took it to the other instances.
    pub remote: Result<(), BusError>,
}

impl Publisher {
    /// The resource `uri` changed: every stream whose honoured URIs cover
    /// it, and whose caller may still read it, hears
    /// `notifications/resources/updated`.
    pub async fn resource_updated(&self, uri: &str) -> Published {
        self.publish(Change::ResourceUpdated {
            uri: uri.to_owned(),
        })
        .await
    }

    /// A list changed: every stream that honours its kind hears it (a
    /// change already pending on a stream counts as queued).
    pub async fn list_changed(&self, list: ListChanged) -> Published {
        self.publish(Change::ListChanged(list)).await
    }

    /// The status of task `task_id`, owned by `owner`, changed: the streams
    /// of its owner that honour the task hear `notifications/tasks` with
    /// `params` (its `taskId` set to `task_id`).
    pub async fn task_status(
        &self,
        owner: &Principal,
        task_id: &str,
        params: Map<String, Value>,
    ) -> Published {
        self.publish(Change::TaskStatus {
            owner: owner.clone(),
            task_id: task_id.to_owned(),
            params,
        })
        .await
    }

    /// Delivers `change` here, then sends it to the other instances.
    pub async fn publish(&self, change: Change) -> Published {
        let streams = deliver(&self.shared, &change).await;
        let remote = self.shared.bus.publish(&change).await;
        if let Err(error) = &remote {
            metrics::events_dropped(Dropped::Bus, 1);
            tracing::debug!(%error, "listen hub: a change did not reach the other instances");
        }
        Published { streams, remote }
    }
}

impl fmt::Debug for Publisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Publisher").finish_non_exhaustive()
    }
}

/// The SSE event the hub writes for a task status `params` of task
/// `task_id`, on the stream of subscription `subscription_id` (JSON text):
/// for the fuzz targets and property tests; only with the private feature
/// `fuzzing`, not part of the API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_task_event(
    task_id: &str,
    params: Map<String, Value>,
    subscription_id: &str,
) -> Vec<u8> {
    let change = Change::TaskStatus {
        owner: Principal::new("owner"),
        task_id: task_id.to_owned(),
        params,
    };
    queue::event_of(&change, subscription_id).to_vec()
}
