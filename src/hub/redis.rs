//! [`RedisBus`]: the hub's bus across instances on Redis pub/sub.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{PushInfo, PushKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::bus::{Bus, BusError, BusFuture, BusReady, Change, Channel, Inbox};
use super::ListChanged;
use crate::filter::stream::coverers;
#[cfg(test)]
use crate::filter::stream::covers;
use crate::sync::lock;
use crate::Principal;

/// The longest message taken from a channel.
const MAX_MESSAGE: usize = 64 * 1024;
/// How long one send, subscription or ping may take.
const TIMEOUT: Duration = Duration::from_millis(500);
/// How often the connection is pinged.
const PING: Duration = Duration::from_secs(1);
/// The longest wait between two attempts to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The longest instance id a message may name.
const MAX_FROM: usize = 64;
/// How many recent messages are remembered, to deliver each once.
const RECENT: usize = 4096;
/// Most messages heard and not yet delivered.
const QUEUE: usize = 1024;
/// Most bytes of the messages heard and not yet delivered.
const QUEUE_BYTES: usize = 4 * 1024 * 1024;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A [`Bus`] on Redis pub/sub (feature `redis`), on redis-rs's
/// connection manager over RESP3.
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
/// {"v":1,"from":"<instance>","seq":7,"change":{"type":"resource_updated","uri":"file:///logs/today"}}
/// {"v":1,"from":"<instance>","seq":8,"change":{"type":"list_changed","list":"tools"}}
/// {"v":1,"from":"<instance>","seq":9,"change":{"type":"task_status","owner":"alice","taskId":"t-1","params":{"status":"completed"}}}
/// ```
///
/// `from` names the publishing instance, at most 64 bytes (its own
/// messages are ignored: it delivered them already); `seq` numbers its
/// messages, so that no two of them are the same bytes. A message that is
/// not this, or longer than 64 KiB, is dropped and counted
/// ([`RedisBus::dropped`]).
///
/// **Each message once.** A publication reaches an instance once per
/// channel it listens on among the update's; the same bytes heard again
/// among the last 4096 messages are one message, delivered once. Nothing
/// else is deduplicated (never by the `from` and `seq` a message claims),
/// so no message can stand in for another instance's next one. The bus
/// remembers a hash of each (keyed at random per instance, so no sender can
/// aim a collision), never the message: 96 KiB, allocated once.
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
/// **Trust.** Any process that can publish on the prefix's channels can
/// send any change they carry: the crate's `docs/security.md` says what
/// it can and cannot do, and gives the Redis ACL user that holds the
/// instances to the prefix (connect as it with
/// `redis://user:password@host:port/`).
///
/// **Faults.** The bus connects in the background: an instance whose Redis
/// is down keeps serving its requests and its own streams, logs the outage
/// once, and retries with backoff (up to 5 s apart); once connected it
/// subscribes to every channel its streams listen on, and a subscription
/// that failed (a stream opened during an outage) is made again at the
/// next second's ping until Redis confirms it. A publication while
/// Redis is down returns [`BusError::Unavailable`]; every send is bounded
/// in time.
#[derive(Clone)]
pub struct RedisBus {
    inner: Arc<Inner>,
}

struct Inner {
    prefix: String,
    instance: String,
    seq: AtomicU64,
    client: redis::Client,
    commands: mpsc::UnboundedSender<Command>,
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Command>>>,
    publisher: Mutex<Option<ConnectionManager>>,
    /// The channels Redis confirmed this instance's subscription to.
    subscribed: Mutex<HashSet<String>>,
    /// Woken at every change of `subscribed`.
    changed: tokio::sync::Notify,
    up: AtomicBool,
    dropped: AtomicU64,
    overflowed: AtomicU64,
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
        let separator = if url.contains('?') { '&' } else { '?' };
        let client = redis::Client::open(format!("{url}{separator}protocol=resp3"))
            .map_err(RedisBusError)?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let instance = instance_id();
        Ok(Self {
            inner: Arc::new(Inner {
                prefix: prefix.to_owned(),
                echo: format!(r#"{{"v":1,"from":"{instance}","#).into_bytes(),
                instance,
                seq: AtomicU64::new(0),
                client,
                commands,
                receiver: Mutex::new(Some(receiver)),
                publisher: Mutex::new(None),
                subscribed: Mutex::new(HashSet::new()),
                changed: tokio::sync::Notify::new(),
                up: AtomicBool::new(false),
                dropped: AtomicU64::new(0),
                overflowed: AtomicU64::new(0),
                queued: AtomicUsize::new(0),
            }),
        })
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

fn channel_name(prefix: &str, channel: Channel<'_>) -> String {
    match channel {
        Channel::Resource(uri) => format!("{prefix}:r:{}", B64.encode(uri)),
        Channel::List(list) => format!("{prefix}:l:{}", list_name(list)),
        Channel::Task { owner, id } => format!(
            "{prefix}:t:{}:{}",
            B64.encode(owner.as_str()),
            B64.encode(id)
        ),
    }
}

fn list_name(list: ListChanged) -> &'static str {
    match list {
        ListChanged::Tools => "tools",
        ListChanged::Prompts => "prompts",
        ListChanged::Resources => "resources",
    }
}

/// The channels a change is published on: for an update, its URI's and
/// every covering URI's.
fn channels_of(prefix: &str, change: &Change) -> Vec<String> {
    match change {
        Change::ResourceUpdated { uri } => coverers(uri)
            .map(|honoured| channel_name(prefix, Channel::Resource(honoured)))
            .collect(),
        Change::ListChanged(list) => vec![channel_name(prefix, Channel::List(*list))],
        Change::TaskStatus { owner, task_id, .. } => {
            vec![channel_name(prefix, Channel::Task { owner, id: task_id })]
        }
    }
}

/// A message on the wire.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Message {
    v: u32,
    from: String,
    seq: u64,
    change: Wire,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
enum Wire {
    ResourceUpdated {
        uri: String,
    },
    ListChanged {
        list: String,
    },
    TaskStatus {
        owner: String,
        #[serde(rename = "taskId")]
        task_id: String,
        params: Map<String, Value>,
    },
}

impl Wire {
    fn of(change: &Change) -> Self {
        match change {
            Change::ResourceUpdated { uri } => Wire::ResourceUpdated { uri: uri.clone() },
            Change::ListChanged(list) => Wire::ListChanged {
                list: list_name(*list).to_owned(),
            },
            Change::TaskStatus {
                owner,
                task_id,
                params,
            } => Wire::TaskStatus {
                owner: owner.as_str().to_owned(),
                task_id: task_id.clone(),
                params: params.clone(),
            },
        }
    }

    fn into_change(self) -> Option<Change> {
        Some(match self {
            Wire::ResourceUpdated { uri } => Change::ResourceUpdated { uri },
            Wire::ListChanged { list } => Change::ListChanged(match list.as_str() {
                "tools" => ListChanged::Tools,
                "prompts" => ListChanged::Prompts,
                "resources" => ListChanged::Resources,
                _ => return None,
            }),
            Wire::TaskStatus {
                owner,
                task_id,
                params,
            } => Change::TaskStatus {
                owner: Principal::new(owner),
                task_id,
                params,
            },
        })
    }
}

impl Inner {
    /// A connection for subscriptions, its pushes sent to `pushes`, and
    /// one for publications.
    async fn connect(
        &self,
        pushes: mpsc::UnboundedSender<PushInfo>,
    ) -> redis::RedisResult<(ConnectionManager, ConnectionManager)> {
        let config = ConnectionManagerConfig::new()
            .set_push_sender(pushes)
            .set_automatic_resubscription()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_max_delay(MAX_BACKOFF);
        let subscriber = self
            .client
            .get_connection_manager_with_config(config)
            .await?;
        let publisher = self.client.get_connection_manager().await?;
        Ok((subscriber, publisher))
    }

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
        let message = Message {
            v: 1,
            from: inner.instance.clone(),
            seq: inner.seq.fetch_add(1, Ordering::Relaxed),
            change: Wire::of(change),
        };
        let channels = channels_of(&inner.prefix, change);
        Box::pin(async move {
            let connection = lock(&inner.publisher).clone();
            let Some(mut connection) = connection else {
                return Err(BusError::Unavailable);
            };
            let payload =
                serde_json::to_vec(&message).map_err(|e| BusError::Failed(e.to_string()))?;
            let mut pipe = redis::pipe();
            for channel in &channels {
                pipe.cmd("PUBLISH").arg(channel).arg(&payload).ignore();
            }
            match tokio::time::timeout(TIMEOUT, pipe.query_async::<()>(&mut connection)).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(BusError::Failed(error.to_string())),
                Err(_) => Err(BusError::Failed("timed out".to_owned())),
            }
        })
    }
}

/// The connection task: connects (again) with backoff, keeps the channels
/// the hub's streams listen on subscribed, pings, and queues what it hears
/// for the delivery task. It never waits for a delivery.
struct Link {
    inner: Arc<Inner>,
    commands: mpsc::UnboundedReceiver<Command>,
    /// The channels the hub's streams listen on.
    live: HashSet<String>,
    recent: Recent,
    queue: mpsc::Sender<Vec<u8>>,
    /// The overflow count when the queue was last found full, while it
    /// still is: one episode, logged once.
    overflow: Option<u64>,
    /// Some live channel may not be subscribed (a subscription failed, or
    /// the connection was lost): subscribed again at the next ping.
    resync: bool,
    backoff: Duration,
    logged: Logged,
}

/// What the connection task last logged of Redis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Logged {
    Nothing,
    Up,
    Down,
}

/// Why a connection was left.
enum Left {
    /// The bus is gone.
    Closed,
    /// The connection is gone: make another.
    Lost,
}

impl Link {
    fn new(
        inner: Arc<Inner>,
        commands: mpsc::UnboundedReceiver<Command>,
        queue: mpsc::Sender<Vec<u8>>,
    ) -> Self {
        Self {
            inner,
            commands,
            live: HashSet::new(),
            recent: Recent::new(),
            queue,
            overflow: None,
            resync: false,
            backoff: Duration::from_millis(100),
            logged: Logged::Nothing,
        }
    }

    async fn run(mut self) {
        while let Some((mut subscriber, messages)) = self.connect().await {
            if let Left::Closed = self.serve(&mut subscriber, messages).await {
                return;
            }
        }
    }

    /// Connects, retrying with backoff; `None` once the bus is gone.
    async fn connect(&mut self) -> Option<(ConnectionManager, mpsc::UnboundedReceiver<PushInfo>)> {
        loop {
            let (pushes, messages) = mpsc::unbounded_channel();
            match tokio::time::timeout(TIMEOUT * 4, self.inner.connect(pushes)).await {
                Ok(Ok((subscriber, publisher))) => {
                    *lock(&self.inner.publisher) = Some(publisher);
                    self.backoff = Duration::from_millis(100);
                    return Some((subscriber, messages));
                }
                Ok(Err(error)) => self.down(&error.to_string()),
                Err(_) => self.down("timed out"),
            }
            if !self.wait(self.backoff).await {
                return None;
            }
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Waits `time`, keeping track of what the streams listen on
    /// meanwhile; false once the bus is gone.
    async fn wait(&mut self, time: Duration) -> bool {
        let wait = tokio::time::sleep(time);
        tokio::pin!(wait);
        loop {
            tokio::select! {
                () = &mut wait => return true,
                command = self.commands.recv() => match command {
                    Some(command) => {
                        self.track(command);
                    }
                    None => return false,
                },
            }
        }
    }

    /// Serves one connection until it is lost or the bus is gone.
    async fn serve(
        &mut self,
        subscriber: &mut ConnectionManager,
        mut messages: mpsc::UnboundedReceiver<PushInfo>,
    ) -> Left {
        self.resync = !self.resubscribe(subscriber).await;
        self.up();
        let mut ping = tokio::time::interval(PING);
        loop {
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(command) => self.command(subscriber, command).await,
                    None => return Left::Closed,
                },
                push = messages.recv() => match push {
                    Some(push) => self.push(push),
                    None => return Left::Lost,
                },
                _ = ping.tick() => self.ping(subscriber).await,
            }
        }
    }

    /// Notes a stream's change of channel; the channel and whether it is
    /// now listened on.
    fn track(&mut self, command: Command) -> (String, bool) {
        match command {
            Command::Watch(channel) => {
                self.live.insert(channel.clone());
                (channel, true)
            }
            Command::Unwatch(channel) => {
                self.live.remove(&channel);
                (channel, false)
            }
        }
    }

    /// Subscribes to a channel a stream listens on, or leaves one no stream
    /// listens on any more.
    async fn command(&mut self, subscriber: &mut ConnectionManager, command: Command) {
        let (channel, on) = self.track(command);
        if !on {
            self.inner.mark(&channel, false);
        }
        match subscribe(subscriber, &channel, on).await {
            Ok(()) if on => self.inner.mark(&channel, true),
            Ok(()) => {}
            Err(error) => {
                tracing::debug!(%error, "listen hub: a Redis (un)subscription failed");
                self.resync |= on;
            }
        }
    }

    fn push(&mut self, push: PushInfo) {
        match push.kind {
            PushKind::Message => {
                if let Some(payload) = payload(push) {
                    self.hear(payload);
                }
            }
            PushKind::Disconnection => {
                self.down("connection lost");
                self.inner.forget();
                self.resync = true;
            }
            PushKind::Subscribe => {
                // The manager subscribes again by itself after an outage.
                if let Some(redis::Value::BulkString(name)) = push.data.first() {
                    if let Ok(name) = std::str::from_utf8(name) {
                        if self.live.contains(name) {
                            self.inner.mark(name, true);
                        }
                    }
                }
                self.up();
            }
            _ => {}
        }
    }

    /// A manager reconnects on the next command that fails: an idle one
    /// must be poked.
    async fn ping(&mut self, subscriber: &mut ConnectionManager) {
        let pinged =
            tokio::time::timeout(TIMEOUT, redis::cmd("PING").query_async::<()>(subscriber)).await;
        if !matches!(pinged, Ok(Ok(()))) {
            self.down("a ping was not answered");
            self.resync = true;
            return;
        }
        // A ping that only timed out leaves no other sign of being
        // answered again.
        self.up();
        if self.resync {
            self.resync = !self.resubscribe(subscriber).await;
        }
    }

    /// Subscribes to every live channel that Redis has not confirmed; true
    /// when none failed.
    async fn resubscribe(&self, subscriber: &mut ConnectionManager) -> bool {
        let missing: Vec<String> = {
            let subscribed = lock(&self.inner.subscribed);
            self.live
                .iter()
                .filter(|channel| !subscribed.contains(*channel))
                .cloned()
                .collect()
        };
        let mut all = true;
        for channel in missing {
            match subscribe(subscriber, &channel, true).await {
                Ok(()) => self.inner.mark(&channel, true),
                Err(error) => {
                    tracing::debug!(%error, "listen hub: a Redis subscription failed");
                    all = false;
                }
            }
        }
        all
    }

    /// Queues one message for delivery: not a long one (counted), not one
    /// of this instance's own, not one already heard (the same bytes on
    /// another channel).
    fn hear(&mut self, payload: Vec<u8>) {
        if payload.len() > MAX_MESSAGE {
            self.inner.malformed(payload.len());
            return;
        }
        // Its own messages start so (the delivery task checks `from` too).
        if payload.starts_with(&self.inner.echo) || !self.recent.first(&payload) {
            return;
        }
        self.offer(payload);
    }

    /// Queues `payload` when the queue has room; else drops it and counts
    /// it, logging once until the queue has room again.
    fn offer(&mut self, payload: Vec<u8>) {
        let bytes = payload.len();
        let queued = &self.inner.queued;
        // Added first: the delivery task may take it off at once.
        let full = queued.fetch_add(bytes, Ordering::AcqRel) + bytes > QUEUE_BYTES
            || self.queue.try_send(payload).is_err();
        if !full {
            if let Some(before) = self.overflow.take() {
                let dropped = self.inner.overflowed.load(Ordering::Relaxed) - before;
                tracing::info!(dropped, "listen hub: Redis deliveries caught up");
            }
            return;
        }
        queued.fetch_sub(bytes, Ordering::AcqRel);
        let count = self.inner.overflowed.fetch_add(1, Ordering::Relaxed);
        if self.overflow.is_none() {
            tracing::warn!(
                "listen hub: Redis deliveries are behind; messages are dropped until they catch up"
            );
            self.overflow = Some(count);
        }
    }

    /// Redis answers: logged when it did not before.
    fn up(&mut self) {
        self.inner.up.store(true, Ordering::Relaxed);
        match self.logged {
            Logged::Up => return,
            Logged::Nothing => tracing::info!("listen hub: connected to Redis"),
            Logged::Down => tracing::info!("listen hub: Redis is reachable again"),
        }
        self.logged = Logged::Up;
    }

    /// Redis does not answer: logged once per outage.
    fn down(&mut self, why: &str) {
        self.inner.up.store(false, Ordering::Relaxed);
        if self.logged != Logged::Down {
            tracing::warn!(
                error = why,
                "listen hub: Redis is unreachable; reconnecting"
            );
            self.logged = Logged::Down;
        }
    }
}

/// The payload of a message push.
fn payload(push: PushInfo) -> Option<Vec<u8>> {
    match push.data.into_iter().nth(1)? {
        redis::Value::BulkString(payload) => Some(payload),
        _ => None,
    }
}

async fn subscribe(
    connection: &mut ConnectionManager,
    channel: &str,
    on: bool,
) -> Result<(), String> {
    let done = match on {
        true => tokio::time::timeout(TIMEOUT, connection.subscribe(channel)).await,
        false => tokio::time::timeout(TIMEOUT, connection.unsubscribe(channel)).await,
    };
    match done {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err("timed out".to_owned()),
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

impl Inner {
    /// The change a message taken off the queue carries (see `parse`).
    fn unqueue(&self, payload: Vec<u8>) -> Option<Change> {
        let change = self.parse(&payload);
        self.queued.fetch_sub(payload.len(), Ordering::AcqRel);
        change
    }

    /// The change a message carries: none for this instance's own, nor
    /// for a malformed one (counted).
    fn parse(&self, payload: &[u8]) -> Option<Change> {
        let message = serde_json::from_slice::<Message>(payload)
            .ok()
            .filter(|message| message.v == 1 && message.from.len() <= MAX_FROM);
        let Some(message) = message else {
            return self.malformed(payload.len());
        };
        if message.from == self.instance {
            return None;
        }
        let change = message.change.into_change();
        change.or_else(|| self.malformed(payload.len()))
    }

    fn malformed(&self, bytes: usize) -> Option<Change> {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(bytes, "listen hub: a malformed Redis message was dropped");
        None
    }
}

/// The keyed hashes of the last [`RECENT`] messages heard, to deliver
/// each once: a ring in the order heard, and an index of the same hashes
/// (open addressing, linear probing, at most half full). Both are
/// allocated once, [`Recent::BYTES`] in all, whatever the messages hold.
struct Recent {
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
    const BYTES: usize = 3 * RECENT * std::mem::size_of::<u64>();

    fn new() -> Self {
        Self {
            keys: std::hash::RandomState::new(),
            ring: vec![FREE; RECENT].into_boxed_slice(),
            next: 0,
            index: vec![FREE; 2 * RECENT].into_boxed_slice(),
        }
    }

    /// True the first time these bytes are heard among the recent messages.
    fn first(&mut self, payload: &[u8]) -> bool {
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
    fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.ring) + std::mem::size_of_val(&*self.index)
    }
}

#[cfg(test)]
mod tests {
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

    /// A flood of messages naming a long instance id: each is dropped and
    /// counted, nothing reaches the hub, and what the bus remembers of them
    /// never passes its bound (96 KiB), as documented.
    #[test]
    fn long_senders_are_dropped_and_the_dedup_state_stays_bounded() {
        let (bus, mut link, mut queued) = link();
        assert_eq!(Recent::BYTES, 96 * 1024);
        let flood = 20_000;
        for i in 0..flood {
            let from = format!("{i:x}{}", "x".repeat(1_000));
            let payload = format!(
                r#"{{"v":1,"from":"{from}","seq":{i},"change":{{"type":"list_changed","list":"tools"}}}}"#
            );
            link.hear(payload.into_bytes());
            let heard = queued.try_recv().unwrap();
            assert_eq!(bus.inner.unqueue(heard), None);
            assert!(link.recent.bytes() <= Recent::BYTES);
        }
        let inner = &bus.inner;
        assert_eq!(bus.dropped(), flood);
        // The longest id taken is 64 bytes.
        let at_most = |from: &str| {
            format!(
                r#"{{"v":1,"from":"{from}","seq":1,"change":{{"type":"list_changed","list":"tools"}}}}"#
            )
        };
        let longest = inner.parse(at_most(&"y".repeat(MAX_FROM)).as_bytes());
        assert_eq!(longest, Some(Change::ListChanged(ListChanged::Tools)));
        assert_eq!(
            inner.parse(at_most(&"y".repeat(MAX_FROM + 1)).as_bytes()),
            None
        );
        assert_eq!(bus.dropped(), flood + 1);
    }

    /// A connection task of a bus that is never started, and its queue.
    fn link() -> (RedisBus, Link, mpsc::Receiver<Vec<u8>>) {
        let bus = RedisBus::new("redis://127.0.0.1:1/", "p").unwrap();
        let (_, commands) = mpsc::unbounded_channel();
        let (queue, queued) = mpsc::channel(QUEUE);
        let link = Link::new(bus.inner.clone(), commands, queue);
        (bus, link, queued)
    }

    /// The queue holds the oldest messages: past `QUEUE` of them, or
    /// `QUEUE_BYTES` of their bytes, the newest are dropped and counted in
    /// one episode, which ends once one is queued again.
    #[test]
    fn a_full_queue_drops_the_newest_and_counts_them() {
        let (bus, mut link, mut queued) = link();
        for i in 0..QUEUE + 10 {
            link.hear(format!("message {i}").into_bytes());
        }
        assert_eq!((bus.overflowed(), bus.dropped()), (10, 0));
        assert!(link.overflow.is_some());
        let oldest = queued.try_recv().unwrap();
        assert_eq!(oldest, b"message 0");
        let _ = bus.inner.unqueue(oldest);
        link.hear(b"one more".to_vec());
        assert_eq!(bus.overflowed(), 10);
        assert!(link.overflow.is_none());
        while let Ok(payload) = queued.try_recv() {
            let _ = bus.inner.unqueue(payload);
        }
        assert_eq!(bus.inner.queued.load(Ordering::Relaxed), 0);

        // Large messages: as many as `QUEUE_BYTES` holds.
        let large = 60 * 1024;
        for i in 0..100 {
            let mut payload = format!("large {i} ").into_bytes();
            payload.resize(large, b'x');
            link.hear(payload);
        }
        let fit = QUEUE_BYTES / large;
        assert_eq!(bus.overflowed(), 10 + (100 - fit) as u64);
        assert_eq!(bus.inner.queued.load(Ordering::Relaxed), fit * large);
    }

    /// The connection task queues neither this instance's own messages
    /// (they start with its `echo`) nor a message longer than 64 KiB.
    #[test]
    fn its_own_and_long_messages_are_not_queued() {
        let (bus, mut link, mut queued) = link();
        let own = Message {
            v: 1,
            from: bus.instance().to_owned(),
            seq: 0,
            change: Wire::of(&Change::ListChanged(ListChanged::Tools)),
        };
        let own = serde_json::to_vec(&own).unwrap();
        assert!(own.starts_with(&bus.inner.echo));
        assert_eq!(bus.inner.parse(&own), None);
        link.hear(own);
        link.hear(vec![b' '; MAX_MESSAGE + 1]);
        assert!(queued.try_recv().is_err());
        assert_eq!((bus.dropped(), bus.overflowed()), (1, 0));
    }

    #[test]
    fn channel_names_are_injective_and_under_the_prefix() {
        let alice = Principal::new("a:b");
        let names = [
            channel_name("p", Channel::Resource("file:///a:b")),
            channel_name("p", Channel::Resource("file:///a")),
            channel_name("p", Channel::List(ListChanged::Tools)),
            channel_name(
                "p",
                Channel::Task {
                    owner: &alice,
                    id: "c",
                },
            ),
            channel_name(
                "p",
                Channel::Task {
                    owner: &Principal::new("a"),
                    id: "b:c",
                },
            ),
        ];
        let distinct: HashSet<&String> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "{names:?}");
        assert!(names.iter().all(|name| name.starts_with("p:")));
        assert_eq!(names[2], "p:l:tools");
        // Any byte a URI may hold stays inside its own segment.
        let odd = channel_name("p", Channel::Resource("x:*?[]\n\u{0}é"));
        assert_eq!(odd.matches(':').count(), 2);
    }

    #[test]
    fn an_update_goes_to_the_channel_of_every_covering_uri() {
        let names = channels_of(
            "p",
            &Change::ResourceUpdated {
                uri: "file:///logs/today".into(),
            },
        );
        let expected: Vec<String> = [
            "file:",
            "file:/",
            "file://",
            "file:///",
            "file:///logs",
            "file:///logs/",
            "file:///logs/today",
        ]
        .into_iter()
        .filter(|h| covers(h.as_bytes(), b"file:///logs/today"))
        .map(|h| channel_name("p", Channel::Resource(h)))
        .collect();
        assert_eq!(names, expected);
        assert!(names.contains(&channel_name("p", Channel::Resource("file:///logs"))));
        // A URI with a dot segment is covered only by itself.
        let names = channels_of(
            "p",
            &Change::ResourceUpdated {
                uri: "file:///logs/../etc".into(),
            },
        );
        assert_eq!(
            names,
            [channel_name("p", Channel::Resource("file:///logs/../etc"))]
        );
    }

    #[test]
    fn messages_round_trip_and_strangers_are_refused() {
        let change = Change::TaskStatus {
            owner: Principal::new("alice"),
            task_id: "t-1".into(),
            params: serde_json::json!({"status": "completed"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let message = Message {
            v: 1,
            from: "i".into(),
            seq: 3,
            change: Wire::of(&change),
        };
        let text = serde_json::to_string(&message).unwrap();
        assert_eq!(
            text,
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"task_status","owner":"alice","taskId":"t-1","params":{"status":"completed"}}}"#
        );
        let back: Message = serde_json::from_str(&text).unwrap();
        assert_eq!(back.change.into_change(), Some(change));
        for bad in [
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"list_changed","list":"widgets"}}"#,
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"deleted"}}"#,
            r#"{"v":1,"from":"i","seq":3,"change":{"type":"resource_updated","uri":"a","extra":1}}"#,
            r#"{"v":1,"from":"i","change":{"type":"resource_updated","uri":"a"}}"#,
        ] {
            let parsed = serde_json::from_str::<Message>(bad)
                .ok()
                .and_then(|m| m.change.into_change());
            assert_eq!(parsed, None, "{bad}");
        }
    }
}
