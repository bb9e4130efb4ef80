//! [`RedisBus`]: the hub's bus across instances on Redis pub/sub. The bus
//! and the state its tasks share are here; its wire format is in `wire`,
//! its connection task in `link`, and what it heard last, to deliver each
//! message once, in `recent`. The delivery task hands what the connection
//! task heard to the hub.

mod deployment;
mod link;
mod recent;
mod wire;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use self::deployment::{Connection, Deployment};
use self::link::Link;
use self::wire::{channel_name, channels_of, Message};
use super::bus::{Bus, BusError, BusFuture, BusReady, Inbox};
use super::change::{Change, Channel};
use crate::metrics::{self, BusDropped};
use crate::sync::lock;

/// How long one send, subscription or ping may take.
const TIMEOUT: Duration = Duration::from_millis(500);
/// Most messages heard and not yet delivered.
const QUEUE: usize = 1024;
/// Most bytes of the messages heard and not yet delivered.
const QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// A [`Bus`] on Redis pub/sub (feature `redis`): on one node
/// ([`RedisBus::new`]), classic pub/sub over redis-rs's connection manager;
/// on a Redis Cluster ([`RedisBus::cluster`]), sharded pub/sub only, over
/// redis-rs's cluster connection, both over RESP3.
///
/// **Channels.** Every channel is named under the deployment's prefix by
/// one injective encoding (URIs, owners and task ids may hold any byte;
/// Base64url without padding has no `:`):
///
/// | what | channel |
/// |---|---|
/// | updates of a URI (and of the URIs below it) | `{prefix}:r:{base64url(uri)}` |
/// | a list change | `{prefix}:l:tools`, `{prefix}:l:prompts`, `{prefix}:l:resources` |
/// | a task's status | `{prefix}:t:{base64url(owner)}:{base64url(task id)}` |
///
/// An update of `file:///logs/today` is published on the channel of every
/// URI that covers it by the sub-resource rule (`file:///logs/today`,
/// `file:///logs/`, `file:///logs`, …), so an instance whose streams honour
/// `file:///logs` hears it; an instance subscribes once per channel,
/// however many of its streams listen there, and unsubscribes with the last.
///
/// **Messages** are JSON objects, so that any process can publish:
///
/// ```json
/// {"v":1,"from":"<instance>","seq":7,"id":"<32 hex digits>","change":{"type":"resource_updated","uri":"file:///logs/today"}}
/// {"v":1,"from":"<instance>","seq":8,"id":"<32 hex digits>","change":{"type":"list_changed","list":"tools"}}
/// {"v":1,"from":"<instance>","seq":9,"id":"<32 hex digits>","change":{"type":"task_status","owner":"alice","taskId":"t-1","params":{"status":"completed"}}}
/// ```
///
/// `from` names the publishing instance, at most 64 bytes (its own
/// messages are ignored: it delivered them already); `seq` numbers its
/// messages; `id` is 128 bits drawn from the operating system's generator
/// for each message, so that nobody knows a message's bytes before it is
/// sent. `id` is optional on read: a process may publish without one, but
/// then anyone who can guess its next message can send those bytes first.
/// A message that is not this, or longer than 64 KiB, is dropped and
/// counted ([`RedisBus::dropped`]).
///
/// **Each message once.** A publication reaches an instance once per
/// channel it listens on among the update's; the same bytes heard again
/// among the last 4096 messages are one message, delivered once, and each
/// copy dropped is counted ([`RedisBus::duplicates`]). Nothing else is
/// deduplicated (never by the `from`, `seq` or `id` a message claims), and
/// the bytes of an instance's next message hold an `id` nobody has seen, so
/// a copy can only repeat a message already sent, never stand in for one
/// to come. The bus remembers a hash of each (keyed at random per
/// instance, so no sender can aim a collision), never the message: 96 KiB,
/// allocated once.
///
/// **Deliveries** run in a task of their own, in the order heard, never in
/// the connection's: a slow [`ResourceAccess`](crate::ResourceAccess) hook
/// holds up the messages behind it, while the connection goes on reading,
/// pinging and subscribing. Between the two, a queue holds at most 1024
/// messages and 4 MiB of their bytes; a message heard while it is full is
/// dropped (the newest, not the queued ones) and counted
/// ([`RedisBus::overflowed`]), with one warning per episode, until one is
/// queued again.
///
/// **On a cluster** (Redis ≥ 7), every channel lives on the shard that owns
/// its slot: an instance subscribes to it there with `SSUBSCRIBE`, once,
/// and a change is sent with one `SPUBLISH` per channel of the update,
/// each to its own shard, so a shard carries only the messages of its
/// channels, however many shards there are (a classic `PUBLISH` is carried
/// to every node of a cluster). The names and messages are the ones above;
/// a process publishes with `SPUBLISH` on the same channels. The bus
/// follows the cluster: a slot moved to another shard (resharding, the
/// shard's `SUNSUBSCRIBE`) is subscribed again on its new owner at once;
/// after a node's outage, a failed ping or a failed subscription, every
/// channel is subscribed again, until a whole pass succeeds; and every
/// 60 s all of them are, whatever the client reported (a channel already
/// subscribed is not subscribed twice). A slot move costs each channel of
/// the slot that this instance listens on one window, from the move to its
/// subscription on the new owner (a round trip once the old owner's
/// `SUNSUBSCRIBE` arrives), in which what is published on it is lost;
/// each window is counted ([`RedisBus::moved`]). On a cluster the bus is connected
/// while every node it knows answers its ping and a node reports
/// `cluster_state:ok`.
///
/// **Trust.** Any process that can publish on the prefix's channels can
/// send any change they carry: the crate's `docs/security.md` says what
/// it can and cannot do, and gives the Redis ACL user that holds the
/// instances to the prefix (connect as it with
/// `redis://user:password@host:port/`).
///
/// **Faults.** The bus connects in the background: an instance whose Redis
/// (or a node of its cluster) is down keeps serving its requests and its
/// own streams, logs the outage once, and retries with backoff (up to 5 s
/// apart); once connected it subscribes to every channel its streams
/// listen on, and a subscription that failed (a stream opened during an
/// outage) is made again at the next second's ping until Redis confirms
/// it. A publication while Redis is down returns [`BusError::Unavailable`]
/// (before the first connection) or [`BusError::Failed`] (a send that
/// failed: on a cluster, one to a shard that is down); every send is
/// bounded in time.
#[derive(Clone)]
pub struct RedisBus {
    inner: Arc<Inner>,
}

struct Inner {
    prefix: String,
    instance: String,
    seq: AtomicU64,
    deployment: Deployment,
    commands: mpsc::UnboundedSender<Command>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    publisher: Mutex<Option<Connection>>,
    /// The channels Redis confirmed this instance's subscription to.
    subscribed: Mutex<HashSet<String>>,
    /// Woken at every change of `subscribed`.
    changed: tokio::sync::Notify,
    up: AtomicBool,
    dropped: AtomicU64,
    overflowed: AtomicU64,
    duplicates: AtomicU64,
    /// Live channels that left with their slot (see [`RedisBus::moved`]).
    moved: AtomicU64,
    /// The bytes of the messages queued for delivery.
    queued: AtomicUsize,
    /// How this instance's own messages start.
    echo: Vec<u8>,
}

enum Command {
    Watch(String),
    Unwatch(String),
}

/// Why a [`RedisBus`] could not be made.
#[derive(Debug)]
pub struct RedisBusError(redis::RedisError);

impl std::fmt::Display for RedisBusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid Redis URL: {}", self.0)
    }
}

impl std::error::Error for RedisBusError {}

impl RedisBus {
    /// A bus on the Redis at `url` (`redis://host:port/db`), its channels
    /// under `prefix` (one per deployment). It connects once the hub
    /// starts it, in the background: this never waits for Redis.
    pub fn new(url: &str, prefix: &str) -> Result<Self, RedisBusError> {
        let deployment = Deployment::node(url).map_err(RedisBusError)?;
        Ok(Self::on(deployment, prefix))
    }

    /// A bus on the Redis Cluster (Redis ≥ 7) that the nodes at `urls`
    /// (`redis://host:port`, one or more) belong to, its channels under
    /// `prefix`, on sharded pub/sub: each channel is subscribed on the
    /// shard that owns its slot, once per instance, and a publication
    /// goes to the shards of its channels only. Slot moves and node
    /// restarts are followed. Like [`new`](Self::new), this never waits
    /// for Redis.
    ///
    /// A prefix holding `{` makes a hash tag of what follows it: keep it
    /// out, or every channel lands on one shard.
    pub fn cluster<S: AsRef<str>>(
        urls: impl IntoIterator<Item = S>,
        prefix: &str,
    ) -> Result<Self, RedisBusError> {
        let deployment = Deployment::cluster(urls).map_err(RedisBusError)?;
        Ok(Self::on(deployment, prefix))
    }

    fn on(deployment: Deployment, prefix: &str) -> Self {
        let (commands, receiver) = mpsc::unbounded_channel();
        let instance = instance_id();
        Self {
            inner: Arc::new(Inner {
                prefix: prefix.to_owned(),
                echo: wire::echo(&instance),
                instance,
                seq: AtomicU64::new(0),
                deployment,
                commands,
                receiver: Mutex::new(Some(receiver)),
                publisher: Mutex::new(None),
                subscribed: Mutex::new(HashSet::new()),
                changed: tokio::sync::Notify::new(),
                up: AtomicBool::new(false),
                dropped: AtomicU64::new(0),
                overflowed: AtomicU64::new(0),
                duplicates: AtomicU64::new(0),
                moved: AtomicU64::new(0),
                queued: AtomicUsize::new(0),
            }),
        }
    }

    /// How many messages from Redis were dropped as malformed: not the
    /// documented format, longer than 64 KiB, or naming an instance id
    /// longer than 64 bytes.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// How many messages from Redis were dropped because the delivery
    /// queue was full (deliveries were behind, as under a slow
    /// [`ResourceAccess`](crate::ResourceAccess) hook).
    pub fn overflowed(&self) -> u64 {
        self.inner.overflowed.load(Ordering::Relaxed)
    }

    /// How many messages from Redis were dropped as copies of one heard
    /// before: the same publication on another channel this instance
    /// listens on (an update below two honoured URIs), or a copy someone
    /// published again.
    pub fn duplicates(&self) -> u64 {
        self.inner.duplicates.load(Ordering::Relaxed)
    }

    /// How many times a channel this instance listens on left its shard
    /// while subscribed (on a cluster, its slot moved to another master)
    /// and was subscribed again on its new owner. Each is a window, from
    /// the slot's move to the new subscription, in which the channel's
    /// updates are lost: sharded pub/sub keeps no message for a subscriber
    /// that is not there.
    pub fn moved(&self) -> u64 {
        self.inner.moved.load(Ordering::Relaxed)
    }

    /// Whether the bus is connected to Redis now.
    pub fn is_connected(&self) -> bool {
        self.inner.up.load(Ordering::Relaxed)
    }

    /// This instance's name in the messages it sends.
    pub fn instance(&self) -> &str {
        &self.inner.instance
    }

    /// The channel of `channel`, under this bus's prefix.
    pub fn channel_name(&self, channel: Channel<'_>) -> String {
        channel_name(&self.inner.prefix, channel)
    }
}

/// An instance name unlikely to repeat: the process id and the clock.
fn instance_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    format!("{:x}-{nanos:x}", std::process::id())
}

impl Inner {
    /// Notes that `channel` is (or no longer is) subscribed.
    fn mark(&self, channel: &str, on: bool) {
        let mut subscribed = lock(&self.subscribed);
        match on {
            true => subscribed.insert(channel.to_owned()),
            false => subscribed.remove(channel),
        };
        drop(subscribed);
        self.changed.notify_waiters();
    }

    /// Forgets every subscription (the connection is gone).
    fn forget(&self) {
        lock(&self.subscribed).clear();
        self.changed.notify_waiters();
    }

    /// Whether each of `names` is subscribed, or waiting is pointless.
    fn settled(&self, names: &[String]) -> bool {
        let subscribed = lock(&self.subscribed);
        !self.up.load(Ordering::Relaxed) || names.iter().all(|name| subscribed.contains(name))
    }

    /// The change a message taken off the queue carries (see `parse`).
    fn unqueue(&self, payload: Vec<u8>) -> Option<Change> {
        let change = self.parse(&payload);
        self.queued.fetch_sub(payload.len(), Ordering::AcqRel);
        change
    }

    /// The change a message carries: none for this instance's own, nor
    /// for a malformed one (counted).
    fn parse(&self, payload: &[u8]) -> Option<Change> {
        let Some(message) = Message::read(payload) else {
            return self.malformed(payload.len());
        };
        if message.from() == self.instance {
            return None;
        }
        let change = message.into_change();
        change.or_else(|| self.malformed(payload.len()))
    }

    fn malformed(&self, bytes: usize) -> Option<Change> {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        metrics::bus_message_dropped(BusDropped::Malformed);
        tracing::debug!(bytes, "listen hub: a malformed Redis message was dropped");
        None
    }
}

impl Bus for RedisBus {
    fn start(&self, inbox: Inbox) {
        let Some(commands) = lock(&self.inner.receiver).take() else {
            return;
        };
        let (queue, queued) = mpsc::channel(QUEUE);
        tokio::spawn(deliver_queued(self.inner.clone(), queued, inbox));
        tokio::spawn(Link::new(self.inner.clone(), commands, queue).run());
    }

    fn watch(&self, channel: Channel<'_>) {
        let _ = self
            .inner
            .commands
            .send(Command::Watch(self.channel_name(channel)));
    }

    fn unwatch(&self, channel: Channel<'_>) {
        let _ = self
            .inner
            .commands
            .send(Command::Unwatch(self.channel_name(channel)));
    }

    fn ready(&self, channels: &[Channel<'_>]) -> BusReady {
        let inner = self.inner.clone();
        let names: Vec<String> = channels.iter().map(|c| self.channel_name(*c)).collect();
        Box::pin(async move {
            let wait = async {
                loop {
                    let changed = inner.changed.notified();
                    tokio::pin!(changed);
                    changed.as_mut().enable();
                    if inner.settled(&names) {
                        return;
                    }
                    changed.await;
                }
            };
            // A stream is not held back for long: past the bound it is
            // acknowledged anyway (and its instance's own changes reach it).
            let _ = tokio::time::timeout(TIMEOUT, wait).await;
        })
    }

    fn publish(&self, change: &Change) -> BusFuture {
        let inner = self.inner.clone();
        let seq = inner.seq.fetch_add(1, Ordering::Relaxed);
        let message = wire::random_id().map(|id| Message::new(&inner.instance, seq, id, change));
        let channels = channels_of(&inner.prefix, change);
        Box::pin(async move {
            let connection = lock(&inner.publisher).clone();
            let Some(mut connection) = connection else {
                return Err(BusError::Unavailable);
            };
            let message = message.map_err(|e| BusError::Failed(e.to_string()))?;
            let payload =
                serde_json::to_vec(&message).map_err(|e| BusError::Failed(e.to_string()))?;
            connection.publish(&channels, &payload).await
        })
    }
}

/// The delivery task: hands the queued messages to the hub one at a time,
/// in the order heard. A slow delivery (a slow hook) holds up only the
/// messages behind it, never the connection.
async fn deliver_queued(inner: Arc<Inner>, mut queue: mpsc::Receiver<Vec<u8>>, inbox: Inbox) {
    while let Some(payload) = queue.recv().await {
        if let Some(change) = inner.unqueue(payload) {
            inbox.deliver(change).await;
        }
    }
}
