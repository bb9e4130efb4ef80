//! The bus's connection task.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use redis::PushInfo;
use tokio::sync::mpsc;

use super::deployment::{Connection, Heard, MAX_BACKOFF};
use super::recent::Recent;
use super::{Command, Inner, QUEUE_BYTES, TIMEOUT};
use crate::metrics::{self, BusDropped};
use crate::sync::lock;

/// The longest message taken from a channel.
const MAX_MESSAGE: usize = 64 * 1024;
/// How often the connection is pinged.
const PING: Duration = Duration::from_secs(1);
/// Every how many pings a cluster's live channels are all subscribed
/// again, whatever its client reported.
const CLUSTER_RESYNC: u32 = 60;

/// The connection task: connects (again) with backoff, keeps the channels
/// the hub's streams listen on subscribed, pings, and queues what it hears
/// for the delivery task. It never waits for a delivery.
pub(super) struct Link {
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
    /// The pings sent on this bus's connections.
    pings: u32,
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
    pub(super) fn new(
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
            pings: 0,
            backoff: Duration::from_millis(100),
            logged: Logged::Nothing,
        }
    }

    pub(super) async fn run(mut self) {
        metrics::bus_connected(false);
        while let Some((mut subscriber, messages)) = self.connect().await {
            if let Left::Closed = self.serve(&mut subscriber, messages).await {
                break;
            }
        }
        metrics::bus_connected(false);
    }

    /// Connects, retrying with backoff; `None` once the bus is gone.
    async fn connect(&mut self) -> Option<(Connection, mpsc::UnboundedReceiver<PushInfo>)> {
        loop {
            let (pushes, messages) = mpsc::unbounded_channel();
            match tokio::time::timeout(TIMEOUT * 4, self.inner.deployment.open(pushes)).await {
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
        subscriber: &mut Connection,
        mut messages: mpsc::UnboundedReceiver<PushInfo>,
    ) -> Left {
        self.subscribe_again(subscriber).await;
        self.up();
        let mut ping = tokio::time::interval(PING);
        loop {
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(command) => self.command(subscriber, command).await,
                    None => return Left::Closed,
                },
                push = messages.recv() => match push {
                    Some(push) => self.push(subscriber, push).await,
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
    async fn command(&mut self, subscriber: &mut Connection, command: Command) {
        let (channel, on) = self.track(command);
        if !on {
            self.inner.mark(&channel, false);
        }
        match subscriber.subscribe(&channel, on).await {
            Ok(()) if on => self.inner.mark(&channel, true),
            Ok(()) => {}
            Err(error) => {
                tracing::debug!(%error, "listen hub: a Redis (un)subscription failed");
                if on {
                    self.unsure();
                }
            }
        }
    }

    async fn push(&mut self, subscriber: &mut Connection, push: PushInfo) {
        match Heard::of(push) {
            Heard::Message(payload) => self.hear(payload),
            Heard::Lost => {
                self.down("connection lost");
                self.inner.forget();
                self.unsure();
            }
            Heard::Subscribed(name) => {
                // The node's manager subscribes again by itself after an
                // outage (a cluster's client tries to).
                if self.live.contains(&name) {
                    self.inner.mark(&name, true);
                }
                // One node answering says a cluster is up no more than
                // its pings do.
                if !self.inner.deployment.is_cluster() {
                    self.up();
                }
            }
            Heard::Unsubscribed(name) if self.live.contains(&name) => {
                // A live channel left: on a cluster, its slot moved to
                // another shard (or this is the late answer to a leave the
                // hub took back). Subscribed again, on its owner; a channel
                // subscribed already is not subscribed twice. What was
                // published on it meanwhile is lost: the window is counted.
                self.inner.mark(&name, false);
                self.inner.moved.fetch_add(1, Ordering::Relaxed);
                metrics::bus_channel_moved();
                let left = std::time::Instant::now();
                match subscriber.subscribe(&name, true).await {
                    Ok(()) => {
                        self.inner.mark(&name, true);
                        let window = left.elapsed();
                        tracing::debug!(
                            ?window,
                            "listen hub: a channel moved shard, subscribed again"
                        );
                    }
                    Err(error) => {
                        tracing::debug!(%error, "listen hub: a Redis subscription failed");
                        self.unsure();
                    }
                }
            }
            Heard::Unsubscribed(_) | Heard::Other => {}
        }
    }

    /// Some live channel may no longer be subscribed: subscribed again at
    /// the next ping. On a cluster that is every live channel: its client
    /// may replace a node's connection, and lose its subscriptions, with
    /// no word of it.
    fn unsure(&mut self) {
        self.resync = true;
        if self.inner.deployment.is_cluster() {
            self.inner.forget();
        }
    }

    /// A manager reconnects on the next command that fails: an idle one
    /// must be poked.
    async fn ping(&mut self, subscriber: &mut Connection) {
        self.pings = self.pings.wrapping_add(1);
        if !subscriber.ping().await {
            self.down("a ping was not answered");
            self.unsure();
            return;
        }
        if self.pings.is_multiple_of(CLUSTER_RESYNC) && self.inner.deployment.is_cluster() {
            self.unsure();
        }
        // A ping that only timed out leaves no other sign of being
        // answered again.
        self.up();
        if self.resync {
            self.subscribe_again(subscriber).await;
        }
    }

    /// Subscribes to every live channel not known to be subscribed; unsure
    /// again when one failed.
    async fn subscribe_again(&mut self, subscriber: &Connection) {
        self.resync = false;
        if !self.resubscribe(subscriber).await {
            self.unsure();
        }
    }

    /// Subscribes to every live channel that Redis has not confirmed, many
    /// at a time; true when none failed.
    async fn resubscribe(&self, subscriber: &Connection) -> bool {
        let missing: Vec<String> = {
            let subscribed = lock(&self.inner.subscribed);
            self.live
                .iter()
                .filter(|channel| !subscribed.contains(*channel))
                .cloned()
                .collect()
        };
        let mut all = true;
        for (channel, done) in subscriber.subscribe_all(missing).await {
            match done {
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
        if payload.starts_with(&self.inner.echo) {
            return;
        }
        if !self.recent.first(&payload) {
            self.inner.duplicates.fetch_add(1, Ordering::Relaxed);
            metrics::bus_message_dropped(BusDropped::Duplicate);
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
        metrics::bus_message_dropped(BusDropped::QueueFull);
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
        metrics::bus_connected(true);
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
        metrics::bus_connected(false);
        if self.logged != Logged::Down {
            tracing::warn!(
                error = why,
                "listen hub: Redis is unreachable; reconnecting"
            );
            self.logged = Logged::Down;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::ListChanged;
    use crate::hub::change::Change;
    use crate::hub::redis::wire::{random_id, Message, MAX_FROM};
    use crate::hub::redis::{RedisBus, QUEUE};

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
        let tools = Change::ListChanged(ListChanged::Tools);
        let own = Message::new(bus.instance(), 0, random_id().unwrap(), &tools);
        let own = serde_json::to_vec(&own).unwrap();
        assert!(own.starts_with(&bus.inner.echo));
        assert_eq!(bus.inner.parse(&own), None);
        link.hear(own);
        link.hear(vec![b' '; MAX_MESSAGE + 1]);
        assert!(queued.try_recv().is_err());
        assert_eq!((bus.dropped(), bus.overflowed()), (1, 0));
    }
}
