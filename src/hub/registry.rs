//! The hub's open streams, indexed by what they hear. A delivery takes
//! what it needs from an index (each stream's queue and caller) and pushes
//! outside the lock; only a stream that falls behind comes back to it.

use std::collections::HashMap;
use std::sync::Arc;

use super::bus::{Bus, Channel};
use super::stream::{End, Queue};
use super::{Config, ListChanged};
use crate::filter::stream::coverers;
use crate::{HonouredFilter, Principal, Topic};

/// One stream as a delivery sees it.
#[derive(Clone)]
pub(super) struct Subscriber {
    pub(super) id: u64,
    pub(super) queue: Arc<Queue>,
    pub(super) caller: Option<Principal>,
}

/// The streams under one topic, by id.
type Streams = HashMap<u64, Subscriber>;

/// Every open stream, and the indexes deliveries look streams up by.
#[derive(Default)]
pub(super) struct Registry {
    next: u64,
    closed: bool,
    /// Open listen streams.
    open: usize,
    streams: HashMap<u64, Entry>,
    /// Honoured URI → the streams honouring it.
    uris: HashMap<Box<[u8]>, Streams>,
    /// Per list kind, the streams honouring it.
    lists: [Streams; 3],
    /// (owner, task id) → the streams honouring it.
    tasks: HashMap<(Principal, Box<str>), Streams>,
    /// Open streams per admission bucket.
    buckets: HashMap<Option<String>, usize>,
}

struct Entry {
    queue: Arc<Queue>,
    topics: Topics,
    /// A listen stream's admission bucket; `None` for a [`Watch`](super::Watch).
    bucket: Option<Option<String>>,
}

/// What an entry hears: a listen's honoured filter, or a watch's own topics.
enum Topics {
    Filter(HonouredFilter),
    Own(Vec<Topic>),
}

impl Topics {
    fn get(&self) -> &[Topic] {
        match self {
            Topics::Filter(filter) => filter.topics(),
            Topics::Own(topics) => topics,
        }
    }
}

/// Who asks to be registered.
pub(super) enum Opener<'a> {
    /// A listen stream, within the caps of its bucket.
    Stream {
        filter: &'a HonouredFilter,
        bucket: Option<String>,
        config: &'a Config,
    },
    /// A watch of a server's own: no cap.
    Watch {
        topics: Vec<Topic>,
        caller: Option<Principal>,
    },
}

/// What becomes of a listen the hub is asked to serve.
pub(super) enum Admission {
    /// Registered under this id.
    Open(u64, Arc<Queue>),
    /// Over a cap: its name and value.
    Full { limit: &'static str, max: usize },
    /// The hub shut down: the stream is acknowledged and ends at once.
    Closed(Arc<Queue>),
}

impl Registry {
    /// The streams on `channel`, its index made when missing.
    fn index(&mut self, channel: Channel<'_>) -> &mut Streams {
        match channel {
            Channel::Resource(uri) => self.uris.entry(uri.as_bytes().into()).or_default(),
            Channel::Task { owner, id } => {
                self.tasks.entry((owner.clone(), id.into())).or_default()
            }
            Channel::List(list) => &mut self.lists[list.index()],
        }
    }

    /// Removes stream `id` from `channel`; true when that left no stream on it.
    fn leave(&mut self, channel: Channel<'_>, id: u64) -> bool {
        match channel {
            Channel::Resource(uri) => remove(&mut self.uris, uri.as_bytes(), id),
            Channel::Task { owner, id: task } => remove(
                &mut self.tasks,
                &(owner.clone(), Box::<str>::from(task)),
                id,
            ),
            Channel::List(list) => {
                let streams = &mut self.lists[list.index()];
                streams.remove(&id).is_some() && streams.is_empty()
            }
        }
    }

    /// Registers a listen stream within the caps, or a watch.
    pub(super) fn open(&mut self, opener: Opener<'_>, bus: &dyn Bus) -> Admission {
        if self.closed {
            let queue = Arc::new(Queue::default());
            queue.end(End::Shutdown);
            return Admission::Closed(queue);
        }
        let (topics, caller, bucket) = match opener {
            Opener::Stream {
                filter,
                bucket,
                config,
            } => {
                if self.len() >= config.max_streams {
                    return Admission::Full {
                        limit: "streams",
                        max: config.max_streams,
                    };
                }
                let open = self.buckets.get(&bucket).copied().unwrap_or(0);
                if open >= config.max_streams_per_caller {
                    return Admission::Full {
                        limit: "streams_per_caller",
                        max: config.max_streams_per_caller,
                    };
                }
                let caller = filter.principal().cloned();
                (Topics::Filter(filter.clone()), caller, Some(bucket))
            }
            Opener::Watch { topics, caller } => (Topics::Own(topics), caller, None),
        };
        let id = self.next;
        self.next += 1;
        let queue = Arc::new(Queue::default());
        let subscriber = Subscriber {
            id,
            queue: queue.clone(),
            caller,
        };
        for topic in topics.get() {
            let channel = Channel::of(topic);
            let streams = self.index(channel);
            if streams.is_empty() {
                bus.watch(channel);
            }
            streams.insert(id, subscriber.clone());
        }
        if let Some(bucket) = &bucket {
            *self.buckets.entry(bucket.clone()).or_default() += 1;
            self.open += 1;
        }
        self.streams.insert(
            id,
            Entry {
                queue: queue.clone(),
                topics,
                bucket,
            },
        );
        Admission::Open(id, queue)
    }

    /// Removes stream `id` from every index, freeing its slot.
    pub(super) fn close(&mut self, id: u64, bus: &dyn Bus) {
        let Some(entry) = self.streams.remove(&id) else {
            return;
        };
        for topic in entry.topics.get() {
            let channel = Channel::of(topic);
            if self.leave(channel, id) {
                bus.unwatch(channel);
            }
        }
        if let Some(bucket) = &entry.bucket {
            self.open -= 1;
            if let Some(open) = self.buckets.get_mut(bucket) {
                *open -= 1;
                if *open == 0 {
                    self.buckets.remove(bucket);
                }
            }
        }
    }

    /// The streams whose honoured URIs cover `uri`, each stream once.
    pub(super) fn covering(&self, uri: &str) -> Vec<Subscriber> {
        let mut found: Vec<&Streams> = coverers(uri)
            .filter_map(|honoured| self.uris.get(honoured.as_bytes()))
            .collect();
        match found.len() {
            0 => Vec::new(),
            1 => found
                .pop()
                .into_iter()
                .flat_map(|s| s.values().cloned())
                .collect(),
            _ => {
                // A stream honouring a URI and one below it hears it once.
                let mut all: Vec<Subscriber> = found
                    .into_iter()
                    .flat_map(|s| s.values().cloned())
                    .collect();
                all.sort_unstable_by_key(|subscriber| subscriber.id);
                all.dedup_by_key(|subscriber| subscriber.id);
                all
            }
        }
    }

    /// The streams that honour `list`.
    pub(super) fn listing(&self, list: ListChanged) -> Vec<Subscriber> {
        self.lists[list.index()].values().cloned().collect()
    }

    /// The streams of `owner` that honour task `task`.
    pub(super) fn following(&self, owner: &Principal, task: &str) -> Vec<Subscriber> {
        self.tasks
            .get(&(owner.clone(), task.into()))
            .map(|streams| streams.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Ends every stream gracefully, and every later one at once; how many
    /// were open.
    pub(super) fn shut(&mut self) -> usize {
        self.closed = true;
        let open = self.len();
        for entry in self.streams.values() {
            entry.queue.end(End::Shutdown);
        }
        open
    }

    /// How many listen streams are open (watches are not counted).
    pub(super) fn len(&self) -> usize {
        self.open
    }
}

/// Removes stream `id` under `key`; true when that left no stream there.
fn remove<K, Q>(index: &mut HashMap<K, Streams>, key: &Q, id: u64) -> bool
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    let Some(streams) = index.get_mut(key) else {
        return false;
    };
    let removed = streams.remove(&id).is_some();
    if streams.is_empty() {
        index.remove(key);
    }
    removed && !index.contains_key(key)
}
