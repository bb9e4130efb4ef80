//! [`RedisBus`]: the hub's bus across instances on Redis pub/sub.

use std::collections::HashSet;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Msg, PushInfo, PushKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::bus::{Bus, BusError, BusFuture, BusReady, Change, Channel, Inbox};
use super::ListChanged;
use crate::filter::stream::coverers;
#[cfg(test)]
use crate::filter::stream::covers;
use crate::Principal;

/// The longest message taken from a channel.
const MAX_MESSAGE: usize = 64 * 1024;
/// How long one send, subscription or ping may take.
const TIMEOUT: Duration = Duration::from_millis(500);
/// The longest wait between two attempts to connect.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The longest instance id a message may name.
const MAX_FROM: usize = 64;
/// How many recent messages are remembered, to deliver each once.
const RECENT: usize = 4096;

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
        Ok(Self {
            inner: Arc::new(Inner {
                prefix: prefix.to_owned(),
                instance: instance_id(),
                seq: AtomicU64::new(0),
                client,
                commands,
                receiver: Mutex::new(Some(receiver)),
                publisher: Mutex::new(None),
                subscribed: Mutex::new(HashSet::new()),
                changed: tokio::sync::Notify::new(),
                up: AtomicBool::new(false),
                dropped: AtomicU64::new(0),
            }),
        })
    }

    /// How many messages from Redis were dropped: malformed or too long.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
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

/// Locks `mutex`, poisoned or not: every change made under this bus's
/// locks is one insert, removal or swap, so none is left half done.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
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
}

impl Bus for RedisBus {
    fn start(&self, inbox: Inbox) {
        let Some(commands) = lock(&self.inner.receiver).take() else {
            return;
        };
        tokio::spawn(run(self.inner.clone(), commands, inbox));
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

/// The bus's task: connects (again) with backoff, keeps the channels the
/// hub's streams listen on subscribed, and hands messages to the hub.
async fn run(inner: Arc<Inner>, mut commands: mpsc::UnboundedReceiver<Command>, inbox: Inbox) {
    let mut live: HashSet<String> = HashSet::new();
    let mut recent = Recent::new();
    let mut backoff = Duration::from_millis(100);
    let mut outage_logged = false;
    loop {
        let (pushes, mut messages) = mpsc::unbounded_channel::<PushInfo>();
        let config = ConnectionManagerConfig::new()
            .set_push_sender(pushes)
            .set_automatic_resubscription()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT))
            .set_max_delay(MAX_BACKOFF);
        let connected = async {
            let subscriber = inner
                .client
                .get_connection_manager_with_config(config)
                .await?;
            let publisher = inner.client.get_connection_manager().await?;
            Ok::<_, redis::RedisError>((subscriber, publisher))
        };
        let (mut subscriber, publisher) = match tokio::time::timeout(TIMEOUT * 4, connected).await {
            Ok(Ok(connections)) => connections,
            failed => {
                if !outage_logged {
                    let why = match failed {
                        Ok(Err(error)) => error.to_string(),
                        _ => "timed out".to_owned(),
                    };
                    tracing::warn!(error = %why, "listen hub: Redis is unreachable; retrying");
                    outage_logged = true;
                }
                // Keep track of what the streams listen on meanwhile.
                let wait = tokio::time::sleep(backoff);
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        () = &mut wait => break,
                        command = commands.recv() => match command {
                            Some(command) => apply(&mut live, command),
                            None => return,
                        },
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        *lock(&inner.publisher) = Some(publisher);
        // Some live channel may not be subscribed (a subscription failed,
        // or the connection was lost): subscribed again at the next ping.
        let mut resync = !resubscribe(&inner, &mut subscriber, &live).await;
        inner.up.store(true, Ordering::Relaxed);
        if outage_logged {
            tracing::info!("listen hub: Redis is reachable again");
        } else {
            tracing::info!("listen hub: connected to Redis");
        }
        outage_logged = false;
        backoff = Duration::from_millis(100);
        let mut ping = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                command = commands.recv() => {
                    let Some(command) = command else { return };
                    let (channel, on) = match &command {
                        Command::Watch(channel) => (channel.clone(), true),
                        Command::Unwatch(channel) => (channel.clone(), false),
                    };
                    apply(&mut live, command);
                    if !on {
                        inner.mark(&channel, false);
                    }
                    match subscribe(&mut subscriber, &channel, on).await {
                        Ok(()) if on => inner.mark(&channel, true),
                        Ok(()) => {}
                        Err(error) => {
                            tracing::debug!(%error, "listen hub: a Redis (un)subscription failed");
                            resync |= on;
                        }
                    }
                }
                push = messages.recv() => match push {
                    Some(push) => match push.kind {
                        PushKind::Message => {
                            if let Some(message) = Msg::from_push_info(push) {
                                receive(&inner, &inbox, &mut recent, message.get_payload_bytes()).await;
                            }
                        }
                        PushKind::Disconnection => {
                            // Logged once per outage: only the change of state.
                            if inner.up.swap(false, Ordering::Relaxed) {
                                tracing::warn!("listen hub: Redis connection lost; reconnecting");
                            }
                            inner.forget();
                            resync = true;
                        }
                        PushKind::Subscribe => {
                            // The manager subscribes again by itself after an outage.
                            if let Some(redis::Value::BulkString(name)) = push.data.first() {
                                if let Ok(name) = std::str::from_utf8(name) {
                                    if live.contains(name) {
                                        inner.mark(name, true);
                                    }
                                }
                            }
                            if !inner.up.swap(true, Ordering::Relaxed) {
                                tracing::info!("listen hub: Redis is reachable again");
                            }
                        }
                        _ => {}
                    },
                    None => break,
                },
                _ = ping.tick() => {
                    // A manager reconnects on the next command that fails:
                    // an idle one must be poked.
                    let pinged = tokio::time::timeout(
                        TIMEOUT,
                        redis::cmd("PING").query_async::<()>(&mut subscriber),
                    )
                    .await;
                    if !matches!(pinged, Ok(Ok(()))) {
                        if inner.up.swap(false, Ordering::Relaxed) {
                            tracing::warn!("listen hub: Redis connection lost; reconnecting");
                        }
                        resync = true;
                        continue;
                    }
                    // A ping that only timed out leaves no other sign of
                    // being answered again.
                    if !inner.up.swap(true, Ordering::Relaxed) {
                        tracing::info!("listen hub: Redis is reachable again");
                    }
                    if resync {
                        resync = !resubscribe(&inner, &mut subscriber, &live).await;
                    }
                }
            }
        }
    }
}

fn apply(live: &mut HashSet<String>, command: Command) {
    match command {
        Command::Watch(channel) => {
            live.insert(channel);
        }
        Command::Unwatch(channel) => {
            live.remove(&channel);
        }
    }
}

/// Subscribes to every channel of `live` that Redis has not confirmed;
/// true when none failed.
async fn resubscribe(
    inner: &Inner,
    subscriber: &mut ConnectionManager,
    live: &HashSet<String>,
) -> bool {
    let missing: Vec<&String> = {
        let subscribed = lock(&inner.subscribed);
        live.iter()
            .filter(|channel| !subscribed.contains(*channel))
            .collect()
    };
    let mut all = true;
    for channel in missing {
        match subscribe(subscriber, channel, true).await {
            Ok(()) => inner.mark(channel, true),
            Err(error) => {
                tracing::debug!(%error, "listen hub: a Redis subscription failed");
                all = false;
            }
        }
    }
    all
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

/// Hands one message from Redis to the hub: only a well-formed one, not
/// one already heard (the same bytes on another channel), not its own.
async fn receive(inner: &Inner, inbox: &Inbox, recent: &mut Recent, payload: &[u8]) {
    if payload.len() > MAX_MESSAGE {
        inner.malformed(payload.len());
        return;
    }
    if !recent.first(payload) {
        return;
    }
    if let Some(change) = inner.parse(payload) {
        inbox.deliver(change).await;
    }
}

impl Inner {
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
        let bus = RedisBus::new("redis://127.0.0.1:1/", "p").unwrap();
        let inner = &bus.inner;
        let mut recent = Recent::new();
        assert_eq!(Recent::BYTES, 96 * 1024);
        let flood = 20_000;
        for i in 0..flood {
            let from = format!("{i:x}{}", "x".repeat(1_000));
            let payload = format!(
                r#"{{"v":1,"from":"{from}","seq":{i},"change":{{"type":"list_changed","list":"tools"}}}}"#
            );
            assert!(recent.first(payload.as_bytes()));
            assert_eq!(inner.parse(payload.as_bytes()), None);
            assert!(recent.bytes() <= Recent::BYTES);
        }
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
