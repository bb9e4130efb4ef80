//! The hub's open streams, indexed by what they hear and grouped by
//! caller. A delivery queues its event on each stream of an index under
//! the registry's lock, deciding once per caller whether it may be heard.

use std::collections::{hash_map, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::bus::Bus;
use super::change::{heard, Change, Channel};
use super::queue::{End, Queue, StreamId, Wakers};
use crate::filter::stream::coverers;
use crate::filter::{HonouredFilter, Topic};
use crate::hooks::Principal;
use crate::metrics::{self, Limit};

/// The streams under one topic, by caller (a delivery decides once per
/// caller), then by id.
#[derive(Default)]
pub(super) struct Streams(HashMap<Option<Principal>, HashMap<StreamId, Arc<Queue>>>);

impl Streams {
    fn insert(&mut self, caller: &Option<Principal>, id: StreamId, queue: &Arc<Queue>) {
        self.0
            .entry(caller.clone())
            .or_default()
            .insert(id, queue.clone());
    }

    /// Removes stream `id`; true when that left no stream here.
    fn remove(&mut self, caller: &Option<Principal>, id: StreamId) -> bool {
        let Some(streams) = self.0.get_mut(caller) else {
            return false;
        };
        let removed = streams.remove(&id).is_some();
        if streams.is_empty() {
            self.0.remove(caller);
        }
        removed && self.0.is_empty()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The streams, caller by caller: each stream's id and queue.
    pub(super) fn callers(
        &self,
    ) -> impl Iterator<Item = (Option<&Principal>, &HashMap<StreamId, Arc<Queue>>)> {
        self.0
            .iter()
            .map(|(caller, streams)| (caller.as_ref(), streams))
    }
}

/// Every open stream, and the indexes deliveries look streams up by.
#[derive(Default)]
pub(super) struct Registry {
    next: u64,
    closed: bool,
    /// Open listen streams.
    open: usize,
    streams: HashMap<StreamId, Entry>,
    /// Honoured URI → the streams registered under it (see [`heard`]).
    uris: HashMap<Box<[u8]>, Streams>,
    /// The lengths of `uris`: a delivery looks up only the covering URIs
    /// of a length some registered URI has.
    lengths: Lengths,
    /// Per list kind, the streams honouring it.
    lists: [Streams; 3],
    /// (owner, task id) → the streams honouring it.
    tasks: HashMap<(Principal, Box<str>), Streams>,
    /// Open streams per admission bucket.
    buckets: HashMap<Bucket, usize>,
    /// The subscription ids of the open listen streams of identified
    /// callers: a caller's second listen under a live id is refused.
    live: HashSet<Live>,
}

/// A caller and the subscription id of one of its open listens (JSON text).
type Live = (Principal, Box<str>);

/// Whose count a listen stream is admitted in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum Bucket {
    /// The one every request without a key shares (anonymous callers).
    Shared,
    /// A caller's name, or the key of an
    /// [`admission_key`](super::ListenHubBuilder::admission_key).
    Key(String),
}

impl From<Option<String>> for Bucket {
    fn from(key: Option<String>) -> Self {
        key.map_or(Bucket::Shared, Bucket::Key)
    }
}

/// A cap a listen may be over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cap {
    /// [`max_streams`](super::ListenHubBuilder::max_streams).
    Streams,
    /// [`max_streams_per_caller`](super::ListenHubBuilder::max_streams_per_caller).
    StreamsPerCaller,
}

impl From<Cap> for Limit {
    fn from(cap: Cap) -> Self {
        match cap {
            Cap::Streams => Limit::Streams,
            Cap::StreamsPerCaller => Limit::StreamsPerCaller,
        }
    }
}

impl Cap {
    /// Its name in the refusal's `data.limit`.
    pub(super) fn name(self) -> &'static str {
        match self {
            Cap::Streams => "streams",
            Cap::StreamsPerCaller => "streams_per_caller",
        }
    }
}

struct Entry {
    queue: Arc<Queue>,
    topics: Topics,
    caller: Option<Principal>,
    /// A listen stream's admission bucket; `None` for a [`Watch`](super::Watch).
    bucket: Option<Bucket>,
    /// A listen stream of an identified caller: its subscription id.
    live: Option<Live>,
    opened: Instant,
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
        bucket: Bucket,
        caps: Caps,
    },
    /// A watch of a server's own: no cap.
    Watch {
        topics: Vec<Topic>,
        caller: Option<Principal>,
    },
}

/// Most streams open at once: in all, and per admission bucket.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caps {
    pub(super) streams: usize,
    pub(super) per_caller: usize,
}

/// What becomes of a listen the hub is asked to serve.
pub(super) enum Admission {
    /// Registered under this id.
    Open(StreamId, Arc<Queue>),
    /// Over a cap, of this value.
    Full { cap: Cap, max: usize },
    /// Its caller has an open listen under the same subscription id.
    Duplicate,
    /// The hub shut down: the stream is acknowledged and ends at once.
    Closed(Arc<Queue>),
}

impl Registry {
    /// The streams on `channel`, its index made when missing.
    fn index(&mut self, channel: Channel<'_>) -> &mut Streams {
        match channel {
            Channel::Resource(uri) => match self.uris.entry(uri.as_bytes().into()) {
                hash_map::Entry::Occupied(entry) => entry.into_mut(),
                hash_map::Entry::Vacant(entry) => {
                    self.lengths.add(uri.len());
                    entry.insert(Streams::default())
                }
            },
            Channel::Task { owner, id } => {
                self.tasks.entry((owner.clone(), id.into())).or_default()
            }
            Channel::List(list) => &mut self.lists[list.index()],
        }
    }

    /// Removes stream `id` of `caller` from `channel`; true when that left
    /// no stream on it.
    fn leave(&mut self, channel: Channel<'_>, caller: &Option<Principal>, id: StreamId) -> bool {
        match channel {
            Channel::Resource(uri) => {
                let emptied = remove(&mut self.uris, uri.as_bytes(), caller, id);
                if emptied {
                    self.lengths.remove(uri.len());
                }
                emptied
            }
            Channel::Task { owner, id: task } => remove(
                &mut self.tasks,
                &(owner.clone(), Box::<str>::from(task)),
                caller,
                id,
            ),
            Channel::List(list) => self.lists[list.index()].remove(caller, id),
        }
    }

    /// Registers a listen stream within the caps, or a watch.
    pub(super) fn open(&mut self, opener: Opener<'_>, bus: &dyn Bus) -> Admission {
        if self.closed {
            return Admission::Closed(Queue::ended(End::Shutdown));
        }
        let (topics, caller, bucket, live) = match opener {
            Opener::Stream {
                filter,
                bucket,
                caps,
            } => {
                if self.len() >= caps.streams {
                    return Admission::Full {
                        cap: Cap::Streams,
                        max: caps.streams,
                    };
                }
                let open = self.buckets.get(&bucket).copied().unwrap_or(0);
                if open >= caps.per_caller {
                    return Admission::Full {
                        cap: Cap::StreamsPerCaller,
                        max: caps.per_caller,
                    };
                }
                let caller = filter.principal().cloned();
                let live = caller
                    .clone()
                    .map(|caller| (caller, filter.subscription_id().get().into()));
                if live.as_ref().is_some_and(|live| self.live.contains(live)) {
                    return Admission::Duplicate;
                }
                (Topics::Filter(filter.clone()), caller, Some(bucket), live)
            }
            Opener::Watch { topics, caller } => (Topics::Own(topics), caller, None, None),
        };
        let id = StreamId::MIN.saturating_add(self.next);
        self.next += 1;
        let queue = Arc::new(Queue::default());
        for channel in heard(topics.get()) {
            let streams = self.index(channel);
            if streams.is_empty() {
                bus.watch(channel);
            }
            streams.insert(&caller, id, &queue);
        }
        if let Some(bucket) = &bucket {
            *self.buckets.entry(bucket.clone()).or_default() += 1;
            self.open += 1;
        }
        if let Some(live) = &live {
            self.live.insert(live.clone());
        }
        self.streams.insert(
            id,
            Entry {
                queue: queue.clone(),
                topics,
                caller,
                bucket,
                live,
                opened: Instant::now(),
            },
        );
        Admission::Open(id, queue)
    }

    /// Removes stream `id` from every index, freeing its slot (and its
    /// subscription id); a listen stream's lifetime is counted.
    pub(super) fn close(&mut self, id: StreamId, bus: &dyn Bus) {
        let Some(entry) = self.streams.remove(&id) else {
            return;
        };
        if let Some(live) = &entry.live {
            self.live.remove(live);
        }
        for channel in heard(entry.topics.get()) {
            if self.leave(channel, &entry.caller, id) {
                bus.unwatch(channel);
            }
        }
        if let Some(bucket) = &entry.bucket {
            metrics::listen_lifetime(entry.opened.elapsed());
            self.open -= 1;
            if let Some(open) = self.buckets.get_mut(bucket) {
                *open -= 1;
                if *open == 0 {
                    self.buckets.remove(bucket);
                }
            }
        }
    }

    /// The streams that hear `change`, by the topic they are registered
    /// under: each stream at most once (see [`heard`]).
    pub(super) fn audience(&self, change: &Change) -> Vec<&Streams> {
        match change {
            Change::ResourceUpdated { uri } => coverers(uri)
                .filter(|honoured| self.lengths.may_hold(honoured.len()))
                .filter_map(|honoured| self.uris.get(honoured.as_bytes()))
                .collect(),
            Change::ListChanged(list) => vec![&self.lists[list.index()]],
            Change::TaskStatus { owner, task_id, .. } => self
                .tasks
                .get(&(owner.clone(), task_id.as_str().into()))
                .into_iter()
                .collect(),
        }
    }

    /// Ends every stream gracefully, and every later one at once; how many
    /// were open. Their wakers go to `wakers`.
    pub(super) fn shut(&mut self, wakers: &mut Wakers) -> usize {
        self.closed = true;
        let open = self.len();
        for entry in self.streams.values() {
            entry.queue.end(End::Shutdown, wakers);
        }
        open
    }

    /// How many listen streams are open (watches are not counted).
    pub(super) fn len(&self) -> usize {
        self.open
    }
}

/// How many URIs there are of each length, up to [`Lengths::COUNTED`];
/// longer ones are counted together.
#[derive(Default)]
struct Lengths {
    counts: Vec<usize>,
    longer: usize,
}

impl Lengths {
    const COUNTED: usize = 4096;

    fn count(&mut self, len: usize) -> &mut usize {
        if len > Self::COUNTED {
            return &mut self.longer;
        }
        if self.counts.len() <= len {
            self.counts.resize(len + 1, 0);
        }
        &mut self.counts[len]
    }

    fn add(&mut self, len: usize) {
        *self.count(len) += 1;
    }

    fn remove(&mut self, len: usize) {
        *self.count(len) -= 1;
    }

    /// Whether some URI may be `len` long.
    fn may_hold(&self, len: usize) -> bool {
        match self.counts.get(len) {
            Some(count) => *count > 0,
            None => len > Self::COUNTED && self.longer > 0,
        }
    }
}

/// Removes stream `id` of `caller` under `key`; true when that left no
/// stream there.
fn remove<K, Q>(
    index: &mut HashMap<K, Streams>,
    key: &Q,
    caller: &Option<Principal>,
    id: StreamId,
) -> bool
where
    K: std::borrow::Borrow<Q> + std::hash::Hash + Eq,
    Q: std::hash::Hash + Eq + ?Sized,
{
    let Some(streams) = index.get_mut(key) else {
        return false;
    };
    let emptied = streams.remove(caller, id);
    if streams.is_empty() {
        index.remove(key);
    }
    emptied
}

#[cfg(test)]
mod tests {
    use super::Lengths;

    #[test]
    fn lengths_are_counted_up_to_a_bound_and_longer_ones_together() {
        let mut lengths = Lengths::default();
        let (short, bound, long) = (5, Lengths::COUNTED, Lengths::COUNTED + 1);
        assert!(!lengths.may_hold(short) && !lengths.may_hold(long));
        for len in [short, short, bound, long] {
            lengths.add(len);
        }
        assert!(lengths.may_hold(short) && lengths.may_hold(bound));
        assert!(lengths.may_hold(long) && lengths.may_hold(10 * long));
        assert!(!lengths.may_hold(short + 1));
        for len in [short, bound, long] {
            lengths.remove(len);
        }
        assert!(lengths.may_hold(short), "one of two is left");
        assert!(!lengths.may_hold(bound) && !lengths.may_hold(long));
        assert!(lengths.counts.len() <= Lengths::COUNTED + 1);
    }
}
