//! [`RedisBus`]: the hub's bus across instances on Redis pub/sub.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
/// `from` names the publishing instance (its own messages are ignored: it
/// delivered them already), `seq` numbers its messages (one sent on several
/// channels is delivered once). A message that is not this, or longer than
/// 64 KiB, is dropped and counted ([`RedisBus::dropped`]).
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

impl Inner {
    /// Notes that `channel` is (or no longer is) subscribed.
    fn mark(&self, channel: &str, on: bool) {
        let mut subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        match on {
            true => subscribed.insert(channel.to_owned()),
            false => subscribed.remove(channel),
        };
        drop(subscribed);
        self.changed.notify_waiters();
    }

    /// Forgets every subscription (the connection is gone).
    fn forget(&self) {
        self.subscribed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.changed.notify_waiters();
    }

    /// Whether each of `names` is subscribed, or waiting is pointless.
    fn settled(&self, names: &[String]) -> bool {
        let subscribed = self.subscribed.lock().unwrap_or_else(|p| p.into_inner());
        !self.up.load(Ordering::Relaxed) || names.iter().all(|name| subscribed.contains(name))
    }
}

impl Bus for RedisBus {
    fn start(&self, inbox: Inbox) {
        let Some(commands) = self
            .inner
            .receiver
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
        else {
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
            let connection = inner
                .publisher
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone();
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
    let mut recent = Recent::default();
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
        *inner.publisher.lock().unwrap_or_else(|p| p.into_inner()) = Some(publisher);
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
        let subscribed = inner.subscribed.lock().unwrap_or_else(|p| p.into_inner());
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

/// Hands one message from Redis to the hub: not its own, not one already
/// delivered, and only a well-formed one.
async fn receive(inner: &Inner, inbox: &Inbox, recent: &mut Recent, payload: &[u8]) {
    let parsed = (payload.len() <= MAX_MESSAGE)
        .then(|| serde_json::from_slice::<Message>(payload).ok())
        .flatten()
        .filter(|message| message.v == 1);
    let Some(message) = parsed else {
        inner.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            bytes = payload.len(),
            "listen hub: a malformed Redis message was dropped"
        );
        return;
    };
    if message.from == inner.instance || !recent.first(&message.from, message.seq) {
        return;
    }
    match message.change.into_change() {
        Some(change) => {
            inbox.deliver(change).await;
        }
        None => {
            inner.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The last messages delivered, by (instance, seq).
#[derive(Default)]
struct Recent {
    order: VecDeque<(String, u64)>,
    seen: HashSet<(String, u64)>,
}

impl Recent {
    /// True the first time (`from`, `seq`) is seen among the recent ones.
    fn first(&mut self, from: &str, seq: u64) -> bool {
        let key = (from.to_owned(), seq);
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > RECENT {
            if let Some(old) = self.order.pop_front() {
                self.seen.remove(&old);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
