//! The reference deployment's in-process event bus.
//!
//! A tool that changes something publishes one `Event` under one
//! [`Topic`]; every open listen stream registered under that topic gets it.
//! Streams register under the topics of their honoured filter, so the bus
//! itself is the filter: a stream never sees an event it did not ask for
//! and may not see. A `Subscription` removes its registrations when it is
//! dropped, so a client that disconnects leaves nothing behind.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use mcp_edge::Topic;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

/// How many events a stream may fall behind before it is cut off.
const STREAM_BACKLOG: usize = 64;

/// The subscription-id key every listen-stream message carries in `_meta`.
pub(crate) const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One notification, published once and delivered to many streams.
#[derive(Debug)]
pub(crate) struct Event {
    /// Which streams get it: those registered under this topic.
    pub(crate) topic: Topic,
    /// The notification's method.
    pub(crate) method: &'static str,
    /// The notification's `params` object, serialized once at publish time.
    params: Box<RawValue>,
}

impl Event {
    /// An event for `topic`: `method` with `params` (a JSON object without `_meta`).
    pub(crate) fn new(topic: Topic, method: &'static str, params: Map<String, Value>) -> Self {
        let params =
            serde_json::value::to_raw_value(&params).expect("a JSON map always serializes");
        Self {
            topic,
            method,
            params,
        }
    }

    /// The notification as one stream sends it: tagged with its subscription id.
    pub(crate) fn tagged(&self, subscription_id: &RawValue) -> String {
        // `params` is a compact JSON object: splice `_meta` in front of its members.
        let members = &self.params.get()[1..self.params.get().len() - 1];
        let separator = if members.is_empty() { "" } else { "," };
        format!(
            r#"{{"jsonrpc":"2.0","method":"{}","params":{{"_meta":{{"{SUBSCRIPTION_ID}":{}}}{separator}{members}}}}}"#,
            self.method,
            subscription_id.get(),
        )
    }
}

/// The registry of open streams, by topic.
#[derive(Default)]
pub struct Bus {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next_id: u64,
    closed: bool,
    streams: HashMap<u64, Registration>,
    topics: HashMap<Topic, HashSet<u64>>,
}

struct Registration {
    sender: mpsc::Sender<Arc<Event>>,
    topics: Vec<Topic>,
}

impl State {
    fn remove(&mut self, id: u64) {
        let Some(registration) = self.streams.remove(&id) else {
            return;
        };
        for topic in registration.topics {
            if let Some(ids) = self.topics.get_mut(&topic) {
                ids.remove(&id);
                if ids.is_empty() {
                    self.topics.remove(&topic);
                }
            }
        }
    }
}

impl Bus {
    /// An empty, open bus.
    pub(crate) fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Registers a stream under `topics`.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        topics: impl IntoIterator<Item = Topic>,
    ) -> Subscription {
        let (sender, receiver) = mpsc::channel(STREAM_BACKLOG);
        let topics: Vec<Topic> = topics.into_iter().collect();
        let mut state = self.state();
        let id = state.next_id;
        state.next_id += 1;
        // After shutdown the sender is dropped at once: the stream acknowledges,
        // then closes gracefully.
        if !state.closed {
            for topic in &topics {
                state.topics.entry(topic.clone()).or_default().insert(id);
            }
            state.streams.insert(id, Registration { sender, topics });
        }
        Subscription {
            bus: Arc::clone(self),
            id,
            receiver,
        }
    }

    /// Delivers `event` to every stream registered under its topic; returns how many.
    pub(crate) fn publish(&self, event: Event) -> usize {
        let event = Arc::new(event);
        let mut state = self.state();
        let Some(ids) = state.topics.get(&event.topic) else {
            return 0;
        };
        let mut delivered = 0;
        let mut lagging = Vec::new();
        for id in ids {
            let Some(registration) = state.streams.get(id) else {
                continue;
            };
            match registration.sender.try_send(Arc::clone(&event)) {
                Ok(()) => delivered += 1,
                // A stream that cannot keep up is cut off rather than silently
                // missing events: it ends without the graceful result, which
                // tells its client to listen again.
                Err(_) => lagging.push(*id),
            }
        }
        for id in lagging {
            tracing::warn!(stream = id, "listen stream fell behind; closing it");
            state.remove(id);
        }
        delivered
    }

    /// Shuts the bus down: every open stream ends with the graceful result.
    pub fn close(&self) {
        let mut state = self.state();
        state.closed = true;
        state.streams.clear();
        state.topics.clear();
    }

    /// Whether [`close`](Self::close) was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.state().closed
    }

    /// How many streams are registered.
    pub fn streams(&self) -> usize {
        self.state().streams.len()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every update leaves the maps consistent, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One stream's registration; dropping it unregisters.
pub(crate) struct Subscription {
    bus: Arc<Bus>,
    id: u64,
    receiver: mpsc::Receiver<Arc<Event>>,
}

/// Why a subscription stopped delivering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// The server is shutting down: close with the graceful result.
    Shutdown,
    /// The stream fell behind and was cut off.
    Lagged,
}

impl Subscription {
    /// The stream's number on the bus, for logs.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The next event, or why there are no more.
    pub(crate) async fn recv(&mut self) -> Result<Arc<Event>, End> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next event, or why there are no more.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Arc<Event>, End>> {
        self.receiver.poll_recv(cx).map(|event| {
            event.ok_or(if self.bus.is_closed() {
                End::Shutdown
            } else {
                End::Lagged
            })
        })
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut state = self.bus.state();
        state.remove(self.id);
        tracing::debug!(
            stream = self.id,
            open = state.streams.len(),
            "listen stream closed"
        );
    }
}
